/*
 * cpu.d: CPU by process — the console's default dashboard.
 * Needs: CSwitch events (sched) and SampledProfile events (profile sample-N) of the kernel logger.
 * Example: dtx -E trace.etl --tui -s dscripts/top/cpu.d
 *          dtx -q -E trace.etl -s dscripts/top/cpu.d
 */
#pragma D option quiet

sched:::on-cpu
{
	self->on = timestamp;
}

sched:::off-cpu
/self->on/
{
	@oncpu_us[execname] = sum((timestamp - self->on) / 1000);
	self->on = 0;
}

profile:::sample-1ms
{
	@samples[execname] = count();
}
