#!/bin/sh
# Runs trace-core's and the façade's tests (unit and integration; the doctests
# are platform-neutral and run on Linux) for x86_64-pc-windows-gnu under Wine:
# the test binaries and the example processes they start are Windows programs.
# Needs the tools of `scripts/install-test-tools.sh --cross` (Wine, MinGW-w64,
# the Wine prefix the set-up makes, outside the checkout: see there). Extra
# arguments go to cargo test before `--`.
#
# Bounded: the run is stopped after WINDOWS_TEST_TIMEOUT seconds (default 1200).
# On a 2-core machine from a clean target directory it took 374 s, nearly all
# of it compiling; the tests themselves run in about 35 s under Wine.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

prefix="${CABIN_TRACE_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/cabin-trace/wine}"
if [ ! -f "$prefix/drive_c/windows/system32/bcryptprimitives.dll" ] || ! command -v wine >/dev/null 2>&1; then
    echo "test-windows: Wine or its prefix $prefix is missing: run scripts/install-test-tools.sh --cross" >&2
    exit 1
fi
export WINEPREFIX="$prefix" WINEDEBUG=-all
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc

started=$(date +%s)
status=0
# The façade's tests run its examples, which `--tests` does not build.
cargo build --locked --target x86_64-pc-windows-gnu -p cabin-trace --examples
timeout "${WINDOWS_TEST_TIMEOUT:-1200}" cargo test --locked --target x86_64-pc-windows-gnu \
    --no-fail-fast -p trace-core -p cabin-trace --lib --tests "$@" || status=$?
# Leave no Wine server behind for the next step.
wineserver --kill 2>/dev/null || true
echo "test-windows: $(($(date +%s) - started)) s under Wine, exit status $status" >&2
exit "$status"
