/*
 * dtx type library: base types.
 *
 * The system types that D programs and dtx's built-in prototypes name. dtx loads every file of
 * dscripts/lib at start-up (they are compiled into the binary, so a script runs from any
 * directory); widths follow the data model (long and pointers are 64-bit under LP64).
 */

typedef unsigned char uchar_t;
typedef unsigned short ushort_t;
typedef unsigned int uint_t;
typedef unsigned long ulong_t;
typedef long long longlong_t;
typedef unsigned long long u_longlong_t;
typedef unsigned char u_char;
typedef unsigned short u_short;
typedef unsigned int u_int;
typedef unsigned long u_long;
typedef int boolean_t;

typedef unsigned long size_t;
typedef long ssize_t;
typedef long ptrdiff_t;
typedef long off_t;
typedef long long off64_t;
typedef long long offset_t;
typedef long long hrtime_t;
typedef long time_t;
typedef long clock_t;
typedef char *caddr_t;

typedef int pid_t;
typedef int id_t;
typedef unsigned int uid_t;
typedef unsigned int gid_t;
typedef int zoneid_t;
typedef int projid_t;
typedef int taskid_t;
typedef int processorid_t;
typedef int psetid_t;
typedef int chipid_t;
typedef int lgrp_id_t;
typedef unsigned long dev_t;
typedef unsigned int major_t;
typedef unsigned int minor_t;
typedef unsigned long ino_t;
typedef unsigned int mode_t;
typedef unsigned int nlink_t;
typedef int key_t;
typedef unsigned int ipaddr_t;
typedef unsigned int in_addr_t;
typedef unsigned short in_port_t;
typedef int errno_t;

typedef struct in6_addr {
	union {
		uint8_t __u6_addr8[16];
		uint16_t __u6_addr16[8];
		uint32_t __u6_addr32[4];
	} __u6_addr;
} in6_addr_t;

typedef struct kmutex { void *_opaque[1]; } kmutex_t;
typedef struct krwlock { void *_opaque[1]; } krwlock_t;
typedef struct mblk { struct mblk *b_next; struct mblk *b_prev; struct mblk *b_cont;
	unsigned char *b_rptr; unsigned char *b_wptr; } mblk_t;

/*
 * The process and thread a probe fired in, as dtx's event source knows them (the trace's
 * process and thread rundown, the live system): curthread points at a struct thread, and
 * psinfo.d translates it into curpsinfo and curlwpsinfo. Every member has the same offset in
 * the 32- and 64-bit data models; the VM fills them in (src/vm/firing.rs).
 */
struct proc {
	pid_t p_pid;
	pid_t p_ppid;
	uid_t p_uid;
	gid_t p_gid;
	uint64_t p_start;
	int p_sessionid;
	int p_dmodel;
	char p_fname[16];
	char p_psargs[80];
};

struct thread {
	id_t t_tid;
	int t_pri;
	uint_t t_state;
	processorid_t t_cpu;
	struct proc t_proc;
	char t_name[64];
	uint64_t t_start;
	void *t_procp;
};
typedef struct thread kthread_t;

typedef struct file {
	int f_flag;
	off_t f_offset;
	void *f_vnode;
} file_t;

typedef struct cpuinfo {
	processorid_t cpu_id;
	psetid_t cpu_pset;
	chipid_t cpu_chip;
	lgrp_id_t cpu_lgrp;
	void *cpu_info;
} cpuinfo_t;

typedef struct psinfo {
	int pr_flag;
	int pr_nlwp;
	pid_t pr_pid;
	pid_t pr_ppid;
	pid_t pr_pgid;
	pid_t pr_sid;
	uid_t pr_uid;
	uid_t pr_euid;
	gid_t pr_gid;
	gid_t pr_egid;
	uintptr_t pr_addr;
	size_t pr_size;
	size_t pr_rssize;
	dev_t pr_ttydev;
	ushort_t pr_pctcpu;
	ushort_t pr_pctmem;
	hrtime_t pr_start;
	hrtime_t pr_time;
	hrtime_t pr_ctime;
	char pr_fname[16];
	char pr_psargs[80];
	int pr_wstat;
	int pr_argc;
	uintptr_t pr_argv;
	uintptr_t pr_envp;
	char pr_dmodel;
	taskid_t pr_taskid;
	projid_t pr_projid;
	int pr_nzomb;
	id_t pr_poolid;
	zoneid_t pr_zoneid;
	id_t pr_contract;
	int pr_sessionid;
} psinfo_t;

typedef struct lwpsinfo {
	int pr_flag;
	id_t pr_lwpid;
	uintptr_t pr_addr;
	uintptr_t pr_wchan;
	char pr_stype;
	char pr_state;
	char pr_sname;
	char pr_nice;
	short pr_syscall;
	char pr_oldpri;
	char pr_cpu;
	int pr_pri;
	ushort_t pr_pctcpu;
	hrtime_t pr_start;
	hrtime_t pr_time;
	char pr_clname[8];
	char pr_name[16];
	processorid_t pr_onpro;
	processorid_t pr_bindpro;
	psetid_t pr_bindpset;
	lgrp_id_t pr_lgrp;
	char pr_tname[64];	/* the thread's name (Windows port), "" when none */
} lwpsinfo_t;
