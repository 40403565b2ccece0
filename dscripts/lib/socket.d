/*
 * dtx type library: socket address families, socket types and socket addresses, as dtrace's
 * own library files give every script (`AF_INET`, `SOCK_STREAM`, `struct sockaddr_in`).
 *
 * The families and types below have the same values on Linux and Windows (winsock2.h);
 * AF_INET6 differs (Linux 10, Windows 23) and is declared by dtx for the system it runs on.
 * The layouts are the ones both systems share (sa_family_t is 16 bits wide).
 */

typedef unsigned short sa_family_t;

inline int AF_UNSPEC = 0;
inline int AF_UNIX = 1;
inline int AF_LOCAL = 1;
inline int AF_INET = 2;

inline int PF_UNSPEC = 0;
inline int PF_UNIX = 1;
inline int PF_LOCAL = 1;
inline int PF_INET = 2;

inline int SOCK_STREAM = 1;
inline int SOCK_DGRAM = 2;
inline int SOCK_RAW = 3;
inline int SOCK_RDM = 4;
inline int SOCK_SEQPACKET = 5;

inline int IPPROTO_IP = 0;
inline int IPPROTO_ICMP = 1;
inline int IPPROTO_TCP = 6;
inline int IPPROTO_UDP = 17;
inline int IPPROTO_IPV6 = 41;
inline int IPPROTO_ICMPV6 = 58;

struct sockaddr {
	sa_family_t sa_family;
	char sa_data[14];
};

struct in_addr {
	in_addr_t s_addr;
};

struct sockaddr_in {
	sa_family_t sin_family;
	in_port_t sin_port;
	struct in_addr sin_addr;
	unsigned char sin_zero[8];
};

struct sockaddr_in6 {
	sa_family_t sin6_family;
	in_port_t sin6_port;
	uint32_t sin6_flowinfo;
	struct in6_addr sin6_addr;
	uint32_t sin6_scope_id;
};

struct sockaddr_un {
	sa_family_t sun_family;
	char sun_path[108];
};

struct sockaddr_storage {
	sa_family_t ss_family;
	char __ss_padding[118];
	uint64_t __ss_align;
};
