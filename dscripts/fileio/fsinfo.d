#!/usr/sbin/dtrace -s
/*
 * fsinfo.d: file system operations by process, operation and file (the fsinfo provider's
 * fileinfo_t), with the bytes of reads and writes.
 *
 * Needs: FileIo operation events (Create, Read, Write, Cleanup, Close, ... OperationEnd; the
 * FILE_IO and FILE_IO_INIT flags). None of the traces in ../shared/etl has them (they hold
 * only FileIo name and rundown events), so this script has no golden output; the fsinfo
 * probes are checked on synthetic events in the unit tests.
 * Example: dtx -s dscripts/fileio/fsinfo.d -E trace-with-fileio.etl
 */

#pragma D option quiet

fsinfo:::
{
	@ops[execname, probename, args[0]->fi_pathname] = count();
}

fsinfo:::read,
fsinfo:::write
{
	@bytes[execname, probename, args[0]->fi_pathname] = sum(args[0]->fi_bcount);
}

END
{
	trunc(@ops, 30);
	trunc(@bytes, 30);
	printf("%-20s %-10s %-50s %8s\n", "PROCESS", "OP", "FILE", "COUNT");
	printa("%-20s %-10s %-50s %@8d\n", @ops);
	printf("\n%-20s %-10s %-50s %8s\n", "PROCESS", "OP", "FILE", "BYTES");
	printa("%-20s %-10s %-50s %@8d\n", @bytes);
}
