/*
 * Chain replication of updates (write, truncate, remove) at one replica.
 *
 * The head of a chain serializes the updates of a chunk (a queue per
 * chunk) and gives each a new version and the version it applies on (its
 * base). Every replica forwards an update to its successor before its own
 * disk write starts, and answers upstream once both are done, so the
 * client's answer means every member holds the update and the tail is
 * always committed.
 *
 * The rules that keep an acknowledged byte safe (docs/failures.md):
 *  - A version names one content, everywhere, ever (sp_next_version): the
 *    head never hands a version out twice, not after a failed local write
 *    (cstate.assigned) nor after a remove (the chunk store's tombstone),
 *    and a new head starts a new epoch.
 *  - A replica applies a forwarded update only on its base; holding the
 *    update's version already is a replay (the same content); anything
 *    else asks the predecessor for the whole chunk (STRATA_ENEEDFULL),
 *    which is installed only over an older version and sent on whole.
 *  - A replica whose own write of an update failed marks the chunk
 *    needsync: it serves no read of it and, at the head, takes no update
 *    of it until it is repaired from the chain (resync.c).
 *  - A replica that applied an update whose forward failed marks the
 *    chunk dirty: it serves no client read of it until an update of it
 *    goes through the whole chain again, or a survey finds that every
 *    member holds it. So does one that took a newer copy out of chain
 *    order (a survey's push or fetch, resync.c).
 *
 * A client token's update carries the file's chunk capability with
 * CAP_WRITE (cap_allow), and is never a forwarded one: only daemons
 * forward, and they are not asked for a cap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "net/rpc.h"
#include "storage_int.h"
#include "common/errors_int.h"

struct update_op {
	struct update_op *next;		/* the chunk's queue at the head */
	struct target *t;
	struct svc_req *req;
	struct sp_update u;
	uint16_t op;
	struct chunk_id id;
	struct cstate *cs;
	bool is_head;
	bool queued;		/* waited behind another update: routed again */
	char succ_addr[CM_ADDR_LEN];
	uint32_t succ_target;
	bool local_done, fwd_done;
	bool pushed;		/* SP_FWD_PUSH installed a newer copy here */
	bool shm;		/* a WRITE_SHM: the bytes came through shared memory */
	bool need_full;		/* the successor lacks the base: resend whole */
	bool full_sent;
	uint8_t *full_buf;
	int local_status, fwd_status;
	uint64_t out_version;
	uint32_t out_length;
};

static void update_start(struct update_op *op);
static void drain(struct target *t, struct cstate *c);

/* The stored version of a chunk, or of its tombstone when it is absent. */
static uint64_t have_version(struct target *t, const struct chunk_id *id)
{
	struct chunk_info ci;

	(void)chunk_stat(t->cs, id, &ci);
	return ci.version;
}

/*
 * Routes op by the map in snap: the ref must name our chain at its current
 * version (check_ref), a client's update must come to a serving head, a
 * forwarded one to a member after it. Fills the successor.
 */
static int route(struct storage *st, struct map_snap *snap, struct update_op *op)
{
	const struct cm_chain *chain;
	int pos, rc = check_ref(st, snap, &op->u.ref, &chain, &pos);

	if (rc)
		return rc;
	if (op->u.forwarded == SP_FWD_PUSH) {
		/* A member's newer copy, for this replica alone. */
		op->is_head = false;
		op->succ_target = 0;
		op->succ_addr[0] = '\0';
		return 0;
	}
	if (!op->u.forwarded && pos != 0)
		return STRATA_ENOTHEAD;
	if (op->u.forwarded && (pos == 0 || op->u.version == 0))
		return STRATA_ENOTHEAD;
	/* A chain whose members are all resyncing has no committed copy to
	 * build on: it takes no update until one is serving again. */
	if (!op->u.forwarded && chain->states[0] != TARGET_SERVING)
		return STRATA_EUNAVAIL;
	/* Our lease ran out: mgmt may be giving the chain another head. */
	if (!op->u.forwarded && !storage_lease_valid(st))
		return STRATA_ESTALE_MAP;
	/* A head that holds the chain back (recover.c) may lack versions the
	 * members hold: no update builds on its copies before it has them. */
	if (!op->u.forwarded && chain_held(op->t, &snap->map, chain, pos))
		return STRATA_EUNAVAIL;
	op->is_head = pos == 0;
	op->succ_target = 0;
	op->succ_addr[0] = '\0';
	if (pos + 1 < chain->len) {
		const struct cm_target *nt = cm_find_target(&snap->map, chain->targets[pos + 1]);
		const struct cm_node *nn = nt ? cm_find_node(&snap->map, nt->node_id) : NULL;

		if (!nn)
			return STRATA_ESTALE_MAP;
		op->succ_target = nt->id;
		snprintf(op->succ_addr, sizeof(op->succ_addr), "%s", nn->addr);
	}
	return 0;
}

