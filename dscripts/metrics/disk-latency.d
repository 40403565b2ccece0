/*
 * Disk I/O latency as a histogram, and bytes moved per process, for
 * `dtx -x metrics=HOST:PORT` (docs/metrics.md). The latency is io:::done's response time in
 * nanoseconds, exported in seconds.
 *
 *   dtx_disk_latency_seconds_bucket{le="..."}   histogram (quantize's power-of-two buckets)
 *   dtx_disk_bytes_total{execname="..."}       counter
 *
 * Example:
 *   dtx -x metrics=127.0.0.1:9464 -s dscripts/metrics/disk-latency.d -E trace.etl
 */

#pragma D option quiet
#pragma D option metricunit=@disk_latency:nanoseconds
#pragma D option metrichelp=@disk_latency:Disk I/O response time
#pragma D option metricunit=@disk:bytes
#pragma D option metriclabels=@disk:execname
#pragma D option metrichelp=@disk:Bytes read and written by the process

io:::done
/args[0]->b_flags & (B_READ | B_WRITE)/
{
	@disk_latency = quantize(args[0]->resp);
	@disk[execname] = sum(args[0]->b_bcount);
}
