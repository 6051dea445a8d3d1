/*
 * The meta service: the operations of src/proto/meta.h over ns.h, and the
 * GC worker that deletes queued chunks through the storage client (the
 * orphan reconciler, reconcile.h, queues the chunks nobody owns for it).
 *
 * Everything below runs on reactor 0's thread (m->r): the handlers, the
 * timers and the storage client's completions. Requests are grouped into
 * shared transactions, answered when they commit (group.h). Only status() and
 * metrics() run elsewhere; they read counters with relaxed atomics.
 *
 * GC. Work is done in batches of up to GC_BATCH queue items. A batch
 * submits one SC_REMOVE per chunk of its items, at most GC_INFLIGHT
 * removes in flight over all batches; an item whose removes all succeed
 * (a missing chunk counts as success) is acknowledged with ns_gc_done().
 * A failed item stays queued and is retried by a later round. Two kinds
 * of batch exist:
 *  - the background batch, started by the GC timer, takes the oldest
 *    items of any file;
 *  - a drain batch takes the items of one file, for a request that must
 *    not be answered before they are gone (a truncate, an open for
 *    writing: see proto/meta.h). The request is answered when the
 *    file has no queued item left, or with the first removal error.
 * Both may pick the same item; removing a chunk twice is harmless.
 * Several meta servers may share one PostgreSQL namespace: only the one
 * that holds the GC role (gc_role) runs background batches; every server
 * runs the drains of its own requests.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/storage_client.h"
#include "common/pg_conn.h"
#include "common/cap.h"
#include "common/errors_int.h"
#include "common/clock.h"
#include "common/layout.h"
#include "common/log.h"
#include "meta/access.h"
#include "meta/group.h"
#include "meta/reserve.h"
#include "meta/meta_service.h"
#include "common/cluster_map.h"
#include "mgmt/announce.h"
#include "meta/ns.h"
#include "meta/reconcile.h"
#include "net/reactor.h"
#include "proto/meta.h"
#include "proto/server.h"
#include "strata/errors.h"

PROTO_SERVER(meta, META_OPS)

#define COMP "meta"
#define GC_BATCH 16u
#define GC_INFLIGHT 64u
#define TABLE_POLL_MS 500u
#define GC_QUEUE_SCAN 256u	/* the gc_queue gauge counts up to this */
#define WALK_MAX 4096	/* 40 links of NS_PATH_MAX bytes cannot need more */
/* /metrics has a series per quota root for this many roots (the lowest
 * inode numbers), refreshed every QUOTA_POLLS table polls: the paths cost
 * a scan of each parent directory, so neither scrapes nor many roots may
 * drive that work. */
#define QUOTA_METRICS_MAX 32u
#define QUOTA_POLLS 4u
/* Per-op counters, indexed by opcode - OP_META_FIRST. */
#define NOPS (OP_META_LAST - OP_META_FIRST + 1)
/* Limits and flags pass between the wire and ns.h unchanged. */
_Static_assert(MD_ROOT_INO == NS_ROOT_INO && MD_ROOT_GEN == NS_ROOT_GEN,
	       "the wire names another root than the namespace");
_Static_assert(MD_NAME_MAX == NS_NAME_MAX && MD_PATH_MAX == NS_PATH_MAX &&
	       MD_TARGET_MAX == NS_PATH_MAX && MD_READDIR_MAX == NS_READDIR_MAX,
	       "meta wire limits differ from the namespace's");
_Static_assert(MD_RENAME_NOREPLACE == NS_RENAME_NOREPLACE &&
	       MD_RENAME_EXCHANGE == NS_RENAME_EXCHANGE && MD_RESOLVE_FOLLOW == NS_RESOLVE_FOLLOW,
	       "meta wire flags differ from the namespace's");
_Static_assert(MD_INLINE_MAX == NS_INLINE_MAX, "the wire's inline bound differs from the store's");
_Static_assert(MD_ATTR_MODE == NS_ATTR_MODE && MD_ATTR_UID == NS_ATTR_UID &&
	       MD_ATTR_GID == NS_ATTR_GID && MD_ATTR_ATIME == NS_ATTR_ATIME &&
	       MD_ATTR_MTIME == NS_ATTR_MTIME && MD_ATTR_SIZE == NS_ATTR_SIZE &&
	       MD_ATTR_ATIME_NOW == NS_ATTR_ATIME_NOW && MD_ATTR_MTIME_NOW == NS_ATTR_MTIME_NOW,
	       "meta wire attribute bits differ from the namespace's");

struct meta;

/* The reply stub of an operation that answers an mt_attr_rep (CREATE,
 * OPEN, SETATTR, TRUNCATE): a drain batch answers through it. */
typedef void (*attr_reply_fn)(struct svc_req *req, int status, const struct mt_attr_rep *rep);
/* The same for the *_INL forms (OPEN_INL, ...), which answer an
 * mt_open_rep: the attr_rep and the file's inline bytes. */
typedef void (*open_reply_fn)(struct svc_req *req, int status, const struct mt_open_rep *rep);

/* How an operation that opens a file answers: the stub of its older form
 * (attr), or of its *_INL form (open), exactly one set. */
struct answer {
	attr_reply_fn attr;
	open_reply_fn open;
};

struct gc_batch {
	struct meta *m;
	struct gc_batch *next;		/* in m->active */
	uint64_t ino;			/* drain: that file; 0: background */
	struct svc_req *req;		/* drain: answered when done, */
	struct answer ans;		/* through this stub */
	struct mt_open_rep rep;		/* and this reply on success, */
	uint8_t *inl;			/* its inline bytes (owned) */
	int err;			/* first removal error of the batch */
	uint32_t n;			/* items loaded */
	uint32_t cur;			/* submission cursor: items[cur], chunk at */
	uint64_t at;
	uint32_t inflight;
	struct meta_gc_item items[GC_BATCH];
	uint32_t pending[GC_BATCH];	/* removes in flight per item */
	int item_err[GC_BATCH];
	bool settled[GC_BATCH];
};

struct gc_io {
	struct sc_io io;
	struct gc_batch *b;
	uint32_t item;
	struct gc_io *next_free;
};

/* [meta] keys. */
struct meta_cfg {
	uint64_t chunk_size;
	int64_t stripe;
	int64_t gc_interval_ms;
	int64_t reconcile_interval_ms;	/* 0: off */
	int64_t reconcile_grace_ms;
	int64_t reconcile_rate;		/* chunks queued per second */
	char store[CFG_STR_MAX];		/* "": SQLite; postgresql://... */
	char store_passfile[CFG_STR_MAX];	/* PostgreSQL's password file */
	bool group_commit;			/* one transaction per loop turn */
	int64_t request_ttl_ms;			/* request ids' records are kept this long */
	uint64_t reserve;			/* SQLite: the disk reserve (reserve.h) */
	uint64_t inline_max;			/* bytes a file may hold inline (0: off) */
};

struct meta {
	const struct meta_cfg *cfg;
	struct reactor *r;
	struct meta_store store;
	struct ns ns;
	bool ns_ready;
	struct sclient *sc;
	uint32_t table_len;		/* of this server's map (0: none yet) */
	/* Last one this server stored while it held the GC role (0: none
	 * since it took the role): one writer per database, so that a server
	 * whose map lags never puts back an older length. */
	uint32_t table_len_stored;
	uint64_t gc_interval_ms;
	struct reactor_timer poll_timer, gc_timer;
	bool stopping;
	struct sc_io probe;		/* nudges the storage client to a map */
	bool probing;
	struct announcer *ann;		/* lists this service in the cluster map */
	struct service_env env;		/* the daemon's: its strings outlive us */
	const struct cluster_key *key;	/* signs chunk caps; NULL: none given */

	struct reconciler *rec;		/* orphaned chunks (reconcile.h) */

	struct meta_group group;	/* group commit (group.h) */

	/* The directories a client's RESOLVE searched (resolve_in). */
	uint64_t walk_dirs[WALK_MAX];

	struct gc_io ios[GC_INFLIGHT];
	struct gc_io *free_ios;
	struct gc_batch *active;	/* batches with work left */
	struct gc_batch *bg;		/* the background batch, if running */
	bool pumping, repump;
	struct meta_gc_item scan[GC_QUEUE_SCAN];
	struct meta_reserve res;	/* SQLite's disk reserve */
	uint8_t *inl_buf;		/* MD_INLINE_MAX: a file's inline bytes */
	uint64_t inl_refused;		/* older-form opens of inline files */
	bool group_allowed;		/* meta.group_commit on a store with savepoints */
	/* Placement (ns_set_full_chains): the chains with a full member, as
	 * of map version full_version; nfull_snap for status and metrics. */
	uint64_t full_bits[CM_MAX_CHAINS / 64];
	uint64_t full_version;
	uint32_t nfull_snap;

	/* Read by other threads (relaxed atomics). */
	uint64_t ops[NOPS], op_errors;
	uint64_t gc_chunks, gc_items, gc_failures;
	bool gc_leader;			/* this server walks the gc queue */
	uint64_t inodes, bytes, gc_queue;
	uint32_t table_len_snap;

	/* Quota roots for /metrics: written on reactor 0, read by the
	 * metrics thread, both under qlock. */
	pthread_mutex_t qlock;
	struct meta_quota qsnap[QUOTA_METRICS_MAX];
	char qpath[QUOTA_METRICS_MAX][256];
	uint32_t qsnap_n, qroots;
	uint32_t qpolls;
};

#define STAT_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define STAT_SET(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define STAT_GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* Counts a request of req's operation (once, not again when it is made
 * again): every handler starts with it. */
static struct meta *count_op(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	uint16_t op = req->hdr.opcode;

	if (op >= OP_META_FIRST && op <= OP_META_LAST && !meta_group_rerunning(&m->group))
		STAT_ADD(&m->ops[op - OP_META_FIRST], 1);
	return m;
}

/* Returns status, counted when it fails the request. */
static int counted(struct meta *m, int status)
{
	if (status)
		STAT_ADD(&m->op_errors, 1);
	return status;
}

/* Answers the request of drain batch b (success: b->rep). */
static void batch_answer(struct meta *m, struct gc_batch *b, int status)
{
	if (b->ans.open)
		b->ans.open(b->req, counted(m, status), status ? NULL : &b->rep);
	else
		b->ans.attr(b->req, counted(m, status), status ? NULL : &b->rep.attr);
	b->req = NULL;
	free(b->inl);
	b->inl = NULL;
}

/* Answers req with an error through ans. */
static void answer_err(struct meta *m, struct svc_req *req, struct answer ans, int rc)
{
	if (ans.open)
		ans.open(req, counted(m, rc), NULL);
	else
		ans.attr(req, counted(m, rc), NULL);
}

