/*
 * The reg provider's argument, as on the Windows DTrace port: every reg probe gives
 * args[0] registry_t * (from a reginfo_t that dtx builds from the Registry event,
 * src/providers/etw/reg.rs).
 */

typedef struct reginfo {
	uint64_t r_index;		/* subkey index (EnumerateKey, ...) */
	uint64_t r_status;		/* NTSTATUS of the operation */
	uint64_t r_time;		/* initial time of the operation */
	uint64_t r_handle;		/* key handle (key control block) */
	char r_name[512];		/* key name */
} reginfo_t;

typedef struct registry {
	int r_index;			/* subkey index of the operation */
	int r_status;			/* NTSTATUS of the operation */
	int64_t r_intime;		/* initial time of the operation */
	string r_rname;			/* name of the registry key */
} registry_t;

translator registry_t < reginfo_t *R > {
	r_index = R->r_index;
	r_status = R->r_status;
	r_intime = R->r_time;
	r_rname = R->r_name;
};
