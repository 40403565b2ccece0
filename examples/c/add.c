/* The target of the pid and fpid examples in docs/pid.md and docs/fpid.md: `./prog N` adds
 * 0, 1, ..., N-1 with add() and prints nothing. Build: cc -O0 -o prog examples/c/add.c */
#include <stdlib.h>

__attribute__((noinline)) int add(int a, int b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	volatile int s = 0;
	for (int i = 0; i < n; i++)
		s = add(s, i);
	return s == -1;
}
