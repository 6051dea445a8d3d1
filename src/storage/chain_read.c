/*
 * The read path at one replica of a chain: OP_CHUNK_READ, OP_CHUNK_VERIFY
 * and OP_CHUNK_BATCH_READ, with the rules that decide which replica may
 * serve a chunk, and the two queries that read a target's state as it is
 * (OP_CHUNK_STAT, OP_TARGET_SPACE). Every handler runs on the reactor that
 * owns the target (storage_service.c hands the request over).
 *
 * A client reads a serving replica, within this node's lease
 * (storage_map.c), that does not hold the chain back (recover.c). A
 * replica with an update of a chunk in flight is "dirty" for that chunk
 * and refuses to serve reads of it (STRATA_EDIRTY: read the tail), so no
 * reader ever sees an uncommitted version (CRAQ); so does one that applied
 * an update it could not pass on (cstate.dirty), and one that knows it
 * lacks the chunk (needsync, resync.c). A repair
 * (SP_READ_REPAIR) or a survey (SP_READ_SURVEY) of a member of the chain
 * reads past those rules: an uncommitted copy is still a state the chain
 * went through (proto/storage.h); so does a recovery (SP_READ_RECOVER),
 * which reads any stored copy.
 *
 * A client token's request carries the chunk capability meta gave it for
 * the file (cap_allow): CAP_READ covers every read, stat and verify here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "storage_int.h"
#include "common/errors_int.h"
#include "strata/errors.h"

/* ---- reads ---- */

struct read_op {
	struct target *t;
	struct svc_req *req;
	struct chunk_id id;
	uint32_t chain;
	void *buf;
	bool verify;			/* OP_CHUNK_VERIFY: the status alone */
	uint8_t *shm_dst;		/* OP_CHUNK_READ_SHM: where the bytes go */
	struct sp_shm shm;		/* ... in this region (a reference held) */
};

static void read_buf_free(void *arg)
{
	abuf_free(arg);
}

static void read_hold_free(void *arg)
{
	chunk_hold_put(arg);
}

/*
 * What a read of chunk id at t found, as the reader is told: a chunk t
 * does not hold is a hole, version 0 (*info NULL, no bytes), the chunk's
 * state before its first write and after a removal (tombstones live in
 * memory only, so their version is not something a reader could rely
 * on); a damaged copy is counted, reported to mgmt and marked for a
 * repair from chain. Returns the status to answer with.
 */
static int read_outcome(struct target *t, const struct chunk_id *id, uint32_t chain, int status,
			const struct chunk_info **info, uint32_t *nread, uint32_t *crc)
{
	if (status == -ENOENT) {
		*info = NULL;
		*nread = 0;
		*crc = 0;
		return 0;
	}
	if (status == STRATA_EINTEGRITY) {
		CNT(t->st, n_integrity, 1);
		report_to_mgmt(t->st, t->id, id, status);
		resync_mark(t, id, chain);
	}
	return status;
}

static void on_read_done(void *arg, int status, const struct chunk_info *info,
			 const uint8_t *data, uint32_t nread, uint32_t crc, struct chunk_hold *hold)
{
	struct read_op *op = arg;
	struct sp_read_rep rep = { 0 };

	status = read_outcome(op->t, &op->id, op->chain, status, &info, &nread, &crc);
	if (!status) {
		rep.version = info ? info->version : 0;
		rep.nread = nread;
		rep.crc = crc;
		rep.length = info ? info->length : 0;
		CNT(op->t->st, n_reads, 1);
		CNT(op->t->st, bytes_read, nread);
		if (hold)
			CNT(op->t->st, n_mapped, 1);
	}
	if (op->shm_dst) {
		/* Copied before the answer: the reader reads the region
		 * once it has it. The reader's CRC check covers the copy. */
		if (!status) {
			memcpy(op->shm_dst, data, nread);
			CNT(op->t->st, n_shm_reads, 1);
		}
		shm_put(op->t->st, &op->shm);
	}
	if (status || op->verify || op->shm_dst) {
		/* A verify answers with the status alone, a shared-memory
		 * read without bulk. */
		abuf_free(op->buf);
		chunk_hold_put(hold);
		st_read_reply(op->req, status, &rep);
		free(op);
		return;
	}
	if (hold) {
		/* Sent straight from the page cache. */
		abuf_free(op->buf);
		st_read_reply_bulk(op->req, 0, &rep, data, nread, read_hold_free, hold);
	} else {
		st_read_reply_bulk(op->req, 0, &rep, op->buf, nread, read_buf_free, op->buf);
	}
	free(op);
}

