#!/usr/sbin/dtrace -s
/*
 * tcpudp.d: TCP and UDP traffic by process, direction and remote end — packets and payload
 * bytes (ipinfo_t, tcpinfo_t, udpinfo_t), and the TCP connections made and accepted.
 *
 * Needs: TcpIp and UdpIp events (the NETWORK_TCPIP flag), IPv4 and IPv6.
 * Example: dtx -s dscripts/net/tcpudp.d -E perfview_net.4.5.2.x86.etl.zip
 */

#pragma D option quiet

tcpip:::send
{
	@pkts["tcp", execname, "send", args[0]->ip_daddr, args[1]->tcp_dport] = count();
	@bytes["tcp", execname, "send", args[0]->ip_daddr, args[1]->tcp_dport] =
	    sum(args[0]->ip_plength);
}

tcpip:::receive
{
	@pkts["tcp", execname, "recv", args[0]->ip_daddr, args[1]->tcp_dport] = count();
	@bytes["tcp", execname, "recv", args[0]->ip_daddr, args[1]->tcp_dport] =
	    sum(args[0]->ip_plength);
}

udpip:::send
{
	@pkts["udp", execname, "send", args[0]->udp_daddr, args[0]->udp_dport] = count();
	@bytes["udp", execname, "send", args[0]->udp_daddr, args[0]->udp_dport] =
	    sum(args[0]->udp_plength);
}

udpip:::receive
{
	@pkts["udp", execname, "recv", args[0]->udp_daddr, args[0]->udp_dport] = count();
	@bytes["udp", execname, "recv", args[0]->udp_daddr, args[0]->udp_dport] =
	    sum(args[0]->udp_plength);
}

tcpip:::connect, tcpip:::accept, tcpip:::disconnect, tcpip:::retransmit, tcpip:::reconnect
{
	@conn[execname, probename, args[0]->ip_daddr, args[1]->tcp_dport, args[1]->tcp_mss] =
	    count();
}

END
{
	printf("%-4s %-16s %-4s %-40s %6s %6s %10s\n", "PROTO", "PROCESS", "DIR", "REMOTE",
	    "PORT", "PKTS", "BYTES");
	printa("%-4s %-16s %-4s %-40s %6d %@6d %@10d\n", @pkts, @bytes);
	printf("\n%-16s %-10s %-40s %6s %6s %6s\n", "PROCESS", "EVENT", "REMOTE", "PORT", "MSS",
	    "COUNT");
	printa("%-16s %-10s %-40s %6d %6d %@6d\n", @conn);
}
