/*
 * .NET exceptions thrown, by process and exception type, with their messages.
 *
 * Needs the .NET runtime's exception events (Microsoft-Windows-DotNETRuntime,
 * ExceptionKeyword 0x8000): ExceptionThrown (80), through dnet::event:excp. Type and message
 * come from the event's decoded fields (etwfield_str).
 *
 * Example:
 *   dtx -s dscripts/dnet/exceptions.d -E ../shared/etl/perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

dnet::event:excp
{
	@types[execname, pid, etwfield_str("ExceptionType")] = count();
	@messages[etwfield_str("ExceptionType"), etwfield_str("ExceptionMessage")] = count();
}

END
{
	printf("%-20s %6s %-50s %6s\n", "PROCESS", "PID", "EXCEPTION", "COUNT");
	printa("%-20s %6d %-50s %@6d\n", @types);
	printf("\n%-50s %-60s %6s\n", "EXCEPTION", "MESSAGE", "COUNT");
	printa("%-50s %-60s %@6d\n", @messages);
}
