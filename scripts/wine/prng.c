/* bcryptprimitives.dll for Wine 8, which lacks it: Rust's std for *-pc-windows-gnu takes its
   random bytes from ProcessPrng. Forwards to advapi32's RtlGenRandom (SystemFunction036). */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
BOOL WINAPI ProcessPrng(PBYTE out, SIZE_T n) {
    for (SIZE_T done = 0; done < n;) {
        ULONG part = (n - done) > 0x1000000 ? 0x1000000 : (ULONG)(n - done);
        if (!SystemFunction036(out + done, part)) return FALSE;
        done += part;
    }
    return TRUE;
}
