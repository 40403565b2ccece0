#!/usr/sbin/dtrace -s
/*
 * registry.d: registry activity by process, operation and key (registry_t), with the
 * operations that failed (a non-zero NTSTATUS).
 *
 * Needs: Registry events (the REGISTRY flag of the kernel logger). None of the traces in
 * ../shared/etl has them, so this script has no golden output (its compilation is tested).
 * Example: dtx -s dscripts/reg/registry.d -E trace-with-registry.etl
 */

#pragma D option quiet

reg:::
{
	@ops[execname, probename, args[0]->r_rname] = count();
}

reg:::
/args[0]->r_status != 0/
{
	@failed[execname, probename, args[0]->r_status] = count();
}

END
{
	trunc(@ops, 30);
	printf("%-20s %-14s %-50s %8s\n", "PROCESS", "OP", "KEY", "COUNT");
	printa("%-20s %-14s %-50s %@8d\n", @ops);
	printf("\n%-20s %-14s %10s %8s\n", "PROCESS", "OP", "STATUS", "COUNT");
	printa("%-20s %-14s %10x %@8d\n", @failed);
}
