#!/usr/sbin/dtrace -s
/*
 * hwconfig.d: the machine a trace was taken on — processors, memory, computer name, disks,
 * network adapters and how many services and PnP devices it had, from the SystemConfig events
 * of the hwconfig provider (arg0 = the payload, as on the Windows port).
 *
 * Needs: the SystemConfig events a kernel session writes when it stops (every NT kernel
 * logger trace has them).
 * Example: dtx -s dscripts/hwconfig/hwconfig.d -E perfview_diaghub-dotnetcore3.1-win-x64-diagsession.zip:diaghub-dotnetcore3.1-win-x64-diagsession/diaghub.kernel.1.etl
 */

#pragma D option quiet

hwconfig:::cpu
{
	printf("computer   %s\n", wstringof(*(wchar_t (*)[256])(arg0 + 20)));
	printf("processors %d at %d MHz\n", *(uint32_t *)(arg0 + 4), *(uint32_t *)arg0);
	printf("memory     %d MB, pages of %d bytes\n", *(uint32_t *)(arg0 + 8),
	    *(uint32_t *)(arg0 + 12));
}

hwconfig:::disk-phy
{
	/*
	 * DiskNumber, BytesPerSector, SectorsPerTrack, TracksPerCylinder, Cylinders (a u64 at
	 * offset 16; the payload is only 4-byte aligned, so it is read in two halves)
	 */
	this->cyl = *(uint32_t *)(arg0 + 16) + ((uint64_t)*(uint32_t *)(arg0 + 20) << 32);
	printf("disk %d     %d MB\n", *(uint32_t *)arg0, this->cyl * *(uint32_t *)(arg0 + 12) *
	    *(uint32_t *)(arg0 + 8) * *(uint32_t *)(arg0 + 4) / 1048576);
}

hwconfig:::
{
	@[probename] = count();
}

END
{
	printf("\n%-16s %6s\n", "EVENT", "COUNT");
	printa("%-16s %@6d\n", @);
}
