/*
 * The tcpip and udpip providers' arguments, as on the Windows DTrace port: tcpip probes give
 * args[0] ipinfo_t * and args[1] tcpinfo_t * (from one tcpip_msg_t), udpip:::send and
 * udpip:::receive give args[0] udpinfo_t *; tcpip:::fail and udpip:::fail give arg0 = the
 * protocol and arg1 = the failure code (ERROR_* below).
 *
 * tcpip_msg_t is what dtx builds for each firing from a TcpIp or UdpIp event
 * (src/providers/etw/net.rs): 64-bit integers, then the addresses already as text.
 */

/* AF_INET, AF_INET6 and the socket addresses are in socket.d */

/* tcpip:::fail and udpip:::fail failure codes */
inline int ERROR_INSUFFICIENT_RESOURCES = 1;
inline int ERROR_TOO_MANY_ADDRESSES = 2;
inline int ERROR_ADDRESS_EXISTS = 3;
inline int ERROR_INVALID_ADDRESS = 4;
inline int ERROR_OTHER = 5;
inline int ERROR_TIMEWAIT_ADDRESS_EXIST = 6;

typedef struct tcpip_msg {
	uint64_t ti_ver;		/* 4 or 6 */
	uint64_t ti_size;		/* payload bytes */
	uint64_t ti_sport;		/* source port */
	uint64_t ti_dport;		/* destination port */
	uint64_t ti_connid;		/* connection identifier */
	uint64_t ti_seqnum;		/* sequence number */
	uint64_t ti_starttime;		/* send: start of the request */
	uint64_t ti_endtime;		/* send: end of the request */
	uint64_t ti_mss;		/* connect, accept: maximum segment size */
	uint64_t ti_sackopt;		/* connect, accept: SACK option */
	uint64_t ti_tsopt;		/* connect, accept: time stamp option */
	uint64_t ti_wsopt;		/* connect, accept: window scale option */
	uint64_t ti_rcvwin;		/* connect, accept: receive window */
	uint64_t ti_rcvwinscale;	/* connect, accept: receive window scale */
	uint64_t ti_sndwinscale;	/* connect, accept: send window scale */
	uint64_t ti_pid;		/* process of the connection */
	char ti_saddr[48];		/* source address */
	char ti_daddr[48];		/* destination address */
} tcpip_msg_t;
typedef struct tcpip_msg udpip_msg_t;

typedef struct ipinfo {
	uint8_t ip_ver;			/* IP version (4, 6) */
	uint32_t ip_plength;		/* payload length (32-bit: an ETW send of a segmentation
					   offload is larger than 64 KB) */
	string ip_saddr;		/* source address */
	string ip_daddr;		/* destination address */
	uint32_t ip_connid;		/* connection identifier */
	uint64_t ip_stime;		/* start of the send request */
	uint32_t ip_etime;		/* end of the send request */
} ipinfo_t;

translator ipinfo_t < tcpip_msg_t *T > {
	ip_ver = T->ti_ver;
	ip_plength = T->ti_size;
	ip_saddr = T->ti_saddr;
	ip_daddr = T->ti_daddr;
	ip_connid = T->ti_connid;
	ip_stime = T->ti_starttime;
	ip_etime = T->ti_endtime;
};

typedef struct tcpinfo {
	uint16_t tcp_sport;		/* source port */
	uint16_t tcp_dport;		/* destination port */
	uint32_t tcp_seq;		/* sequence number */
	uint32_t tcp_ack;		/* acknowledgement number */
	uint8_t tcp_offset;		/* data offset, in bytes */
	uint8_t tcp_flags;		/* flags */
	uint16_t tcp_window;		/* window size */
	uint16_t tcp_checksum;		/* checksum */
	uint16_t tcp_urgent;		/* urgent data pointer */
	uintptr_t tcp_hdr;		/* raw TCP header (not in the events: 0) */
	uint16_t tcp_mss;		/* maximum segment size */
	uint16_t tcp_sackopt;		/* selective acknowledgement option */
	uint16_t tcp_tsopt;		/* time stamp option */
	uint16_t tcp_wsopt;		/* window scale option */
	uint16_t tcp_rcvws;		/* receive window scaling factor */
	uint16_t tcp_sndws;		/* send window scaling factor */
} tcpinfo_t;

translator tcpinfo_t < tcpip_msg_t *T > {
	tcp_sport = T->ti_sport;
	tcp_dport = T->ti_dport;
	tcp_seq = T->ti_seqnum;
	tcp_ack = 0;
	tcp_offset = 0;
	tcp_flags = 0;
	tcp_window = T->ti_rcvwin;
	tcp_checksum = 0;
	tcp_urgent = 0;
	tcp_hdr = 0;
	tcp_mss = T->ti_mss;
	tcp_sackopt = T->ti_sackopt;
	tcp_tsopt = T->ti_tsopt;
	tcp_wsopt = T->ti_wsopt;
	tcp_rcvws = T->ti_rcvwinscale;
	tcp_sndws = T->ti_sndwinscale;
};

typedef struct udpinfo {
	uint32_t udp_connid;		/* connection identifier */
	uint32_t udp_seq;		/* sequence number */
	uint16_t udp_plength;		/* payload length */
	uint16_t udp_sport;		/* local port */
	uint16_t udp_dport;		/* remote port */
	string udp_saddr;		/* local address */
	string udp_daddr;		/* remote address */
} udpinfo_t;

translator udpinfo_t < udpip_msg_t *U > {
	udp_connid = U->ti_connid;
	udp_seq = U->ti_seqnum;
	udp_plength = U->ti_size;
	udp_sport = U->ti_sport;
	udp_dport = U->ti_dport;
	udp_saddr = U->ti_saddr;
	udp_daddr = U->ti_daddr;
};
