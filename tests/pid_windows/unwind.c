/* ustack() through code without frame pointers: built with -O2 -fomit-frame-pointer (the
   scripts give it those flags), main -> sort_them -> qsort (msvcrt) -> cmp; every frame is
   unwound by .pdata/.xdata, none keeps an rbp chain. Prints "sorted N" and exits 0. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) int sort_them(int *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    /* work after the call, so that qsort is not a tail call */
    int s = 0;
    for (int i = 0; i < n; i++) s += v[i] * i;
    return s;
}

int main(void) {
    int v[64];
    for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
    int s = sort_them(v, 64);
    printf("sorted %d %d\n", v[63], s);
    return 0;
}
