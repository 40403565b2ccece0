/* Probe-hit cost under Wine: hits [N] calls hit() N times. */
#include <stdlib.h>
__attribute__((noinline)) int hit(int x) { int y = x * 3; return y + 1; }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0, s = 0;
    for (long i = 0; i < n; i++) s += hit((int)i);
    return s == 42;
}
