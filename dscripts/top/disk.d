/*
 * disk.d: disk I/O by process — requests and bytes, and the size of each request.
 * Needs: DiskIo completion events (io done) of the kernel logger; io:::start needs the
 * DISK_IO_INIT flag, which many traces lack, so the dashboard counts completions.
 * Example: dtx -E trace.etl --tui -s dscripts/top/disk.d
 */
#pragma D option quiet

io:::done
/args[0]->b_flags & (B_READ | B_WRITE)/
{
	@ios[execname, args[0]->b_flags & B_WRITE ? "write" : "read"] = count();
	@bytes[execname, args[0]->b_flags & B_WRITE ? "write" : "read"] = sum(args[0]->b_bcount);
	@size = quantize(args[0]->b_bcount);
}
