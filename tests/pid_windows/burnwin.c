/* The CPU-bound target of the flamegraph line's live Windows test (tests/etw_live_windows.rs,
   built there with MSVC: cl /O2 /Zi, its PDB moved next to it with the program).
   burnwin [MS]   burns MS ms of its own CPU time (default 1500) in burnwin_leaf, called through
                  burnwin_middle and burnwin_outer from main; prints the low bit of a checksum */
#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

__declspec(noinline) unsigned long long burnwin_leaf(unsigned long long n) {
    volatile unsigned long long x = 0;
    for (unsigned long long i = 0; i < n; i++) x = x * 2862933555777941757ULL + i;
    return x;
}

__declspec(noinline) unsigned long long burnwin_middle(unsigned long long n) {
    return burnwin_leaf(n) + 1;
}

__declspec(noinline) unsigned long long burnwin_outer(unsigned long long n) {
    return burnwin_middle(n) ^ 3;
}

/* The process's CPU time so far (user and kernel), in ms. */
static double cpu_ms(void) {
    FILETIME created, exited, kernel, user;
    GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel, &user);
    ULARGE_INTEGER k, u;
    k.LowPart = kernel.dwLowDateTime;
    k.HighPart = kernel.dwHighDateTime;
    u.LowPart = user.dwLowDateTime;
    u.HighPart = user.dwHighDateTime;
    return (double)(k.QuadPart + u.QuadPart) / 1e4;
}

int main(int argc, char **argv) {
    double ms = argc > 1 ? atof(argv[1]) : 1500;
    unsigned long long acc = 0;
    double start = cpu_ms();
    do {
        acc += burnwin_outer(200000);
    } while (cpu_ms() - start < ms);
    printf("%llu\n", acc & 1);
    return 0;
}
