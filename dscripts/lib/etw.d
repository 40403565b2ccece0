/*
 * dtx type library: the ETW event header.
 *
 * The `etw:<provider guid>:0xLL_0xKKKKKKKKKKKKKKKK:<event id>|generic_event` probes pass in arg0 a
 * pointer to the event's EVENT_HEADER (evntcons.h, 80 bytes, the same layout in 32- and 64-bit
 * processes) followed by the event's payload; arg1 is the payload's size. Declared here so that
 * scripts can write `((nt`_EVENT_HEADER *)arg0)->EventDescriptor.Id`, as on the Windows port.
 * KernelTime and UserTime (a union with ProcessorTime on Windows) are 0 in dtx.
 */

typedef struct _GUID {
	uint32_t Data1;
	uint16_t Data2;
	uint16_t Data3;
	uint8_t Data4[8];
} GUID;

typedef struct _EVENT_DESCRIPTOR {
	uint16_t Id;
	uint8_t Version;
	uint8_t Channel;
	uint8_t Level;
	uint8_t Opcode;
	uint16_t Task;
	uint64_t Keyword;
} EVENT_DESCRIPTOR;

typedef struct _EVENT_HEADER {
	uint16_t Size;
	uint16_t HeaderType;
	uint16_t Flags;
	uint16_t EventProperty;
	uint32_t ThreadId;
	uint32_t ProcessId;
	int64_t TimeStamp;
	GUID ProviderId;
	EVENT_DESCRIPTOR EventDescriptor;
	uint32_t KernelTime;
	uint32_t UserTime;
	GUID ActivityId;
} EVENT_HEADER;

typedef struct _EVENT_HEADER _EVENT_HEADER;
typedef struct _EVENT_HEADER *PEVENT_HEADER;

/*
 * The counted UTF-16 string of the Windows API (ntdef.h), which the Windows port's scripts read
 * from a process as `(userland pid`UNICODE_STRING *)arg0`.
 */
typedef struct _UNICODE_STRING {
	uint16_t Length;
	uint16_t MaximumLength;
	wchar_t *Buffer;
} UNICODE_STRING;
