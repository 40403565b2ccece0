#!/usr/sbin/dtrace -s
/*
 * iotop.d: disk I/O by process and disk, in the manner of iotop — operations, bytes and mean
 * response time, then the response time distribution of each disk.
 *
 * Needs: disk I/O completions (kernel DiskIo Read/Write events; DISK_IO flag).
 * Example: dtx -s dscripts/io/iotop.d -E perfview_net.4.5.2.x64.etl.zip
 */

#pragma D option quiet

io:::done
/args[0]->b_flags & (B_READ | B_WRITE)/
{
	this->dir = args[0]->b_flags & B_READ ? "R" : "W";
	@ops[execname, args[1]->dev_statname, this->dir] = count();
	@bytes[execname, args[1]->dev_statname, this->dir] = sum(args[0]->b_bcount);
	@lat[execname, args[1]->dev_statname, this->dir] = avg(args[0]->resp / 1000);
	@dist[args[1]->dev_statname] = quantize(args[0]->resp / 1000);
}

END
{
	printf("%-24s %-6s %1s %8s %12s %10s\n", "PROCESS", "DEVICE", "D", "OPS", "BYTES",
	    "AVG(us)");
	printa("%-24s %-6s %1s %@8d %@12d %@10d\n", @ops, @bytes, @lat);
	printf("\nresponse time (us) by disk\n");
	printa(@dist);
}
