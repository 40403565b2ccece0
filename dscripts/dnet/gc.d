/*
 * .NET garbage collections per process, by generation and reason: how many, and how long the
 * runtime kept managed threads suspended for them (SuspendEE begin to RestartEE end).
 *
 * Needs the .NET runtime's GC events (Microsoft-Windows-DotNETRuntime, GCKeyword 0x1):
 * GCStart (1), GCSuspendEEBegin (9), GCRestartEEEnd (3), through the dnet provider's
 * dnet::gc:gc-start (args[0] is the port's netgc_t), dnet::gc:suspend-start and
 * dnet::gc:resume-end probes.
 *
 * PROCESS is execname, which comes from the kernel's Process records: a trace of the runtime's
 * events alone (perfview_gcevents.etl.zip) has none, and the column is empty; PID is there.
 *
 * Example:
 *   dtx -s dscripts/dnet/gc.d -E ../shared/etl/perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

dnet::gc:suspend-start
{
	suspended[pid] = timestamp;
}

/* .NET 4.5 logs GCStart twice (versions 1 and 2): count each GC once, by its number */
dnet::gc:gc-start
/gcnum[pid] != args[0]->gc_count/
{
	gcnum[pid] = args[0]->gc_count;
	gen[pid] = args[0]->gc_depth;
	this->r = args[0]->gc_reason;
	reason[pid] = this->r == 0 ? "small alloc" : this->r == 1 ? "induced" :
	    this->r == 2 ? "low memory" : this->r == 3 ? "empty" :
	    this->r == 4 ? "large alloc" : this->r == 5 ? "out of space (SOH)" :
	    this->r == 6 ? "out of space (LOH)" : this->r == 7 ? "induced, not forced" :
	    "other";
	@gcs[execname, pid, gen[pid], reason[pid]] = count();
}

dnet::gc:resume-end
/suspended[pid] && gcnum[pid]/
{
	this->us = (timestamp - suspended[pid]) / 1000;
	@pause[execname, pid, gen[pid], reason[pid]] = sum(this->us);
	@longest[execname, pid, gen[pid], reason[pid]] = max(this->us);
	@dist[gen[pid]] = quantize(this->us);
	suspended[pid] = 0;
}

END
{
	printf("%-16s %6s %4s %-20s %8s\n", "PROCESS", "PID", "GEN", "REASON", "GCS");
	printa("%-16s %6d %4d %-20s %@8d\n", @gcs);
	printf("\n%-16s %6s %4s %-20s %12s %10s\n", "PROCESS", "PID", "GEN", "REASON",
	    "PAUSE(us)", "MAX(us)");
	printa("%-16s %6d %4d %-20s %@12d %@10d\n", @pause, @longest);
	printf("\nsuspension time (us) by generation\n");
	printa(@dist);
}
