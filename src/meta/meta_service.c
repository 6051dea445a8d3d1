/*
 * The meta service: namespace RPCs (meta_proto.h) over ns.h, and the GC
 * worker that deletes queued chunks through the storage client.
 *
 * Everything below runs on reactor 0's thread (m->r): the handlers, the
 * timers and the storage client's completions. Only status() and
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
 *    writing: see meta_proto.h). The request is answered when the
 *    file has no queued item left, or with the first removal error.
 * Both may pick the same item; removing a chunk twice is harmless.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/storage_client.h"
#include "common/layout.h"
#include "common/log.h"
#include "meta/meta_proto.h"
#include "meta/meta_service.h"
#include "meta/ns.h"
#include "net/codec.h"
#include "stratad/metrics.h"
#include "strata/errors.h"

#define COMP "meta"
#define GC_BATCH 16u
#define GC_INFLIGHT 64u
#define TABLE_POLL_MS 500u
#define GC_QUEUE_SCAN 256u	/* the gc_queue gauge counts up to this */
#define NOPS (OP_META_END - OP_META_FIRST)

struct meta;

struct gc_batch {
	struct meta *m;
	struct gc_batch *next;		/* in m->active */
	uint64_t ino;			/* drain: that file; 0: background */
	struct svc_req *req;		/* drain: answered when done */
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

struct meta {
	struct daemon *d;
	struct reactor *r;
	struct meta_store store;
	struct ns ns;
	bool ns_ready;
	struct sclient *sc;
	uint32_t table_len;		/* last one given to ns_set_table_len */
	uint64_t gc_interval_ms;
	struct reactor_timer poll_timer, gc_timer;
	bool stopping;
	struct sc_io probe;		/* nudges the storage client to a map */
	bool probing;

	struct gc_io ios[GC_INFLIGHT];
	struct gc_io *free_ios;
	struct gc_batch *active;	/* batches with work left */
	struct gc_batch *bg;		/* the background batch, if running */
	bool pumping, repump;
	struct meta_gc_item scan[GC_QUEUE_SCAN];

