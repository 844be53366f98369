#!/bin/sh
# Runs every test of the workspace: installs the tools the tests need, then
# `cargo test --workspace --locked` (which also builds the examples the tests
# run), with the versions Cargo.lock pins.
# Tests print their figures (the `reliability:` lines that docs/reliability.md
# quotes, the Perfetto size), so output is not captured. Extra arguments go to
# cargo test before `--`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-test-tools.sh"
cd "$root"
exec cargo test --workspace --locked "$@" -- --nocapture
