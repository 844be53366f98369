#!/bin/sh
# The project's own performance gate: this tool's verdict on a change.
#
#   scripts/perf-gate.sh [BASE_REV [HEAD_REV]]
#
# Builds the demo and minibuild examples at two revisions (default: the merge
# base of HEAD with main, and HEAD), each in a git worktree of its own under a
# temporary directory and with a target directory of its own, then runs
# `cabin-trace bench` (built from this tree: the instrument does not change with
# the code it measures) on a few scenarios and prints the comparison. Only
# committed code is measured.
#
# Environment: PERF_GATE_RUNS (blocks per scenario, default 12),
# PERF_GATE_FAMILY (the family size of the paired rule; by default the
# report's own, every timed comparison it makes; the gate decides on wall),
# PERF_GATE_FORMAT (table, markdown or json;
# default table), PERF_GATE_OUT (default target/perf-gate/<base>-<head>),
# NINJA (default: ninja on PATH, else the newest of .tools/ninja).
#
# Exit status: that of `bench --fail-on-regression`: 1 when a regression is
# detected or a scenario is an INVALID MEASUREMENT, 2 on bad input.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

base_sha=$(git rev-parse --verify "${1:-$(git merge-base HEAD main)}^{commit}")
head_sha=$(git rev-parse --verify "${2:-HEAD}^{commit}")
runs=${PERF_GATE_RUNS:-12}
format=${PERF_GATE_FORMAT:-table}
short() { git rev-parse --short "$1"; }
out=${PERF_GATE_OUT:-$root/target/perf-gate/$(short "$base_sha")-$(short "$head_sha")}

if [ -z "${NINJA:-}" ]; then
    NINJA=$(command -v ninja || ls -d "$root"/.tools/ninja/*/ninja 2>/dev/null | sort -V | tail -n 1 || true)
fi
[ -n "$NINJA" ] || { echo "perf-gate: no ninja: run scripts/install-ninja.sh or set NINJA" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf-gate.XXXXXX")
cleanup() {
    for side in base head; do
        [ -d "$tmp/src-$side" ] && git worktree remove --force "$tmp/src-$side" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

for side in base head; do
    if [ "$side" = base ]; then sha=$base_sha; else sha=$head_sha; fi
    echo "perf-gate: building $side ($(short "$sha")) in its own worktree and target directory" >&2
    git worktree add --quiet --detach "$tmp/src-$side" "$sha"
    (cd "$tmp/src-$side" && CARGO_TARGET_DIR="$tmp/target-$side" \
        cargo build --quiet --release --example demo --example minibuild)
done
cargo build --quiet --release -p cabin-trace-cli
cabin_trace=$root/target/release/cabin-trace

# {tool} is each side's examples directory.
cat > "$tmp/scenarios.toml" <<EOF
[defaults]
runs = $runs
warmups = 2

[[scenario]]
name = "demo/default"
command = "{tool}/demo --spans 200"
checks = ["count:resolve == 1"]

[[scenario]]
name = "demo/debug-2000"
command = "CABIN_TRACE_FILTER=debug {tool}/demo --spans 2000"
checks = ["count:resolve_package == 2000"]

[[scenario]]
name = "minibuild/noop"
command = "NINJA=$NINJA {tool}/minibuild $tmp/mb-noop"
checks = ["exit_status == 0", "ninja_actions == 0"]

[[scenario]]
name = "minibuild/clean"
command = "NINJA=$NINJA {tool}/minibuild $tmp/mb-clean"
prepare = "rm -rf $tmp/mb-clean"
checks = ["exit_status == 0", "ninja_actions == 8"]
EOF

rm -rf "$out"
status=0
"$cabin_trace" bench --scenarios "$tmp/scenarios.toml" \
    --tool "base=$tmp/target-base/release/examples" \
    --tool "head=$tmp/target-head/release/examples" \
    ${PERF_GATE_FAMILY:+--family-size "$PERF_GATE_FAMILY"} --format "$format" --fail-on-regression \
    --output "$out" || status=$?
echo "perf-gate: base $(short "$base_sha"), head $(short "$head_sha"); samples in $out/samples.json" >&2
exit "$status"
