#!/usr/sbin/dtrace -s
/*
 * hardfaults.d: hard page faults (reads from a file or the page file) by process and file,
 * with the bytes read, and the other page fault kinds by process.
 *
 * Needs: hard faults (kernel PageFault HardFault events; MEMORY_HARD_FAULTS flag); the other
 * probes need the MEMORY_PAGE_FAULTS and VIRTUAL_ALLOC flags.
 * Arguments as the Windows port's: arg0 the file's name (wchar_t *), arg1 the address; dtx's
 * arg5 the bytes read.
 * Example: dtx -s dscripts/pf/hardfaults.d -E perfview_net.4.5.2.x86.etl.zip
 */

#pragma D option quiet

pf:::hardflt
{
	@faults[execname, basename(wstringof((wchar_t *)arg0))] = count();
	@bytes[execname, basename(wstringof((wchar_t *)arg0))] = sum(arg5);
}

pf:::trans_flt, pf:::dzero_flt, pf:::cow_flt, pf:::gp_flt, pf:::hp_flt, pf:::av_flt,
pf:::valloc, pf:::vfree, pf:::imgload
{
	@other[execname, probename] = count();
}

END
{
	printf("%-20s %-40s %8s %10s\n", "PROCESS", "FILE", "FAULTS", "BYTES");
	printa("%-20s %-40s %@8d %@10d\n", @faults, @bytes);
	printa("%-20s %-40s %@8d\n", @other);
}
