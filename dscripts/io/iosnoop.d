#!/usr/sbin/dtrace -s
/*
 * iosnoop.d: every disk I/O as it completes — time, process, direction, size, disk response
 * time and file, in the manner of iosnoop.
 *
 * Needs: disk I/O completions (kernel DiskIo Read/Write events; DISK_IO flag) and, for file
 * names, the FileIo name or rundown events (FILE_IO or DISK_FILE_IO flag).
 * Example: dtx -s dscripts/io/iosnoop.d -E randomascii_slow_ppt_trace.etl.zip
 */

#pragma D option quiet

BEGIN
{
	printf("%10s %-16s %1s %8s %8s %s\n", "TIME(ms)", "COMM", "D", "BYTES", "LAT(us)",
	    "FILE");
}

io:::done
/args[0]->b_flags & (B_READ | B_WRITE)/
{
	printf("%10d %-16s %1s %8d %8d %s\n", timestamp / 1000000, execname,
	    args[0]->b_flags & B_READ ? "R" : "W", args[0]->b_bcount, args[0]->resp / 1000,
	    args[2]->fi_pathname);
}
