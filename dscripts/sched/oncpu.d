#!/usr/sbin/dtrace -s
/*
 * oncpu.d: time each thread spends on a CPU, as a power-of-two distribution per process.
 *
 * Needs: context switches (kernel CSwitch events; the NT kernel logger's CSWITCH flag).
 * Example: dtx -s dscripts/sched/oncpu.d -E randomascii_slow_ppt_trace.etl.zip
 */

#pragma D option quiet

sched:::on-cpu
{
	self->ts = timestamp;
}

sched:::off-cpu
/self->ts/
{
	@oncpu[execname] = quantize(timestamp - self->ts);
	@total[execname] = sum(timestamp - self->ts);
	self->ts = 0;
}

END
{
	printa(@oncpu);
	trunc(@total, 10);
	printf("%-24s %16s\n", "PROCESS", "ON-CPU (ns)");
	printa("%-24s %@16d\n", @total);
}
