/*
 * A program that touches every record of a trace (for scripts/bench_many_traces.sh): counts by
 * process, a distribution of record times per CPU, and on-CPU time per process.
 */
#pragma D option quiet

diag:::events
{
	@n[execname] = count();
	@t[cpu] = quantize(timestamp);
}

sched:::on-cpu
{
	self->ts = timestamp;
}

sched:::off-cpu
/self->ts/
{
	@oncpu[execname] = quantize(timestamp - self->ts);
	self->ts = 0;
}

END
{
	trunc(@n, 5);
}
