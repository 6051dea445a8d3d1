/*
 * Network addresses: "host:port" strings and the socket addresses they
 * name.
 *
 * Name resolution can block for seconds (DNS, /etc/hosts on a slow disk),
 * and a reactor thread must never block. So there are two ways in:
 *
 *  - addr_parse_numeric() reads an IP literal ("10.0.0.1:7000",
 *    "[::1]:7000") with inet_pton: no lookup, no file, no lock, safe on a
 *    reactor thread. It fails with -EAGAIN on a name ("localhost:7000",
 *    "storage-3:7000").
 *  - addr_resolve() does the full getaddrinfo() and may block: call it at
 *    start-up (a listener's address) or on a thread made for waiting.
 *
 * conn_connect() uses the first on the loop and hands a name to its
 * reactor's helper thread (reactor_offload) for the second; see conn.h.
 */
#ifndef STRATA_NET_ADDR_H
#define STRATA_NET_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The longest host part parse_hostport accepts, with its NUL. */
#define ADDR_HOST_MAX 256
/* Room for any "host:port" string addr_format writes. */
#define ADDR_STR_MAX 64

/* Parses "host:port" (an IPv4 literal, a name such as "localhost", or
 * "[v6]"); port 0..65535. host gets the host part without brackets.
 * Returns 0 or -EINVAL. */
int parse_hostport(const char *addr, char *host, size_t hostlen, int *port);

/* addr as a socket address when its host is an IP literal, without any
 * lookup. Returns 0, -EAGAIN when the host is a name (resolve it with
 * addr_resolve off the loop), or -EINVAL when addr is malformed. */
int addr_parse_numeric(const char *addr, struct sockaddr_storage *ss, socklen_t *sl);

/* Whether addr ("host:port") can only be reached from this machine: a
 * 127.0.0.0/8 or ::1 literal, or "localhost". No lookup. */
bool addr_is_loopback(const char *addr);

/* addr as a socket address, looking names up with getaddrinfo (the first
 * answer, TCP). Blocks: never call it on a reactor thread. Returns 0,
 * -EINVAL when addr is malformed or -EHOSTUNREACH when the name does not
 * resolve. */
int addr_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *sl);

/* The port of an IPv4 or IPv6 socket address (0 for another family). */
int addr_port(const struct sockaddr_storage *ss);

/* "ip:port" ("[ip]:port" for IPv6) of sa into out; "?" for another
 * family. */
void addr_format(const struct sockaddr_storage *ss, char *out, size_t len);

#endif
