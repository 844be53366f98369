#!/bin/sh
# Regenerates the seed corpus in seeds/delta from logs written by real Ninja.
#
# Needs the binaries of scripts/install-ninja.sh (run it first). Each seed is
# one input of the `delta` target: a flag byte (bit 0: a log before, bit 1: a
# log after), the length of the log before as a little-endian u32, the log
# before, then the log after. Times and modification times differ on every
# run, so regenerated seeds differ from the checked-in ones byte for byte but
# not in kind.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
tools=${NINJA_LOG_TEST_NINJA_DIR:-$here/../../.tools/ninja}
seeds=$here/seeds/delta
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$seeds"

# pack NAME BEFORE AFTER: BEFORE and AFTER are files, or - for no log.
pack() {
    python3 - "$seeds/$1" "$2" "$3" <<'PY'
import struct, sys
out, before, after = sys.argv[1:]
read = lambda p: None if p == "-" else open(p, "rb").read()
b, a = read(before), read(after)
flags = (1 if b is not None else 0) | (2 if a is not None else 0)
b = b or b""
open(out, "wb").write(bytes([flags]) + struct.pack("<I", len(b)) + b + (a or b""))
PY
}

# build VERSION [ARGS...]: one Ninja run in $work/b, saving the log before it.
build() {
    v=$1
    shift
    if [ -f "$work/b/.ninja_log" ]; then cp "$work/b/.ninja_log" "$work/before"; else rm -f "$work/before"; fi
    "$tools/$v/ninja" -C "$work/b" "$@" >/dev/null 2>&1 || true
}
before() { if [ -f "$work/before" ]; then echo "$work/before"; else echo -; fi; }
fresh() {
    rm -rf "$work/b"
    mkdir -p "$work/b"
    cat > "$work/b/build.ninja"
}
# Ages every file, then makes the named inputs newer than any output.
bump() {
    find "$work/b" -type f ! -name .ninja_log -exec touch -d '-1000 seconds' {} +
    for f in "$@"; do touch "$work/b/$f"; done
}

chain='rule cp
  command = cp $in $out
rule split
  command = cp $in $out1 && cp $in $out2
build a.out: cp a.in
build m1 m2: split a.out
  out1 = m1
  out2 = m2
build c.out: cp c.in
'
always='rule mark
  command = touch $out
rule pair
  command = touch $out1 $out2
build FORCE: phony
build a.out: mark | FORCE
build m1 m2: pair a.out | FORCE
  out1 = m1
  out2 = m2
build e.out: mark | FORCE
'

for v in 1.10.0 1.13.2; do
    printf '%s' "$chain" | fresh
    echo a > "$work/b/a.in"; echo c > "$work/b/c.in"
    build $v
    pack "first-build-$v" - "$work/b/.ninja_log"
    bump a.in
    build $v
    pack "append-$v" "$(before)" "$work/b/.ninja_log"
    build $v
    pack "no-op-$v" "$(before)" "$work/b/.ninja_log"

    printf '%sbuild d.out: mark | FORCE\n' "$always" | fresh
    i=0
    while [ $i -lt 21 ]; do build $v -j1; i=$((i + 1)); done
    printf '%s' "$always" > "$work/b/build.ninja"
    rm -f "$work/b/d.out"
    build $v -j1
    pack "recompaction-with-dead-output-$v" "$(before)" "$work/b/.ninja_log"

    printf 'rule mark\n  command = touch $out\nrule fail\n  command = false\nbuild ok1: mark\nbuild ok2: mark ok1\nbuild bad: fail ok2\n' | fresh
    build $v -j1
    pack "failed-build-$v" - "$work/b/.ninja_log"
done

# A version switch each way.
printf '%s' "$chain" | fresh
echo a > "$work/b/a.in"; echo c > "$work/b/c.in"
build 1.10.0
bump a.in
build 1.13.2
pack "start-over-v5-to-1.13.2" "$(before)" "$work/b/.ninja_log"
bump a.in
build 1.11.1
pack "foreign-header-append-1.11.1" "$(before)" "$work/b/.ninja_log"

# Regenerations, with and without `ninja -t restat`.
for v in 1.10.0 1.13.2; do
    for restat in "" " \&\& $tools/$v/ninja -t restat"; do
        manifest="rule gen
  command = sh gen.sh$restat \&\& sleep 0.15
  generator = 1
build build.ninja: gen gen.sh
rule cp
  command = cp \$in \$out
build a.out: cp a.in
build b.out: cp a.out
"
        printf '%s' "$manifest" | sed 's/\\&/\&/g' | fresh
        printf "cat > build.ninja <<'EOF'\n%s\nEOF\n" "$(cat "$work/b/build.ninja")" > "$work/b/gen.sh"
        echo a > "$work/b/a.in"
        build $v
        bump gen.sh a.in
        build $v
        name=regeneration-$v
        [ -n "$restat" ] && name=regeneration-with-restat-$v
        pack "$name" "$(before)" "$work/b/.ninja_log"
    done
done

ls "$seeds"