static void op_free(struct update_op *op)
{
	abuf_free(op->full_buf);
	free(op);
}

/*
 * Starts the chunk's queued updates while none is in flight (one that
 * fails at once lets the next start), then lets an idle cstate go. Whatever
 * ran (a client's update or one forwarded to us before we became head), a
 * queued update waits for no more than that. Re-entered from an update
 * that finished at once: the outer call carries on.
 */
static void drain(struct target *t, struct cstate *c)
{
	if (c->draining)
		return;
	c->draining = true;
	while (c->q_head && !c->inflight) {
		struct update_op *next = c->q_head;

		c->q_head = next->next;
		if (!c->q_head)
			c->q_tail = &c->q_head;
		update_start(next);
	}
	c->draining = false;
	if (!c->inflight && !c->q_head)
		cstate_maybe_free(t, c);
}

static void update_finish(struct update_op *op)
{
	struct target *t = op->t;
	struct cstate *c = op->cs;
	struct sp_update_rep rep = { op->out_version, op->out_length };
	int status = op->local_status ? op->local_status : op->fwd_status;

	/* Applied here but maybe not below: no client reads it here until an
	 * update of it goes all the way through, or a survey finds every
	 * member holds it (resync.c). So for a newer copy a member's survey
	 * pushed here, out of chain order: the members that lack it, before
	 * or after this one, still serve the older copy until it reaches
	 * them too. A push says nothing of the others: it clears nothing. */
	if ((!op->local_status && op->fwd_status) || op->pushed)
		cstate_set_dirty(t, c, true);
	else if (!status && op->u.forwarded != SP_FWD_PUSH)
		cstate_set_dirty(t, c, false);
	if (status == 0 && op->op == OP_CHUNK_WRITE) {
		CNT(t->st, n_writes, 1);
		CNT(t->st, bytes_written, op->u.len);
		if (op->shm)
			CNT(t->st, n_shm_writes, 1);
	}
	st_write_reply(op->req, status, &rep);
	c->inflight--;
	op_free(op);
	drain(t, c);
}

static void send_full(struct update_op *op);

static void maybe_finish(struct update_op *op)
{
	if (op->need_full && op->local_done && !op->full_sent) {
		send_full(op);
		return;
	}
	if (op->local_done && op->fwd_done)
		update_finish(op);
}

