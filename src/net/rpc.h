/*
 * Connection pools and blocking calls on top of conn.h.
 *
 * rpc_pool: one connection per peer address, owned by one reactor thread,
 * reconnected on demand after a failure. Used by daemons (chain
 * forwarding, heartbeats) and by the client library's I/O threads.
 *
 * rpc_client: a reactor thread with its own pool, plus blocking calls from
 * any thread (CLI, tools, the synchronous client API), optionally run on
 * the calling thread over lanes (rpc_client_add_lanes).
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

/*
 * rpc_direct: a pool with no thread of its own, driven by the thread that
 * holds it. A blocking call from a thread that holds it writes its request
 * from that thread (at once when the connection is idle) and waits in
 * epoll on the pool's own sockets, so nothing is handed to another thread
 * and no other thread is woken. One thread holds it at a time: take it
 * with rpc_direct_try_hold (it never waits) and, while holding it, make
 * calls on rpc_direct_pool (rpc_pool_call or the proto stubs) and wait for
 * them with rpc_direct_wait; callbacks run on the holder's thread, inside
 * rpc_direct_wait (or inside rpc_direct_try_hold, for events of earlier
 * calls). Timeouts, reconnects, credentials and TLS are the pool's. A
 * caller that finds it held uses something else (an rpc_client).
 */
struct rpc_direct;

int rpc_direct_new(const char *name, uint32_t timeout_ms, struct rpc_direct **out);
/* Closes the connections (calls still pending fail with -ECONNRESET) and
 * frees d. No thread may hold d. d may be NULL. */
void rpc_direct_free(struct rpc_direct *d);
/* The pool: its calls only by the holder; rpc_pool_set_cred/set_tls
 * before the first hold. */
struct rpc_pool *rpc_direct_pool(struct rpc_direct *d);
/* Takes d for the calling thread when no thread holds it, and handles
 * what its connections reported since the last holder left (a peer that
 * closed an idle connection, so the next call reconnects). Returns true
 * when the caller now holds d. */
bool rpc_direct_try_hold(struct rpc_direct *d);
/* Gives d back; calls still in flight go on (their callbacks run when
 * the next holder waits), so callers wait for theirs first. */
void rpc_direct_release(struct rpc_direct *d);
/* Holder only: runs d's connections on the calling thread until done(arg)
 * is true. Every call completes (by its timeout at the latest), so a done
 * that waits for the holder's calls returns. 0, or -EIO when epoll failed
 * on the way (logged; the calls then ended by their timeouts). */
int rpc_direct_wait(struct rpc_direct *d, bool (*done)(void *arg), void *arg);
/* Holder only: a blocking call over d's pool, answered on the calling
 * thread (rpc_direct_wait). Same contract as rpc_call_sync. */
int rpc_direct_call_sync(struct rpc_direct *d, const char *addr, const struct rpc_sync_args *a,
			 struct rpc_result *res);

/*
 * rpc_lanes: rpc_directs shared by the threads that make blocking calls
 * (libstrata's memory and meta calls). A thread takes the lane its number
 * (rpc_thread_slot) names when it is free, so that it keeps one lane and
 * that lane's connections while threads are fewer than lanes, else any
 * free one; when every lane is held, the caller uses its rpc_client.
 */
#define RPC_LANES_MAX 64u

struct rpc_lanes;

/* n lanes (at most RPC_LANES_MAX; 0: none, rpc_lanes_hold always NULL)
 * whose pools present, and time out, as like does now (its credential and
 * TLS context are copied; set them on like first). 0, or a negative
 * error (-ENOMEM, -EMFILE: the descriptors of a lane) with nothing left. */
int rpc_lanes_new(const char *name, uint32_t n, const struct rpc_pool *like,
		  struct rpc_lanes **out);
/* Frees every lane; no thread may hold one. l may be NULL. */
void rpc_lanes_free(struct rpc_lanes *l);
/* A free lane, now held by the calling thread (rpc_direct_release when
 * done), or NULL when every lane is held (or l is NULL). Never waits. */
struct rpc_direct *rpc_lanes_hold(struct rpc_lanes *l);
/* How many lanes: n, or the value of environment variable env (a test
 * knob) when it is set to a number >= 0; at most RPC_LANES_MAX. */
uint32_t rpc_lanes_count(const char *env, uint32_t n);
/* The calling thread's number, given on its first call (0, 1, ...): picks
 * a thread's lane, and other per-thread choices (an I/O thread). */
unsigned rpc_thread_slot(void);

/* Gives cl n lanes (rpc_lanes, like cl's pool: call after its
 * rpc_pool_set_cred and set_tls, before its first call; freed with cl):
 * from then on rpc_call_sync runs on the calling thread over a free lane
 * (rpc_direct_call_sync), and through cl's thread only when every lane is
 * held. Timeouts, reconnects, credentials and errors stay the same; a
 * lane looks for a peer's close at every hold, as cl's thread would have
 * seen it. 0 or rpc_lanes_new's error (cl unchanged). */
int rpc_client_add_lanes(struct rpc_client *cl, uint32_t n);

#endif