	/* Read by other threads (relaxed atomics). */
	uint64_t ops[NOPS], op_errors;
	uint64_t gc_chunks, gc_items, gc_failures;
	uint64_t inodes, bytes, gc_queue;
	uint32_t table_len_snap;
};

#define STAT_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define STAT_SET(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define STAT_GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)

static const char *const op_names[NOPS] = {
	"lookup", "getattr", "create", "open", "mkdir", "symlink", "readlink", "unlink",
	"rmdir", "rename", "setattr", "set_size", "truncate", "readdir", "set_layout",
	"get_layout", "statfs", "resolve",
};

/* Answers req: a failed operation carries an empty body. */
static void finish_req(struct meta *m, struct svc_req *req, int status)
{
	uint16_t op = req->hdr.opcode;

	if (op >= OP_META_FIRST && op < OP_META_END)
		STAT_ADD(&m->ops[op - OP_META_FIRST], 1);
	if (status) {
		STAT_ADD(&m->op_errors, 1);
		req->reply.len = 0;
	}
	svc_reply(req, status);
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
	int n = ns_gc_next(&m->ns, b->ino, b->items, GC_BATCH);

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
		finish_req(m, b->req, b->err ? STRATA_EUNAVAIL : 0);
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

static void on_gc_timer(void *arg)
{
	struct meta *m = arg;
	struct gc_batch *b;
	int n;

	if (m->stopping || m->bg)
		return;
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
 * Answers req with status once file ino has no queued GC item left (see
 * meta_proto.h). A failed operation is answered at once.
 */
static void reply_after_drain(struct meta *m, struct svc_req *req, uint64_t ino, int status)
{
	struct gc_batch *b;
	int n;

	if (status || m->stopping) {
		finish_req(m, req, status ? status : -ESHUTDOWN);
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		finish_req(m, req, -ENOMEM);
		return;
	}
	b->m = m;
	b->ino = ino;
	n = batch_load(m, b);
	if (n <= 0) {
		free(b);
		finish_req(m, req, n);
		return;
	}
	b->req = req;
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
	if (tl && tl != m->table_len) {
		rc = ns_set_table_len(&m->ns, tl);
		if (rc) {
			log_warn(COMP, "cannot record chain table length %u: %s", tl,
				 strata_strerror(rc));
		} else {
			log_info(COMP, "chain table length %u -> %u", m->table_len, tl);
			m->table_len = tl;
		}
	}
	if (ns_statfs(&m->ns, &st) == 0) {
		STAT_SET(&m->inodes, st.inodes);
		STAT_SET(&m->bytes, st.bytes);
		STAT_SET(&m->table_len_snap, st.table_len);
	}
	n = ns_gc_next(&m->ns, 0, m->scan, GC_QUEUE_SCAN);
	if (n >= 0)
		STAT_SET(&m->gc_queue, (uint64_t)n);
	reactor_timer_arm(m->r, &m->poll_timer, TABLE_POLL_MS);
}

/* ---- handlers ---- */

static void reply_inode(struct meta *m, struct svc_req *req, int rc, const struct meta_inode *in)
{
	struct wbuf w;

	if (!rc) {
		wbuf_init(&w, &req->reply);
		mp_inode_encode(&w, in);
		rc = w.err;
	}
	finish_req(m, req, rc);
}

static int encode_attr_rep(struct svc_req *req, struct mp_attr_rep *rep)
{
	struct wbuf w;

	if (!rep->trunc.layout.chunk_size)
		rep->trunc.layout = rep->inode.layout;
	wbuf_init(&w, &req->reply);
	mp_attr_rep_encode(&w, rep);
	return w.err;
}

static void op_lookup(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_name_req rq;
	struct meta_inode in;
	int rc = mp_name_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_lookup(&m->ns, ns_any(rq.parent), rq.name, &in);
	reply_inode(m, req, rc, &in);
}

static void op_getattr(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_ino_req rq;
	struct meta_inode in;
	int rc = mp_ino_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_getattr(&m->ns, ns_any(rq.ino), &in);
	reply_inode(m, req, rc, &in);
}

static void op_create(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_create_req rq;
	struct mp_attr_rep rep;
	int rc = mp_create_req_decode(req->body, req->hdr.body_len, &rq);

	memset(&rep, 0, sizeof(rep));
	if (!rc)
		rc = ns_create(&m->ns, ns_any(rq.parent), rq.name, rq.mode, rq.uid, rq.gid,
			       rq.flags & MP_CREATE_EXCL, &rep.inode);
	if (rc < 0) {
		finish_req(m, req, rc);
		return;
	}
	rep.created = rc == 1;
	rc = 0;
	/* Not atomic with the lookup above: a file replaced in between is
	 * truncated under its new identity, as O_TRUNC on a path would. */
	if (!rep.created && (rq.flags & MP_CREATE_TRUNC))
		rc = ns_open(&m->ns, ns_any(rep.inode.ino), O_WRONLY | O_TRUNC, &rep.inode, &rep.trunc);
	if (!rc)
		rc = encode_attr_rep(req, &rep);
	if (rep.created)
		finish_req(m, req, rc);
	else
		reply_after_drain(m, req, rep.inode.ino, rc);
}

static void op_open(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_open_req rq;
	struct mp_attr_rep rep;
	int rc = mp_open_req_decode(req->body, req->hdr.body_len, &rq);

	memset(&rep, 0, sizeof(rep));
	if (!rc)
		rc = ns_open(&m->ns, ns_any(rq.ino), mp_open_flags_from_wire(rq.flags), &rep.inode,
			     &rep.trunc);
	if (!rc)
		rc = encode_attr_rep(req, &rep);
	if (!rc && (rq.flags & MP_O_ACCMODE) != MP_O_RDONLY && S_ISREG(rep.inode.mode))
		reply_after_drain(m, req, rep.inode.ino, rc);
	else
		finish_req(m, req, rc);
}

static void op_mkdir(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_create_req rq;
	struct meta_inode in;
	int rc = mp_create_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc && rq.flags)
		rc = -EINVAL;
	if (!rc)
		rc = ns_mkdir(&m->ns, ns_any(rq.parent), rq.name, rq.mode, rq.uid, rq.gid, &in);
	reply_inode(m, req, rc, &in);
}

static void op_symlink(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_symlink_req rq;
	struct meta_inode in;
	int rc = mp_symlink_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_symlink(&m->ns, ns_any(rq.parent), rq.name, rq.target, rq.uid, rq.gid, &in);
	reply_inode(m, req, rc, &in);
}

static void op_readlink(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_ino_req rq;
	char target[MP_TARGET_MAX + 1];
	struct wbuf w;
	int rc = mp_ino_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_readlink(&m->ns, ns_any(rq.ino), target, sizeof(target));
	if (rc >= (int)sizeof(target))
		rc = -ENAMETOOLONG;	/* ns keeps targets below NS_PATH_MAX */
	if (rc >= 0) {
		wbuf_init(&w, &req->reply);
		mp_readlink_rep_encode(&w, target, (uint32_t)rc);
		rc = w.err;
	}
	finish_req(m, req, rc);
}

/* UNLINK and RMDIR. */
static void op_remove(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_name_req rq;
	int rc = mp_name_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc && req->hdr.opcode == OP_META_RMDIR)
		rc = ns_rmdir(&m->ns, ns_any(rq.parent), rq.name);
	else if (!rc)
		rc = ns_unlink(&m->ns, ns_any(rq.parent), rq.name);
	finish_req(m, req, rc);
}

static void op_rename(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_rename_req rq;
	int rc = mp_rename_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_rename(&m->ns, ns_any(rq.src_parent), rq.src_name, ns_any(rq.dst_parent), rq.dst_name,
			       rq.flags);
	finish_req(m, req, rc);
}

static void op_setattr(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_setattr_req rq;
	struct mp_attr_rep rep;
	int rc = mp_setattr_req_decode(req->body, req->hdr.body_len, &rq);

	memset(&rep, 0, sizeof(rep));
	if (!rc && (rq.mask & NS_ATTR_SIZE) && rq.attrs.size > INT64_MAX)
		rc = -EFBIG;
	if (!rc)
		rc = ns_setattr(&m->ns, ns_any(rq.ino), rq.mask, &rq.attrs, &rep.inode, &rep.trunc);
	if (!rc)
		rc = encode_attr_rep(req, &rep);
	if (!rc && (rq.mask & NS_ATTR_SIZE))
		reply_after_drain(m, req, rq.ino, rc);
	else
		finish_req(m, req, rc);
}

static void op_set_size(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_set_size_req rq;
	struct meta_inode in;
	int rc = mp_set_size_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc && rq.size > INT64_MAX)
		rc = -EFBIG;
	if (!rc)
		rc = ns_set_size(&m->ns, ns_any(rq.ino), rq.size, rq.mtime_ns, &in);
	reply_inode(m, req, rc, &in);
}

