/*
 * The dnet provider's typed argument, as on the Windows DTrace port: the probes of the .NET
 * runtime's events give args[0] as one of the net*_t types below, translated from arg0 (the
 * payload). Member names and types are the port's (netirop_t's clr_modid is the 64-bit
 * ModuleID); dtx adds netmethod_t for the JIT and method probes.
 *
 * The members are read by field name from the event the probe fired for (etwfield and
 * etwfield_str, which give 0 and "" for a field the event's version lacks), so they are right
 * for every event version and for the 32-bit runtime's events, whose pointers are 4 bytes. The
 * field names are the runtime manifest's (Microsoft-Windows-DotNETRuntime); dtx decodes them
 * from the trace's EventMetadata or from the manifest it ships. A GUID member is the GUID's
 * text, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", where the port has a guid_t.
 *
 * args[0] is only meaningful in the clause of the probe that fired: the translators read that
 * event, not memory at p.
 */

/* GCStart's Reason */
inline int NET_GC_SMALL_OBJ_HEAP_ALLOC = 0x0;
#pragma D binding "1.0" NET_GC_SMALL_OBJ_HEAP_ALLOC
inline int NET_GC_INDUCED = 0x1;
#pragma D binding "1.0" NET_GC_INDUCED
inline int NET_GC_LOW_MEMORY = 0x2;
#pragma D binding "1.0" NET_GC_LOW_MEMORY
inline int NET_GC_EMPTY = 0x3;
#pragma D binding "1.0" NET_GC_EMPTY
inline int NET_GC_LARGE_OBJ_HEAP_ALLOC = 0x4;
#pragma D binding "1.0" NET_GC_LARGE_OBJ_HEAP_ALLOC
inline int NET_GC_OOS_SMALL = 0x5;
#pragma D binding "1.0" NET_GC_OOS_SMALL
inline int NET_GC_OOS_LARGE = 0x6;
#pragma D binding "1.0" NET_GC_OOS_LARGE
inline int NET_GC_INDUCED_NFBLK = 0x7;
#pragma D binding "1.0" NET_GC_INDUCED_NFBLK

/* GCStart's Type */
inline int NET_GC_TYPE_BLKING_O = 0x0;	/* blocking, outside a background GC */
#pragma D binding "1.0" NET_GC_TYPE_BLKING_O
inline int NET_GC_TYPE_BG = 0x1;	/* background */
#pragma D binding "1.0" NET_GC_TYPE_BG
inline int NET_GC_TYPE_BLKING_D = 0x2;	/* blocking, during a background GC */
#pragma D binding "1.0" NET_GC_TYPE_BLKING_D

/* GCAllocationTick's AllocationKind, GCCreateSegment's Type */
inline int NET_GC_ALLOC_SMALL_OBJ = 0x0;
#pragma D binding "1.0" NET_GC_ALLOC_SMALL_OBJ
inline int NET_GC_ALLOC_LARGE_OBJ = 0x1;
#pragma D binding "1.0" NET_GC_ALLOC_LARGE_OBJ
inline int NET_GC_ALLOC_RD_ONLY = 0x3;
#pragma D binding "1.0" NET_GC_ALLOC_RD_ONLY

/* ThreadCreated's Flags */
inline int NET_GC_MANG_THR = 0x0;
#pragma D binding "1.0" NET_GC_MANG_THR
inline int NET_GC_NATIVE_THR = 0x1;
#pragma D binding "1.0" NET_GC_NATIVE_THR

/*
 * thread pool threads: thr-start, thr-stop, thr-retire, thr-unretire (worker thread events
 * 50-53) and io-start ... io-unretire (I/O thread events 44-47), which name their counts
 * differently: an event has one name of each pair, the other reads as 0.
 */
typedef struct netthrinfo {
	uint64_t clr_thrco;		/* active (or I/O) threads */
	uint64_t clr_retireco;		/* retired threads */
	uint16_t clr_instid;		/* ClrInstanceID */
} netthrinfo_t;

translator netthrinfo_t < char *p > {
	clr_thrco = etwfield("ActiveWorkerThreadCount") + etwfield("IOThreadCount");
	clr_retireco = etwfield("RetiredWorkerThreadCount") + etwfield("RetiredIOThreads");
	clr_instid = etwfield("ClrInstanceID");
};

