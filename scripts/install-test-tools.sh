#!/bin/sh
# Installs every tool the test suite needs, from the package registries only:
#
# - Ninja 1.10.0, 1.10.2, 1.11.1, 1.13.0 and 1.13.2 from the `ninja` PyPI
#   package, each under .tools/ninja/<version> (scripts/install-ninja.sh);
# - the official Perfetto schema (`perfetto` PyPI package) in .tools/py and
#   Debian's protoc (scripts/install-perfetto.sh);
# - the `jsonschema` validator in .tools/py, for the timings schema test;
# - the official OpenTelemetry protocol classes (`opentelemetry-proto`) in
#   .tools/py, which tools/otlp_check.py decodes OTLP bodies with, and the
#   `rotel` OpenTelemetry collector (its wheel ships the `rotel-agent`
#   binary), the real OTLP/HTTP receiver of the export tests;
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

if ! "$py" -c 'import opentelemetry.proto.trace.v1.trace_pb2, rotel' 2>/dev/null; then
    echo "install-test-tools: installing opentelemetry-proto and rotel into .tools/py" >&2
    PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet --disable-pip-version-check \
        "opentelemetry-proto>=1.38" "rotel==0.0.1a15"
fi

if ! command -v cc >/dev/null 2>&1; then
    echo "install-test-tools: installing a C compiler (gcc)" >&2
    apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi
