#!/bin/sh
# Runs the `delta` fuzz target for a bounded time: fuzz/run.sh [SECONDS] (default 60).
#
# Installs cargo-fuzz if it is missing. cargo-fuzz needs nightly features;
# RUSTC_BOOTSTRAP=1 lets the stable toolchain provide them. New inputs go to
# fuzz/corpus/delta (ignored by git); the checked-in seeds in fuzz/seeds/delta
# are read, never written. A crash leaves its input in fuzz/artifacts/delta.
set -eu

seconds=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "run.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

mkdir -p "$here/corpus/delta"
cd "$here/.."
RUSTC_BOOTSTRAP=1 exec cargo fuzz run --fuzz-dir "$here" delta \
    "$here/corpus/delta" "$here/seeds/delta" \
    -- -max_total_time="$seconds" -max_len=65536
