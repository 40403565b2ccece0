/*
 * disk.d: disk I/O by process — requests and bytes, and the size of each request.
 * Needs: DiskIo completion events (io done) of the kernel logger; io:::start needs the
 * DISK_IO_INIT flag, which many traces lack, so the dashboard counts completions.
 * Example: dtx -E trace.etl --tui -s dscripts/top/disk.d
 */
#pragma D option quiet

io:::done
{
	@ios[execname, arg3 ? "write" : "read"] = count();
	@bytes[execname, arg3 ? "write" : "read"] = sum(arg0);
	@size = quantize(arg0);
}
