/* A DLL built by clang + lld with a PDB (scripts/pid-windows-fixtures.sh: ringlib_pdb.dll), whose
   types the PDB types test reads when rings.exe, built by gcc without a PDB, imports it: a
   process's DLLs give their types as its executable does (src/symbols/process_types.rs). */
#include "ring.h"

/* the empty asm keeps clang from dropping the calls (a call without effects may go) */
__declspec(dllexport) __attribute__((noinline)) int ring_size(RING *r) {
    __asm__ volatile("" ::: "memory");
    return r->size + (int)r->level;
}

__declspec(dllexport) __attribute__((noinline)) RING *ring_self(RING *r) {
    __asm__ volatile("" ::: "memory");
    return r->self;
}
