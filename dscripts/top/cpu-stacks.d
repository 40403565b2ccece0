/*
 * cpu-stacks.d: CPU by process, then the user stacks the CPU samples land in — the dashboard
 * of `dtx --demo`. The same tables as cpu.d (the default dashboard); in the console the stacks
 * are the next tab (→ in the aggregations pane), as a tree with percentages.
 * Needs: CSwitch events (sched) and SampledProfile events (profile sample-N) of the kernel
 * logger, with stacks for @stacks (the idle process, pid 0, has none worth showing).
 * Example: dtx --demo
 *          dtx -E trace.etl --tui -s dscripts/top/cpu-stacks.d
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
/pid != 0/
{
	@stacks[ustack()] = count();
}

profile:::sample-1ms
{
	@samples[execname] = count();
}
