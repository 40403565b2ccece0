/*
 * The io and fsinfo providers' arguments, as on the Windows DTrace port: io:::start and
 * io:::done give args[0] bufinfo_t *, args[1] devinfo_t *, args[2] fileinfo_t * (from one
 * buf_t); every fsinfo probe gives args[0] fileinfo_t * (from a wfileinfo_t).
 *
 * buf_t and wfileinfo_t are what dtx builds for each firing from the DiskIo and FileIo events
 * (src/providers/etw/io.rs, fsinfo.rs). Every integer member is 64-bit and the strings come
 * last, so the layout is the same in both data models; file names are UTF-8, from the trace's
 * FileIo name and rundown events.
 */

inline int B_READ = 0x01;
#pragma D binding "1.0" B_READ
inline int B_WRITE = 0x02;
#pragma D binding "1.0" B_WRITE
inline int B_FLUSH = 0x04;
#pragma D binding "1.0" B_FLUSH

typedef struct buf {
	uint64_t b_flags;		/* B_READ, B_WRITE or B_FLUSH */
	uint64_t b_irpflags;		/* IRP flags of the request */
	uint64_t b_bcount;		/* bytes transferred */
	uint64_t b_offset;		/* byte offset on the disk */
	uint64_t b_irp;			/* the IRP: pairs start with done */
	uint64_t b_diskno;		/* disk number */
	uint64_t b_resptime;		/* ns from issue to completion (done) */
	uint64_t b_fileobj;		/* file object */
	char b_devname[64];		/* device of the file, e.g. \Device\HarddiskVolume2 */
	char b_fname[512];		/* file name, "" when unknown */
} buf_t;

typedef struct bufinfo {
	int b_flags;			/* B_READ, B_WRITE, B_FLUSH */
	int b_irpflags;			/* I/O request packet flags */
	size_t b_bcount;		/* number of bytes */
	caddr_t b_addr;			/* the request (IRP) address */
	uint64_t b_lblkno;		/* block number (512-byte blocks) */
	uint64_t b_blkno;		/* expanded block number */
	size_t b_resid;			/* bytes not transferred */
	size_t b_bufsize;		/* size of the buffer */
	caddr_t b_iodone;		/* completion routine */
	int b_error;			/* error */
	int b_edev;			/* disk number */
	uint64_t resp;			/* ns between issue and completion */
} bufinfo_t;

translator bufinfo_t < buf_t *B > {
	b_flags = B->b_flags;
	b_irpflags = B->b_irpflags;
	b_bcount = B->b_bcount;
	b_addr = (caddr_t)B->b_irp;
	b_lblkno = B->b_offset / 512;
	b_blkno = B->b_offset / 512;
	b_resid = 0;
	b_bufsize = B->b_bcount;
	b_iodone = 0;
	b_error = 0;
	b_edev = B->b_diskno;
	resp = B->b_resptime;
};

typedef struct devinfo {
	int dev_major;			/* major number */
	int dev_minor;			/* minor number */
	int dev_instance;		/* instance number */
	string dev_name;		/* name of device */
	string dev_statname;		/* name of device + instance */
	string dev_pathname;		/* pathname of device */
} devinfo_t;

translator devinfo_t < buf_t *B > {
	dev_major = 0;
	dev_minor = B->b_diskno;
	dev_instance = B->b_diskno;
	dev_name = "disk";
	dev_statname = strjoin("disk", lltostr(B->b_diskno));
	dev_pathname = B->b_devname[0] == 0 ? "?" : B->b_devname;
};

typedef struct wfileinfo {
	uint64_t f_offset;		/* offset in the file */
	uint64_t f_ioflags;		/* I/O flags */
	uint64_t f_createopt;		/* create options (and disposition in the top byte) */
	uint64_t f_fileattrib;		/* file attributes */
	uint64_t f_shareflags;		/* share access */
	uint64_t f_iosize;		/* bytes requested */
	uint64_t f_extinfo;		/* extra information of the operation */
	uint64_t f_ntstatus;		/* NTSTATUS (done) */
	uint64_t f_dlen;		/* directory enumeration buffer size */
	uint64_t f_irpptr;		/* the IRP: pairs an operation with its done */
	uint64_t f_fileobj;		/* file object */
	uint64_t f_infoclass;		/* information class */
	char f_dpattern[256];		/* directory search pattern */
	char f_name[512];		/* file name, "" when unknown */
} wfileinfo_t;

