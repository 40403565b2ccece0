/* The pid provider's test program for Windows (mingw, run under Wine or Windows).
   pidwin [N]        calls add() N times (default 5), then many(), say(), leaf(); exits 3
   pidwin loop N     calls tick() every 10 ms N times, printing "loop started"/"loop finished"
   pidwin crash      calls add() once and then writes through a null pointer
   pidwin threads    four threads call work() 1000 times each
   pidwin dl PATH    loads the DLL at PATH, calls its libfunc(0..6), prints "dl SUM" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

__attribute__((noinline)) int add(int a, int b) { return a + b; }
__attribute__((noinline)) long long many(long long a, long long b, long long c, long long d,
                                         long long e, long long f, long long g, long long h) {
    return a + b + c + d + e + f + g + h;
}
__attribute__((noinline)) int say(const char *s) { return (int)strlen(s); }
__attribute__((noinline)) int leaf2(int x) { return x * 2; }
__attribute__((noinline)) int leaf(int x) { return leaf2(x) + 1; }
__attribute__((noinline)) int tick(int i) { return i * 2; }
__attribute__((noinline)) int work(int x) { volatile int y = x; return y + 1; }

static DWORD WINAPI run(LPVOID a) {
    long s = 0;
    for (int i = 0; i < 1000; i++) s += work(i);
    return (DWORD)s;
}

int main(int argc, char **argv) {
    setvbuf(stdout, 0, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "loop") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 300;
        printf("loop started\n");
        for (int i = 0; i < n; i++) { tick(i); Sleep(10); }
        printf("loop finished\n");
        return 7;
    }
    if (argc > 1 && strcmp(argv[1], "crash") == 0) {
        add(1, 2);
        volatile int *p = 0;
        *p = 1;
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        HANDLE t[4];
        for (int i = 0; i < 4; i++) t[i] = CreateThread(0, 0, run, 0, 0, 0);
        WaitForMultipleObjects(4, t, TRUE, INFINITE);
        printf("threads done\n");
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "dl") == 0) {
        HMODULE h = LoadLibraryA(argv[2]);
        if (!h) { printf("LoadLibrary failed\n"); return 1; }
        int (*f)(int) = (int (*)(int))GetProcAddress(h, "libfunc");
        int s = 0;
        for (int i = 0; i < 7; i++) s += f(i);
        printf("dl %d\n", s);
        FreeLibrary(h);
        return 0;
    }
    int n = argc > 1 ? atoi(argv[1]) : 5, t = 0;
    for (int i = 0; i < n; i++) t += add(i, 10);
    t += (int)many(1, 2, 3, 4, 5, 6, 7, 8);
    t += say("hello pid");
    t += leaf(3);
    printf("total %d\n", t);
    return 3;
}
