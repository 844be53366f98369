#!/bin/sh
# Installs Perfetto's trace processor (`trace_processor_shell`, v58.2): the
# engine the Perfetto UI runs to import a trace into SQL tables before it draws
# anything. The trace-processor tests (tests/it/trace_processor.rs) load every
# capture into it and check what a person would see.
#
# It ends up at .tools/perfetto/trace_processor_shell, which the tests find
# (or wherever TRACE_PROCESSOR_SHELL points, if that is set). Taken from, in
# order:
#
# 1. $TRACE_PROCESSOR_SHELL, if it names an executable;
# 2. `shared/tools/perfetto/trace_processor_shell` in the directory beside this
#    repository's checkout, where the project's machines keep a copy built from
#    Perfetto's source at v58.2 (with its build script);
# 3. Perfetto's official prebuilt release of the same version, downloaded
#    (needs access to Perfetto's artifact storage; x86-64 and arm64 Linux):
#    https://commondatastorage.googleapis.com/perfetto-luci-artifacts/v58.2/linux-amd64/trace_processor_shell
#
# The binary needs Debian's libprotobuf32, libsqlite3-0, zlib1g and libzstd1 at
# run time (the copy built from source links them; the prebuilt one links
# nothing but libc): installed here when missing.
#
# Idempotent. Nothing installed here is committed (.tools/ is ignored by git).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dest_dir="$root/.tools/perfetto"
dest="$dest_dir/trace_processor_shell"
version=v58.2

say() {
    echo "install-trace-processor: $*" >&2
}

# The runtime libraries, before anything runs the binary.
missing=""
for pkg in libprotobuf32 libsqlite3-0 zlib1g libzstd1; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
if [ -n "$missing" ] && command -v apt-get >/dev/null 2>&1; then
    say "installing$missing"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # shellcheck disable=SC2086 # one package name per word
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

works() {
    [ -x "$1" ] && "$1" --version >/dev/null 2>&1
}

if works "$dest"; then
    :
elif [ -n "${TRACE_PROCESSOR_SHELL:-}" ] && works "$TRACE_PROCESSOR_SHELL"; then
    mkdir -p "$dest_dir"
    ln -sf "$TRACE_PROCESSOR_SHELL" "$dest"
elif works "$root/../shared/tools/perfetto/trace_processor_shell"; then
    mkdir -p "$dest_dir"
    say "linking the trace processor built from source (shared/tools/perfetto)"
    ln -sf "$(cd "$root/../shared/tools/perfetto" && pwd)/trace_processor_shell" "$dest"
else
    case "$(uname -m)" in
        x86_64) arch=linux-amd64 ;;
        aarch64) arch=linux-arm64 ;;
        *) say "no prebuilt trace processor for $(uname -m): build it from Perfetto's source ($version)"; exit 1 ;;
    esac
    url="https://commondatastorage.googleapis.com/perfetto-luci-artifacts/$version/$arch/trace_processor_shell"
    say "downloading Perfetto's prebuilt trace processor $version"
    mkdir -p "$dest_dir"
    if ! curl -fsSL -o "$dest.partial" "$url"; then
        rm -f "$dest.partial"
        say "could not download $url; put a trace_processor_shell $version on this machine and set TRACE_PROCESSOR_SHELL to it"
        exit 1
    fi
    chmod +x "$dest.partial"
    mv "$dest.partial" "$dest"
fi

if ! works "$dest"; then
    say "$dest does not run (missing libraries? see this script's comment)"
    exit 1
fi
echo "trace processor: $("$dest" --version 2>&1 | head -n 1) (.tools/perfetto/trace_processor_shell)"
