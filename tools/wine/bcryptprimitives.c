/*
 * A stand-in for Windows' bcryptprimitives.dll, for running the Windows
 * tests under Wine 8 (Debian 12), which lacks it. Rust's standard library
 * (1.78 and later) takes its random bytes from ProcessPrng there; this gives
 * them from RtlGenRandom (SystemFunction036), which Wine has. Only the test
 * set-up builds it (scripts/install-test-tools.sh --cross), into the Wine
 * prefix under .tools/; nothing the crates ship uses it.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
