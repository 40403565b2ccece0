/* The fpid provider's Windows test program (tests/fpid_windows.rs): hit(i) N times (argv[1],
   5,000 by default), wide() with eight arguments (four in registers, four on the stack), a call
   chain for ustack(), then its own checksum. With a second argument "wait", it first prints
   "ready" and sleeps that many milliseconds between calls (for -p). With FPIDWIN_TLS=N in the
   environment it first takes N TLS indexes (TlsAlloc), so that the agent's is past 63. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

__attribute__((noinline)) long long hit(long long i) { return i * 3 + 1; }
__attribute__((noinline)) long long wide(long long a, long long b, long long c, long long d,
                                         long long e, long long f, long long g, long long h) {
    return a + b + c + d + e + f + g + h;
}
__attribute__((noinline)) int leaf(int x) { return x + 1; }
__attribute__((noinline)) int middle(int x) { return leaf(x) * 2; }
__attribute__((noinline)) int outer(int x) { return middle(x) + 3; }

int main(int argc, char **argv) {
    long long n = argc > 1 ? atoll(argv[1]) : 5000, sum = 0;
    int pause = argc > 2 ? atoi(argv[2]) : 0;
    const char *tls = getenv("FPIDWIN_TLS");
    for (int i = 0, k = tls ? atoi(tls) : 0; i < k; i++) TlsAlloc();
    /* stdout stays buffered: the program's lines come out together at its exit, not between
       the lines dtx prints meanwhile */
    if (pause) {
        printf("ready\n");
        fflush(stdout);
        Sleep(pause * 4);
    }
    for (long long i = 0; i < n; i++) {
        sum += hit(i);
        if (pause) Sleep(pause);
    }
    sum += wide(1, 2, 3, 4, 5, 6, 7, 8);
    int s = 0;
    for (int i = 0; i < 3; i++) s += outer(i);
    printf("chain %d\n", s);
    printf("checksum %lld\n", sum);
    return 0;
}
