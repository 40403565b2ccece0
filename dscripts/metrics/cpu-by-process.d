/*
 * CPU by process, as metrics: context switches onto a CPU per process name, for
 * `dtx -x metrics=HOST:PORT` (docs/metrics.md).
 *
 *   dtx_cpu_switches_total{execname="..."}   counter
 *
 * Example (the built-in trace):
 *   dtx -x metrics=127.0.0.1:9464 -s dscripts/metrics/cpu-by-process.d -E demo
 */

#pragma D option quiet
#pragma D option metriclabels=@cpu_switches:execname
#pragma D option metrichelp=@cpu_switches:Times a thread of the process was switched onto a CPU

sched:::on-cpu
{
	@cpu_switches[execname] = count();
}
