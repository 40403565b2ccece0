/*
 * syscalls.d: system calls by process.
 * Needs: SysClEnter events (syscall entry) of the kernel logger.
 * Example: dtx -E trace.etl --tui -s dscripts/top/syscalls.d
 */
#pragma D option quiet

syscall:::entry
{
	@calls[execname] = count();
}
