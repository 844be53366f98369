#!/usr/bin/env bash
# End-to-end cost of CPU stacks: examples/demo (release) captured at info with
# CABIN_TRACE_STACKS=off against =1ms, timed by hyperfine in ROUNDS short
# sessions whose command order alternates, the runs pooled (the method of
# scripts/bench-e2e.sh, two commands instead of four). Prints the median wall
# time of each, the quartiles, hyperfine's mean user + system CPU, and the two
# ratios (docs/performance.md, "CPU stacks").
#
#   scripts/bench-stacks.sh [ROUNDS [RUNS]]
#
# Environment: SPANS (the demo's --spans, default 2000: the bench-e2e demo;
# 200000 runs about half a second), WARMUP (default 1). Traces go to a
# directory in memory (/dev/shm) when there is one.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-8}
runs=${2:-3}
warmup=${WARMUP:-1}
spans=${SPANS:-2000}
target=${CARGO_TARGET_DIR:-$root/target}
command -v hyperfine >/dev/null 2>&1 || { echo "bench-stacks: hyperfine is needed (apt-get install hyperfine)" >&2; exit 1; }

cargo build --quiet --release --example demo
demo=$target/release/examples/demo
parent=/dev/shm
[ -d "$parent" ] && [ -w "$parent" ] || parent=${TMPDIR:-/tmp}
traces=$(mktemp -d "$parent/cabin-trace-stacks.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/cabin-trace-stacks-runs.XXXXXX")
trap 'rm -rf "$traces" "$work"' EXIT

for r in $(seq 1 "$rounds"); do
    if (( r % 2 )); then order="off 1ms"; else order="1ms off"; fi
    cmds=()
    for v in $order; do
        cmds+=("env CABIN_TRACE_DIR=$traces CABIN_TRACE_FILTER=info CABIN_TRACE_STACKS=$v $demo --spans $spans --threads 2 --no-table")
    done
    hyperfine -N --style none --warmup "$warmup" --runs "$runs" --export-json "$work/round-$r.json" "${cmds[@]}" >/dev/null 2>&1
    rm -rf "${traces:?}"/*
done

python3 - "$work" <<'PY'
import glob, json, statistics, sys
by = {}
for f in glob.glob(sys.argv[1] + "/round-*.json"):
    for r in json.load(open(f))["results"]:
        k = "1ms" if "STACKS=1ms" in r["command"] else "off"
        v = by.setdefault(k, {"wall": [], "cpu": []})
        v["wall"] += r["times"]
        v["cpu"].append(r["user"] + r["system"])
for k in ("off", "1ms"):
    w = sorted(by[k]["wall"]); n = len(w)
    print(f"| `{k}` | {n} | {statistics.median(w)*1e3:.1f} | {w[n//4]*1e3:.1f}-{w[3*n//4]*1e3:.1f} | {statistics.mean(by[k]['cpu'])*1e3:.1f} |")
print(f"ratio 1ms/off: median wall {statistics.median(by['1ms']['wall'])/statistics.median(by['off']['wall']):.2f}, "
      f"mean CPU {statistics.mean(by['1ms']['cpu'])/statistics.mean(by['off']['cpu']):.2f}")
PY