/* ---- GC ---- */

static void gc_pump(struct meta *m);

static void batch_push(struct meta *m, struct gc_batch *b)
{
	b->next = m->active;
	m->active = b;
	m->repump = true;
}

/* Loads the next items of b (its file's, or any) and rewinds it. Returns
 * the count or an error. */
static int batch_load(struct meta *m, struct gc_batch *b)
{
	int n;

	/* Chunks are removed only for changes that are durable. */
	meta_group_flush(&m->group);
	n = ns_gc_next(&m->ns, b->ino, b->items, GC_BATCH);

	b->n = n > 0 ? (uint32_t)n : 0;
	b->cur = 0;
	b->at = b->n ? b->items[0].from : 0;
	b->inflight = 0;
	memset(b->pending, 0, sizeof(b->pending));
	memset(b->item_err, 0, sizeof(b->item_err));
	memset(b->settled, 0, sizeof(b->settled));
	return n;
}

/* Acknowledges item i once every one of its removes was submitted and
 * came back. */
static void item_settle(struct meta *m, struct gc_batch *b, uint32_t i)
{
	const struct meta_gc_item *it = &b->items[i];
	int rc;

	if (b->settled[i] || i >= b->cur || b->pending[i])
		return;
	b->settled[i] = true;
	rc = b->item_err[i];
	if (!rc) {
		rc = ns_gc_done(&m->ns, it);
		if (!rc) {
			STAT_ADD(&m->gc_items, 1);
			return;
		}
	}
	STAT_ADD(&m->gc_failures, 1);
	if (!b->err)
		b->err = rc;
	log_warn(COMP, "gc of chunks [%llu, %llu) of inode %llu failed: %s (kept queued)",
		 (unsigned long long)it->from, (unsigned long long)it->to,
		 (unsigned long long)it->ino, strata_strerror(rc));
}

static void gc_io_done(struct sc_io *io)
{
	struct gc_io *g = io->user;
	struct gc_batch *b = g->b;
	struct meta *m = b->m;
	uint32_t i = g->item;

	g->next_free = m->free_ios;
	m->free_ios = g;
	b->inflight--;
	b->pending[i]--;
	if (io->status == 0 || io->status == -ENOENT)
		STAT_ADD(&m->gc_chunks, 1);
	else if (!b->item_err[i])
		b->item_err[i] = io->status;
	item_settle(m, b, i);
	gc_pump(m);
}

/* Submits removes of b while I/O slots are free. */
static void batch_fill(struct meta *m, struct gc_batch *b)
{
	while (b->cur < b->n && !m->stopping) {
		struct meta_gc_item *it = &b->items[b->cur];
		struct gc_io *g;

		if (b->at >= it->to) {
			b->cur++;
			item_settle(m, b, b->cur - 1);
			if (b->cur < b->n)
				b->at = b->items[b->cur].from;
			continue;
		}
		g = m->free_ios;
		if (!g)
			return;
		m->free_ios = g->next_free;
		memset(&g->io, 0, sizeof(g->io));
		g->b = b;
		g->item = b->cur;
		g->io.kind = SC_REMOVE;
		g->io.ino = it->ino;
		g->io.idx = b->at;
		g->io.chain_idx = layout_chain_index(&it->layout, b->at);
		g->io.cb = gc_io_done;
		g->io.user = g;
		b->at++;
		b->pending[b->cur]++;
		b->inflight++;
		sc_submit(m->sc, &g->io);
	}
}

/* A batch whose removes are all back: load more, answer, or rest. */
static void batch_finish(struct meta *m, struct gc_batch *b)
{
	bool again = b->n == GC_BATCH && !b->err;
	int n;

	if (b->req) {
		n = 0;
		if (again && !m->stopping)
			n = batch_load(m, b);
		if (n > 0) {
			batch_push(m, b);
			return;
		}
		if (n < 0 && !b->err)
			b->err = n;
		if (m->stopping && !b->err)
			b->err = -ESHUTDOWN;
		/* The reason is logged; the caller learns that storage could
		 * not be reached and that repeating the call is safe. */
		batch_answer(m, b, b->err ? STRATA_EUNAVAIL : 0);
		free(b);
		return;
	}
	m->bg = NULL;
	free(b);
	if (!m->stopping)
		reactor_timer_arm(m->r, &m->gc_timer, again ? 1 : m->gc_interval_ms);
}

/* Submits what can be submitted and finishes batches that are done. Safe
 * to call from a completion that runs inside sc_submit(). */
static void gc_pump(struct meta *m)
{
	if (m->pumping) {
		m->repump = true;
		return;
	}
	m->pumping = true;
	do {
		m->repump = false;
		for (struct gc_batch **pp = &m->active; *pp;) {
			struct gc_batch *b = *pp;

			batch_fill(m, b);
			if ((b->cur >= b->n || m->stopping) && !b->inflight) {
				*pp = b->next;
				batch_finish(m, b);
			} else {
				pp = &b->next;
			}
		}
	} while (m->repump);
	m->pumping = false;
}

/*
 * Whether this server walks the queue now. Several meta servers on one
 * PostgreSQL database elect one of them (ns_gc_claim: an advisory lock
 * of its session, free again as soon as that server or its connection
 * dies); the others run only the drains their own requests need. The
 * same server records the chain table length (on_poll_timer).
 */
static bool gc_role(struct meta *m)
{
	int rc = ns_gc_claim(&m->ns);
	bool held = rc > 0;

	if (rc < 0)
		log_warn_limited(COMP, "cannot learn which meta server runs the gc: %s",
				 strata_strerror(rc));
	if (rc >= 0 && held != m->gc_leader) {
		log_info(COMP, held ? "this meta server runs the chunk gc" :
			 "another meta server runs the chunk gc");
		m->table_len_stored = 0;	/* another may have stored one since */
	}
	if (rc >= 0)
		STAT_SET(&m->gc_leader, held);
	return held;
}

/* Request records pruned by one statement, and statements per gc tick
 * at most: 40,000 a second at the default gc_interval, more than a meta
 * server writes, so that the table stays about rate x meta.request_ttl. */
#define PRUNE_BATCH 5000
#define PRUNE_ROUNDS 8

/* Drops expired request records (ns.h, ns_request_prune): the server
 * with the gc role, at each gc tick, a bounded number of batches. */
static void prune_requests(struct meta *m)
{
	int64_t cut = now_ns() / 1000000 - m->cfg->request_ttl_ms;
	int n = PRUNE_BATCH;

	for (int i = 0; i < PRUNE_ROUNDS && n == PRUNE_BATCH; i++) {
		n = ns_request_prune(&m->ns, cut, PRUNE_BATCH);
		if (n < 0)
			log_warn(COMP, "cannot prune expired request records: %s",
				 strata_strerror(n));
	}
}

static void on_gc_timer(void *arg)
{
	struct meta *m = arg;
	struct gc_batch *b;
	int n;

	if (m->stopping || m->bg)
		return;
	if (!gc_role(m)) {
		reactor_timer_arm(m->r, &m->gc_timer, m->gc_interval_ms);
		return;
	}
	prune_requests(m);
	b = calloc(1, sizeof(*b));
	if (!b) {
		reactor_timer_arm(m->r, &m->gc_timer, m->gc_interval_ms);
		return;
	}
	b->m = m;
	n = batch_load(m, b);
	if (n <= 0) {
		if (n < 0)
			log_warn(COMP, "cannot read the gc queue: %s", strata_strerror(n));
		free(b);
		reactor_timer_arm(m->r, &m->gc_timer, m->gc_interval_ms);
		return;
	}
	m->bg = b;
	batch_push(m, b);
	gc_pump(m);
}

/*
 * Answers req with rep through reply once file ino has no queued GC item
 * left (see proto/meta.h), or with the first error of its removals.
 */
static void reply_after_drain(struct meta *m, struct svc_req *req, uint64_t ino,
			      struct answer ans, const struct mt_open_rep *rep)
{
	struct gc_batch *b;
	int n;

	if (m->stopping) {
		answer_err(m, req, ans, -ESHUTDOWN);
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		answer_err(m, req, ans, -ENOMEM);
		return;
	}
	b->m = m;
	b->ino = ino;
	b->ans = ans;
	b->rep = *rep;
	b->req = req;
	n = batch_load(m, b);
	if (n <= 0) {
		batch_answer(m, b, n);	/* nothing to wait for, or an error */
		free(b);
		return;
	}
	if (rep->data.len) {
		/* The bytes outlive this call: the reply leaves later. */
		b->inl = malloc(rep->data.len);
		if (!b->inl) {
			batch_answer(m, b, -ENOMEM);
			free(b);
			return;
		}
		memcpy(b->inl, rep->data.p, rep->data.len);
		b->rep.data.p = b->inl;
	}
	batch_push(m, b);
	gc_pump(m);
}

/* ---- chain table and statistics ---- */

static void probe_done(struct sc_io *io)
{
	struct meta *m = io->user;

	m->probing = false;
}

/*
 * The storage client fetches the map once at start and then only when an
 * I/O needs it. While it knows no chain, a STAT of chain 0 waits in it,
 * refetching the map until chains exist (or its retry budget ends).
 */
static void probe_map(struct meta *m)
{
	if (m->probing || m->stopping)
		return;
	memset(&m->probe, 0, sizeof(m->probe));
	m->probe.kind = SC_STAT;
	m->probe.chain_idx = 0;
	m->probe.ino = UINT64_MAX;
	m->probe.cb = probe_done;
	m->probe.user = m;
	m->probing = true;
	sc_submit(m->sc, &m->probe);
}

/* Refreshes the quota roots /metrics reports, with their paths (cut to
 * 255 bytes: a label, not a name to resolve). */
static void quota_snapshot(struct meta *m)
{
	struct meta_quota q[QUOTA_METRICS_MAX], more[QUOTA_METRICS_MAX];
	char path[QUOTA_METRICS_MAX][256], full[NS_PATH_MAX];
	uint32_t total;
	int n, k;

	n = ns_quota_list(&m->ns, 0, q, QUOTA_METRICS_MAX);
	if (n < 0)
		return;
	/* The count of every root, for the roots gauge. */
	total = (uint32_t)n;
	for (k = n; k == (int)QUOTA_METRICS_MAX; total += (uint32_t)k)
		k = ns_quota_list(&m->ns, (total == (uint32_t)n ? q[n - 1] : more[k - 1]).ino,
				  more, QUOTA_METRICS_MAX);
	if (k < 0)
		return;
	for (int i = 0; i < n; i++) {
		int rc = ns_path(&m->ns, ns_any(q[i].ino), full, sizeof(full));

		if (rc < 0)
			snprintf(path[i], sizeof(path[i]), "(inode %llu)",
				 (unsigned long long)q[i].ino);
		else
			snprintf(path[i], sizeof(path[i]), "%s", full);
	}
	pthread_mutex_lock(&m->qlock);
	memcpy(m->qsnap, q, (size_t)n * sizeof(q[0]));
	memcpy(m->qpath, path, (size_t)n * sizeof(path[0]));
	m->qsnap_n = (uint32_t)n;
	m->qroots = total;
	pthread_mutex_unlock(&m->qlock);
}

