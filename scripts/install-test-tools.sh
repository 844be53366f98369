#!/bin/sh
# Installs every tool the test suite needs, from the package registries only:
#
# - Ninja 1.10.0, 1.10.2, 1.11.1, 1.13.0 and 1.13.2 from the `ninja` PyPI
#   package, each under .tools/ninja/<version> (scripts/install-ninja.sh);
# - the official Perfetto schema (`perfetto` PyPI package) in .tools/py and
#   Debian's protoc (scripts/install-perfetto.sh);
# - Perfetto's trace processor v58.2 in .tools/perfetto, the engine of the
#   Perfetto UI, which tests/it/trace_processor.rs loads every capture into
#   (scripts/install-trace-processor.sh);
# - the `jsonschema` validator in .tools/py, for the timings and samples schema tests;
# - SciPy and numpy in .tools/py, to regenerate trace-compare's reference
#   vectors (trace-compare/tests/vectors/gen.py);
# - Debian's hyperfine, to regenerate the hyperfine fixtures of the CLI tests
#   (cli/tests/fixtures/hyperfine/regen.sh) and for scripts/perf-gate.sh's context;
# - the official OpenTelemetry protocol classes (`opentelemetry-proto`) in
#   .tools/py, which tools/otlp_check.py decodes OTLP bodies with, and the
#   `rotel` OpenTelemetry collector (its wheel ships the `rotel-agent`
#   binary), the real OTLP/HTTP receiver of the export tests;
# - a C compiler, for the minibuild example's real builds;
# - for the viewer test (tests/it/viewer.rs): Debian's chromium, Node.js and
#   npm, and in tools/viewer/node_modules the npm packages that
#   tools/viewer/package-lock.json pins (speedscope, playwright-core), with
#   `npm ci`. playwright-core downloads no browser: it drives Debian's.
#
# `--cross` adds the tools of the other targets (below).
#
# Idempotent: what is in place is left alone. Nothing here is committed
# (.tools/ is ignored by git).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

"$root/scripts/install-ninja.sh"
"$root/scripts/install-perfetto.sh"
"$root/scripts/install-trace-processor.sh"

py="$root/.tools/py/bin/python"
if ! "$py" -c 'import jsonschema' 2>/dev/null; then
    echo "install-test-tools: installing jsonschema into .tools/py" >&2
    PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check "jsonschema>=4.18"
fi

if ! "$py" -c 'import opentelemetry.proto.trace.v1.trace_pb2, rotel' 2>/dev/null; then
    echo "install-test-tools: installing opentelemetry-proto and rotel into .tools/py" >&2
    PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check \
        "opentelemetry-proto>=1.38" "rotel==0.0.1a15"
fi

if ! "$py" -c 'import scipy, numpy' 2>/dev/null; then
    echo "install-test-tools: installing scipy and numpy into .tools/py" >&2
    PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check "scipy>=1.11" numpy
fi

if ! command -v hyperfine >/dev/null 2>&1; then
    echo "install-test-tools: installing hyperfine" >&2
    apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null
fi

if ! command -v cc >/dev/null 2>&1; then
    echo "install-test-tools: installing a C compiler (gcc)" >&2
    apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi

# trace-stacks' symbolizer test removes a section from a copy of its binary.
if ! command -v objcopy >/dev/null 2>&1; then
    echo "install-test-tools: installing binutils (objcopy)" >&2
    apt-get update -qq && apt-get install -y -qq binutils >/dev/null
fi

# Only what is missing: a machine whose Node.js came from elsewhere (with npm
# bundled) cannot also take Debian's nodejs and npm packages.
missing=""
[ -x /usr/bin/chromium ] || missing=" chromium"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    echo "install-test-tools: installing$missing" >&2
    # shellcheck disable=SC2086 # one package name per word
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

viewer="$root/tools/viewer"
# Reinstalled whenever the lock file is newer than what npm last installed.
if ! [ -f "$viewer/node_modules/.package-lock.json" ] \
    || [ "$viewer/package-lock.json" -nt "$viewer/node_modules/.package-lock.json" ]; then
    echo "install-test-tools: installing speedscope and playwright-core into tools/viewer (npm ci)" >&2
    (cd "$viewer" && npm ci --no-audit --no-fund --loglevel=error)
fi

# With --cross, also what the other targets' checks and the Windows tests need
# (.ci/run passes it; scripts/test.sh does not):
#
# - the Rust standard libraries of aarch64-apple-darwin, x86_64-pc-windows-msvc
#   (clippy of the whole workspace) and x86_64-pc-windows-gnu (the Windows tests);
# - clang and llvm-ar: criterion's `alloca` dependency compiles a C file for the
#   target even under clippy, and the host's gcc compiles for neither macOS nor
#   MSVC (see scripts/check-targets.sh);
# - Wine and the MinGW-w64 compiler and linker, and a Wine prefix holding the
#   stand-in bcryptprimitives.dll that Wine 8 lacks (tools/wine/bcryptprimitives.c),
#   for scripts/test-windows.sh. The prefix lives outside the checkout
#   (CABIN_TRACE_WINEPREFIX, default ~/.cache/cabin-trace/wine): its drive Z: is
#   a link to /, which any walk of the checkout (`cargo package` of the
#   façade, whose files are listed by pattern) would follow into a loop.
[ "${1:-}" = "--cross" ] || exit 0

rustup target add aarch64-apple-darwin x86_64-pc-windows-msvc x86_64-pc-windows-gnu

missing=""
for tool in clang:clang llvm-ar:llvm wine:wine x86_64-w64-mingw32-gcc:gcc-mingw-w64-x86-64; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing="$missing ${tool#*:}"
done
if [ -n "$missing" ]; then
    echo "install-test-tools: installing$missing" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing wine64 >/dev/null
fi

prefix="${CABIN_TRACE_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/cabin-trace/wine}"
dll="$prefix/drive_c/windows/system32/bcryptprimitives.dll"
if [ ! -f "$dll" ]; then
    echo "install-test-tools: creating the Wine prefix $prefix" >&2
    mkdir -p "$prefix"
    WINEPREFIX="$prefix" WINEDEBUG=-all wine wineboot --init >/dev/null 2>&1
    WINEPREFIX="$prefix" wineserver --wait
    x86_64-w64-mingw32-gcc -O2 -shared -o "$dll" \
        "$root/tools/wine/bcryptprimitives.c" "$root/tools/wine/bcryptprimitives.def" -ladvapi32
fi