/* Common checks of a read of one chunk at target t. A verify checks the
 * stored copy whatever the replica's state, but the ref must still name
 * this target's chain at our map's version (a damaged copy is marked for
 * a repair from that chain), and a chunk already marked is being
 * repaired: answered at once. A repair read (SP_READ_REPAIR) may take a
 * copy that is not committed yet; a recovery (SP_READ_RECOVER) any stored
 * copy, of a member or of a target taken out of the chain. */
static int read_check(struct storage *st, struct target *t, const struct sp_ref *ref,
		      bool verify, uint32_t flags)
{
	struct map_snap *snap = map_get(st);
	const struct cm_chain *chain;
	struct chunk_id id = { ref->ino, ref->idx };
	struct cstate *c;
	bool repair = flags & (SP_READ_REPAIR | SP_READ_SURVEY | SP_READ_RECOVER);
	bool survey = flags & SP_READ_SURVEY;
	bool recover = flags & SP_READ_RECOVER;
	/* A recovery reads members taken out too (pos -1: none of the
	 * checks below apply to it). */
	int pos, rc = recover && !verify ? check_ref_or_out(st, snap, ref, &chain, &pos) :
				 check_ref(st, snap, ref, &chain, &pos);

	/* A repair asks a syncing member too: its copy may be the newest. */
	if (!rc && !verify && !repair && chain->states[pos] != TARGET_SERVING)
		rc = STRATA_ESYNCING;
	/* Our lease ran out: mgmt may be moving the chain on without us. */
	if (!rc && !verify && !repair && !storage_lease_valid(st)) {
		CNT(st, n_stale, 1);
		rc = STRATA_ESTALE_MAP;
	}
	/* A chain this replica holds back (recover.c) serves no client and no
	 * repair: its copies may lack what the other members hold. Its stored
	 * copy still answers a survey or a recovery, which take the newest. */
	if (!rc && !verify && !survey && !recover && chain_held(t, &snap->map, chain, pos))
		rc = STRATA_ESYNCING;
	c = rc ? NULL : cstate_find(t, &id, false);
	/* A chunk this replica knows it lacks is served by the others. Its
	 * copy, if intact, still answers a survey: it is a state the chunk
	 * went through and may be the newest (a syncing member's may be newer
	 * than any serving member's). A bad one says so: it has nothing to
	 * offer (resync.c, on_probed). A recovery (recover.c) reads any
	 * stored copy but a damaged one. */
	if (c && c->needsync && c->lost && !repair)
		rc = STRATA_ELOST;	/* no member holds an intact copy */
	else if (c && c->needsync && c->damaged && (flags & SP_READ_REPAIR) && !survey && !recover)
		rc = STRATA_EINTEGRITY;	/* a repair learns we have nothing */
	else if (c && c->needsync && !survey && !recover)
		rc = STRATA_ESYNCING;
	else if (c && c->needsync && c->damaged)
		rc = STRATA_EINTEGRITY;
	/* CRAQ: a replica other than the committed tail (the last serving
	 * member) does not serve a chunk with an update in flight; and none
	 * serves one it applied but could not pass on: the member below that
	 * lacks it may be made serving meanwhile (a resync catching up). */
	if (!rc && !verify && !repair && c &&
	    ((c->inflight && pos != cm_serving_tail(chain)) || c->dirty)) {
		CNT(st, n_dirty, 1);
		rc = STRATA_EDIRTY;
	}
	map_put(st, snap);
	return rc;
}

static void on_verify_done(void *arg, int status, const struct chunk_info *info, uint32_t nread,
			   uint32_t crc)
{
	struct read_op *op = arg;

	on_read_done(op, status, info, op->buf, nread, crc, NULL);
}

/*
 * OP_CHUNK_READ, and OP_CHUNK_VERIFY: a reader found that bytes this
 * target sent fail the CRC they came with. Whole blocks in the page cache
 * go out unverified (chunk_read_ref), so the reader's check is the one
 * that finds a damaged copy; the verify reads the range again through the
 * verifying path, which reports the damage to mgmt and marks the chunk
 * for resync as a failed read does. It answers with the status alone.
 */
