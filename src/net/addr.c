/* "host:port" strings and socket addresses (addr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

int parse_hostport(const char *addr, char *host, size_t hostlen, int *port)
{
	const char *colon;
	const char *h = addr;
	size_t hl;
	int64_t p;
	char *end;

	if (!addr || !*addr)
		return -EINVAL;
	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = addr + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - addr);
	}
	if (hl == 0 || hl >= hostlen)
		return -EINVAL;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || p < 0 || p > 65535)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (int)p;
	return 0;
}

int addr_parse_numeric(const char *addr, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[ADDR_HOST_MAX];
	int port, rc = parse_hostport(addr, host, sizeof(host), &port);
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	if (rc)
		return rc;
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		*sl = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*sl = sizeof(*sin6);
		return 0;
	}
	/* "[name]:port" is not a name to look up. */
	return addr[0] == '[' ? -EINVAL : -EAGAIN;
}

int addr_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[ADDR_HOST_MAX], portstr[8];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int port, rc = addr_parse_numeric(addr, ss, sl);

	if (rc != -EAGAIN)
		return rc;
	rc = parse_hostport(addr, host, sizeof(host), &port);
	if (rc)
		return rc;
	snprintf(portstr, sizeof(portstr), "%d", port);
	if (getaddrinfo(host, portstr, &hints, &res) != 0 || !res)
		return -EHOSTUNREACH;
	if (res->ai_addrlen > sizeof(*ss)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sl = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int addr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

void addr_format(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET &&
	    inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, sizeof(ip)))
		snprintf(out, len, "%s:%d", ip, addr_port(ss));
	else if (ss->ss_family == AF_INET6 &&
		 inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, sizeof(ip)))
		snprintf(out, len, "[%s]:%d", ip, addr_port(ss));
	else
		snprintf(out, len, "?");
}

bool addr_is_loopback(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char host[ADDR_HOST_MAX];
	int port;

	if (parse_hostport(addr, host, sizeof(host), &port))
		return false;
	if (!strcmp(host, "localhost"))
		return true;
	if (addr_parse_numeric(addr, &ss, &sl))
		return false;
	if (ss.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
	return ss.ss_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
}