translator netthrinfo_t < intptr_t p > {
	clr_thrco = etwfield("ActiveWorkerThreadCount") + etwfield("IOThreadCount");
	clr_retireco = etwfield("RetiredWorkerThreadCount") + etwfield("RetiredIOThreads");
	clr_instid = etwfield("ClrInstanceID");
};

/* a managed thread: thr-create (ThreadCreated) */
typedef struct netthr {
	uint64_t clr_thrid;		/* ManagedThreadID */
	uint64_t clr_appdmid;		/* AppDomainID */
	uint32_t clr_flgs;		/* NET_GC_MANG_THR, NET_GC_NATIVE_THR */
	uint32_t clr_mngthrindex, clr_osthrid;
	uint16_t clr_instid;
} netthr_t;

translator netthr_t < char *p > {
	clr_thrid = etwfield("ManagedThreadID");
	clr_appdmid = etwfield("AppDomainID");
	clr_flgs = etwfield("Flags");
	clr_mngthrindex = etwfield("ManagedThreadIndex");
	clr_osthrid = etwfield("OSThreadID");
	clr_instid = etwfield("ClrInstanceID");
};

/* lock contention: lck-wait, lck-done */
typedef struct netlck {
	uint8_t lck_flags;		/* 0 managed, 1 native */
	uint16_t clr_instid;
} netlck_t;

translator netlck_t < char *p > {
	lck_flags = etwfield("ContentionFlags");
	clr_instid = etwfield("ClrInstanceID");
};

/* a collection: gc-start, gc-end, suspend-start, finalizer-end */
typedef struct netgc {
	uint16_t clr_instid;
	uint32_t gc_count, gc_depth, gc_reason, gc_type;
	uint64_t gc_addr, gc_size;
} netgc_t;

translator netgc_t < char *p > {
	clr_instid = etwfield("ClrInstanceID");
	gc_count = etwfield("Count");
	gc_depth = etwfield("Depth");		/* the generation collected */
	gc_reason = etwfield("Reason");		/* NET_GC_INDUCED, ... */
	gc_type = etwfield("Type");		/* NET_GC_TYPE_BG, ... */
	gc_addr = etwfield("Address");
	gc_size = etwfield("Size");
};

/* a GC heap segment: seg-create, seg-free */
typedef struct netgcseg {
	uint64_t gc_addr, gc_size;
	uint32_t gc_type;		/* NET_GC_ALLOC_SMALL_OBJ, ... */
	uint16_t clr_instid;
} netgcseg_t;

translator netgcseg_t < char *p > {
	gc_addr = etwfield("Address");
	gc_size = etwfield("Size");
	gc_type = etwfield("Type");
	clr_instid = etwfield("ClrInstanceID");
};

/* allocate-tick: every ~100 KB a managed heap hands out */
typedef struct netgcalloctick {
	uint32_t gc_amt, gc_kind;
	uint16_t clr_instid;
	uint64_t gc_amt64;
	uint64_t gc_typeid;
	string gc_typename;
	uint32_t gc_heapindex;
	uint64_t gc_addr;
} netgcalloctick_t;

translator netgcalloctick_t < char *p > {
	gc_amt = etwfield("AllocationAmount");
	gc_kind = etwfield("AllocationKind");
	clr_instid = etwfield("ClrInstanceID");
	gc_amt64 = etwfield("AllocationAmount64");
	gc_typeid = etwfield("TypeID");
	gc_typename = etwfield_str("TypeName");
	gc_heapindex = etwfield("HeapIndex");
	gc_addr = etwfield("Address");
};

/* heapstat: the heap after a collection */
typedef struct netgcheapstat {
	uint64_t gc_gensz0, gc_totpromsize0, gc_gensz1, gc_totpromsize1, gc_gensz2,
	    gc_totpromsize2, gc_gensz3, gc_totpromsize3, gc_finpromsz, gc_finpromcount;
	uint32_t gc_pinnedobjco, gc_sinkblkcount, gc_gchandcount;
	uint16_t clr_instid;
	uint64_t gc_gensz4, gc_totpromsize4;
} netgcheapstat_t;