/* Starts read rd at st for req (OP_CHUNK_READ, OP_CHUNK_VERIFY, or
 * OP_CHUNK_READ_SHM with shm set: the bytes go to region shm at at). */
static void read_start(struct storage *st, struct svc_req *req, const struct sp_read *rd,
		       const struct sp_shm *shm, uint64_t at)
{
	bool verify = req->hdr.opcode == OP_CHUNK_VERIFY;
	struct target *t;
	struct read_op *op;
	int rc;

	t = find_target(st, rd->ref.target_id);
	rc = t ? 0 : STRATA_ESTALE_MAP;
	if (!rc)
		rc = cap_allow(t, req, &rd->ref.cap, rd->ref.ino, CAP_READ);
	if (!rc && shm && rd->flags)
		rc = -EINVAL;	/* repairs and surveys are daemons' reads */
	if (!rc)
		rc = read_check(st, t, &rd->ref, verify, rd->flags);
	if (rc) {
		svc_reply(req, rc);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (op)
		op->buf = abuf_alloc(rd->len ? rd->len : 1);
	if (!op || !op->buf) {
		free(op);
		svc_reply(req, -ENOMEM);
		return;
	}
	if (shm) {
		op->shm_dst = shm_get(st, shm, at, rd->len, &rc);
		op->shm = *shm;
		if (!op->shm_dst) {
			abuf_free(op->buf);
			free(op);
			svc_reply(req, rc);
			return;
		}
	}
	op->t = t;
	op->req = req;
	op->id.ino = rd->ref.ino;
	op->id.idx = rd->ref.idx;
	op->chain = rd->ref.chain_id;
	op->verify = verify;
	if (verify) {
		CNT(st, n_verify, 1);
		rc = chunk_read(t->cs, &op->id, rd->offset, rd->len, op->buf, on_verify_done, op);
	} else {
		rc = chunk_read_ref(t->cs, &op->id, rd->offset, rd->len, op->buf, on_read_done, op);
	}
	if (rc) {
		if (op->shm_dst)
			shm_put(st, &op->shm);
		abuf_free(op->buf);
		free(op);
		svc_reply(req, rc);
	}
}

/*
 * OP_CHUNK_READ, and OP_CHUNK_VERIFY: a reader found that bytes this
 * target sent fail the CRC they came with. Whole blocks in the page cache
 * go out unverified (chunk_read_ref), so the reader's check is the one
 * that finds a damaged copy; the verify reads the range again through the
 * verifying path, which reports the damage to mgmt and marks the chunk
 * for resync as a failed read does. It answers with the status alone.
 */
void op_read(void *svc, struct svc_req *req)
{
	struct sp_read rd;

	if (st_read_req(req, &rd))
		return;
	read_start(svc, req, &rd, NULL, 0);
}

/* OP_CHUNK_READ_SHM: a READ whose bytes are copied into the reader's
 * shared-memory region (shm_serve.c) before the answer, which has no
 * bulk. The reader checks their CRC as for a READ. */
void op_read_shm(void *svc, struct svc_req *req)
{
	struct sp_shm_read m;

	if (st_read_shm_req(req, &m))
		return;
	read_start(svc, req, &m.rd, &m.shm, m.at);
}

/* ---- batch reads ---- */

struct batch_op {
	struct target *t;
	struct svc_req *req;
	struct sp_batch rq;
	struct sp_batch_rep rep;
	uint32_t left;
	uint8_t *buf;
	uint64_t total;
};

struct batch_slot {
	struct batch_op *b;
	uint32_t i;
};

static void batch_free(struct batch_op *b)
{
	sp_batch_release(&b->rq);
	free(b->rep.results);
	free(b);
}

static void batch_finish(struct batch_op *b)
{
	st_batch_reply_bulk(b->req, 0, &b->rep, b->buf, b->total, read_buf_free, b->buf);
	batch_free(b);
}

static void on_batch_item(void *arg, int status, const struct chunk_info *info, uint32_t nread,
			  uint32_t crc)
{
	struct batch_slot *s = arg;
	struct batch_op *b = s->b;
	const struct sp_batch_item *it = &b->rq.items[s->i];
	struct sp_read_result *r = &b->rep.results[s->i];
	struct chunk_id id = { it->ino, it->idx };

	status = read_outcome(b->t, &id, it->chain_id, status, &info, &nread, &crc);
	r->status = status;
	r->version = info && !status ? info->version : 0;
	r->nread = status ? 0 : nread;
	r->crc = status ? 0 : crc;
	if (!status) {
		CNT(b->t->st, n_reads, 1);
		CNT(b->t->st, bytes_read, nread);
	}
	free(s);
	if (--b->left == 0)
		batch_finish(b);
}

void op_batch_read(void *svc, struct svc_req *req)
{
	struct storage *st = svc;
	struct batch_op *b = calloc(1, sizeof(*b));
	uint64_t off = 0;
	int rc = 0;

	if (!b) {
		svc_reply(req, -ENOMEM);
		return;
	}
	if (st_batch_req(req, &b->rq)) {
		free(b);
		return;
	}
	b->t = find_target(st, b->rq.target_id);
	if (!b->t)
		rc = STRATA_ESTALE_MAP;
	if (!rc) {
		b->rep.results_n = b->rq.items_n;
		b->rep.results = calloc(b->rq.items_n ? b->rq.items_n : 1, sizeof(*b->rep.results));
		for (uint32_t i = 0; i < b->rq.items_n; i++)
			b->total += b->rq.items[i].len;
		b->buf = abuf_alloc(b->total ? b->total : 1);
		if (!b->rep.results || !b->buf)
			rc = -ENOMEM;
	}
	if (rc) {
		abuf_free(b->buf);
		batch_free(b);
		svc_reply(req, rc);
		return;
	}
	CNT(st, n_batches, 1);
	b->req = req;
	b->left = b->rq.items_n + 1;
	for (uint32_t i = 0; i < b->rq.items_n; i++) {
		const struct sp_batch_item *it = &b->rq.items[i];
		struct sp_ref ref = { .chain_id = it->chain_id, .chain_ver = it->chain_ver,
				       .target_id = b->rq.target_id, .ino = it->ino, .idx = it->idx };
		struct chunk_id id = { it->ino, it->idx };
		struct batch_slot *s = malloc(sizeof(*s));

		/* Items of one file share a cap: the target's cache verifies
		 * it once for the batch. */
		rc = s ? cap_allow(b->t, req, b->rq.caps_n ? &b->rq.caps[it->cap] : NULL, it->ino,
				   CAP_READ) : -ENOMEM;
		if (!rc)
			rc = read_check(st, b->t, &ref, false, 0);
		if (!rc) {
			s->b = b;
			s->i = i;
			rc = chunk_read(b->t->cs, &id, it->offset, it->len, b->buf + off, on_batch_item, s);
		}
		if (rc) {
			free(s);
			b->rep.results[i].status = rc;
			b->left--;
		}
		off += it->len;
	}
	if (--b->left == 0)
		batch_finish(b);
}

/* ---- stat and space ---- */

void op_stat(void *svc, struct svc_req *req)
{
	struct storage *st = svc;
	struct sp_ref ref;
	struct sp_stat_rep rep = { 0 };
	struct chunk_info ci;
	struct target *t;
	int rc;

	if (st_stat_req(req, &ref))
		return;
	t = find_target(st, ref.target_id);
	if (!t) {
		svc_reply(req, STRATA_ESTALE_MAP);
		return;
	}
	rc = cap_allow(t, req, &ref.cap, ref.ino, CAP_READ);
	if (rc) {
		svc_reply(req, rc);
		return;
	}
	{
		struct chunk_id id = { ref.ino, ref.idx };

		rc = chunk_stat(t->cs, &id, &ci);
	}
	rep.version = ci.version;
	rep.length = ci.length;
	rep.crc = ci.crc;
	st_stat_reply(req, rc, &rep);
}

void op_space(void *svc, struct svc_req *req)
{
	struct storage *st = svc;
	struct sp_target rq;
	struct sp_space_rep rep = { 0 };
	struct target *t;
	int rc;

	if (st_space_req(req, &rq))
		return;
	t = find_target(st, rq.target_id);
	if (!t) {
		svc_reply(req, -ENOENT);
		return;
	}
	rc = chunk_space(t->cs, &rep.total, &rep.used);
	st_space_reply(req, rc, &rep);
}
