/*
 * DNS activity seen by the Windows DNS client: the names each process looked up, how the
 * queries ended, and the DNS servers configured per interface.
 *
 * Needs Microsoft-Windows-DNS-Client events, read by field name with etwfield/etwfield_str:
 *   3006  query started    (QueryName, QueryType)
 *   3008  query completed  (QueryName, QueryStatus)
 *   1001  DNS server for an interface (Interface, Index, DynamicAddress, Address: a
 *         SOCKADDR, shown as address:port)
 * The field names come from the trace's EventMetadata (or a loaded manifest).
 *
 * Example:
 *   dtx -s dscripts/dns/dnsqueries.d -E ../shared/etl/perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

microsoft-windows-dns-client:::events
/arg0 == 3006/
{
	@queries[execname, etwfield_str("QueryName"), etwfield("QueryType")] = count();
}

microsoft-windows-dns-client:::events
/arg0 == 3008/
{
	@results[etwfield_str("QueryName"), etwfield("QueryStatus")] = count();
}

microsoft-windows-dns-client:::events
/arg0 == 1001/
{
	@servers[etwfield_str("Interface"), etwfield("Index"), etwfield_str("DynamicAddress"),
	    etwfield_str("Address")] = count();
}

END
{
	printf("%-20s %-50s %6s %6s\n", "PROCESS", "QUERY", "TYPE", "COUNT");
	printa("%-20s %-50s %6d %@6d\n", @queries);
	printf("\n%-50s %8s %6s\n", "QUERY", "STATUS", "COUNT");
	printa("%-50s %8d %@6d\n", @results);
	printf("\n%-12s %5s %-8s %-48s %6s\n", "INTERFACE", "INDEX", "KIND", "SERVER", "COUNT");
	printa("%-12s %5d %-8s %-48s %@6d\n", @servers);
}