translator netgcheapstat_t < char *p > {
	gc_gensz0 = etwfield("GenerationSize0");
	gc_totpromsize0 = etwfield("TotalPromotedSize0");
	gc_gensz1 = etwfield("GenerationSize1");
	gc_totpromsize1 = etwfield("TotalPromotedSize1");
	gc_gensz2 = etwfield("GenerationSize2");
	gc_totpromsize2 = etwfield("TotalPromotedSize2");
	gc_gensz3 = etwfield("GenerationSize3");
	gc_totpromsize3 = etwfield("TotalPromotedSize3");
	gc_finpromsz = etwfield("FinalizationPromotedSize");
	gc_finpromcount = etwfield("FinalizationPromotedCount");
	gc_pinnedobjco = etwfield("PinnedObjectCount");
	gc_sinkblkcount = etwfield("SinkBlockCount");
	gc_gchandcount = etwfield("GCHandleCount");
	clr_instid = etwfield("ClrInstanceID");
	gc_gensz4 = etwfield("GenerationSize4");
	gc_totpromsize4 = etwfield("TotalPromotedSize4");
};

/* the runtime a process loaded: event:runtime, rundown:runtime */
typedef struct netrt {
	uint16_t clr_instid;
	uint16_t clr_sku;		/* 1 desktop CLR, 2 CoreCLR */
	uint16_t clr_msmaj, clr_msmin, clr_msbld, clr_msfix;	/* base class library */
	uint16_t clr_clrmaj, clr_clrmin, clr_clrbld, clr_clrfix;	/* runtime */
	uint32_t clr_startflags;
	uint8_t clr_startmode;
	string clr_cmdline;
	string clr_guid;		/* ComObjectGuid */
	string clr_clrpath;
} netrt_t;

translator netrt_t < char *p > {
	clr_instid = etwfield("ClrInstanceID");
	clr_sku = etwfield("Sku");
	clr_msmaj = etwfield("BclMajorVersion");
	clr_msmin = etwfield("BclMinorVersion");
	clr_msbld = etwfield("BclBuildNumber");
	clr_msfix = etwfield("BclQfeNumber");
	clr_clrmaj = etwfield("VMMajorVersion");
	clr_clrmin = etwfield("VMMinorVersion");
	clr_clrbld = etwfield("VMBuildNumber");
	clr_clrfix = etwfield("VMQfeNumber");
	clr_startflags = etwfield("StartupFlags");
	clr_startmode = etwfield("StartupMode");
	clr_cmdline = etwfield_str("CommandLine");
	clr_guid = etwfield_str("ComObjectGuid");
	clr_clrpath = etwfield_str("RuntimeDllPath");
};

/* an exception thrown: event:excp */
typedef struct netexcp {
	string clr_excep;		/* the exception's type */
	string clr_excepmsg;
	intptr_t clr_ip;		/* where it was thrown */
	uint32_t clr_res;		/* HRESULT */
	uint16_t clr_flags;
	uint16_t clr_instid;
} netexcp_t;

translator netexcp_t < char *p > {
	clr_excep = etwfield_str("ExceptionType");
	clr_excepmsg = etwfield_str("ExceptionMessage");
	clr_ip = etwfield("ExceptionEIP");
	clr_res = etwfield("ExceptionHRESULT");
	clr_flags = etwfield("ExceptionFlags");
	clr_instid = etwfield("ClrInstanceID");
};

/* an interop stub: stub-gen (ILStubGenerated), stub-hit (ILStubCacheHit) */
typedef struct netirop {
	uint64_t clr_modid;
	uint64_t clr_stubid, clr_stubflags;
	uint32_t clr_mngitoken;
	string clr_mim_namespace, clr_mim_name, clr_mim_sig, clr_nm_sig, clr_stub_sig,
	    clr_stub_code;
	uint16_t clr_instid;
} netirop_t;

translator netirop_t < char *p > {
	clr_modid = etwfield("ModuleID");
	clr_stubid = etwfield("StubMethodID");
	clr_stubflags = etwfield("StubFlags");
	clr_mngitoken = etwfield("ManagedInteropMethodToken");
	clr_mim_namespace = etwfield_str("ManagedInteropMethodNamespace");
	clr_mim_name = etwfield_str("ManagedInteropMethodName");
	clr_mim_sig = etwfield_str("ManagedInteropMethodSignature");
	clr_nm_sig = etwfield_str("NativeMethodSignature");
	clr_stub_sig = etwfield_str("StubMethodSignature");
	clr_stub_code = etwfield_str("StubMethodILCode");
	clr_instid = etwfield("ClrInstanceID");
};

