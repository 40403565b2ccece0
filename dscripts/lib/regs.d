/*
 * dtx type library: register indexes for uregs[] (x86-64 layout).
 *
 * The names of the 32-bit registers are aliases of their 64-bit counterparts, so scripts
 * written for either data model index the same saved register.
 */

inline int R_R15 = 0;
inline int R_R14 = 1;
inline int R_R13 = 2;
inline int R_R12 = 3;
inline int R_R11 = 4;
inline int R_R10 = 5;
inline int R_R9 = 6;
inline int R_R8 = 7;
inline int R_RDI = 8;
inline int R_RSI = 9;
inline int R_RBP = 10;
inline int R_RBX = 11;
inline int R_RDX = 12;
inline int R_RCX = 13;
inline int R_RAX = 14;
inline int R_TRAPNO = 15;
inline int R_ERR = 16;
inline int R_RIP = 17;
inline int R_CS = 18;
inline int R_RFL = 19;
inline int R_RSP = 20;
inline int R_SS = 21;
inline int R_FS = 22;
inline int R_GS = 23;
inline int R_ES = 24;
inline int R_DS = 25;
inline int R_FSBASE = 26;
inline int R_GSBASE = 27;

inline int R_PC = R_RIP;
inline int R_SP = R_RSP;
inline int R_PS = R_RFL;
inline int R_FP = R_RBP;
inline int R_R0 = R_RAX;
inline int R_R1 = R_RBX;

inline int R_EAX = R_RAX;
inline int R_EBX = R_RBX;
inline int R_ECX = R_RCX;
inline int R_EDX = R_RDX;
inline int R_ESI = R_RSI;
inline int R_EDI = R_RDI;
inline int R_EBP = R_RBP;
inline int R_ESP = R_RSP;
inline int R_EIP = R_RIP;
inline int R_EFL = R_RFL;
inline int R_UESP = R_RSP;
