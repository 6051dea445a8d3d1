/*
 * An HTTP server (libmicrohttpd) listening on a "host:port": what the
 * metrics endpoint and the composer's API share. The daemon's side only
 * (internal_srcs): libstrata never serves HTTP.
 */
#ifndef STRATA_NET_HTTP_LISTEN_H
#define STRATA_NET_HTTP_LISTEN_H

#include <microhttpd.h>

/*
 * Starts an MHD daemon on addr (port 0: any) with flags (IPv6 added for
 * an IPv6 address) and the handler cb(cls, ...), each connection timing
 * out after timeout_s idle seconds; done (NULL: none) is called when a
 * request ends, however it ends. Resolves addr (may block: call it at
 * start-up). Returns the port bound and *out (MHD_stop_daemon frees it),
 * or a negative error: -EADDRINUSE when MHD cannot start.
 */
int http_listen(const char *addr, unsigned int flags, unsigned int timeout_s,
		MHD_AccessHandlerCallback cb, MHD_RequestCompletedCallback done, void *cls,
		struct MHD_Daemon **out);

#endif