/* ns_set_space's make_room: a removal failed for space. */
static bool make_room(void *arg)
{
	struct meta *m = arg;

	if (!meta_reserve_release(&m->res))
		return false;
	ns_set_space(&m->ns, true, make_room, m);
	return true;
}

/* The namespace follows the reserve: new entries refused while it is
 * given back, and one transaction per call then (a group whose commit
 * fails for space would fail every call in it, removals too). */
static void follow_reserve(struct meta *m)
{
	bool tight = meta_reserve_tight(&m->res);

	if (tight && m->group.on)
		meta_group_flush(&m->group);
	m->group.on = m->group_allowed && !tight;
	ns_set_space(&m->ns, tight, make_room, m);
}

/* New files avoid chains with a member mgmt holds full: taken from the
 * map when its version moves. */
static void follow_full_chains(struct meta *m, uint32_t tl)
{
	uint64_t v = sclient_map_version(m->sc);
	uint32_t nfull = 0, was = STAT_GET(&m->nfull_snap);

	if (!tl || v == m->full_version)
		return;
	m->full_version = v;
	tl = sclient_full_chains(m->sc, m->full_bits, CM_MAX_CHAINS / 64, &nfull);
	ns_set_full_chains(&m->ns, m->full_bits, tl, nfull);
	if (nfull != was)
		log_info(COMP, "%u of %u chains have a full target: new files are placed on the "
			 "%u others", nfull, tl, tl > nfull ? tl - nfull : 0);
	STAT_SET(&m->nfull_snap, nfull);
}

static void on_poll_timer(void *arg)
{
	struct meta *m = arg;
	uint32_t tl = sclient_table_len(m->sc);
	struct ns_statfs st;
	int rc, n;

	if (m->stopping)
		return;
	if (!tl)
		probe_map(m);
	if (tl)
		m->table_len = tl;
	follow_full_chains(m, tl);
	if (meta_reserve_poll(&m->res) || m->res.tight != m->ns.tight)
		follow_reserve(m);
	/* Only the GC role's holder writes it: one writer per database. */
	if (tl && tl != m->table_len_stored && gc_role(m)) {
		rc = ns_set_table_len(&m->ns, tl);
		if (rc) {
			log_warn(COMP, "cannot record chain table length %u: %s", tl,
				 strata_strerror(rc));
		} else {
			log_info(COMP, "chain table length %u -> %u", m->table_len_stored, tl);
			m->table_len_stored = tl;
		}
	}
	/* Clients find the namespace through the map: list it once it can
	 * place a file (a chain table in the map and in the database, where
	 * the GC role's holder may be the one to store it), not before. */
	if (m->table_len && STAT_GET(&m->table_len_snap) && !m->ann) {
		rc = announce_start(&m->env, CM_SVC_META, &m->ann);
		if (rc)
			log_warn(COMP, "cannot announce the meta service to mgmt '%s': %s (retrying)",
				 m->env.mgmt_addr, strata_strerror(rc));
	}
	if (ns_statfs(&m->ns, &st) == 0) {
		STAT_SET(&m->inodes, st.inodes);
		STAT_SET(&m->bytes, st.bytes);
		STAT_SET(&m->table_len_snap, st.table_len);
	}
	n = ns_gc_next(&m->ns, 0, m->scan, GC_QUEUE_SCAN);
	if (n >= 0)
		STAT_SET(&m->gc_queue, (uint64_t)n);
	if (m->qpolls++ % QUOTA_POLLS == 0)
		quota_snapshot(m);
	reactor_timer_arm(m->r, &m->poll_timer, TABLE_POLL_MS);
}

/* ---- handlers ---- */

/*
 * Each handler decodes its request with md_<op>_req() (a malformed one is
 * answered STRATA_EBADMSG there, with the reason logged), calls ns.h and
 * answers with md_<op>_reply(). Names and paths arrive as views into the
 * request body; ns.h takes C strings, so they are copied out first (the
 * decoder bounded their length already).
 */

/* Gives the request's id to the namespace call that follows (ns.h,
 * ns_request): a retry of it is answered from the recorded outcome. */
static void with_id(struct meta *m, const struct mt_reqid *rid)
{
	ns_request(&m->ns, (struct ns_reqid){ rid->client, rid->seq });
}

static struct ns_ref ref_of(const struct mt_handle *h)
{
	struct ns_ref r = { h->ino, h->gen };

	return r;
}

static void inode_to_wire(const struct meta_inode *in, struct mt_inode *w)
{
	w->ino = in->ino;
	w->gen = in->gen;
	w->mode = in->mode;
	w->uid = in->uid;
	w->gid = in->gid;
	w->nlink = in->nlink;
	w->size = in->size;
	w->atime_ns = in->atime_ns;
	w->mtime_ns = in->mtime_ns;
	w->ctime_ns = in->ctime_ns;
	w->parent = in->parent;
	mt_layout_set(&w->layout, &in->layout);
}

/*
 * Permissions (meta/access.h). Trusted callers (daemons, open peers) skip
 * every check below at no cost: acc_ctx_init reads the identity only. A
 * client's checks read the inodes involved before the operation, each in
 * its own transaction; nothing can change in between, as this service
 * runs one request at a time on reactor 0.
 */

/* Reads h into in (a client's only) and checks that the caller reaches
 * it as need says with permission want. */
static int check_ino(struct meta *m, struct acc_ctx *ac, const struct mt_handle *h,
		     enum acc_reach need, unsigned want, struct meta_inode *in)
{
	int rc;

	if (ac->trusted)
		return 0;
	rc = ns_getattr(&m->ns, ref_of(h), in);
	if (rc)
		return rc;
	/* Searching a file is ns's -ENOTDIR, as POSIX has it, not a missing
	 * x; the scopes still apply. */
	if ((want & ACC_X) && !S_ISDIR(in->mode))
		want = 0;
	return acc_need(ac, in, need, want);
}

/* The owner of an inode a client creates in dir: the token's identity,
 * never the request's; the group is dir's when dir is setgid (and a
 * directory made there is setgid too), else the token's first. */
static void owner_of_new(const struct acc_ctx *ac, const struct meta_inode *dir, uint32_t *uid,
			 uint32_t *gid, uint32_t *mode)
{
	*uid = ac->cred.uid;
	*gid = ac->cred.ngids ? ac->cred.gids[0] : TOKEN_NOBODY;
	if (dir->mode & S_ISGID) {
		*gid = dir->gid;
		if (mode)
			*mode |= S_ISGID;
	}
}

/* Removing (or renaming away) name from dir: its inode, if any, is
 * checked against dir's sticky bit; *victim is filled (ino 0: none). */
static int check_victim(struct meta *m, struct acc_ctx *ac, const struct meta_inode *dir,
			const char *name, struct meta_inode *victim)
{
	int rc = ns_lookup(&m->ns, ns_any(dir->ino), name, victim);

	if (rc == -ENOENT) {
		memset(victim, 0, sizeof(*victim));
		return 0;
	}
	return rc ? rc : acc_sticky(&ac->cred, dir, victim);
}

/* The reply stub of an operation that answers an mt_inode. */
typedef void (*inode_reply_fn)(struct svc_req *req, int status, const struct mt_inode *rep);

static void reply_inode(struct meta *m, struct svc_req *req, inode_reply_fn reply, int rc,
			const struct meta_inode *in)
{
	struct mt_inode w;

	if (!rc)
		inode_to_wire(in, &w);
	reply(req, counted(m, rc), rc ? NULL : &w);
}

/*
 * Answers an operation that may have truncated (CREATE, OPEN, SETATTR,
 * TRUNCATE): at once, or with drain once the file's queued chunk removals
 * are done. tr's layout defaults to the file's. rights (CAP_*, 0: none):
 * the chunk capability of the file the reply carries (proto/meta.h), the
 * rights the caller was just found to have; without a cluster key no cap
 * is made (storage then checks none).
 */
static void reply_attr(struct meta *m, struct svc_req *req, struct answer ans, int rc,
		       bool created, const struct meta_inode *in, const struct ns_trunc *tr,
		       bool drain, uint8_t rights, const struct ns_inline *inl)
{
	struct mt_open_rep orep;
	struct mt_attr_rep rep;

	if (rc) {
		answer_err(m, req, ans, rc);
		return;
	}
	memset(&rep, 0, sizeof(rep));
	rep.created = created;
	inode_to_wire(in, &rep.inode);
	if (rights && m->key && S_ISREG(in->mode)) {
		struct chunk_cap cap;

		cap_make(m->key, in->ino, rights, now_ns() / 1000000000 + CAP_LIFETIME_S, &cap);
		sp_cap_set(&rep.cap, &cap);
		if (rights & CAP_WRITE)
			reconcile_note_write(m->rec, in->ino, cap.expiry);
	}
	rep.trunc.partial = tr->partial;
	rep.trunc.chunk = tr->chunk;
	rep.trunc.len = tr->len;
	rep.trunc.gc_from = tr->gc_from;
	rep.trunc.gc_to = tr->gc_to;
	mt_layout_set(&rep.trunc.layout, &tr->layout);
	if (!rep.trunc.layout.chunk_size)
		rep.trunc.layout = rep.inode.layout;
	memset(&orep, 0, sizeof(orep));
	orep.attr = rep;
	if (ans.open) {
		orep.inline_max = (uint32_t)m->cfg->inline_max;
		if (inl && inl->has) {
			orep.inl = 1;
			orep.data.p = inl->buf;
			orep.data.len = inl->len;
		}
	}
	if (drain)
		reply_after_drain(m, req, in->ino, ans, &orep);
	else if (ans.open)
		ans.open(req, 0, &orep);
	else
		ans.attr(req, 0, &rep);
}

/* An open by the older form (OPEN, OPEN_PATH, CREATE, CREATE_PATH) of a
 * file that is inline: its caller would read zeros, so it is refused
 * (proto/meta.h, "Inline data"). rc otherwise. */
