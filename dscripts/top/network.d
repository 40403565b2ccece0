/*
 * network.d: network traffic by connection — TCP and UDP payload bytes and packets per process
 * and remote address and port, and TCP connection events.
 * Needs: TcpIp and UdpIp events (NETWORK_TCPIP flag), IPv4 and IPv6.
 * Example: dtx -E perfview_net.4.5.2.x86.etl.zip --tui -s dscripts/top/network.d
 */
#pragma D option quiet

/* the remote end: the destination of what is sent, the source of what is received */
tcpip:::send
{
	@bytes["tcp", execname, args[0]->ip_daddr, args[1]->tcp_dport] = sum(args[0]->ip_plength);
	@packets["tcp", execname, args[0]->ip_daddr, args[1]->tcp_dport] = count();
}

tcpip:::receive
{
	@bytes["tcp", execname, args[0]->ip_saddr, args[1]->tcp_sport] = sum(args[0]->ip_plength);
	@packets["tcp", execname, args[0]->ip_saddr, args[1]->tcp_sport] = count();
}

udpip:::send
{
	@bytes["udp", execname, args[0]->udp_daddr, args[0]->udp_dport] = sum(args[0]->udp_plength);
	@packets["udp", execname, args[0]->udp_daddr, args[0]->udp_dport] = count();
}

udpip:::receive
{
	@bytes["udp", execname, args[0]->udp_saddr, args[0]->udp_sport] = sum(args[0]->udp_plength);
	@packets["udp", execname, args[0]->udp_saddr, args[0]->udp_sport] = count();
}

tcpip:::connect, tcpip:::accept, tcpip:::disconnect, tcpip:::retransmit
{
	@connections[execname, probename, args[0]->ip_daddr, args[1]->tcp_dport] = count();
}
