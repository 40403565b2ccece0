/*
 * Methods the .NET JIT compiled, per process, the time the JIT took for them, and the methods
 * that took longest.
 *
 * Needs the .NET runtime's JIT events (Microsoft-Windows-DotNETRuntime, JitKeyword 0x10):
 * MethodJittingStarted (145) and MethodLoadVerbose (143), through dnet::jit:method-jit-begin
 * and dnet::jit:method-load. The method names come from the events' decoded fields
 * (etwfield_str).
 *
 * Example:
 *   dtx -s dscripts/dnet/jit.d -E ../shared/etl/perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

dnet::jit:method-jit-begin
{
	self->start[arg4] = timestamp;	/* arg4: MethodID */
}

/* MethodFlags 0x8: the method was jitted (not precompiled) */
dnet::jit:method-load
/etwfield("MethodFlags") & 8/
{
	@methods[execname, pid] = count();
	@bytes[execname, pid] = sum(arg5);	/* arg5: MethodSize */
}

dnet::jit:method-load
/self->start[arg6]/
{
	this->us = (timestamp - self->start[arg6]) / 1000;
	@jit_us[execname, pid] = sum(this->us);
	@slowest[strjoin(strjoin(etwfield_str("MethodNamespace"), "."),
	    etwfield_str("MethodName"))] = max(this->us);
	self->start[arg6] = 0;
}

END
{
	printf("%-20s %6s %8s %10s %10s\n", "PROCESS", "PID", "METHODS", "CODE(B)", "JIT(us)");
	printa("%-20s %6d %@8d %@10d %@10d\n", @methods, @bytes, @jit_us);
	trunc(@slowest, 10);
	printf("\n%-80s %8s\n", "SLOWEST TO JIT", "us");
	printa("%-80s %@8d\n", @slowest);
}