static void on_local_done(void *arg, int status, const struct chunk_info *info)
{
	struct update_op *op = arg;
	struct target *t = op->t;

	/* A newer copy pushed here (not one held already, a replay). */
	op->pushed = status == 0 && op->u.forwarded == SP_FWD_PUSH;
	/* A replay of an update this replica already holds is success. */
	if (status == -EALREADY || (status == -ENOENT && op->op == OP_CHUNK_REMOVE))
		status = 0;
	if (status == STRATA_EINTEGRITY) {
		/* Our stored copy is bad: repaired from the chain. The head
		 * cannot apply the update and asks the client to retry; a
		 * replica downstream has the predecessor resend it whole. */
		CNT(t->st, n_integrity, 1);
		report_to_mgmt(t->st, t->id, &op->id, status);
		resync_mark(t, &op->id, op->u.ref.chain_id);
		status = op->is_head ? STRATA_EUNAVAIL : STRATA_ENEEDFULL;
		info = NULL;
	} else if (status && !(status == -ESTALE && !op->is_head) &&
		   !(status == -ENOENT && op->op == OP_CHUNK_TRUNCATE)) {
		/* Our copy missed this update (the disk refused it) while the
		 * replicas below may hold it: it serves nothing until it is
		 * made whole again. Not so for -ESTALE below the head (we hold
		 * a newer version already: the update is a stale duplicate),
		 * nor for a truncate of an absent chunk: its base was checked,
		 * so every replica found it absent too. */
		log_warn("storage", "target %u: update of chunk %llx:%llx failed here: %s; the chunk is checked against its chain",
			 t->id, (unsigned long long)op->id.ino, (unsigned long long)op->id.idx,
			 strata_strerror(status));
		resync_mark_behind(t, &op->id, op->u.ref.chain_id);
		info = NULL;
	}
	op->local_status = status;
	if (info) {
		op->out_version = info->version;
		op->out_length = info->length;
	}
	/* A removal leaves nothing to repair on a copy known bad: the chain's
	 * state is "absent", and so is ours (how a lost chunk's file is
	 * cleaned up, resync.c). */
	if (status == 0 && op->op == OP_CHUNK_REMOVE && op->cs->needsync && op->cs->damaged)
		resync_clear(t, op->cs);
	if (status == 0 && (op->u.forwarded == SP_FWD_FULL || op->u.forwarded == SP_FWD_PUSH)) {
		/* A whole chunk from the predecessor: this replica caught up. */
		CNT(t->st, n_synced_chunks, 1);
		CNT(t->st, bytes_synced, op->u.len);
		if (op->cs->needsync) {
			CNT(t->st, n_repaired, 1);
			resync_clear(t, op->cs);
		}
	}
	op->local_done = true;
	maybe_finish(op);
}

static void on_fwd_done(void *arg, int status, struct rpc_msg *resp)
{
	struct update_op *op = arg;

	(void)resp;
	if (status)
		log_warn("storage", "forwarding chunk %llx:%llx to target %u at '%s' failed: %s",
			 (unsigned long long)op->id.ino, (unsigned long long)op->id.idx,
			 op->succ_target, op->succ_addr, strata_strerror(status));
	if (status == STRATA_ENEEDFULL && !op->full_sent && op->op != OP_CHUNK_REMOVE) {
		/* Sent once the local update is done: the whole chunk then. */
		op->need_full = true;
		maybe_finish(op);
		return;
	}
	op->fwd_status = status;
	op->fwd_done = true;
	maybe_finish(op);
}

static void on_full_done(void *arg, int status, struct rpc_msg *resp)
{
	struct update_op *op = arg;

	(void)resp;
	abuf_free(op->full_buf);
	op->full_buf = NULL;
	if (status)
		log_warn("storage", "sending chunk %llx:%llx whole to target %u failed: %s",
			 (unsigned long long)op->id.ino, (unsigned long long)op->id.idx,
			 op->succ_target, strata_strerror(status));
	op->fwd_status = status;
	op->fwd_done = true;
	maybe_finish(op);
}

static int send_update(struct update_op *op, uint16_t opcode, const struct sp_update *fu,
		       const void *bulk, uint32_t bulk_len, rpc_cb cb)
{
	struct proto_call c = { .bulk = bulk, .bulk_len = bulk_len, .cb = cb, .arg = op,
				.timeout_ms = op->t->st->timeout_ms };

	if (!op->t->pool)
		return -ESHUTDOWN;	/* the service stops */
	return proto_call(op->t->pool, op->succ_addr, opcode, sp_update_enc_any, fu, &c);
}

static void on_full_read(void *arg, int status, const struct chunk_info *info, uint32_t nread,
			 uint32_t crc)
{
	struct update_op *op = arg;
	struct sp_update fu = op->u;
	int rc = status;

	if (!rc && (!info || info->version != op->u.version))
		rc = STRATA_EUNAVAIL;	/* moved on meanwhile: the client retries */
	if (rc == STRATA_EINTEGRITY) {
		/* Our copy is bad too: it gets repaired like one a read finds. */
		CNT(op->t->st, n_integrity, 1);
		report_to_mgmt(op->t->st, op->t->id, &op->id, rc);
		resync_mark(op->t, &op->id, op->u.ref.chain_id);
		rc = STRATA_EUNAVAIL;
	}
	if (!rc) {
		/* A write whatever the update was: the content, whole. */
		fu.forwarded = SP_FWD_FULL;
		fu.ref.target_id = op->succ_target;
		fu.offset = 0;
		fu.len = nread;
		fu.crc = crc;
		rc = send_update(op, OP_CHUNK_WRITE, &fu, op->full_buf, nread, on_full_done);
		if (!rc)
			return;
	}
	on_full_done(op, rc, NULL);
}

