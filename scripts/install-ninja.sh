#!/bin/sh
# Installs the real Ninja binaries that the ninja-log integration tests drive.
#
# Each version comes from the `ninja` Python package (the wheel ships a native
# binary) and lands in `.tools/ninja/<version>/`, with `.tools/ninja/<version>/ninja`
# pointing at the binary. A version already in place is left alone, so running
# this again is quick. `.tools/` is ignored by git: the binaries are never committed.
#
# Usage: scripts/install-ninja.sh [VERSION...]   (default: every version the tests use)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
versions=${*:-1.10.0 1.10.2 1.11.1 1.13.0 1.13.2}

# True when "$1" runs and reports version "$2" (the wheels print e.g.
# `1.10.0.git.kitware.jobserver-1`, so only the prefix is compared).
reports_version() {
    [ -x "$1" ] || return 1
    out=$("$1" --version 2>/dev/null) || return 1
    case "$out" in
        "$2" | "$2".*) return 0 ;;
        *) return 1 ;;
    esac
}

for v in $versions; do
    dest="$root/.tools/ninja/$v"
    if reports_version "$dest/ninja" "$v"; then
        continue
    fi
    echo "install-ninja: installing ninja $v into .tools/ninja/$v" >&2
    tmp="$dest.partial"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
        --target "$tmp/pkg" "ninja==$v"
    # Where the native binary sits differs between wheels: older ones keep it in
    # the package's data directory (their `bin/ninja` is a Python launcher),
    # newer ones put the binary itself in `bin/`.
    found=""
    for candidate in pkg/ninja/data/bin/ninja pkg/bin/ninja; do
        if reports_version "$tmp/$candidate" "$v"; then
            found=$candidate
            break
        fi
    done
    if [ -z "$found" ]; then
        echo "install-ninja: no runnable ninja $v binary found in the installed package" >&2
        exit 1
    fi
    ln -s "$found" "$tmp/ninja"
    rm -rf "$dest"
    mv "$tmp" "$dest"
done

for v in $versions; do
    echo "ninja $v: $("$root/.tools/ninja/$v/ninja" --version)"
done
