#!/bin/sh
# Installs the independent Perfetto decoder that the trace-sink-perfetto tests
# check every `.pftrace` with:
#
# - `.tools/py/`: a Python virtual environment holding the `perfetto` package,
#   which ships the whole official trace schema as generated Python classes
#   (`perfetto.protos.perfetto.trace.perfetto_trace_pb2`), and the `protobuf`
#   runtime those classes need;
# - `.tools/perfetto_trace.desc`: that schema exported as a descriptor set, so
#   `protoc --descriptor_set_in=.tools/perfetto_trace.desc
#   --decode=perfetto.protos.Trace < FILE.pftrace` prints any trace as text;
# - `protoc` itself, from Debian's `protobuf-compiler`, when it is not on PATH.
#
# What is already in place is left alone, so running this again is quick.
# `.tools/` is ignored by git: nothing installed here is ever committed.
#
# Usage: scripts/install-perfetto.sh
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
venv="$tools/py"
desc="$tools/perfetto_trace.desc"
# 0.59 is the first release with the whole schema as one Python module; its
# generated code refuses a protobuf runtime older than 6.31.
perfetto_req="perfetto>=0.59"
protobuf_req="protobuf>=6.31"

say() {
    echo "install-perfetto: $*" >&2
}

# True when the venv imports the official schema classes.
schema_imports() {
    [ -x "$venv/bin/python" ] &&
        "$venv/bin/python" -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null
}

# Installs the packages into .tools/py: a virtual environment where Python can
# make one; otherwise (a Python without its venv module) `pip install --target`
# and a `bin/python` that puts that directory on the module path.
install_packages() {
    rm -rf "$venv"
    mkdir -p "$tools"
    if python3 -m venv "$venv" 2>/dev/null; then
        PIP_ROOT_USER_ACTION=ignore "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            "$perfetto_req" "$protobuf_req"
    else
        say "python3 cannot create a virtual environment; installing with pip --target instead"
        rm -rf "$venv"
        mkdir -p "$venv/bin"
        PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
            --target "$venv/lib" "$perfetto_req" "$protobuf_req"
        printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' \
            "$venv/lib" "$(command -v python3)" >"$venv/bin/python"
        chmod +x "$venv/bin/python"
    fi
}

if ! schema_imports; then
    say "installing the perfetto package into .tools/py"
    install_packages
    if ! schema_imports; then
        say "the perfetto package installed but its schema module does not import"
        exit 1
    fi
    # A new schema may differ from the exported one: export it again below.
    rm -f "$desc"
fi

if [ ! -s "$desc" ]; then
    say "exporting the official schema to .tools/perfetto_trace.desc"
    "$venv/bin/python" - "$desc" <<'EOF'
import os
import sys

from google.protobuf import descriptor_pb2
from perfetto.protos.perfetto.trace import perfetto_trace_pb2

# The schema file and everything it imports, each once, imports first: protoc
# wants a self-contained set in dependency order.
files = descriptor_pb2.FileDescriptorSet()
seen = set()


def add(fd):
    if fd.name in seen:
        return
    seen.add(fd.name)
    for dep in fd.dependencies:
        add(dep)
    fd.CopyToProto(files.file.add())


add(perfetto_trace_pb2.DESCRIPTOR)
path = sys.argv[1]
with open(path + ".partial", "wb") as f:
    f.write(files.SerializeToString())
os.replace(path + ".partial", path)
EOF
fi

if ! command -v protoc >/dev/null 2>&1; then
    say "installing protoc (Debian's protobuf-compiler)"
    if [ "$(id -u)" -ne 0 ]; then
        say "protoc is missing and installing it needs root: run 'apt-get install protobuf-compiler' as root"
        exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
fi

perfetto_version=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("perfetto"))')
protobuf_version=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("protobuf"))')
echo "perfetto $perfetto_version, protobuf $protobuf_version (.tools/py)"
echo "schema: .tools/perfetto_trace.desc ($(wc -c <"$desc") bytes)"
echo "$(protoc --version) ($(command -v protoc))"
