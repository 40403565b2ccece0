/*
 * switches.d: context switches and wakeups by process.
 * Needs: CSwitch and ReadyThread events (sched) of the kernel logger.
 * Example: dtx -E trace.etl --tui -s dscripts/top/switches.d
 */
#pragma D option quiet

sched:::on-cpu
{
	@switches[execname] = count();
}

sched:::wakeup
{
	@wakeups[execname] = count();
}
