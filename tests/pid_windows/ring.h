/* The struct of ringlib.c and rings.c: the DLL's PDB describes it, the exe has no PDB. */
typedef struct _RING {
    int size;
    unsigned int wrapped : 1;
    unsigned int level : 4;
    struct _RING *self;
} RING;