typedef struct fileinfo {
	string fi_name;			/* name (basename of fi_pathname) */
	string fi_dirname;		/* directory (dirname of fi_pathname) */
	string fi_pathname;		/* full pathname */
	uint64_t fi_offset;		/* offset within file */
	string fi_fs;			/* filesystem */
	string fi_mount;		/* mount point of file system */
	int fi_oflags;			/* I/O flags */
	int fi_cflags;			/* create options */
	int fi_aflags;			/* file attributes */
	int fi_sflags;			/* share access flags */
	int fi_bcount;			/* number of bytes requested */
	int fi_extinfo;			/* extra information */
	int fi_rstatus;			/* return (NTSTATUS) status */
	int fi_dbuflen;			/* directory enumeration buffer size */
	caddr_t fi_irp;			/* unique IRP address */
	string fi_dpattern;		/* directory search pattern */
} fileinfo_t;

translator fileinfo_t < buf_t *B > {
	fi_name = B->b_fname[0] == 0 ? "<none>" : basename(B->b_fname);
	fi_dirname = B->b_fname[0] == 0 ? "<none>" : dirname(B->b_fname);
	fi_pathname = B->b_fname[0] == 0 ? "<none>" : B->b_fname;
	fi_offset = B->b_offset;
	fi_fs = "?";
	fi_mount = B->b_devname[0] == 0 ? "?" : B->b_devname;
	fi_oflags = 0;
	fi_cflags = 0;
	fi_aflags = 0;
	fi_sflags = 0;
	fi_bcount = B->b_bcount;
	fi_extinfo = 0;
	fi_rstatus = 0;
	fi_dbuflen = 0;
	fi_irp = (caddr_t)B->b_irp;
	fi_dpattern = "";
};

translator fileinfo_t < wfileinfo_t *F > {
	fi_name = F->f_name[0] == 0 ? "<none>" : basename(F->f_name);
	fi_dirname = F->f_name[0] == 0 ? "<none>" : dirname(F->f_name);
	fi_pathname = F->f_name[0] == 0 ? "<none>" : F->f_name;
	fi_offset = F->f_offset;
	fi_fs = "?";
	fi_mount = "?";
	fi_oflags = F->f_ioflags;
	fi_cflags = F->f_createopt;
	fi_aflags = F->f_fileattrib;
	fi_sflags = F->f_shareflags;
	fi_bcount = F->f_iosize;
	fi_extinfo = F->f_extinfo;
	fi_rstatus = F->f_ntstatus;
	fi_dbuflen = F->f_dlen;
	fi_irp = (caddr_t)F->f_irpptr;
	fi_dpattern = F->f_dpattern;
};

/* share access */
inline int FILE_SHARE_READ = 0x00000001;
inline int FILE_SHARE_WRITE = 0x00000002;
inline int FILE_SHARE_DELETE = 0x00000004;

/* create options */
inline int FILE_DIRECTORY_FILE = 0x00000001;
inline int FILE_WRITE_THROUGH = 0x00000002;
inline int FILE_SEQUENTIAL_ONLY = 0x00000004;
inline int FILE_NO_INTERMEDIATE_BUFFERING = 0x00000008;
inline int FILE_SYNCHRONOUS_IO_NONALERT = 0x00000020;
inline int FILE_NON_DIRECTORY_FILE = 0x00000040;
inline int FILE_RANDOM_ACCESS = 0x00000800;
inline int FILE_DELETE_ON_CLOSE = 0x00001000;

/* file attributes */
inline int FILE_ATTRIBUTE_READONLY = 0x00000001;
inline int FILE_ATTRIBUTE_HIDDEN = 0x00000002;
inline int FILE_ATTRIBUTE_SYSTEM = 0x00000004;
inline int FILE_ATTRIBUTE_DIRECTORY = 0x00000010;
inline int FILE_ATTRIBUTE_ARCHIVE = 0x00000020;
inline int FILE_ATTRIBUTE_NORMAL = 0x00000080;
inline int FILE_ATTRIBUTE_TEMPORARY = 0x00000100;