/* The successor lacks this chunk's base version: send it our whole copy
 * (just updated) with the same version; it installs it atomically. */
static void send_full(struct update_op *op)
{
	struct chunk_info ci;
	int rc;

	op->full_sent = true;
	if (op->local_status) {
		on_full_done(op, op->local_status, NULL);
		return;
	}
	rc = chunk_stat(op->t->cs, &op->id, &ci);
	op->full_buf = rc ? NULL : abuf_alloc(ci.length ? ci.length : 1);
	if (!rc && !op->full_buf)
		rc = -ENOMEM;
	if (!rc)
		rc = chunk_read(op->t->cs, &op->id, 0, ci.length, op->full_buf, on_full_read, op);
	if (rc)
		on_full_done(op, rc, NULL);
}

/* Queues the local half of an update; 0 or the submit error. */
static int submit_local(struct update_op *op)
{
	struct target *t = op->t;
	const struct sp_update *u = &op->u;

	op->cs->upd_gen++;
	switch (op->op) {
	case OP_CHUNK_WRITE:
		if ((u->forwarded == SP_FWD_FULL || u->forwarded == SP_FWD_PUSH) && op->cs->needsync)
			/* Our copy is known bad: take the chain's whatever
			 * version ours claims. */
			return chunk_replace(t->cs, &op->id, op->req->bulk, u->len, u->crc,
					     u->version, u->ref.chain_id, on_local_done, op);
		if (u->forwarded == SP_FWD_FULL || u->forwarded == SP_FWD_PUSH)
			return chunk_replace_newer(t->cs, &op->id, op->req->bulk, u->len, u->crc,
						   u->version, u->ref.chain_id, on_local_done, op);
		return chunk_write_tagged(t->cs, &op->id, u->offset, op->req->bulk, u->len, u->crc,
					  u->version, u->ref.chain_id, on_local_done, op);
	case OP_CHUNK_TRUNCATE:
		return chunk_truncate(t->cs, &op->id, u->len, u->version, on_local_done, op);
	default:
		return chunk_remove(t->cs, &op->id, u->version, on_local_done, op);
	}
}

static int forward(struct update_op *op)
{
	struct sp_update fu = op->u;

	/* A whole chunk goes on whole: sent as a write at 0 it would keep
	 * the successor's bytes past its end (a shrinking truncate lost). */
	fu.forwarded = op->u.forwarded == SP_FWD_FULL ? SP_FWD_FULL : SP_FWD_UPDATE;
	fu.ref.target_id = op->succ_target;
	return send_update(op, op->op, &fu, op->op == OP_CHUNK_WRITE ? op->req->bulk : NULL,
			   op->op == OP_CHUNK_WRITE ? op->u.len : 0, on_fwd_done);
}

/* Has the store more room now than when c's repair failed for lack of
 * it? (Someone freed space: the failure is stale.) */
static bool space_came_back(struct target *t, const struct cstate *c)
{
	uint64_t avail;

	return !chunk_space_avail(t->cs, &avail) && avail > c->sync_err_avail;
}

