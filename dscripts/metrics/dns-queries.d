/*
 * DNS queries by process and name, for `dtx -x metrics=HOST:PORT` (docs/metrics.md), from
 * the Windows DNS client's events (3006: a query started; see dscripts/dns/dnsqueries.d).
 * Names are many: the per-metric series limit (metriclimit) keeps the busiest.
 *
 *   dtx_dns_queries_total{execname="...",name="..."}   counter
 *
 * Example:
 *   dtx -x metrics=127.0.0.1:9464 -s dscripts/metrics/dns-queries.d \
 *       -E ../shared/etl/perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet
#pragma D option metriclabels=@dns_queries:execname,name
#pragma D option metriclimit=500
#pragma D option metrichelp=@dns_queries:DNS queries the process started

microsoft-windows-dns-client:::events
/arg0 == 3006/
{
	@dns_queries[execname, etwfield_str("QueryName")] = count();
}
