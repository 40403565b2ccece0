#!/usr/sbin/dtrace -s
/*
 * filebyproc.d: disk I/O by process and file — bytes read and written per file, with the
 * fileinfo_t of io:::done (args[2]).
 *
 * Needs: disk I/O completions (kernel DiskIo Read/Write events; DISK_IO flag) and the FileIo
 * name or rundown events that name their files (FILE_IO or DISK_FILE_IO flag).
 * Example: dtx -s dscripts/fileio/filebyproc.d -E perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

io:::done
/args[0]->b_flags & (B_READ | B_WRITE)/
{
	@[execname, args[0]->b_flags & B_READ ? "read" : "write", args[2]->fi_name] =
	    sum(args[0]->b_bcount);
}

END
{
	trunc(@, 25);
	printf("%-20s %-6s %-40s %10s\n", "PROCESS", "OP", "FILE", "BYTES");
	printa("%-20s %-6s %-40s %@10d\n", @);
}
