#!/bin/sh
# Do the newest compatible versions of our dependencies still build? Resolves
# the workspace afresh, without Cargo.lock, in a copy of the sources (the
# checkout's own lockfile is never touched), and runs `cargo check --workspace`
# there: the libraries and the binaries, not the tests, so that it costs a
# check of what changed and no more. When the fresh resolution is the same as
# Cargo.lock, the locked build already covered it and nothing is checked.
# Artifacts go to target/newest-deps, so a second run checks only what moved.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT INT TERM
# The tracked files and the untracked ones git does not ignore: the sources as
# they are in this checkout (a fresh clone's are the commit's).
git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$copy"
rm -f "$copy/Cargo.lock"
cargo generate-lockfile --quiet --manifest-path "$copy/Cargo.toml"
if cmp -s Cargo.lock "$copy/Cargo.lock"; then
    echo "check-newest-deps: a fresh resolution is Cargo.lock itself; nothing newer to check" >&2
    exit 0
fi
# What is newer (the dry run writes nothing).
cargo update --dry-run
CARGO_TARGET_DIR="$root/target/newest-deps" cargo check --workspace --manifest-path "$copy/Cargo.toml"
echo "check-newest-deps: the workspace builds with the newest versions (see above); \`cargo update\` takes them" >&2
