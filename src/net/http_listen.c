/* An HTTP server on "host:port" (http_listen.h). */
#include <errno.h>
#include <netinet/in.h>

#include "net/addr.h"
#include "net/http_listen.h"

int http_listen(const char *addr, unsigned int flags, unsigned int timeout_s,
		MHD_AccessHandlerCallback cb, MHD_RequestCompletedCallback done, void *cls,
		struct MHD_Daemon **out)
{
	struct sockaddr_storage ss;
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	socklen_t sl;
	int port, rc = addr_resolve(addr, &ss, &sl);

	if (rc)
		return rc;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	port = addr_port(&ss);
	d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, cb, cls,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
			     MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
			     MHD_OPTION_NOTIFY_COMPLETED, done, cls, MHD_OPTION_END);
	if (!d)
		return -EADDRINUSE;
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*out = d;
	return info ? info->port : port;
}