static void op_truncate(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_truncate_req rq;
	struct mp_attr_rep rep;
	struct meta_inode at;
	int rc = mp_truncate_req_decode(req->body, req->hdr.body_len, &rq);

	memset(&rep, 0, sizeof(rep));
	memset(&at, 0, sizeof(at));
	if (!rc && rq.size > INT64_MAX)
		rc = -EFBIG;
	at.size = rq.size;
	/* setattr(SIZE) is ns_truncate that also returns the inode. */
	if (!rc)
		rc = ns_setattr(&m->ns, ns_any(rq.ino), NS_ATTR_SIZE, &at, &rep.inode, &rep.trunc);
	if (!rc)
		rc = encode_attr_rep(req, &rep);
	if (!rc)
		reply_after_drain(m, req, rq.ino, rc);
	else
		finish_req(m, req, rc);
}

struct readdir_ctx {
	struct wbuf w;
	uint32_t n;
	char last[MP_NAME_MAX + 1];
};

static int readdir_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct readdir_ctx *c = arg;
	size_t len = strlen(name);

	if (len > MP_NAME_MAX)
		return 1;
	mp_dirent_encode(&c->w, name, ino, type);
	if (c->w.err)
		return 1;
	memcpy(c->last, name, len + 1);
	c->n++;
	return 0;
}

