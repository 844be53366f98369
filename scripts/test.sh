#!/bin/sh
# Runs every test of the workspace: installs the tools the tests need, then
# `cargo test --workspace` (which also builds the examples the tests run).
# Extra arguments go to cargo test.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-test-tools.sh"
cd "$root"
exec cargo test --workspace "$@"
