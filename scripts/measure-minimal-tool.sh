#!/bin/sh
# What a tool's build pays for the façade: the crates that examples/minimal-tool
# (one file, cabin-trace with its default features) compiles besides itself,
# and the wall and CPU time of its clean release build, at two revisions in one
# run: BEFORE (a git revision) and this checkout as it is.
#
# Each side is a scratch copy of the sources with the tool beside it as a
# workspace of its own (the tool's src/main.rs, this checkout's Cargo.lock so
# that both sides resolve the same versions, the default release profile);
# sources are fetched first, then every build starts from an empty target
# directory, offline. Rounds alternate the order (before after, after before,
# ...) so that a machine getting busier does not favour one side.
#
#   scripts/measure-minimal-tool.sh BEFORE [ROUNDS]     (ROUNDS: default 1)
#
# Prints one line per build, then the counts (and, counted only, those of this
# checkout's façade with one format feature at a time), and the crates of each
# side under target/minimal-tool/. docs/performance.md quotes it.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
before=${1:?usage: scripts/measure-minimal-tool.sh BEFORE-REVISION [ROUNDS]}
rounds=${2:-1}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT INT TERM
out="$root/target/minimal-tool"
mkdir -p "$out" "$scratch/before" "$scratch/after"

git -C "$root" archive "$before" | tar -xf - -C "$scratch/before"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$scratch/after"

# The crates a tool's manifest compiles besides the tool, one per line.
crates() {
    cargo tree --quiet --offline --manifest-path "$1" -e normal,build --prefix none --format '{p}' |
        sed 's/ (\*)$//; s/ (proc-macro)$//; s| (/.*||' | grep -v '^minimal-tool ' | sort -u
}

for side in before after; do
    tool="$scratch/tool-$side"
    mkdir -p "$tool/src"
    cp "$root/examples/minimal-tool/src/main.rs" "$tool/src/main.rs"
    cp "$root/Cargo.lock" "$tool/Cargo.lock"
    cat >"$tool/Cargo.toml" <<EOF
[package]
name = "minimal-tool"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
cabin-trace = { path = "$scratch/$side" }
tracing = { version = "0.1.41", default-features = false, features = ["std"] }

[workspace]
EOF
    cargo fetch --quiet --manifest-path "$tool/Cargo.toml"
    crates "$tool/Cargo.toml" >"$out/crates-$side.txt"
done

build() {
    side=$1
    target="$scratch/target-$side"
    rm -rf "$target"
    /usr/bin/time -f "%e %U %S" -o "$scratch/time" \
        cargo build --quiet --offline --release --manifest-path "$scratch/tool-$side/Cargo.toml" --target-dir "$target"
    read -r wall user sys <"$scratch/time"
    echo "minimal-tool $side: clean release build $wall s wall, $(echo "$user + $sys" | bc) s CPU"
}

round=1
while [ "$round" -le "$rounds" ]; do
    if [ $((round % 2)) -eq 1 ]; then build before; build after; else build after; build before; fi
    round=$((round + 1))
done

for side in before after; do
    ours=$(grep -c '^cabin-trace \|^trace-\|^ninja-log ' "$out/crates-$side.txt" || true)
    echo "minimal-tool $side ($( [ "$side" = before ] && echo "$before" || echo "this checkout")): \
$(wc -l <"$out/crates-$side.txt") crates besides the tool, $ours of them ours (target/minimal-tool/crates-$side.txt)"
done
echo "left out after: $(comm -23 "$out/crates-before.txt" "$out/crates-after.txt" | cut -d' ' -f1 | tr '\n' ' ')"

# What each format alone would cost a tool (counted, not built): the after
# side's tool with the façade's default features off and one format on.
manifest="$scratch/tool-after/Cargo.toml"
cp "$manifest" "$scratch/manifest-after"
for features in "" chrome perfetto otlp; do
    list=${features:+\"$features\"}
    sed "s|^cabin-trace = { path = \"\(.*\)\" }|cabin-trace = { path = \"\\1\", default-features = false, features = [$list] }|" \
        "$scratch/manifest-after" >"$manifest"
    echo "minimal-tool after, format features [${features:-none}] only: $(crates "$manifest" | wc -l) crates besides the tool"
done
