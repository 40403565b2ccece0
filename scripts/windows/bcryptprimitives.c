/* A stand-in for bcryptprimitives.dll, which Wine 8 lacks. Rust's std for *-pc-windows-gnu
 * fills its random seeds through ProcessPrng from that DLL; without it every test executable
 * stops at load time (STATUS_DLL_NOT_FOUND). Only the Wine prefix of scripts/windows-check.sh
 * gets this file; real Windows has the system DLL.
 *
 * ProcessPrng(buffer, length) always succeeds on Windows; here the bytes come from
 * RtlGenRandom (advapi32's SystemFunction036), taken in chunks since it counts in ULONG. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE dll, DWORD reason, LPVOID reserved)
{
    (void)dll;
    (void)reason;
    (void)reserved;
    return TRUE;
}
