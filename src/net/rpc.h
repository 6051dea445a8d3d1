/*
 * Connection pools and blocking calls on top of conn.h.
 *
 * rpc_pool: one connection per peer address, owned by one reactor thread,
 * reconnected on demand after a failure. Used by daemons (chain
 * forwarding, heartbeats) and by the client library's I/O threads.
 *
 * rpc_client: a reactor thread with its own pool, plus blocking calls from
 * any thread (CLI, tools, the synchronous client API).
 */
#ifndef STRATA_NET_RPC_H
#define STRATA_NET_RPC_H

#include <stdint.h>

#include "common/buf.h"
#include "conn.h"

struct rpc_pool;

int rpc_pool_new(struct reactor *r, uint32_t timeout_ms, struct rpc_pool **out);
/* Closes every connection (their calls fail) and frees the pool. Owner
 * thread only. */
void rpc_pool_free(struct rpc_pool *p);
/* What the pool's connections present from now on (copied); without it,
 * the process default (net_cred_default, auth.h). Owner thread, or before
 * the pool is used. */
int rpc_pool_set_cred(struct rpc_pool *p, const struct net_cred *cred);
/* The TLS client context (tls.h; a reference is taken) the pool's new
 * connections use from now on; NULL: plain TCP. Without it, the process
 * default (net_tls_default). Owner thread, or before the pool is used. */
void rpc_pool_set_tls(struct rpc_pool *p, struct net_tls *tls);
/* Calls addr over the pooled connection, connecting first if needed.
 * Same contract as conn_call. Owner thread only. */
int rpc_pool_call(struct rpc_pool *p, const char *addr, const struct rpc_call_args *a);
/* Drops the pooled connection to addr (next call reconnects). */
void rpc_pool_reset(struct rpc_pool *p, const char *addr);

struct rpc_client;

int rpc_client_new(const char *name, uint32_t timeout_ms, struct rpc_client **out);
void rpc_client_free(struct rpc_client *cl);
struct reactor *rpc_client_reactor(struct rpc_client *cl);
struct rpc_pool *rpc_client_pool(struct rpc_client *cl);

/* Result of a blocking call. body is owned by the result: release with
 * rpc_result_release. */
struct rpc_result {
	int status;		/* transport error or the response status */
	struct frame_hdr hdr;	/* valid when a response arrived */
	struct bbuf body;
	uint64_t bulk_len;	/* bytes placed in bulk_dst */
};

void rpc_result_release(struct rpc_result *res);

struct rpc_sync_args {
	uint16_t op;
	const void *body;
	uint32_t body_len;
	const void *bulk;
	uint64_t bulk_len;
	void *bulk_dst;
	uint64_t bulk_cap;
	uint32_t timeout_ms;
	uint32_t flags;		/* rpc_call_args' */
};

/* Blocking call from any thread except the client's own reactor thread.
 * Returns res->status (0 or negative); res->body must be released even on
 * error. */
int rpc_call_sync(struct rpc_client *cl, const char *addr, const struct rpc_sync_args *a,
		  struct rpc_result *res);

#endif
