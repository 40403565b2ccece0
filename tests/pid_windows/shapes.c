/* The PDB types test program (src/symbols/pdb_types.rs's unit test, and tests/it/pid/windows.rs
   under Wine, built by clang + lld with a PDB as shapes_pdb.exe): the kinds of types a target's
   PDB has, a typedef'd struct with a nested struct, a pointer to itself, a union, an enum,
   bit-fields and an array, a function taking a pointer to it, and two returning an enum and a
   pointer (the types of a return probe's args[1]).
   shapes            calls area() once and prints its result */
#include <stdio.h>
typedef enum _COLOUR { RED = 1, GREEN = 2, BLUE = 40 } COLOUR;
typedef struct _INNER { short a; unsigned char b[3]; } INNER;
typedef union _NUM { int i; float f; } NUM;
typedef struct _SHAPE {
    int id;
    long count;
    INNER inner;
    struct _SHAPE *next;
    NUM num;
    COLOUR colour;
    unsigned int flag : 1;
    unsigned int kind : 3;
    unsigned int rest : 28;
    char name[8];
} SHAPE;
__attribute__((noinline)) int area(SHAPE *s, int scale) {
    return s->id * scale + s->kind;
}
/* the empty asm keeps clang from dropping the calls (a call without effects may go) */
__attribute__((noinline)) COLOUR colour_of(SHAPE *s) {
    __asm__ volatile("" ::: "memory");
    return s->colour;
}
__attribute__((noinline)) SHAPE *self_of(SHAPE *s) {
    __asm__ volatile("" ::: "memory");
    return s;
}
int main(int argc, char **argv) {
    SHAPE s = { 7, 9, { 3, { 1, 2, 3 } }, 0, { 5 }, BLUE, 1, 5, 0, "box" };
    (void)argv;
    printf("%d\n", area(&s, argc));
    return colour_of(self_of(&s)) == BLUE ? 0 : 1;
}