static int older_open(struct meta *m, struct answer ans, const struct ns_inline *inl,
		      const struct meta_inode *in, int rc)
{
	if (rc || ans.open || !inl->has)
		return rc;
	STAT_ADD(&m->inl_refused, 1);
	log_warn_limited(COMP, "refused an open of inline file %llu by a client without inline"
			 " support: upgrade the client, or set meta.inline_max = 0 and rewrite"
			 " the file", (unsigned long long)in->ino);
	return -EMEDIUMTYPE;
}

static void op_lookup(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char name[MD_NAME_MAX + 1];
	struct meta_inode in;
	struct mt_name rq;
	int rc;

	struct acc_ctx ac;
	struct meta_inode dir;

	if (counted(m, md_lookup_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(rq.name, name, sizeof(name));
	if (!rc)
		rc = check_ino(m, &ac, &rq.dir, ACC_PASS, ACC_X, &dir);
	if (!rc)
		rc = ns_lookup(&m->ns, ref_of(&rq.dir), name, &in);
	if (!rc)
		rc = acc_need(&ac, &in, ACC_PASS, 0);
	acc_ctx_release(&ac);
	reply_inode(m, req, md_lookup_reply, rc, &in);
}

static void op_getattr(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct meta_inode in;
	struct mt_ino rq;

	struct acc_ctx ac;
	int rc;

	if (counted(m, md_getattr_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = ns_getattr(&m->ns, ref_of(&rq.h), &in);
	if (!rc)
		rc = acc_need(&ac, &in, ACC_PASS, 0);
	acc_ctx_release(&ac);
	reply_inode(m, req, md_getattr_reply, rc, &in);
}

/* An open or create in its older form (answered with the attributes) and
 * in its *_INL form (answered with the inline bytes too): one decoded
 * request, handed to run as arg. */
#define OPEN_OP_PAIR(name, type, run, arg)					\
	static void op_##name(void *svc, struct svc_req *req)			\
	{									\
		struct meta *m = count_op(svc, req);				\
		type rq;							\
										\
		if (!counted(m, md_##name##_req(req, &rq)))			\
			run(m, req, arg, (struct answer){ .attr = md_##name##_reply }); \
	}									\
	static void op_##name##_inl(void *svc, struct svc_req *req)		\
	{									\
		struct meta *m = count_op(svc, req);				\
		type rq;							\
										\
		if (!counted(m, md_##name##_inl_req(req, &rq)))			\
			run(m, req, arg, (struct answer){ .open = md_##name##_inl_reply }); \
	}

/* CREATE of a decoded request, answered through reply (CREATE,
 * CREATE_PATH). */
static void create_in(struct meta *m, struct svc_req *req, struct mt_create rq,
		      struct answer ans)
{
	struct ns_inline inl = { .buf = m->inl_buf };
	char name[MD_NAME_MAX + 1];
	struct meta_inode in;
	struct ns_trunc tr;
	bool created;
	int rc;

	struct meta_inode dir, old;
	struct acc_ctx ac;
	uint8_t rights;

	memset(&tr, 0, sizeof(tr));
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(rq.name, name, sizeof(name));
	if (!rc)
		rc = check_ino(m, &ac, &rq.dir, ACC_PASS, ACC_X, &dir);
	if (!rc && !ac.trusted) {
		/* An existing file is opened, which needs w on it (CREATE
		 * carries no access mode, and its callers write); a new one
		 * needs w and x on the directory. Anything else is left to
		 * ns_create's answer. */
		rc = ns_lookup(&m->ns, ns_any(dir.ino), name, &old);
		if (rc == -ENOENT)
			rc = acc_need(&ac, &dir, ACC_WRITE, ACC_W | ACC_X);
		else if (!rc && S_ISREG(old.mode) && !(rq.flags & MD_CREATE_EXCL))
			rc = acc_need(&ac, &old, ACC_WRITE, ACC_W);
		if (!rc)
			owner_of_new(&ac, &dir, &rq.uid, &rq.gid, NULL);
	}
	acc_ctx_release(&ac);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_create(&m->ns, ref_of(&rq.dir), name, rq.mode, rq.uid, rq.gid,
			       rq.flags & MD_CREATE_EXCL, &in);
	if (rc < 0) {
		answer_err(m, req, ans, rc);
		return;
	}
	created = rc == 1;
	rc = 0;
	/* Not atomic with the create above: a file removed in between fails
	 * the call with -ENOENT, as if the create had come later. An
	 * existing file that may be inline is read for its bytes. */
	if (!created && (rq.flags & MD_CREATE_TRUNC))
		rc = ns_open_inline(&m->ns, ns_any(in.ino), O_WRONLY | O_TRUNC, &in, &tr, &inl);
	else if (!created && S_ISREG(in.mode) && in.size && in.size <= MD_INLINE_MAX)
		rc = ns_open_inline(&m->ns, ns_any(in.ino), O_RDONLY, &in, &tr, &inl);
	rc = older_open(m, ans, &inl, &in, rc);
	/* CREATE opens for writing (checked above); reading too when the
	 * caller may read the file, as an OPEN would have found. */
	rights = CAP_WRITE;
	if (!rc && m->key) {
		acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
		if (!acc_need(&ac, &in, ACC_READ, ACC_R))
			rights |= CAP_READ;
		acc_ctx_release(&ac);
	}
	reply_attr(m, req, ans, rc, created, &in, &tr, !created, rights, &inl);
}

OPEN_OP_PAIR(create, struct mt_create, create_in, rq)

/* OPEN of a decoded request, answered through ans (OPEN, OPEN_PATH and
 * their *_INL forms). */
static void open_in(struct meta *m, struct svc_req *req, struct mt_open rq, struct answer ans)
{
	struct ns_inline inl = { .buf = m->inl_buf };
	struct meta_inode in;
	struct ns_trunc tr;
	int rc;

	uint32_t acc;
	struct acc_ctx ac;
	unsigned want;

	memset(&tr, 0, sizeof(tr));
	acc = rq.flags & MD_O_ACCMODE;
	want = acc == MD_O_RDONLY ? ACC_R : acc == MD_O_WRONLY ? ACC_W : ACC_R | ACC_W;
	if (rq.flags & MD_O_TRUNC)
		want |= ACC_W;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = check_ino(m, &ac, &rq.h, (want & ACC_W) ? ACC_WRITE : ACC_READ, want, &in);
	acc_ctx_release(&ac);
	if (!rc)
		rc = ns_open_inline(&m->ns, ref_of(&rq.h), md_open_flags_from_wire(rq.flags), &in,
				    &tr, &inl);
	rc = older_open(m, ans, &inl, &in, rc);
	reply_attr(m, req, ans, rc, false, &in, &tr,
		   !rc && (rq.flags & MD_O_ACCMODE) != MD_O_RDONLY && S_ISREG(in.mode),
		   ((want & ACC_R) ? CAP_READ : 0) | ((want & ACC_W) ? CAP_WRITE : 0), &inl);
}

OPEN_OP_PAIR(open, struct mt_open, open_in, rq)

/* INLINE_SET (proto/meta.h, "Inline data"): a writer's publish of a small
 * file's whole content, or the end of a conversion to chunks. */
static void op_inline_set(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_inline_set rq;
	struct meta_inode in;
	struct acc_ctx ac;
	int rc;

	if (counted(m, md_inline_set_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	/* As SET_SIZE: the owner, or anyone who may write the file now. */
	rc = check_ino(m, &ac, &rq.h, ACC_WRITE, 0, &in);
	if (!rc && !ac.trusted && ac.cred.uid != 0 && ac.cred.uid != in.uid)
		rc = acc_check(&ac.cred, &in, ACC_W);
	acc_ctx_release(&ac);
	if (!rc && (rq.flags & ~MD_INL_GUARD) == MD_INL_PUBLISH)
		rc = !m->cfg->inline_max ? -EOPNOTSUPP :
		     rq.len > m->cfg->inline_max ? -EFBIG :
		     ns_publish_inline_if(&m->ns, ref_of(&rq.h), rq.data.p, rq.len,
					  (rq.flags & MD_INL_GUARD) ? &rq.crc : NULL, rq.mtime_ns,
					  &in);
	else if (!rc && rq.flags == MD_INL_CONVERT)
		rc = ns_uninline(&m->ns, ref_of(&rq.h), rq.len, rq.crc, &in);
	else if (!rc)
		rc = -EINVAL;	/* none, both, or GUARD without PUBLISH */
	reply_inode(m, req, md_inline_set_reply, rc, &in);
}

/* The checks of a request that makes a new entry in a directory (MKDIR,
 * MKNOD): no flags, a name that fits, w and x on the directory, and the
 * owner of what it makes (mode: a directory may inherit setgid). 0 or an
 * error for the reply. */
static int check_new_entry(struct meta *m, struct svc_req *req, struct mt_create *rq,
			   char name[MD_NAME_MAX + 1], uint32_t *mode)
{
	struct meta_inode dir;
	struct acc_ctx ac;
	int rc;

	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = rq->flags ? -EINVAL : pstr_copy(rq->name, name, MD_NAME_MAX + 1);
	if (!rc)
		rc = check_ino(m, &ac, &rq->dir, ACC_WRITE, ACC_W | ACC_X, &dir);
	if (!rc && !ac.trusted)
		owner_of_new(&ac, &dir, &rq->uid, &rq->gid, mode);
	acc_ctx_release(&ac);
	return rc;
}

static void op_mkdir(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char name[MD_NAME_MAX + 1];
	struct meta_inode in;
	struct mt_create rq;
	int rc;

	if (counted(m, md_mkdir_req(req, &rq)))
		return;
	rc = check_new_entry(m, req, &rq, name, &rq.mode);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_mkdir(&m->ns, ref_of(&rq.dir), name, rq.mode, rq.uid, rq.gid, &in);
	reply_inode(m, req, md_mkdir_reply, rc, &in);
}

static void op_mknod(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char name[MD_NAME_MAX + 1];
	struct meta_inode in;
	struct mt_create rq;
	int rc;

	if (counted(m, md_mknod_req(req, &rq)))
		return;
	rc = check_new_entry(m, req, &rq, name, NULL);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_mknod(&m->ns, ref_of(&rq.dir), name, rq.mode, rq.uid, rq.gid, &in);
	reply_inode(m, req, md_mknod_reply, rc, &in);
}

static void op_link(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char name[MD_NAME_MAX + 1];
	struct meta_inode in, dir, src;
	struct mt_link rq;
	struct acc_ctx ac;
	int rc;

	if (counted(m, md_link_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(rq.name, name, sizeof(name));
	if (!rc)
		rc = check_ino(m, &ac, &rq.dir, ACC_WRITE, ACC_W | ACC_X, &dir);
	/* The file itself must be in a scope that may write (a new name
	 * is a way to keep it), and the caller one who may name it. */
	if (!rc)
		rc = check_ino(m, &ac, &rq.h, ACC_WRITE, 0, &src);
	if (!rc && !ac.trusted)
		rc = acc_link(&ac.cred, &src);
	acc_ctx_release(&ac);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_link(&m->ns, ref_of(&rq.h), ref_of(&rq.dir), name, &in);
	reply_inode(m, req, md_link_reply, rc, &in);
}

static void op_symlink(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char name[MD_NAME_MAX + 1], target[MD_TARGET_MAX + 1];
	struct meta_inode in;
	struct mt_symlink rq;
	int rc;

	struct meta_inode dir;
	struct acc_ctx ac;

	if (counted(m, md_symlink_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(rq.name, name, sizeof(name));
	if (!rc)
		rc = pstr_copy(rq.target, target, sizeof(target));
	if (!rc)
		rc = check_ino(m, &ac, &rq.dir, ACC_WRITE, ACC_W | ACC_X, &dir);
	if (!rc && !ac.trusted)
		owner_of_new(&ac, &dir, &rq.uid, &rq.gid, NULL);
	acc_ctx_release(&ac);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_symlink(&m->ns, ref_of(&rq.dir), name, target, rq.uid, rq.gid, &in);
	reply_inode(m, req, md_symlink_reply, rc, &in);
}

static void op_readlink(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char target[MD_TARGET_MAX + 1];
	struct mt_target rep;
	struct mt_ino rq;
	int rc;

	struct meta_inode in;
	struct acc_ctx ac;

	if (counted(m, md_readlink_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = check_ino(m, &ac, &rq.h, ACC_READ, 0, &in);
	acc_ctx_release(&ac);
	if (!rc)
		rc = ns_readlink(&m->ns, ref_of(&rq.h), target, sizeof(target));
	if (rc >= (int)sizeof(target))
		rc = -ENAMETOOLONG;	/* ns keeps targets below NS_PATH_MAX */
	if (rc >= 0) {
		rep.target.p = target;
		rep.target.len = (uint32_t)rc;
		rc = 0;
	}
	md_readlink_reply(req, counted(m, rc), rc ? NULL : &rep);
}

/* UNLINK and RMDIR of a decoded request: 0 or the reply's error. */
static int remove_in(struct meta *m, struct svc_req *req, const struct mt_unlink rq, bool dir)
{
	char name[MD_NAME_MAX + 1];
	int rc;

	struct meta_inode d, victim;
	struct acc_ctx ac;

	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(rq.name, name, sizeof(name));
	if (!rc)
		rc = check_ino(m, &ac, &rq.dir, ACC_WRITE, ACC_W | ACC_X, &d);
	if (!rc && !ac.trusted)
		rc = check_victim(m, &ac, &d, name, &victim);
	acc_ctx_release(&ac);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = dir ? ns_rmdir(&m->ns, ref_of(&rq.dir), name) :
			   ns_unlink(&m->ns, ref_of(&rq.dir), name);
	return rc;
}

/* UNLINK and RMDIR. */
static void remove_entry(struct meta *m, struct svc_req *req, bool dir)
{
	struct mt_unlink rq;

	if (counted(m, (dir ? md_rmdir_req : md_unlink_req)(req, &rq)))
		return;
	(dir ? md_rmdir_reply : md_unlink_reply)(req, counted(m, remove_in(m, req, rq, dir)),
						  NULL);
}

static void op_unlink(void *svc, struct svc_req *req)
{
	remove_entry(count_op(svc, req), req, false);
}

static void op_rmdir(void *svc, struct svc_req *req)
{
	remove_entry(count_op(svc, req), req, true);
}

static void op_rename(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	char from[MD_NAME_MAX + 1], to[MD_NAME_MAX + 1];
	struct mt_rename rq;
	int rc;

	struct meta_inode sd, dd, sv, dv;
	struct acc_ctx ac;

	if (counted(m, md_rename_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(rq.src_name, from, sizeof(from));
	if (!rc)
		rc = pstr_copy(rq.dst_name, to, sizeof(to));
	if (!rc)
		rc = check_ino(m, &ac, &rq.src_dir, ACC_WRITE, ACC_W | ACC_X, &sd);
	if (!rc)
		rc = check_ino(m, &ac, &rq.dst_dir, ACC_WRITE, ACC_W | ACC_X, &dd);
	if (!rc && !ac.trusted)
		rc = check_victim(m, &ac, &sd, from, &sv);
	if (!rc && !ac.trusted)
		rc = check_victim(m, &ac, &dd, to, &dv);
	/* A directory that changes parent rewrites its "..": w on it too
	 * (on both, for an exchange). */
	if (!rc && !ac.trusted && sd.ino != dd.ino) {
		if (sv.ino && S_ISDIR(sv.mode))
			rc = acc_check(&ac.cred, &sv, ACC_W);
		if (!rc && dv.ino && S_ISDIR(dv.mode) && (rq.flags & MD_RENAME_EXCHANGE))
			rc = acc_check(&ac.cred, &dv, ACC_W);
	}
	acc_ctx_release(&ac);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_rename(&m->ns, ref_of(&rq.src_dir), from, ref_of(&rq.dst_dir), to,
			       rq.flags);
	md_rename_reply(req, counted(m, rc), NULL);
}

static void op_setattr(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct meta_inode at, in;
	struct ns_trunc tr;
	struct mt_setattr rq;
	struct acc_ctx ac;
	int rc = 0;

	if (counted(m, md_setattr_req(req, &rq)))
		return;
	memset(&tr, 0, sizeof(tr));
	memset(&at, 0, sizeof(at));
	at.ino = rq.h.ino;
	at.mode = rq.mode;
	at.uid = rq.uid;
	at.gid = rq.gid;
	at.atime_ns = rq.atime_ns;
	at.mtime_ns = rq.mtime_ns;
	at.size = rq.size;
	if ((rq.mask & MD_ATTR_SIZE) && rq.size > INT64_MAX)
		rc = -EFBIG;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	if (!rc)
		rc = check_ino(m, &ac, &rq.h, ACC_WRITE, 0, &in);
	if (!rc && !ac.trusted)
		rc = acc_setattr(&ac.cred, &in, rq.mask, &at,
				 (rq.mask & MD_ATTR_MODE) ? &at.mode : NULL);
	acc_ctx_release(&ac);
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_setattr(&m->ns, ref_of(&rq.h), rq.mask, &at, &in, &tr);
	/* A new size may leave the client a chunk to cut: w was checked. */
	reply_attr(m, req, (struct answer){ .attr = md_setattr_reply }, rc, false, &in, &tr,
		   !rc && (rq.mask & MD_ATTR_SIZE), (rq.mask & MD_ATTR_SIZE) ? CAP_WRITE : 0, NULL);
}

static void op_set_size(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_set_size rq;
	struct meta_inode in;
	int rc;

	struct acc_ctx ac;

	if (counted(m, md_set_size_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	/* A writer publishing its length at close: the owner, or anyone who
	 * may write the file now. */
	rc = check_ino(m, &ac, &rq.h, ACC_WRITE, 0, &in);
	if (!rc && !ac.trusted && ac.cred.uid != 0 && ac.cred.uid != in.uid)
		rc = acc_check(&ac.cred, &in, ACC_W);
	acc_ctx_release(&ac);
	if (!rc)
		rc = rq.size > INT64_MAX ? -EFBIG :
		     ns_set_size(&m->ns, ref_of(&rq.h), rq.size, rq.mtime_ns, &in);
	reply_inode(m, req, md_set_size_reply, rc, &in);
}

static void op_truncate(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct meta_inode at, in;
	struct mt_truncate rq;
	struct ns_trunc tr;
	struct acc_ctx ac;
	int rc = 0;

	if (counted(m, md_truncate_req(req, &rq)))
		return;
	memset(&tr, 0, sizeof(tr));
	memset(&at, 0, sizeof(at));
	if (rq.size > INT64_MAX)
		rc = -EFBIG;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	if (!rc)
		rc = check_ino(m, &ac, &rq.h, ACC_WRITE, ACC_W, &in);
	acc_ctx_release(&ac);
	at.size = rq.size;
	/* setattr(SIZE) is ns_truncate that also returns the inode. */
	if (!rc)
		with_id(m, &rq.rid);
	if (!rc)
		rc = ns_setattr(&m->ns, ref_of(&rq.h), NS_ATTR_SIZE, &at, &in, &tr);
	reply_attr(m, req, (struct answer){ .attr = md_truncate_reply }, rc, false, &in, &tr, !rc,
		   CAP_WRITE, NULL);
}

/* A READDIR(PLUS) page being collected: entries (ents or pents) whose
 * names point into names. */
struct dir_page {
	struct mt_dirent *ents;
	struct mt_direntplus *pents;
	char (*names)[MD_NAME_MAX + 1];
	struct pstr last;		/* the name of the last entry taken */
	uint32_t n;
};

/* Copies name into pg as its next entry's; false when it cannot be one. */
static bool page_name(struct dir_page *pg, const char *name)
{
	size_t len = strlen(name);

	if (len > MD_NAME_MAX)
		return false;
	memcpy(pg->names[pg->n], name, len);
	pg->last.p = pg->names[pg->n];
	pg->last.len = (uint32_t)len;
	return true;
}

static int readdir_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct dir_page *pg = arg;
	struct mt_dirent *e = &pg->ents[pg->n];

	if (!page_name(pg, name))
		return 1;
	e->name = pg->last;
	e->ino = ino;
	e->type = type;
	pg->n++;
	return 0;
}

static int readdirplus_cb(void *arg, const char *name, const struct meta_inode *in)
{
	struct dir_page *pg = arg;
	struct mt_direntplus *e = &pg->pents[pg->n];

	if (!page_name(pg, name))
		return 1;
	e->name = pg->last;
	inode_to_wire(in, &e->inode);
	pg->n++;
	return 0;
}

/* READDIR and READDIRPLUS. */
static void list_dir(struct meta *m, struct svc_req *req, bool plus)
{
	char cookie[MD_NAME_MAX + 1];
	struct dir_page pg = { 0 };
	struct meta_inode dir;
	struct mt_readdir rq;
	struct acc_ctx ac;
	int rc;

	if (counted(m, (plus ? md_readdirplus_req : md_readdir_req)(req, &rq)))
		return;
	pg.names = malloc(rq.max * sizeof(*pg.names));
	if (plus)
		pg.pents = calloc(rq.max, sizeof(*pg.pents));
	else
		pg.ents = calloc(rq.max, sizeof(*pg.ents));
	rc = pg.names && (pg.ents || pg.pents) ? pstr_copy(rq.cookie, cookie, sizeof(cookie)) :
	     -ENOMEM;
	/* Names need r; the entries' inodes too need x, as a stat of each
	 * would. */
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	if (!rc)
		rc = check_ino(m, &ac, &rq.dir, ACC_READ, plus ? ACC_R | ACC_X : ACC_R, &dir);
	acc_ctx_release(&ac);
	if (!rc && plus)
		rc = ns_readdirplus(&m->ns, ref_of(&rq.dir), cookie, rq.max, readdirplus_cb, &pg);
	else if (!rc)
		rc = ns_readdir(&m->ns, ref_of(&rq.dir), cookie, rq.max, readdir_cb, &pg);
	if (rc < 0 && plus) {
		md_readdirplus_reply(req, counted(m, rc), NULL);
	} else if (rc < 0) {
		md_readdir_reply(req, counted(m, rc), NULL);
	} else if (plus) {
		struct mt_readdirplus_rep rep = {
			.ents = pg.pents, .ents_n = pg.n, .next_cookie = pg.n ? pg.last : rq.cookie,
			.eof = (uint32_t)rc < rq.max,
		};

		md_readdirplus_reply(req, 0, &rep);
	} else {
		struct mt_readdir_rep rep = {
			.ents = pg.ents, .ents_n = pg.n, .next_cookie = pg.n ? pg.last : rq.cookie,
			.eof = (uint32_t)rc < rq.max,
		};

		md_readdir_reply(req, 0, &rep);
	}
	free(pg.ents);
	free(pg.pents);
	free(pg.names);
}

static void op_readdir(void *svc, struct svc_req *req)
{
	list_dir(count_op(svc, req), req, false);
}

static void op_readdirplus(void *svc, struct svc_req *req)
{
	list_dir(count_op(svc, req), req, true);
}

static void op_set_layout(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_set_layout rq;
	struct file_layout l;

	struct meta_inode dir;
	struct acc_ctx ac;
	int rc;

	if (counted(m, md_set_layout_req(req, &rq)))
		return;
	mt_layout_get(&rq.layout, &l);
	/* A directory's layout is an attribute: its owner's, or root's. */
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = check_ino(m, &ac, &rq.dir, ACC_WRITE, 0, &dir);
	if (!rc && !ac.trusted && ac.cred.uid != 0 && ac.cred.uid != dir.uid)
		rc = -EPERM;
	acc_ctx_release(&ac);
	if (!rc)
		rc = ns_set_layout(&m->ns, ref_of(&rq.dir), &l);
	md_set_layout_reply(req, counted(m, rc), NULL);
}

static void op_get_layout(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct meta_inode in;
	struct mt_layout rep;
	struct mt_ino rq;
	int rc;

	struct acc_ctx ac;

	if (counted(m, md_get_layout_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = ns_getattr(&m->ns, ref_of(&rq.h), &in);
	if (!rc)
		rc = acc_need(&ac, &in, ACC_PASS, 0);
	acc_ctx_release(&ac);
	if (!rc)
		mt_layout_set(&rep, &in.layout);
	md_get_layout_reply(req, counted(m, rc), rc ? NULL : &rep);
}

static void op_statfs(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct proto_void rq;
	struct ns_statfs st;
	struct mt_statfs rep;
	int rc;

	if (counted(m, md_statfs_req(req, &rq)))
		return;
	rc = ns_statfs(&m->ns, &st);
	rep.inodes = st.inodes;
	rep.bytes = st.bytes;
	rep.table_len = st.table_len;
	md_statfs_reply(req, counted(m, rc), rc ? NULL : &rep);
}

/* A client's RESOLVE: the directories it searched, for acc_walked. */
struct walk {
	struct acc_ctx ac;
	uint64_t *dirs;
	uint32_t n;
};

static int walk_dir(void *arg, const struct meta_inode *dir)
{
	struct walk *w = arg;
	int rc = acc_check(&w->ac.cred, dir, ACC_X);

	if (rc)
		return rc;
	if (w->n && w->dirs[w->n - 1] == dir->ino)
		return 0;
	if (w->n == WALK_MAX)
		return -ELOOP;
	w->dirs[w->n++] = dir->ino;
	return 0;
}

/* Resolves path for req's caller (RESOLVE's rules, flags MD_RESOLVE_*)
 * into *in: 0 or the reply's error. */
static int resolve_in(struct meta *m, struct svc_req *req, struct pstr path_v, uint32_t flags,
		      struct meta_inode *in)
{
	char path[MD_PATH_MAX + 1];
	struct walk w = { 0 };
	int rc;

	acc_ctx_init(&w.ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = pstr_copy(path_v, path, sizeof(path));
	if (!rc && w.ac.trusted) {
		rc = ns_resolve(&m->ns, path, flags, in);
	} else if (!rc) {
		/* Reactor 0 runs one request at a time: one buffer serves all. */
		w.dirs = m->walk_dirs;
		rc = ns_resolve_walk(&m->ns, path, flags, walk_dir, &w, in);
		if (!rc)
			rc = acc_walked(&w.ac, in, w.dirs, w.n);
	}
	acc_ctx_release(&w.ac);
	return rc;
}

static void op_resolve(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_resolve rq;
	struct meta_inode in;

	if (!counted(m, md_resolve_req(req, &rq)))
		reply_inode(m, req, md_resolve_reply,
			    resolve_in(m, req, rq.path, rq.flags, &in), &in);
}

/* ---- compound operations by path (proto/meta.h) ---- */

static struct mt_handle handle_of(const struct meta_inode *in)
{
	struct mt_handle h = { in->ino, in->gen };

	return h;
}

/* CREATE_PATH of a decoded request, answered through ans. */
static void create_path_in(struct meta *m, struct svc_req *req, const struct mt_create_path *rq,
			   struct answer ans)
{
	struct meta_inode dir;
	int rc = resolve_in(m, req, rq->dir, MD_RESOLVE_FOLLOW, &dir);

	if (rc) {
		answer_err(m, req, ans, rc);
		return;
	}
	create_in(m, req,
		  (struct mt_create){ .dir = handle_of(&dir), .name = rq->name, .mode = rq->mode,
				      .uid = rq->uid, .gid = rq->gid, .flags = rq->flags,
				      .rid = rq->rid },
		  ans);
}

OPEN_OP_PAIR(create_path, struct mt_create_path, create_path_in, &rq)

/* OPEN_PATH of a decoded request, answered through ans. */
static void open_path_in(struct meta *m, struct svc_req *req, const struct mt_open_path *rq,
			 struct answer ans)
{
	struct meta_inode in;
	int rc = resolve_in(m, req, rq->path, MD_RESOLVE_FOLLOW, &in);

	if (rc) {
		answer_err(m, req, ans, rc);
		return;
	}
	open_in(m, req, (struct mt_open){ .h = handle_of(&in), .flags = rq->flags }, ans);
}

OPEN_OP_PAIR(open_path, struct mt_open_path, open_path_in, &rq)

static void op_unlink_path(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_path_name rq;
	struct meta_inode dir;
	int rc;

	if (counted(m, md_unlink_path_req(req, &rq)))
		return;
	rc = resolve_in(m, req, rq.dir, MD_RESOLVE_FOLLOW, &dir);
	if (!rc)
		rc = remove_in(m, req, (struct mt_unlink){ .dir = handle_of(&dir), .name = rq.name,
							   .rid = rq.rid }, false);
	md_unlink_path_reply(req, counted(m, rc), NULL);
}

static void quota_to_wire(const struct meta_quota *q, struct mt_quota *w)
{
	w->ino = q->ino;
	w->max_bytes = q->max_bytes;
	w->max_inodes = q->max_inodes;
	w->bytes = q->bytes;
	w->inodes = q->inodes;
}

/* Admin only (the table's access): no namespace check on top. */
static void op_quota_set(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_quota_set rq;
	struct meta_quota q;
	struct mt_quota rep;
	int rc;

	if (counted(m, md_quota_set_req(req, &rq)))
		return;
	rc = ns_quota_set(&m->ns, ref_of(&rq.dir), rq.max_bytes, rq.max_inodes, &q);
	if (!rc) {
		log_info(COMP, "quota of directory %llu: %llu bytes, %llu inodes (0: none)",
			 (unsigned long long)q.ino, (unsigned long long)rq.max_bytes,
			 (unsigned long long)rq.max_inodes);
		quota_to_wire(&q, &rep);
	}
	md_quota_set_reply(req, counted(m, rc), rc ? NULL : &rep);
}

/* A client reads the quota of a directory it reaches, as it would stat it. */
static void op_quota_get(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct meta_inode dir;
	struct meta_quota q;
	struct mt_quota rep;
	struct acc_ctx ac;
	struct mt_ino rq;
	int rc;

	if (counted(m, md_quota_get_req(req, &rq)))
		return;
	acc_ctx_init(&ac, &m->ns, svc_req_ident(req), svc_req_caller(req));
	rc = check_ino(m, &ac, &rq.h, ACC_READ, 0, &dir);
	acc_ctx_release(&ac);
	if (!rc)
		rc = ns_quota_get(&m->ns, ref_of(&rq.h), &q);
	if (!rc)
		quota_to_wire(&q, &rep);
	md_quota_get_reply(req, counted(m, rc), rc ? NULL : &rep);
}

static void op_quota_list(void *svc, struct svc_req *req)
{
	struct meta *m = count_op(svc, req);
	struct mt_quota_list_rep rep = { 0 };
	struct meta_quota *q = NULL;
	struct mt_quota_list rq;
	char (*paths)[MD_PATH_MAX] = NULL;
	int rc, n = 0;

	if (counted(m, md_quota_list_req(req, &rq)))
		return;
	if (rq.max) {
		q = calloc(rq.max, sizeof(*q));
		paths = malloc(rq.max * sizeof(*paths));
		rep.ents = calloc(rq.max, sizeof(*rep.ents));
	}
	rc = rq.max && (!q || !paths || !rep.ents) ? -ENOMEM : 0;
	if (!rc)
		rc = n = ns_quota_list(&m->ns, rq.after, q, rq.max);
	for (int i = 0; rc >= 0 && i < n; i++) {
		rc = ns_path(&m->ns, ns_any(q[i].ino), paths[i], sizeof(paths[i]));
		if (rc >= 0) {
			quota_to_wire(&q[i], &rep.ents[i].quota);
			rep.ents[i].path.p = paths[i];
			rep.ents[i].path.len = (uint32_t)rc;
		}
	}
	if (rc >= 0) {
		rc = 0;
		rep.ents_n = (uint32_t)n;
		rep.eof = (uint32_t)n < rq.max || !rq.max;
	}
	md_quota_list_reply(req, counted(m, rc), rc ? NULL : &rep);
	free(rep.ents);
	free(paths);
	free(q);
}

static const struct meta_handlers handlers = {
	.md_lookup = op_lookup,
	.md_getattr = op_getattr,
	.md_create = op_create,
	.md_open = op_open,
	.md_mkdir = op_mkdir,
	.md_symlink = op_symlink,
	.md_mknod = op_mknod,
	.md_link = op_link,
	.md_readlink = op_readlink,
	.md_unlink = op_unlink,
	.md_rmdir = op_rmdir,
	.md_rename = op_rename,
	.md_setattr = op_setattr,
	.md_set_size = op_set_size,
	.md_truncate = op_truncate,
	.md_readdir = op_readdir,
	.md_set_layout = op_set_layout,
	.md_get_layout = op_get_layout,
	.md_statfs = op_statfs,
	.md_resolve = op_resolve,
	.md_readdirplus = op_readdirplus,
	.md_quota_set = op_quota_set,
	.md_quota_get = op_quota_get,
	.md_quota_list = op_quota_list,
	.md_create_path = op_create_path,
	.md_open_path = op_open_path,
	.md_unlink_path = op_unlink_path,
	.md_open_inl = op_open_inl,
	.md_open_path_inl = op_open_path_inl,
	.md_create_inl = op_create_inl,
	.md_create_path_inl = op_create_path_inl,
	.md_inline_set = op_inline_set,
};

/* The handler of operation op (NULL: none). */
static svc_handler_fn handler_of(uint16_t op)
{
	switch (op) {
#define MS_CASE(NAME, num, fn, req, rep, access) \
	case OP_##NAME: \
		return handlers.fn;
		META_OPS(MS_CASE)
#undef MS_CASE
	default:
		return NULL;
	}
}

/* Where every request enters: queued for the turn's group (group.h),
 * which runs its handler. */
static void op_enter(void *svc, struct svc_req *req)
{
	struct meta *m = svc;

	meta_group_submit(&m->group, req, handler_of(req->hdr.opcode), m);
}

/* Routes every operation that has a handler through op_enter. */
static void route_all(struct rpc_server *srv, struct meta *m)
{
	struct meta_handlers h = handlers;

#define MS_ENTER(NAME, num, fn, req, rep, access) \
	if (h.fn) \
		h.fn = op_enter;
	META_OPS(MS_ENTER)
#undef MS_ENTER
	meta_route(srv, m->r, &h, m);
}

/* ---- life cycle ---- */

/* The root of a new (or still empty) namespace takes the configured chunk
 * size and stripe; later changes go through SET_LAYOUT. */
static void root_layout(struct meta *m)
{
	struct ns_statfs st;
	struct file_layout l = { 0 };
	int rc = ns_statfs(&m->ns, &st);

	if (rc || st.inodes != 1)
		return;
	l.chunk_size = (uint32_t)m->cfg->chunk_size;
	if (m->cfg->stripe != NS_STRIPE_DEFAULT_MAX)
		l.stripe = (uint32_t)m->cfg->stripe;
	if (st.table_len && l.stripe > st.table_len)
		l.stripe = st.table_len;
	rc = ns_set_layout(&m->ns, ns_any(NS_ROOT_INO), &l);
	if (rc)
		log_warn(COMP, "cannot set the root layout (chunk size %u, stripe %u): %s",
			 l.chunk_size, l.stripe, strata_strerror(rc));
}

static void start_on_owner(void *arg)
{
	struct meta *m = arg;

	reactor_timer_arm(m->r, &m->poll_timer, 1);
	reactor_timer_arm(m->r, &m->gc_timer, m->gc_interval_ms);
	reconcile_start(m->rec);
}

static void stop_timers_on_owner(void *arg)
{
	struct meta *m = arg;

	m->stopping = true;
	meta_group_stop(&m->group);
	reconcile_stop(m->rec);
	reactor_timer_cancel(m->r, &m->poll_timer);
	reactor_timer_cancel(m->r, &m->gc_timer);
}

/* After the storage client is gone: no completion can arrive any more. */
static void release_on_owner(void *arg)
{
	struct meta *m = arg;

	while (m->active) {
		struct gc_batch *b = m->active;

		m->active = b->next;
		if (b->inflight)
			log_error(COMP, "gc batch freed with %u remove(s) in flight", b->inflight);
		if (b->req)
			batch_answer(m, b, -ESHUTDOWN);
		free(b);
	}
	m->bg = NULL;
	meta_group_stop(&m->group);
	reconcile_free(m->rec);
	m->rec = NULL;
	if (m->ns_ready)
		ns_release(&m->ns);
	meta_store_close(&m->store);
}

static void meta_free(struct meta *m)
{
	free(m->inl_buf);
	if (m->sc)
		sclient_free(m->sc);
	m->sc = NULL;
	reactor_call(m->r, release_on_owner, m);
	pthread_mutex_destroy(&m->qlock);
	free(m);
}

struct rec_new {
	struct meta *m;
	int rc;
};

static void rec_new_on_owner(void *arg)
{
	struct rec_new *a = arg;
	struct meta *m = a->m;
	struct reconcile_opts o;

	reconcile_opts_init(&o, sizeof(o));
	o.interval_ms = (uint64_t)m->cfg->reconcile_interval_ms;
	o.grace_ms = (uint64_t)m->cfg->reconcile_grace_ms;
	o.rate = (uint32_t)m->cfg->reconcile_rate;
	o.leases = m->key != NULL;
	a->rc = reconcile_new(m->r, &m->ns, m->sc, &o, &m->rec);
}

/* The orphan reconciler, made on reactor 0 (its owner). */
static int start_reconciler(struct meta *m)
{
	struct rec_new a = { m, 0 };

	if (!m->cfg->reconcile_interval_ms) {
		log_info(COMP, "orphan chunk reconciler off (meta.reconcile_interval = 0)");
		return 0;
	}
	reactor_call(m->r, rec_new_on_owner, &a);
	if (a.rc)
		log_error(COMP, "cannot start the orphan chunk reconciler: %s",
			  strata_strerror(a.rc));
	return a.rc;
}

static int meta_start(const struct service_env *env, void **out)
{
	struct meta *m = calloc(1, sizeof(*m));
	struct sclient_opts so;
	char path[CFG_STR_MAX + 16];
	int rc;

	if (!m)
		return -ENOMEM;
	m->env = *env;
	m->cfg = env->cfg;
	m->key = env->key;
	m->r = env->reactors[0];
	m->gc_interval_ms = (uint64_t)m->cfg->gc_interval_ms;
	pthread_mutex_init(&m->qlock, NULL);
	m->inl_buf = malloc(MD_INLINE_MAX);
	if (!m->inl_buf) {
		pthread_mutex_destroy(&m->qlock);
		free(m);
		return -ENOMEM;
	}
	reactor_timer_init(&m->poll_timer, on_poll_timer, m);
	reactor_timer_init(&m->gc_timer, on_gc_timer, m);
	for (uint32_t i = 0; i < GC_INFLIGHT; i++) {
		m->ios[i].next_free = m->free_ios;
		m->free_ios = &m->ios[i];
	}
	rc = meta_store_open_spec(m->cfg->store, m->cfg->store_passfile, env->data, &m->store,
				  path, sizeof(path));
	if (rc) {
		log_error(COMP, "cannot open the namespace database (meta.store): %s",
			  strata_strerror(rc));
		goto fail;
	}
	/* The store and ns are used on reactor 0 only from here on; this
	 * thread hands them over before any request or timer can run. */
	rc = ns_init(&m->ns, &m->store, 0);
	if (rc) {
		log_error(COMP, "cannot open the namespace in '%s': %s", path, strata_strerror(rc));
		goto fail;
	}
	m->ns_ready = true;
	/* PostgreSQL has no savepoints here (meta_store.h): one transaction
	 * per call, as before. */
	m->group_allowed = m->cfg->group_commit && m->store.ops->sp_mark;
	meta_group_init(&m->group, &m->ns, m->r, m->group_allowed);
	/* The reserve guards the SQLite file's disk; PostgreSQL's is its
	 * server's. */
	rc = meta_reserve_init(&m->res, env->data,
			       pg_conn_is_uri(m->cfg->store) ? 0 : m->cfg->reserve);
	if (rc)
		goto fail;
	follow_reserve(m);
	root_layout(m);
	sclient_opts_init(&so, sizeof(so));
	so.timeout_ms = env->rpc_timeout_ms;
	/* A removal gives up before a client's call to us times out. */
	so.retry_ms = so.timeout_ms;
	rc = sclient_new(m->r, env->mgmt_addr, &so, &m->sc);
	if (rc) {
		log_error(COMP, "cannot create the storage client (mgmt '%s'): %s",
			  env->mgmt_addr, strata_strerror(rc));
		goto fail;
	}
	rc = start_reconciler(m);
	if (rc)
		goto fail;
	rc = reactor_post(m->r, start_on_owner, m);
	if (rc)
		goto fail;
	/* Served from now on; announced once a chain table is known
	 * (on_poll_timer). */
	route_all(env->srv, m);
	log_info(COMP, "namespace '%s' open; chunk deletion every %llu ms", path,
		 (unsigned long long)m->gc_interval_ms);
	*out = m;
	return 0;
fail:
	reactor_call(m->r, stop_timers_on_owner, m);
	meta_free(m);
	return rc;
}

static void meta_stop(void *svc)
{
	struct meta *m = svc;

	/* Requests no longer arrive: the daemon closed its connections. The
	 * storage client fails what it still holds; the completions run on
	 * reactor 0 and start nothing new once stopping is set. */
	reactor_call(m->r, stop_timers_on_owner, m);
	announce_stop(m->ann);	/* the timers that start it have stopped */
	meta_free(m);
}

static void meta_status(void *svc, json_t *o)
{
	struct meta *m = svc;
	struct reconcile_stats rs;

	json_object_set_new(o, "inodes", json_integer((json_int_t)STAT_GET(&m->inodes)));
	json_object_set_new(o, "bytes", json_integer((json_int_t)STAT_GET(&m->bytes)));
	json_object_set_new(o, "table_len", json_integer(STAT_GET(&m->table_len_snap)));
	json_object_set_new(o, "chains_full", json_integer(STAT_GET(&m->nfull_snap)));
	json_object_set_new(o, "reserve_bytes", json_integer((json_int_t)m->res.bytes));
	json_object_set_new(o, "disk_tight", json_boolean(meta_reserve_tight(&m->res)));
	json_object_set_new(o, "gc_queue", json_integer((json_int_t)STAT_GET(&m->gc_queue)));
	json_object_set_new(o, "gc_chunks_removed",
			    json_integer((json_int_t)STAT_GET(&m->gc_chunks)));
	json_object_set_new(o, "gc_failures", json_integer((json_int_t)STAT_GET(&m->gc_failures)));
	reconcile_get_stats(m->rec, &rs);
	json_object_set_new(o, "reconcile_chunks", json_integer((json_int_t)rs.chunks));
	json_object_set_new(o, "reconcile_bytes", json_integer((json_int_t)rs.bytes));
	json_object_set_new(o, "reconcile_pending", json_integer((json_int_t)rs.pending));

	json_object_set_new(o, "gc_leader", json_boolean(STAT_GET(&m->gc_leader)));
}

/* One gauge with a series per quota root of the snapshot (qlock held). */
static void quota_series(struct meta *m, struct bbuf *out, const char *name, const char *help,
			 size_t field)
{
	metrics_head(out, name, "gauge", help);
	for (uint32_t i = 0; i < m->qsnap_n; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&m->qsnap[i] + field, sizeof(v));
		metrics_series(out, name, "path", m->qpath[i], (double)v);
	}
}

static void quota_metrics(struct meta *m, struct bbuf *out)
{
	pthread_mutex_lock(&m->qlock);
	metrics_put(out, "strata_meta_quota_roots", "gauge", "directories with a quota",
		    (double)m->qroots);
	quota_series(m, out, "strata_meta_quota_bytes_used", "bytes under a quota root (32 roots)",
		     offsetof(struct meta_quota, bytes));
	quota_series(m, out, "strata_meta_quota_bytes_limit", "byte limit of a quota root (0: none)",
		     offsetof(struct meta_quota, max_bytes));
	quota_series(m, out, "strata_meta_quota_inodes_used", "inodes under a quota root",
		     offsetof(struct meta_quota, inodes));
	quota_series(m, out, "strata_meta_quota_inodes_limit",
		     "inode limit of a quota root (0: none)", offsetof(struct meta_quota, max_inodes));
	pthread_mutex_unlock(&m->qlock);
}

static void reconcile_metrics(struct meta *m, struct bbuf *out)
{
	struct reconcile_stats rs;

	reconcile_get_stats(m->rec, &rs);
	metrics_put(out, "strata_meta_reconcile_passes_total", "counter",
		    "orphan reconciler passes over every chain", (double)rs.passes);
	metrics_put(out, "strata_meta_reconcile_chunks_total", "counter",
		    "orphaned chunks queued for removal", (double)rs.chunks);
	metrics_put(out, "strata_meta_reconcile_bytes_total", "counter",
		    "bytes of the orphaned chunks queued for removal", (double)rs.bytes);
	metrics_put(out, "strata_meta_reconcile_pending", "gauge",
		    "orphaned chunks waiting out meta.reconcile_grace", (double)rs.pending);
	metrics_put(out, "strata_meta_reconcile_foreign", "gauge",
		    "chunks of inodes this namespace never had (kept; last pass)",
		    (double)rs.foreign);
	metrics_put(out, "strata_meta_reconcile_errors_total", "counter",
		    "reconciler listings or namespace reads that failed", (double)rs.errors);
	metrics_put(out, "strata_meta_reconcile_standby", "gauge",
		    "1: another meta server of this database runs the reconciler",
		    (double)rs.standby);
}

static void meta_metrics(void *svc, struct bbuf *out)
{
	struct meta *m = svc;
	char name[64];

	for (uint32_t i = 0; i < meta_NOPS; i++) {
		/* META_SET_SIZE -> strata_meta_set_size_total */
		const char *op = meta_ops[i].name + strlen("META_");
		char lower[32];
		size_t k;

		for (k = 0; op[k] && k < sizeof(lower) - 1; k++)
			lower[k] = (char)tolower((unsigned char)op[k]);
		lower[k] = '\0';
		snprintf(name, sizeof(name), "strata_meta_%s_total", lower);
		metrics_put(out, name, "counter", "meta requests of this kind",
			    (double)STAT_GET(&m->ops[meta_ops[i].op - OP_META_FIRST]));
	}
	metrics_put(out, "strata_meta_errors_total", "counter", "meta requests that failed",
		    (double)STAT_GET(&m->op_errors));
	metrics_put(out, "strata_meta_inodes", "gauge", "inodes in the namespace",
		    (double)STAT_GET(&m->inodes));
	metrics_put(out, "strata_meta_bytes", "gauge", "bytes of regular files",
		    (double)STAT_GET(&m->bytes));
	metrics_put(out, "strata_meta_disk_tight", "gauge",
		    "1 while the metadata disk is full: the reserve (meta.reserve) is given back, "
		    "creates are refused and deletes go on", meta_reserve_tight(&m->res));
	metrics_put(out, "strata_meta_reserve_releases_total", "counter",
		    "times the reserve was given back",
		    (double)__atomic_load_n(&m->res.releases, __ATOMIC_RELAXED));
	metrics_put(out, "strata_meta_chains_full", "gauge",
		    "chains with a target held full: new files are placed on the others",
		    (double)STAT_GET(&m->nfull_snap));
	metrics_put(out, "strata_meta_gc_queue", "gauge", "queued gc items (counted up to 256)",
		    (double)STAT_GET(&m->gc_queue));
	metrics_put(out, "strata_meta_gc_chunks_total", "counter", "chunks removed by gc",
		    (double)STAT_GET(&m->gc_chunks));
	metrics_put(out, "strata_meta_gc_items_total", "counter", "gc items completed",
		    (double)STAT_GET(&m->gc_items));
	metrics_put(out, "strata_meta_gc_failures_total", "counter", "gc items that failed",
		    (double)STAT_GET(&m->gc_failures));
	metrics_put(out, "strata_meta_groups_total", "counter",
		    "group commits: transactions that held requests (meta.group_commit)",
		    (double)STAT_GET(&m->group.groups));
	metrics_put(out, "strata_meta_group_requests_total", "counter",
		    "requests answered after a group commit", (double)STAT_GET(&m->group.reqs));
	metrics_put(out, "strata_meta_group_failures_total", "counter",
		    "group commits that failed (each request answered with the error)",
		    (double)STAT_GET(&m->group.failures));
	metrics_put(out, "strata_meta_group_reruns_total", "counter",
		    "requests made again, alone, after their group lost a serialization race",
		    (double)STAT_GET(&m->group.reruns));
	metrics_put(out, "strata_meta_group_pauses_total", "counter",
		    "times grouping paused after a lost serialization race (requests ran alone)",
		    (double)STAT_GET(&m->group.pauses));
	reconcile_metrics(m, out);

	metrics_put(out, "strata_meta_inline_refused_total", "counter",
		    "opens of inline files refused to clients without inline support",
		    (double)STAT_GET(&m->inl_refused));
	metrics_put(out, "strata_meta_request_replays_total", "counter",
		    "requests answered from the recorded outcome of their id (a retry)",
		    (double)STAT_GET(&m->ns.replays));
	metrics_put(out, "strata_meta_gc_leader", "gauge",
		    "1 if this meta server runs the background gc of its database",
		    STAT_GET(&m->gc_leader) ? 1.0 : 0.0);
	quota_metrics(m, out);
}

#define K(name, type, field, def, min, max, help) \
	CFG_KEY(struct meta_cfg, "meta", name, type, field, def, min, max, help)
static const struct cfg_key meta_keys[] = {
	K("chunk_size", CFG_SIZE, chunk_size, "4M", 65536, 67108864,
	  "default chunk size of the root directory"),
	K("stripe", CFG_INT, stripe, "16", 1, 256, "default stripe width"),
	K("gc_interval", CFG_MS, gc_interval_ms, "1s", 10, 3600000,
	  "chunk garbage collection interval"),
	K("reconcile_interval", CFG_MS, reconcile_interval_ms, "60s", 0, 86400000,
	  "orphan chunk reconciler: pause between passes over the chains (0: off)"),
	K("reconcile_grace", CFG_MS, reconcile_grace_ms, "15m", 0, 604800000,
	  "orphan chunk reconciler: how long a chunk stays orphaned before it is removed"),
	K("reconcile_rate", CFG_INT, reconcile_rate, "100", 1, 100000,
	  "orphan chunk reconciler: chunks queued for removal per second at most"),
	K("store", CFG_STR, store, "", 0, 0,
	  "namespace database: empty: SQLite (meta.db in the data directory);"
	  " postgresql://...: PostgreSQL"),
	K("store_passfile", CFG_STR, store_passfile, "", 0, 0,
	  "PostgreSQL password file (mode 0600); empty: libpq's default"),
	K("reserve", CFG_SIZE, reserve, "64M", 0, 0,
	  "SQLite: space kept on the database's disk for deletes once it is full (0: none)"),
	K("group_commit", CFG_BOOL, group_commit, "true", 0, 0,
	  "the requests of one turn of the event loop share one transaction, each"
	  " answered after it commits (SQLite and PostgreSQL)"),
	K("inline_max", CFG_SIZE, inline_max, "16K", 0, 65536,
	  "bytes a small file may keep inline in the namespace store, in place of a chunk"
	  " (written at close in one meta call, read with the open; 0: off, at most 64K)"),
	K("request_ttl", CFG_MS, request_ttl_ms, "2m", 1000, 86400000,
	  "how long a request id's outcome is kept for a retry of its call; keep it above"
	  " the clients' retry budget (libstrata: retry_ms plus timeout_ms, 40 s by default)"),
};
#undef K
static const struct cfg_schema meta_schema = CFG_SCHEMA(meta_keys);

/* meta.store names a backend this build has; a password file is private. */
static int meta_check(const void *cfg, char *err, size_t errlen)
{
	const struct meta_cfg *c = cfg;

	if (pg_conn_check_store_keys("meta", c->store, c->store_passfile, NULL,
				     "leave it empty for the embedded SQLite database, or give a"
				     " postgresql:// URI", "", err, errlen))
		return STRATA_ECONFIG;
	if (c->reconcile_interval_ms && c->reconcile_grace_ms < c->reconcile_interval_ms) {
		snprintf(err, errlen, "key 'meta.reconcile_grace' (%lld ms) is below"
			 " 'meta.reconcile_interval' (%lld ms): an orphan must be seen by two passes"
			 " before it is removed; raise the grace or lower the interval",
			 (long long)c->reconcile_grace_ms, (long long)c->reconcile_interval_ms);
		return STRATA_ECONFIG;
	}
	return 0;
}

const struct service_def meta_service = {
	.name = "meta",
	.schema = &meta_schema,
	.cfg_size = sizeof(struct meta_cfg),
	.check = meta_check,
	.start = meta_start,
	.stop = meta_stop,
	.status = meta_status,
	.metrics = meta_metrics,
};