/* an application domain: appdomain-load, appdomain-unload, rundown:appdomain-dc* */
typedef struct netappdom {
	uint64_t clr_appdomid;
	uint32_t clr_appdomflgs;
	string clr_appdomname;
	uint32_t clr_appdomindex;
	uint16_t clr_instid;
} netappdom_t;

translator netappdom_t < char *p > {
	clr_appdomid = etwfield("AppDomainID");
	clr_appdomflgs = etwfield("AppDomainFlags");
	clr_appdomname = etwfield_str("AppDomainName");
	clr_appdomindex = etwfield("AppDomainIndex");
	clr_instid = etwfield("ClrInstanceID");
};

/* an assembly: assembly-load, assembly-unload, rundown:assembly-dc* */
typedef struct netassm {
	uint64_t clr_assmid;
	uint64_t clr_appdmid;
	uint64_t clr_bindid;
	uint32_t clr_assmflgs;
	string clr_assmname;		/* fully qualified */
	uint16_t clr_instid;
} netassm_t;

translator netassm_t < char *p > {
	clr_assmid = etwfield("AssemblyID");
	clr_appdmid = etwfield("AppDomainID");
	clr_bindid = etwfield("BindingID");
	clr_assmflgs = etwfield("AssemblyFlags");
	clr_assmname = etwfield_str("FullyQualifiedAssemblyName");
	clr_instid = etwfield("ClrInstanceID");
};

/* a module: module-load, module-unload, rundown:module-dc* */
typedef struct netmodule {
	uint64_t clr_modid;
	uint64_t clr_assmid;
	uint32_t clr_modflgs;
	uint32_t clr_reserved;
	string clr_modilpath;
	string clr_modnativepath;
	uint16_t clr_instid;
	string clr_mngpdb_guid;
	uint32_t clr_mngpdb_age;
	string clr_mngpdb_path;
	string clr_nativepdb_guid;
	uint32_t clr_nativepdb_age;
	string clr_nativepdb_path;
} netmodule_t;

translator netmodule_t < char *p > {
	clr_modid = etwfield("ModuleID");
	clr_assmid = etwfield("AssemblyID");
	clr_modflgs = etwfield("ModuleFlags");
	clr_reserved = etwfield("Reserved1");
	clr_modilpath = etwfield_str("ModuleILPath");
	clr_modnativepath = etwfield_str("ModuleNativePath");
	clr_instid = etwfield("ClrInstanceID");
	clr_mngpdb_guid = etwfield_str("ManagedPdbSignature");
	clr_mngpdb_age = etwfield("ManagedPdbAge");
	clr_mngpdb_path = etwfield_str("ManagedPdbBuildPath");
	clr_nativepdb_guid = etwfield_str("NativePdbSignature");
	clr_nativepdb_age = etwfield("NativePdbAge");
	clr_nativepdb_path = etwfield_str("NativePdbBuildPath");
};

/*
 * dtx: a method the JIT compiled or the runtime loaded: jit:method-jit-begin,
 * jit:method-load, jit:method-unload, rundown:method-dc* (clr_start and clr_size are 0 for
 * method-jit-begin, clr_ilsize is 0 for the others).
 */
typedef struct netmethod {
	uint64_t clr_methid;
	uint64_t clr_modid;
	uint64_t clr_start;		/* the code's address */
	uint32_t clr_size;		/* the code's size */
	uint32_t clr_token;
	uint32_t clr_flags;
	uint32_t clr_ilsize;
	string clr_namespace;
	string clr_name;
	string clr_sig;
	uint16_t clr_instid;
} netmethod_t;

translator netmethod_t < char *p > {
	clr_methid = etwfield("MethodID");
	clr_modid = etwfield("ModuleID");
	clr_start = etwfield("MethodStartAddress");
	clr_size = etwfield("MethodSize");
	clr_token = etwfield("MethodToken");
	clr_flags = etwfield("MethodFlags");
	clr_ilsize = etwfield("MethodILSize");
	clr_namespace = etwfield_str("MethodNamespace");
	clr_name = etwfield_str("MethodName");
	clr_sig = etwfield_str("MethodSignature");
	clr_instid = etwfield("ClrInstanceID");
};