static void update_start(struct update_op *op)
{
	struct target *t = op->t;
	struct cstate *c = op->cs;
	int rc = 0;

	if (t->closing) {
		svc_reply(op->req, -ESHUTDOWN);
		op_free(op);
		drain(t, c);
		return;
	}
	if (op->is_head) {
		if (op->queued) {
			/* It waited: the map may have moved on, and the
			 * successor with it. */
			struct map_snap *snap = map_get(t->st);

			rc = route(t->st, snap, op);
			map_put(t->st, snap);
		}
		/* Our copy lacks what the chain holds: repaired first. A
		 * disk still as full as when the repair failed keeps it from
		 * that, and says so; once space came back, the client
		 * retries while the next tick's repair runs. */
		if (!rc && c->needsync && !(c->lost && op->op == OP_CHUNK_REMOVE))
			rc = c->sync_err == -ENOSPC && !space_came_back(t, c) ? -ENOSPC
									      : STRATA_EUNAVAIL;
		if (rc) {
			svc_reply(op->req, rc);
			op_free(op);
			drain(t, c);	/* a no-op inside drain(), which goes on */
			return;
		}
		op->u.base = have_version(t, &op->id);
		op->u.version = sp_next_version(op->u.base > c->assigned ? op->u.base : c->assigned,
						op->u.ref.chain_ver);
		c->assigned = op->u.version;
	}
	c->inflight++;
	c->busy_chain = op->u.ref.chain_id;
	c->busy_ver = op->u.version;
	op->out_version = op->u.version;
	/* The local submit only queues the I/O, so the successor's disk still
	 * works while ours does; it also checks the data's CRC32C (the one
	 * check on receipt), so damaged data is never passed on. */
	rc = submit_local(op);
	if (rc) {
		if (rc == STRATA_EINTEGRITY) {
			CNT(t->st, n_integrity, 1);
			log_warn("storage", "write of chunk %llx:%llx arrived with a bad checksum from '%s'",
				 (unsigned long long)op->id.ino, (unsigned long long)op->id.idx,
				 conn_peer(op->req->conn));
		}
		op->local_status = rc;
		op->local_done = true;
		op->fwd_done = true;
		maybe_finish(op);
		return;
	}
	if (op->succ_target && (rc = forward(op))) {
		op->fwd_status = rc;
		op->fwd_done = true;
	} else if (!op->succ_target) {
		op->fwd_done = true;
	}
}

/* Checks a forwarded update against what this replica holds. */
static int check_base(struct target *t, struct update_op *op)
{
	const struct sp_update *u = &op->u;
	struct chunk_info ci;
	bool absent = chunk_stat(t->cs, &op->id, &ci) == -ENOENT;
	uint64_t have = ci.version;	/* or the tombstone's */

	if (u->forwarded >= SP_FWD_FULL || op->op == OP_CHUNK_REMOVE)
		return 0;	/* whole content / absence: no base needed */
	/* A removal queued by resync would run first and leave only this
	 * update's bytes; a copy known bad cannot take a delta: the
	 * predecessor sends the chunk whole (a repair fetch in flight is then
	 * dropped). */
	if (op->cs->removing || op->cs->needsync)
		return STRATA_ENEEDFULL;
	/* No copy here: a delta builds on nothing only as the chunk's first
	 * update (base 0). A tombstone names absence at its version only when
	 * the chain removed the chunk there; one left by a resync that dropped
	 * a copy its source lacked has that version's bytes elsewhere in the
	 * chain. So the predecessor sends the chunk whole (a re-create after a
	 * removal costs that resend). */
	if (absent && u->base && have != u->version)
		return STRATA_ENEEDFULL;
	if (have == u->base || have == u->version)
		return 0;	/* the base, or a replay of this very update */
	return STRATA_ENEEDFULL;
}

/*
 * Starts update u of req (opcode: WRITE, TRUNCATE or REMOVE), whose bytes
 * (a WRITE's) are req->bulk, bulk_len of them; shm: they came through
 * the writer's shared memory (op_write_shm).
 */
