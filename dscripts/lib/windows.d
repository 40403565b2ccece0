/*
 * dtx type library: the common typedefs of the Windows headers (ntdef.h, minwindef.h,
 * basetsd.h, winnt.h), which Microsoft's DTrace scripts use with no scope (`NTSTATUS`,
 * `HANDLE`, `ULONG_PTR`, `POBJECT_ATTRIBUTES`) or with the kernel's (``nt`PSIZE_T``).
 *
 * Sizes are Windows' on x64 (LLP64): LONG and ULONG are 32 bits, the _PTR types and SIZE_T
 * pointer-sized. Like every type of this library they sit in a scope below the program's: a
 * script that declares one of these names itself uses its own declaration.
 */

typedef uint8_t BOOLEAN;
typedef int32_t BOOL;
typedef uint8_t BYTE;
typedef uint8_t UCHAR;
typedef char CHAR;
typedef char CCHAR;
typedef wchar_t WCHAR;
typedef int16_t SHORT;
typedef uint16_t USHORT;
typedef uint16_t WORD;
typedef int32_t INT;
typedef uint32_t UINT;
typedef int32_t LONG;
typedef uint32_t ULONG;
typedef uint32_t DWORD;
typedef int64_t LONGLONG;
typedef uint64_t ULONGLONG;
typedef uint64_t ULONG64;
typedef uint64_t DWORD64;
typedef int64_t LONG64;
typedef uint32_t ULONG32;
typedef intptr_t LONG_PTR;
typedef uintptr_t ULONG_PTR;
typedef intptr_t INT_PTR;
typedef uintptr_t UINT_PTR;
typedef uintptr_t DWORD_PTR;
typedef uintptr_t SIZE_T;
typedef intptr_t SSIZE_T;
typedef void *PVOID;
typedef void *HANDLE;
typedef LONG NTSTATUS;
typedef ULONG ACCESS_MASK;
typedef CHAR KPROCESSOR_MODE;
typedef UCHAR KIRQL;

typedef BOOLEAN *PBOOLEAN;
typedef UCHAR *PUCHAR;
typedef CHAR *PCHAR;
typedef CHAR *PSTR;
typedef WCHAR *PWCHAR;
typedef WCHAR *PWSTR;
typedef USHORT *PUSHORT;
typedef LONG *PLONG;
typedef ULONG *PULONG;
typedef DWORD *PDWORD;
typedef ULONG_PTR *PULONG_PTR;
typedef SIZE_T *PSIZE_T;
typedef HANDLE *PHANDLE;
typedef PVOID *PPVOID;
typedef NTSTATUS *PNTSTATUS;
typedef ACCESS_MASK *PACCESS_MASK;
typedef UNICODE_STRING *PUNICODE_STRING;
typedef GUID *PGUID;

typedef struct _LARGE_INTEGER_PARTS {
	ULONG LowPart;
	LONG HighPart;
} LARGE_INTEGER_PARTS;

typedef union _LARGE_INTEGER {
	LARGE_INTEGER_PARTS u;
	LONGLONG QuadPart;
} LARGE_INTEGER;
typedef LARGE_INTEGER *PLARGE_INTEGER;

typedef struct _CLIENT_ID {
	HANDLE UniqueProcess;
	HANDLE UniqueThread;
} CLIENT_ID;
typedef CLIENT_ID *PCLIENT_ID;

typedef struct _OBJECT_ATTRIBUTES {
	ULONG Length;
	HANDLE RootDirectory;
	PUNICODE_STRING ObjectName;
	ULONG Attributes;
	PVOID SecurityDescriptor;
	PVOID SecurityQualityOfService;
} OBJECT_ATTRIBUTES;
typedef OBJECT_ATTRIBUTES *POBJECT_ATTRIBUTES;

typedef struct _IO_STATUS_BLOCK {
	union {
		NTSTATUS Status;
		PVOID Pointer;
	} u;
	ULONG_PTR Information;
} IO_STATUS_BLOCK;
typedef IO_STATUS_BLOCK *PIO_STATUS_BLOCK;