static void op_readdir(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_readdir_req rq;
	struct readdir_ctx c;
	struct bbuf ents;
	struct wbuf w;
	int rc = mp_readdir_req_decode(req->body, req->hdr.body_len, &rq);

	bbuf_init(&ents);
	memset(&c, 0, sizeof(c));
	wbuf_init(&c.w, &ents);
	if (!rc)
		rc = ns_readdir(&m->ns, ns_any(rq.dir), rq.cookie, rq.max, readdir_cb, &c);
	if (rc >= 0 && c.w.err)
		rc = c.w.err;
	if (rc >= 0) {
		wbuf_init(&w, &req->reply);
		mp_readdir_rep_encode(&w, c.n, ents.buf, ents.len, c.n ? c.last : rq.cookie,
				      (uint32_t)rc < rq.max);
		rc = w.err;
	}
	bbuf_release(&ents);
	finish_req(m, req, rc);
}

static void op_set_layout(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_set_layout_req rq;
	int rc = mp_set_layout_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_set_layout(&m->ns, ns_any(rq.dir), &rq.layout);
	finish_req(m, req, rc);
}

static void op_get_layout(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_ino_req rq;
	struct meta_inode in;
	struct wbuf w;
	int rc = mp_ino_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_getattr(&m->ns, ns_any(rq.ino), &in);
	if (!rc) {
		wbuf_init(&w, &req->reply);
		mp_layout_encode(&w, &in.layout);
		rc = w.err;
	}
	finish_req(m, req, rc);
}

static void op_statfs(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct ns_statfs st;
	struct mp_statfs_rep rep;
	struct wbuf w;
	int rc = mp_empty_decode(req->body, req->hdr.body_len);

	if (!rc)
		rc = ns_statfs(&m->ns, &st);
	if (!rc) {
		rep.inodes = st.inodes;
		rep.bytes = st.bytes;
		rep.table_len = st.table_len;
		wbuf_init(&w, &req->reply);
		mp_statfs_rep_encode(&w, &rep);
		rc = w.err;
	}
	finish_req(m, req, rc);
}

static void op_resolve(void *svc, struct svc_req *req)
{
	struct meta *m = svc;
	struct mp_resolve_req rq;
	struct meta_inode in;
	int rc = mp_resolve_req_decode(req->body, req->hdr.body_len, &rq);

	if (!rc)
		rc = ns_resolve(&m->ns, rq.path, rq.flags, &in);
	reply_inode(m, req, rc, &in);
}

/* In enum meta_op order. */
static const svc_handler_fn handlers[NOPS] = {
	op_lookup, op_getattr, op_create, op_open, op_mkdir, op_symlink, op_readlink,
	op_remove, op_remove, op_rename, op_setattr, op_set_size, op_truncate, op_readdir,
	op_set_layout, op_get_layout, op_statfs, op_resolve,
};
_Static_assert(NOPS == 18, "a meta op without a handler");

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
	l.chunk_size = (uint32_t)m->d->cfg.chunk_size;
	if (m->d->cfg.stripe != NS_STRIPE_DEFAULT_MAX)
		l.stripe = (uint32_t)m->d->cfg.stripe;
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
}

static void stop_timers_on_owner(void *arg)
{
	struct meta *m = arg;

	m->stopping = true;
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
			finish_req(m, b->req, -ESHUTDOWN);
		free(b);
	}
	m->bg = NULL;
	if (m->ns_ready)
		ns_release(&m->ns);
	meta_store_close(&m->store);
}

static void meta_free(struct meta *m)
{
	if (m->sc)
		sclient_free(m->sc);
	m->sc = NULL;
	reactor_call(m->r, release_on_owner, m);
	free(m);
}

