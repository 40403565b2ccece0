/*
 * files.d: file I/O by process and file — the disk reads and writes each file caused, in
 * requests and bytes, and how long they took.
 * Needs: DiskIo completion events (io done; DISK_IO flag) and the FileIo name or rundown
 * events that name the files (FILE_IO or DISK_FILE_IO flag).
 * Example: dtx -E perfview_net.4.5.2.x64.etl.zip --tui -s dscripts/top/files.d
 */
#pragma D option quiet

io:::done
/args[0]->b_flags & (B_READ | B_WRITE)/
{
	@bytes[execname, args[2]->fi_name, args[0]->b_flags & B_WRITE ? "write" : "read"] =
	    sum(args[0]->b_bcount);
	@ios[execname, args[2]->fi_name] = count();
	@latency_us = quantize(args[0]->resp / 1000);
}
