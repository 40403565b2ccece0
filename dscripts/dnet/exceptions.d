/*
 * .NET exceptions thrown, by process and exception type, with their messages.
 *
 * Needs the .NET runtime's exception events (Microsoft-Windows-DotNETRuntime,
 * ExceptionKeyword 0x8000): ExceptionThrown (80), through dnet::event:excp, whose args[0] is
 * the port's netexcp_t (type and message as text).
 *
 * Example:
 *   dtx -s dscripts/dnet/exceptions.d -E ../shared/etl/perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

dnet::event:excp
{
	@types[execname, pid, args[0]->clr_excep] = count();
	@messages[args[0]->clr_excep, args[0]->clr_excepmsg] = count();
}

END
{
	printf("%-20s %6s %-50s %6s\n", "PROCESS", "PID", "EXCEPTION", "COUNT");
	printa("%-20s %6d %-50s %@6d\n", @types);
	printf("\n%-50s %-60s %6s\n", "EXCEPTION", "MESSAGE", "COUNT");
	printa("%-50s %-60s %@6d\n", @messages);
}
