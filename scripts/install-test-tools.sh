#!/bin/sh
# Installs every tool the test suite needs, from the package registries only:
#
# - Ninja 1.10.0, 1.10.2, 1.11.1, 1.13.0 and 1.13.2 from the `ninja` PyPI
#   package, each under .tools/ninja/<version> (scripts/install-ninja.sh);
# - the official Perfetto schema (`perfetto` PyPI package) in .tools/py and
#   Debian's protoc (scripts/install-perfetto.sh);
# - the `jsonschema` validator in .tools/py, for the timings and samples schema tests;
# - SciPy and numpy in .tools/py, to regenerate trace-compare's reference
#   vectors (trace-compare/tests/vectors/gen.py);
# - Debian's hyperfine, to regenerate the hyperfine fixtures of the CLI tests
#   (cli/tests/fixtures/hyperfine/regen.sh) and for scripts/perf-gate.sh's context;
# - a C compiler, for the minibuild example's real builds.
#
# Idempotent: what is in place is left alone. Nothing here is committed
# (.tools/ is ignored by git).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

"$root/scripts/install-ninja.sh"
"$root/scripts/install-perfetto.sh"

py="$root/.tools/py/bin/python"
if ! "$py" -c 'import jsonschema' 2>/dev/null; then
    echo "install-test-tools: installing jsonschema into .tools/py" >&2
    PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check "jsonschema>=4.18"
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
