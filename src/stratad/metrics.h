/*
 * The Prometheus text endpoint of a daemon (libmicrohttpd, its own thread).
 * GET /metrics calls collect(ctx, out), which must be thread-safe.
 */
#ifndef STRATA_STRATAD_METRICS_H
#define STRATA_STRATAD_METRICS_H

#include "common/buf.h"

struct metrics_server;
typedef void (*metrics_collect_fn)(void *ctx, struct bbuf *out);

/* Listens on addr ("host:port", port 0 = any). Returns the port or a
 * negative error. */
int metrics_start(const char *addr, metrics_collect_fn collect, void *ctx,
		  struct metrics_server **out);
void metrics_stop(struct metrics_server *m);

#endif
