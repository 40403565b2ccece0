/* Imports ringlib_pdb.dll (tests/pid_windows/ringlib.c); built by gcc with no PDB, so the types
   a script names come from the DLL's PDB.
   rings             prints ring_size(ring_self(&r)): 21 */
#include <stdio.h>
#include "ring.h"
__declspec(dllimport) int ring_size(RING *r);
__declspec(dllimport) RING *ring_self(RING *r);
int main(void) {
    RING r = { 12, 1, 9, 0 };
    r.self = &r;
    printf("%d\n", ring_size(ring_self(&r)));
    return 0;
}
