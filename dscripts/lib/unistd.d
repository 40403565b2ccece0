/*
 * dtx type library: constants of the D runtime.
 *
 * DTRACEFLT_* are the fault codes the ERROR probe reports in arg4; NULL is the integer constant 0, which D
 * accepts wherever a pointer or string is expected.
 */

inline int NULL = 0;

inline int DTRACEFLT_UNKNOWN = 0;	/* unknown fault */
inline int DTRACEFLT_BADADDR = 1;	/* bad address */
inline int DTRACEFLT_BADALIGN = 2;	/* bad alignment */
inline int DTRACEFLT_ILLOP = 3;		/* illegal operation */
inline int DTRACEFLT_DIVZERO = 4;	/* division by zero */
inline int DTRACEFLT_NOSCRATCH = 5;	/* out of scratch space */
inline int DTRACEFLT_KPRIV = 6;		/* illegal kernel access */
inline int DTRACEFLT_UPRIV = 7;		/* illegal user access */
inline int DTRACEFLT_TUPOFLOW = 8;	/* tuple stack overflow */
inline int DTRACEFLT_BADSTACK = 9;	/* bad stack */