static int meta_start(struct daemon *d, void **out)
{
	struct meta *m = calloc(1, sizeof(*m));
	struct sclient_opts so;
	char path[CFG_STR_MAX + 16];
	int rc;

	if (!m)
		return -ENOMEM;
	m->d = d;
	m->r = d->reactors[0];
	m->gc_interval_ms = (uint64_t)d->cfg.gc_interval_ms;
	reactor_timer_init(&m->poll_timer, on_poll_timer, m);
	reactor_timer_init(&m->gc_timer, on_gc_timer, m);
	for (uint32_t i = 0; i < GC_INFLIGHT; i++) {
		m->ios[i].next_free = m->free_ios;
		m->free_ios = &m->ios[i];
	}
	snprintf(path, sizeof(path), "%s/meta.db", d->cfg.data);
	rc = meta_store_sqlite_open(path, NULL, &m->store);
	if (rc) {
		log_error(COMP, "cannot open the namespace database '%s': %s", path,
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
	root_layout(m);
	sclient_opts_init(&so, sizeof(so));
	so.timeout_ms = (uint32_t)d->cfg.rpc_timeout_ms;
	/* A removal gives up before a client's call to us times out. */
	so.retry_ms = so.timeout_ms;
	rc = sclient_new(m->r, d->cfg.mgmt_addr, &so, &m->sc);
	if (rc) {
		log_error(COMP, "cannot create the storage client (mgmt '%s'): %s",
			  d->cfg.mgmt_addr, strata_strerror(rc));
		goto fail;
	}
	rc = reactor_post(m->r, start_on_owner, m);
	if (rc)
		goto fail;
	for (uint32_t i = 0; i < NOPS; i++)
		rpc_server_route(d->srv, (uint16_t)(OP_META_FIRST + i), m->r, handlers[i], m);
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
	meta_free(m);
}

static void meta_status(void *svc, json_t *o)
{
	struct meta *m = svc;

	json_object_set_new(o, "inodes", json_integer((json_int_t)STAT_GET(&m->inodes)));
	json_object_set_new(o, "bytes", json_integer((json_int_t)STAT_GET(&m->bytes)));
	json_object_set_new(o, "table_len", json_integer(STAT_GET(&m->table_len_snap)));
	json_object_set_new(o, "gc_queue", json_integer((json_int_t)STAT_GET(&m->gc_queue)));
	json_object_set_new(o, "gc_chunks_removed",
			    json_integer((json_int_t)STAT_GET(&m->gc_chunks)));
	json_object_set_new(o, "gc_failures", json_integer((json_int_t)STAT_GET(&m->gc_failures)));
}

static void meta_metrics(void *svc, struct bbuf *out)
{
	struct meta *m = svc;
	char name[64];

	for (uint32_t i = 0; i < NOPS; i++) {
		snprintf(name, sizeof(name), "strata_meta_%s_total", op_names[i]);
		metrics_put(out, name, "counter", "meta requests of this kind",
			    (double)STAT_GET(&m->ops[i]));
	}
	metrics_put(out, "strata_meta_errors_total", "counter", "meta requests that failed",
		    (double)STAT_GET(&m->op_errors));
	metrics_put(out, "strata_meta_inodes", "gauge", "inodes in the namespace",
		    (double)STAT_GET(&m->inodes));
	metrics_put(out, "strata_meta_bytes", "gauge", "bytes of regular files",
		    (double)STAT_GET(&m->bytes));
	metrics_put(out, "strata_meta_gc_queue", "gauge", "queued gc items (counted up to 256)",
		    (double)STAT_GET(&m->gc_queue));
	metrics_put(out, "strata_meta_gc_chunks_total", "counter", "chunks removed by gc",
		    (double)STAT_GET(&m->gc_chunks));
	metrics_put(out, "strata_meta_gc_items_total", "counter", "gc items completed",
		    (double)STAT_GET(&m->gc_items));
	metrics_put(out, "strata_meta_gc_failures_total", "counter", "gc items that failed",
		    (double)STAT_GET(&m->gc_failures));
}

const struct service_def meta_service = {
	.name = "meta",
	.start = meta_start,
	.stop = meta_stop,
	.status = meta_status,
	.metrics = meta_metrics,
};
