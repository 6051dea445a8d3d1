/*
 * libstrata's calls to the meta service: the stubs src/proto/meta.h
 * generates (md_<op>_call_sync), bound to a connection and a timeout, and
 * the directory listing, whose replies come in pages and point into their
 * bodies.
 *
 * Every call blocks the calling thread (any thread but the rpc_client's
 * own reactor thread) until the reply arrives or ctx->timeout_ms passes.
 * With lanes on the rpc_client (libstrata's: rpc_client_add_lanes,
 * net/rpc.h) the call is written and answered on the calling thread, over
 * a lane's own connection, and goes through the rpc_client's thread only
 * when every lane is held; either way the same timeouts, retries,
 * credentials and errors apply. A call returns 0 (or a documented count) or a negative error: the ns_*
 * error the service answered (-ENOENT, -EEXIST, -ESTALE, ...), a
 * transport error (-ETIMEDOUT, -ECONNREFUSED, ...), STRATA_EBADMSG for a
 * reply that does not decode, -ENAMETOOLONG for a name or path too long
 * to send. Outputs are filled only on success.
 *
 * Several meta servers may serve one namespace (docs/namespace.md,
 * "Several meta servers"). ctx's resolver (libstrata's reads the cluster
 * map) names the one to call. The calls of a ctx spread over the servers
 * by calling thread: each thread has a slot (one of MC_SLOTS), and each
 * slot keeps the server the resolver named for it while the map lists it
 * UP (libstrata's resolver gives slot k the (seed + k)-th UP server); one
 * the map marks OFFLINE or drops is left for another at the slot's next
 * call.
 *
 * Request ids. Every call of an operation that is not idempotent (its
 * request type is in MT_WITH_RID, proto/meta.h) carries an id that
 * MC_CALL stamps: ctx's client id (random, from getrandom, per ctx) and
 * the next number of ctx's sequence; the same id on every retry of the
 * call. A meta server answers an id it has recorded with the recorded
 * outcome instead of applying the call again.
 *
 * Retries, for up to ctx's retry_ms (0: none), at the server the
 * resolver names then: another one listed UP at once, the same one (or
 * another) after 100 ms from the second failure on.
 * - A call a server could not even receive is made again, whatever the
 *   operation: a refused connection (-ECONNREFUSED: it died, is
 *   restarting, or moved) and a call none of whose bytes left before its
 *   connection closed or its time ran out (-ENOTCONN,
 *   CONN_CALL_F_NOTCONN_UNSENT in net/conn.h).
 * - A call that may have reached a server that then died or stopped
 *   answering (-ETIMEDOUT, -ECONNRESET, -EPIPE, -ECONNABORTED,
 *   -EHOSTUNREACH, -ENETUNREACH) is made again when that is safe: it
 *   carries a request id, or its operation reads or is idempotent
 *   (OPEN, SET_SIZE, SET_LAYOUT, QUOTA_SET: applied twice, one effect).
 *   A request of an MT_WITH_RID type passed through a const pointer
 *   cannot be stamped: its call is not made again after it may have
 *   been delivered.
 * An error the service answered (-ENOENT, -EIO, ...) is never retried
 * here. A call still waiting on a server the map marks OFFLINE waits for
 * its reset or its timeout (a server killed resets its connections at
 * once), then goes elsewhere.
 */
#ifndef STRATA_CLIENT_META_CLIENT_H
#define STRATA_CLIENT_META_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/rpc.h"
#include "proto/meta.h"

/* Slots of a ctx: the calling threads spread over them (see the top). */
#define MC_SLOTS 16

/* What a resolver is asked (in) and answers (out). */
struct mc_pick {
	uint32_t slot;		/* in: the calling thread's slot, 0..MC_SLOTS-1 */
	uint32_t node;		/* in: the server called now (0: none yet); out: the one to call */
	bool refused;		/* in: that server failed a call: name another if one is UP */
	uint64_t version;	/* in/out: the map version the answer came from */
	char addr[64];		/* out: its "host:port" */
};

/*
 * Where and how to call: a caller-owned struct, set up with mc_ctx_init()
 * and never released (it owns nothing). cl is borrowed and must outlive
 * every call; one ctx may be used by several threads at once.
 */
struct mc_ctx {
	struct rpc_client *cl;
	struct proto_sync sync;	/* the timeout (0: the rpc_client's); no bulk */
	uint32_t retry_ms;	/* how long a failed call is made again; 0: not */
	uint64_t client_id;	/* request ids' client part: random, never 0 */
	uint64_t seq;		/* the last sequence number handed out (atomic) */
	/* The meta server to call, asked before each call and after each
	 * refusal with the state in `at`: returns 0 with p filled (p->node
	 * and p->addr kept when nothing changed), or a negative error (the
	 * last address is kept). NULL: always the address given to
	 * mc_ctx_init. Called with ctx's lock not held, from any thread. */
	int (*resolve)(void *arg, struct mc_pick *p);
	void *resolve_arg;
	pthread_mutex_t lock;
	struct mc_pick at[MC_SLOTS];	/* the server each slot calls now (lock) */
};

