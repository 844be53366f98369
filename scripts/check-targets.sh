#!/bin/sh
# Clippy of the whole workspace, warnings denied, for the other platforms the
# crates support: macOS (aarch64-apple-darwin) and Windows (x86_64-pc-windows-msvc).
# Checking needs no linker and no SDK, but build scripts still run: criterion's
# `alloca` dependency (benchmarks only) compiles one C file for the target, which
# the host's gcc cannot. clang does, freestanding (the file needs only
# stddef.h and stdint.h, which clang ships), with `_MSC_VER` unset for MSVC so
# that the file does not ask for MSVC's malloc.h.
# Needs the tools of `scripts/install-test-tools.sh --cross`.
set -eu
cd "$(dirname "$0")/.."

CC_aarch64_apple_darwin=clang AR_aarch64_apple_darwin=llvm-ar CFLAGS_aarch64_apple_darwin=-ffreestanding \
    cargo clippy --locked --workspace --all-targets --target aarch64-apple-darwin -- -D warnings

CC_x86_64_pc_windows_msvc=clang AR_x86_64_pc_windows_msvc=llvm-ar \
    CFLAGS_x86_64_pc_windows_msvc="-ffreestanding -U_MSC_VER" \
    cargo clippy --locked --workspace --all-targets --target x86_64-pc-windows-msvc -- -D warnings