static void update_begin(struct storage *st, struct svc_req *req, const struct sp_update *u,
			 uint16_t opcode, uint64_t bulk_len, bool shm)
{
	struct update_op *op = NULL;
	struct map_snap *snap = NULL;
	struct target *t;
	int rc = 0;

	if (opcode == OP_CHUNK_WRITE && u->len != bulk_len)
		rc = STRATA_EBADMSG;
	if (!rc && opcode != OP_CHUNK_WRITE && bulk_len)
		rc = STRATA_EBADMSG;
	if (!rc && u->forwarded >= SP_FWD_FULL && opcode != OP_CHUNK_WRITE)
		rc = STRATA_EBADMSG;
	t = rc ? NULL : find_target(st, u->ref.target_id);
	if (!rc && !t)
		rc = STRATA_ESTALE_MAP;
	/* Only daemons forward (a client's forwarded update would skip the
	 * head's ordering); a client needs a write cap for the file. */
	if (!rc && u->forwarded && svc_req_ident(req)->role == NET_ROLE_CLIENT)
		rc = cap_allow(t, req, NULL, u->ref.ino, CAP_WRITE);
	if (!rc)
		rc = cap_allow(t, req, &u->ref.cap, u->ref.ino, CAP_WRITE);
	op = rc ? NULL : calloc(1, sizeof(*op));
	if (!rc && !op)
		rc = -ENOMEM;
	if (rc)
		goto fail;
	op->t = t;
	op->req = req;
	op->u = *u;
	op->op = opcode;
	op->shm = shm;
	op->id.ino = u->ref.ino;
	op->id.idx = u->ref.idx;
	snap = map_get(st);
	rc = route(st, snap, op);
	map_put(st, snap);
	op->cs = rc ? NULL : cstate_find(t, &op->id, true);
	if (!rc && !op->cs)
		rc = -ENOMEM;
	if (!rc && u->forwarded)
		rc = check_base(t, op);
	if (rc)
		goto fail;
	if (op->is_head && (op->cs->inflight || op->cs->q_head)) {
		op->queued = true;
		*op->cs->q_tail = op;
		op->cs->q_tail = &op->next;
		return;
	}
	update_start(op);
	return;
fail:
	if (op && op->cs)
		cstate_maybe_free(t, op->cs);
	free(op);
	svc_reply(req, rc);
}

void op_update(void *svc, struct svc_req *req)
{
	struct sp_update u;

	/* One message for three operations (write, truncate, remove). */
	if (proto_req_decode(req, sp_update_decode_any, &u, "update"))
		return;
	update_begin(svc, req, &u, req->hdr.opcode, req->hdr.bulk_len, false);
}

/*
 * OP_CHUNK_WRITE_SHM: a client's WRITE whose bytes are in its shared-memory
 * region (shm_serve.c). They are copied into a buffer of ours first, and
 * only that copy is checked against the CRC, written and forwarded: the
 * writer could change its region at any time. A descriptor that names no
 * region of ours (-ENOENT), a range that is outside it or does not start
 * at a slot (-ERANGE), more than SP_SHM_WRITE_MAX bytes (-EMSGSIZE) or a
 * forwarded update (-EINVAL: daemons forward over TCP) is refused before
 * anything else happens.
 */
void op_write_shm(void *svc, struct svc_req *req)
{
	struct storage *st = svc;
	struct sp_shm_write m;
	const uint8_t *src = NULL;
	void *buf = NULL;
	int rc = 0;

	if (st_write_shm_req(req, &m))
		return;
	if (m.upd.forwarded != SP_FWD_CLIENT || req->hdr.bulk_len)
		rc = -EINVAL;
	else if (m.upd.len > SP_SHM_WRITE_MAX)
		rc = -EMSGSIZE;
	else if (m.at % SP_SHM_SLOT)
		rc = -ERANGE;
	if (!rc) {
		buf = abuf_alloc(m.upd.len ? m.upd.len : 1);
		rc = buf ? 0 : -ENOMEM;
	}
	if (!rc)
		src = shm_get(st, &m.shm, m.at, m.upd.len, &rc);
	if (!src) {
		abuf_free(buf);
		svc_reply(req, rc);
		return;
	}
	memcpy(buf, src, m.upd.len);
	shm_put(st, &m.shm);
	req->bulk = buf;	/* the request frees it, as a WRITE's bulk */
	update_begin(st, req, &m.upd, OP_CHUNK_WRITE, m.upd.len, true);
}

void update_queue_drop(struct cstate *c, int status)
{
	while (c->q_head) {
		struct update_op *op = c->q_head;

		c->q_head = op->next;
		svc_reply(op->req, status);
		op_free(op);
	}
	c->q_tail = &c->q_head;
}