/* Fills ctx, with a fresh random client id. Returns 0, or -ENAMETOOLONG
 * if addr does not fit. */
int mc_ctx_init(struct mc_ctx *ctx, struct rpc_client *cl, const char *addr,
		uint32_t timeout_ms);

/* For MC_CALL: the calling thread's slot; stamping rid (may be NULL:
 * false, nothing done) with ctx's next request id; the address slot
 * calls now (asking the resolver); and whether a call that ended with rc
 * is to be made again (safe: it may be delivered twice; attempt counts
 * the failures so far; it picked another server, or waited). */
uint32_t mc_slot(void);
bool mc_stamp(struct mc_ctx *ctx, struct mt_reqid *rid);
void mc_where(struct mc_ctx *ctx, uint32_t slot, char addr[64]);
bool mc_again(struct mc_ctx *ctx, uint32_t slot, int rc, bool safe, uint64_t deadline_ms,
	      uint32_t *attempt);
uint64_t mc_deadline(const struct mc_ctx *ctx);

/* The rid field of a request of an MT_WITH_RID type (NULL for any other
 * type, and for one passed through a const pointer), and whether the
 * request's type is one of them. */
#define MC_RID_CASE_(t) struct t *: &((struct t *)(uintptr_t)mc_rid_rq_)->rid,
#define MC_NEEDS_CASE_(t) struct t *: true, const struct t *: true,
#define MC_RID(rq) ({ \
	__typeof__(rq) mc_rid_rq_ = (rq); \
	_Generic(mc_rid_rq_, MT_WITH_RID(MC_RID_CASE_) default: (struct mt_reqid *)NULL); \
})
#define MC_NEEDS_RID(rq) _Generic((rq), MT_WITH_RID(MC_NEEDS_CASE_) default: false)

/*
 * Calls operation fn (md_lookup, md_getattr, ...: the stub's name) with
 * request *rq and decodes the reply into *rep; returns as described
 * above. For the replies that hold no views (every one but READLINK's and
 * the listings', which have functions below).
 */
#define MC_CALL(ctx, fn, rq, rep) MC_CALL_WITH(ctx, fn, rq, &(ctx)->sync, rep)
/* The same with other call settings (sync: a struct proto_sync *). */
#define MC_CALL_WITH(ctx, fn, rq, sync, rep) ({ \
	struct mc_ctx *mc_ = (ctx); \
	__typeof__(rq) rq_ = (rq); \
	bool safe_ = mc_stamp(mc_, MC_RID(rq_)) || !MC_NEEDS_RID(rq_); \
	uint64_t dl_ = mc_deadline(mc_); \
	uint32_t n_ = 0, slot_ = mc_slot(); \
	char at_[64]; \
	int rc_; \
	do { \
		mc_where(mc_, slot_, at_); \
		rc_ = fn##_call_sync(mc_->cl, at_, rq_, (sync), (rep)); \
	} while (mc_again(mc_, slot_, rc_, safe_, dl_, &n_)); \
	rc_; \
})

/* Copies the target of symlink h into buf[cap] with a NUL, cut short if it
 * does not fit; returns the target's full length. */
int mc_readlink(struct mc_ctx *ctx, struct mt_handle h, char *buf, size_t cap);

/* Called for each entry of a listing, in name order; name is
 * NUL-terminated and valid during the call only. Non-zero stops the
 * listing before that entry. */
typedef int (*mc_dirent_fn)(void *arg, const char *name, uint64_t ino, uint32_t type);
/* The same for READDIRPLUS: the entry's inode (valid during the call). */
typedef int (*mc_direntplus_fn)(void *arg, const char *name, const struct mt_inode *in);

/*
 * Lists up to max (1..MD_READDIR_MAX) entries of dir whose names sort
 * after cookie (NULL or "" for the start), calling cb for each. The
 * listing is checked whole before cb runs. next_cookie (cap >
 * MD_NAME_MAX; may be NULL) receives the position after the last entry cb
 * took, and *eof (may be NULL) whether the directory has nothing after
 * it. Returns the number of entries cb took.
 */
int mc_readdir(struct mc_ctx *ctx, struct mt_handle dir, const char *cookie, uint32_t max,
	       mc_dirent_fn cb, void *arg, char *next_cookie, size_t cap, bool *eof);
/* As mc_readdir, with each entry's inode (READDIRPLUS). */
int mc_readdirplus(struct mc_ctx *ctx, struct mt_handle dir, const char *cookie,
		   uint32_t max, mc_direntplus_fn cb, void *arg, char *next_cookie, size_t cap,
		   bool *eof);

#endif
