/*
 * A restarted member's chains: a target serves a chain only once its
 * process knows which of its copies lack updates.
 *
 * A replica whose own write of an update fails after it passed the update
 * on marks the chunk behind (resync.c): the members below may hold the
 * update, and clients may have read it there, so it serves nothing of the
 * chunk until a survey finds the newest copy. The marks live in memory. A
 * member whose process restarted has lost them; it normally comes back as
 * a SYNCING tail and copies its chain from a serving member before it
 * serves. But the last SERVING member taken out of a chain left with no
 * serving member comes back SERVING (mgmt, target_bring_back): it holds
 * every acknowledged update, and a resync needs a serving source. It may
 * still lack updates that failed at it (or whose sync failed before the
 * crash) and that the others hold, and every other member resyncs from
 * it.
 *
 * So a target holds back every chunk of a chain where it is SERVING until
 * its process knows its marks there are complete (chain_held): no client
 * read, no update at the head, no listing or repair read for a resyncing
 * member. It knows them once
 *  - it was SYNCING in the chain: it is made SERVING only after a resync
 *    from a serving member, which holds its own marks;
 *  - or another member of the chain is SERVING as well (a chain new to
 *    the cluster: no member can be made SERVING while this one holds
 *    back, a resync needs it as its source), or it is alone in the chain;
 *  - or it recovered the chain: it listed every other member, syncing ones
 *    included, and every target taken out of the chain (whose process
 *    answers while it is out: a member taken out may hold the only copy
 *    of an update that failed here, which a client may have read), and
 *    took every copy newer than its own or that it lacks. A target taken
 *    out that does not answer keeps the chain held until it does, or
 *    until `target replace` gives it up.
 * A copy is taken only when newer, and installed only over an older one
 * (chunk_replace_newer): every stored copy is a state the chunk went
 * through (a version names one content), so the newest of them is at
 * least as new as anything a client read. While the chain is held nothing
 * new is written in it (only the head makes versions) and no member
 * resyncs or repairs from it, so the others' copies only move forward to
 * copies they hold between them: a target listed once is covered for the
 * rest of the recovery, whatever the chain's version since.
 *
 * A decision needs a map at least as new as mgmt's answer to this
 * process's registration: an older one may show the target as its
 * previous process left it, before mgmt took it out and brought it back.
 * Until then every chain where the map shows it SERVING is held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "storage_int.h"
#include "common/errors_int.h"

#define FETCH_MIN (64u << 10)	/* the smallest fetch buffer */

struct member {
	char addr[CM_ADDR_LEN];
	uint32_t target;
};

struct recovery {
	struct recovery *next;
	struct target *t;
	uint32_t chain_id;
	bool busy;			/* an RPC or an install in flight */
	bool done;			/* ended: freed once not busy */
	bool running;			/* a pass is under way */
	bool failed;			/* member k met an error: not covered */
	uint64_t pass_ver;		/* the chain version the pass works at */
	uint64_t logged_ver;		/* "held until ..." was logged at it */
	/* The other members and the targets taken out, whose copies this
	 * one holds or newer: listed whole, every newer copy taken. */
	uint32_t covered[2 * CM_CHAIN_SLOTS];
	uint32_t ncovered;
	uint32_t warned[2 * CM_CHAIN_SLOTS];	/* failed once: logged */
	uint32_t nwarned;
	struct member members[CM_CHAIN_SLOTS];	/* the pass's: not covered */
	uint32_t nmembers, k;		/* the one listed now */
	struct sp_list_ent *ents;	/* its page being read */
	uint32_t nents, pos;
	bool more, started;
	struct chunk_id cursor;
	struct chunk_id cur;		/* the chunk fetched or installed */
	struct sp_read rd;		/* its fetch */
	uint8_t *buf;
	uint32_t buf_cap;
	uint32_t taken;			/* copies installed */
};

static bool in_set(const uint32_t *v, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++) {
		if (v[i] == id)
			return true;
	}
	return false;
}

/* ---- the chains this process knows ---- */

static bool known(const struct target *t, uint32_t chain_id)
{
	return chain_id / 8 < t->known_len && (t->known[chain_id / 8] >> (chain_id % 8) & 1);
}

/* -ENOMEM leaves the chain held: the next tick tries again. */
static int set_known(struct target *t, uint32_t chain_id)
{
	if (chain_id / 8 >= t->known_len) {
		uint32_t len = chain_id / 8 + 1;
		uint8_t *v = realloc(t->known, len);

		if (!v)
			return -ENOMEM;
		memset(v + t->known_len, 0, len - t->known_len);
		t->known = v;
		t->known_len = len;
	}
	t->known[chain_id / 8] |= (uint8_t)(1u << (chain_id % 8));
	return 0;
}

/* Whether m tells what mgmt made of this process's registration. */
static bool decidable(const struct target *t, const struct cluster_map *m)
{
	uint64_t reg = __atomic_load_n(&t->st->reg_version, __ATOMIC_ACQUIRE);

	return reg && m->version >= reg;
}

/* Whether another member of c than pos is SERVING. */
static bool other_serving(const struct cm_chain *c, int pos)
{
	for (int i = 0; i < c->len; i++) {
		if (i != pos && c->states[i] == TARGET_SERVING)
			return true;
	}
	return false;
}

/* Whether t, SERVING at pos in c, knows c without a recovery: another
 * member serves too (a chain new to the cluster), or there is nobody
 * else to take a copy from. */
static bool known_at_once(const struct cm_chain *c, int pos)
{
	return other_serving(c, pos) || (c->len == 1 && c->nout == 0);
}

bool chain_held(struct target *t, const struct cluster_map *m, const struct cm_chain *c, int pos)
{
	if (c->states[pos] != TARGET_SERVING || known(t, c->id))
		return false;
	/* Decided here too, not only at the next tick: such a chain serves
	 * at once. */
	return !(decidable(t, m) && known_at_once(c, pos) && set_known(t, c->id) == 0);
}

/* ---- one recovery ---- */

static void step(struct recovery *rc);

static void task_free(struct recovery *rc)
{
	struct target *t = rc->t;

	for (struct recovery **pp = &t->recoveries; *pp; pp = &(*pp)->next) {
		if (*pp == rc) {
			*pp = rc->next;
			break;
		}
	}
	abuf_free(rc->buf);
	free(rc->ents);
	free(rc);
}

/* Ends rc: now, or when what it has in flight completes. */
static void task_end(struct recovery *rc)
{
	rc->done = true;
	if (!rc->busy)
		task_free(rc);
}

/*
 * The targets of chain c other than t, members and taken out, that rc
 * has not covered yet: into rc->members when fill, and into the text out
 * (when not NULL). Returns how many, or -1 when fill finds one whose node
 * the map lacks.
 */
static int uncovered(struct recovery *rc, const struct cluster_map *m, const struct cm_chain *c,
		     bool fill, char *out, size_t outlen)
{
	size_t n = 0;
	int cnt = 0;

	if (fill)
		rc->nmembers = 0;
	for (int i = 0; i < c->len + c->nout; i++) {
		uint32_t id = i < c->len ? c->targets[i] : c->out[i - c->len];
		const struct cm_target *ct = cm_find_target(m, id);
		const struct cm_node *nd = ct ? cm_find_node(m, ct->node_id) : NULL;

		if (id == rc->t->id || in_set(rc->covered, rc->ncovered, id))
			continue;
		cnt++;
		if (out && n < outlen)
			n += (size_t)snprintf(out + n, outlen - n, "%s%u", n ? ", " : "", id);
		if (!fill)
			continue;
		if (!nd)
			return -1;
		snprintf(rc->members[rc->nmembers].addr, sizeof(rc->members[0].addr), "%s", nd->addr);
		rc->members[rc->nmembers++].target = id;
	}
	return cnt;
}

/* The pass is over. Once every other member and every target taken out
 * is covered, at the chain's current version, the chain is known. */
static void pass_end(struct recovery *rc)
{
	struct target *t = rc->t;
	struct map_snap *snap = map_get(t->st);
	const struct cm_chain *c = snap ? cm_find_chain(&snap->map, rc->chain_id) : NULL;
	char out[CM_CHAIN_SLOTS * 24];
	int left;

	rc->running = false;
	if (c && c->version == rc->pass_ver) {
		left = uncovered(rc, &snap->map, c, false, out, sizeof(out));
		/* -ENOMEM: the next tick tries again. */
		if (left == 0 && set_known(t, rc->chain_id) == 0) {
			log_info("storage", "target %u: chain %u recovered (%u newer cop%s taken from its other members): serving it",
				 t->id, rc->chain_id, rc->taken, rc->taken == 1 ? "y" : "ies");
			task_end(rc);
		} else if (left > 0 && rc->logged_ver != c->version) {
			rc->logged_ver = c->version;
			log_warn("storage", "target %u: chain %u stays held back until targets %s answer (or are replaced): one may hold a newer copy of a chunk than any here",
				 t->id, rc->chain_id, out);
		}
	}
	map_put(t->st, snap);
}

static void next_member(struct recovery *rc);

static void fail(struct recovery *rc, const char *what, int status)
{
	uint32_t id = rc->members[rc->k].target;

	/* Once per target: a target taken out is tried at every tick. */
	if (!in_set(rc->warned, rc->nwarned, id)) {
		if (rc->nwarned < sizeof(rc->warned) / sizeof(rc->warned[0]))
			rc->warned[rc->nwarned++] = id;
		log_warn("storage", "target %u: recovering chain %u: %s target %u failed: %s (will retry)",
			 rc->t->id, rc->chain_id, what, id, strata_strerror(status));
	}
	rc->failed = true;
	next_member(rc);
}

static void on_installed(void *arg, int status, const struct chunk_info *info)
{
	struct recovery *rc = arg;

	(void)info;
	rc->busy = false;
	if (rc->done) {
		task_free(rc);
		return;
	}
	/* -EALREADY/-ESTALE: as new a copy or newer came meanwhile. */
	if (status && status != -EALREADY && status != -ESTALE) {
		log_warn("storage", "target %u: recovering chain %u: cannot install chunk %llx:%llx: %s (will retry)",
			 rc->t->id, rc->chain_id, (unsigned long long)rc->cur.ino,
			 (unsigned long long)rc->cur.idx, strata_strerror(status));
		rc->failed = true;
		next_member(rc);
		return;
	}
	if (!status)
		rc->taken++;
	step(rc);
}

static void fetch(struct recovery *rc, uint32_t len);

static void on_fetched(void *arg, int status, struct rpc_msg *resp)
{
	struct recovery *rc = arg;
	struct target *t = rc->t;
	struct sp_read_rep rep = { 0 };
	struct cstate *c;
	int err;

	rc->busy = false;
	if (rc->done) {
		task_free(rc);
		return;
	}
	if (!status) {
		status = st_read_rep(resp, &rep);
		if (!status && rep.nread != resp->hdr.bulk_len)
			status = STRATA_EBADMSG;
	}
	if (!status && rep.nread < rep.length && rep.nread == rc->rd.len &&
	    rep.length <= CHUNK_MAX_SIZE) {
		fetch(rc, rep.length);	/* it grew: again, with room for all */
		return;
	}
	if (!status && crc32c(0, rc->buf, rep.nread) != rep.crc) {
		/* The copy there may be damaged (cached blocks go out
		 * unverified): it checks them again. */
		status = STRATA_EINTEGRITY;
		sp_ask_verify(t->pool, rc->members[rc->k].addr, &rc->rd, t->st->timeout_ms);
	}
	if (status) {
		fail(rc, "fetching a chunk from", status);
		return;
	}
	if (rep.version == 0) {
		step(rc);	/* gone there since it was listed */
		return;
	}
	/* A repair of ours fetched before this install must not follow it
	 * with an older copy (resync.c checks upd_gen). */
	c = cstate_find(t, &rc->cur, false);
	if (c)
		c->upd_gen++;
	rc->busy = true;
	err = chunk_replace_newer(t->cs, &rc->cur, rc->buf, rep.nread, rep.crc, rep.version,
				  rc->chain_id, on_installed, rc);
	if (err)
		on_installed(rc, err, NULL);
}

/* Room in rc->buf for len bytes (at least FETCH_MIN, at most a chunk). */
static int ensure_buf(struct recovery *rc, uint32_t len)
{
	uint32_t cap = len < FETCH_MIN ? FETCH_MIN : len > CHUNK_MAX_SIZE ? CHUNK_MAX_SIZE : len;

	if (rc->buf && rc->buf_cap >= cap)
		return 0;
	abuf_free(rc->buf);
	rc->buf = abuf_alloc(cap);
	rc->buf_cap = rc->buf ? cap : 0;
	return rc->buf ? 0 : -ENOMEM;
}

/* Fetches rc->cur whole from target k; len: its listed length. */
static void fetch(struct recovery *rc, uint32_t len)
{
	struct target *t = rc->t;
	const struct member *m = &rc->members[rc->k];
	struct proto_call pc = { .cb = on_fetched, .arg = rc, .timeout_ms = t->st->timeout_ms };
	int err = ensure_buf(rc, len);

	if (!err) {
		rc->rd = (struct sp_read){ .ref = { rc->chain_id, rc->pass_ver, m->target, rc->cur.ino,
						    rc->cur.idx },
					   .len = rc->buf_cap, .flags = SP_READ_RECOVER };
		pc.bulk_dst = rc->buf;
		pc.bulk_cap = rc->buf_cap;
		rc->busy = true;
		err = st_read_call(t->pool, m->addr, &rc->rd, &pc);
		if (err)
			rc->busy = false;
	}
	if (err)
		fail(rc, "fetching a chunk from", err);
}

static void on_list(void *arg, int status, struct rpc_msg *resp)
{
	struct recovery *rc = arg;
	struct sp_list_rep rep = { 0 };

	rc->busy = false;
	if (rc->done) {
		task_free(rc);
		return;
	}
	if (!status)
		status = st_list_rep(resp, &rep);
	if (!status) {
		free(rc->ents);
		rc->ents = malloc((rep.ents_n ? rep.ents_n : 1) * sizeof(*rc->ents));
		if (!rc->ents)
			status = -ENOMEM;
	}
	if (status) {
		sp_list_rep_release(&rep);
		rc->nents = 0;
		fail(rc, "listing the chain at", status);
		return;
	}
	if (rep.ents_n)
		memcpy(rc->ents, rep.ents, rep.ents_n * sizeof(*rc->ents));
	rc->nents = rep.ents_n;
	rc->pos = 0;
	rc->more = rep.more;
	if (rc->nents)
		rc->cursor = (struct chunk_id){ rc->ents[rc->nents - 1].ino,
						rc->ents[rc->nents - 1].idx };
	sp_list_rep_release(&rep);
	step(rc);
}

/* The next page of target k's chunks of the chain. */
static void list_page(struct recovery *rc)
{
	struct target *t = rc->t;
	const struct member *m = &rc->members[rc->k];
	struct sp_list rq = { rc->chain_id, rc->pass_ver, m->target, rc->cursor.ino,
			      rc->cursor.idx, SP_LIST_PAGE, rc->started ? 1 : 0 };
	struct proto_call pc = { .cb = on_list, .arg = rc, .timeout_ms = t->st->timeout_ms };
	int err;

	rc->started = true;
	rc->busy = true;
	err = st_list_call(t->pool, m->addr, &rq, &pc);
	if (err) {
		rc->busy = false;
		fail(rc, "listing the chain at", err);
	}
}

/* Starts listing target k from the beginning, or ends the pass. */
static void member_start(struct recovery *rc)
{
	if (rc->k >= rc->nmembers) {
		pass_end(rc);
		return;
	}
	rc->failed = false;
	rc->nents = rc->pos = 0;
	rc->more = true;
	rc->started = false;
	memset(&rc->cursor, 0, sizeof(rc->cursor));
	list_page(rc);
}

/* Target k is done: covered, unless it failed; on to the next. */
static void next_member(struct recovery *rc)
{
	uint32_t id = rc->members[rc->k].target;

	/* (Room for all: pass_start keeps only targets of the chain.) */
	if (!rc->failed && !in_set(rc->covered, rc->ncovered, id) &&
	    rc->ncovered < sizeof(rc->covered) / sizeof(rc->covered[0]))
		rc->covered[rc->ncovered++] = id;
	rc->k++;
	member_start(rc);
}

/* Advances the pass: the next copy newer than ours, the next page, the
 * next target, or its end. */
static void step(struct recovery *rc)
{
	struct target *t = rc->t;

	if (rc->busy || !rc->running)
		return;
	while (rc->pos < rc->nents) {
		const struct sp_list_ent *e = &rc->ents[rc->pos++];
		struct chunk_info ci;

		rc->cur = (struct chunk_id){ e->ino, e->idx };
		/* Absent here: its tombstone's version, 0 after a restart. */
		(void)chunk_stat(t->cs, &rc->cur, &ci);
		if (e->version > ci.version) {
			fetch(rc, e->length);
			return;
		}
	}
	if (rc->more) {
		list_page(rc);
		return;
	}
	next_member(rc);
}

/* A pass over the targets of chain c not covered yet, at its version. */
static void pass_start(struct recovery *rc, const struct cluster_map *m, const struct cm_chain *c)
{
	uint32_t n = 0;

	/* Targets no longer in the chain need no cover (one that comes back
	 * is listed again): room for those that are. */
	for (uint32_t i = 0; i < rc->ncovered; i++) {
		if (in_set(c->targets, c->len, rc->covered[i]) ||
		    in_set(c->out, c->nout, rc->covered[i]))
			rc->covered[n++] = rc->covered[i];
	}
	rc->ncovered = n;
	if (uncovered(rc, m, c, true, NULL, 0) < 0)
		return;	/* a map without one of them: the next one */
	rc->pass_ver = c->version;
	rc->running = true;
	rc->k = 0;
	member_start(rc);
}

static struct recovery *task_new(struct target *t, const struct cm_chain *c)
{
	struct recovery *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return NULL;
	rc->t = t;
	rc->chain_id = c->id;
	rc->next = t->recoveries;
	t->recoveries = rc;
	/* Alone in its chain, nobody else holds a copy to take. */
	if (c->len > 1 || c->nout)
		log_warn("storage", "target %u: chain %u held back: this process is its only serving member and does not know which of its copies lack updates (a restart forgets); it first takes the newest copy of each chunk from the other members and the targets taken out",
			 t->id, c->id);
	return rc;
}

/* ---- the holds, at every tick ---- */

void recover_check(struct target *t)
{
	struct map_snap *snap = map_get(t->st);
	bool decide = snap && decidable(t, &snap->map);

	for (uint32_t i = 0; snap && i < snap->map.nchains; i++) {
		const struct cm_chain *c = &snap->map.chains[i];
		int pos = chain_pos(c, t->id);
		struct recovery *rc;

		for (rc = t->recoveries; rc && (rc->done || rc->chain_id != c->id); rc = rc->next)
			;
		if (pos < 0 || known(t, c->id)) {
			if (rc)
				task_end(rc);	/* out of it: back held, or syncing */
			continue;
		}
		if (!decide)
			continue;
		if (c->states[pos] != TARGET_SERVING || known_at_once(c, pos)) {
			if (set_known(t, c->id) == 0 && rc)
				task_end(rc);
			continue;
		}
		if (!rc)
			rc = task_new(t, c);
		if (rc && !rc->running && !rc->busy)
			pass_start(rc, &snap->map, c);
	}
	map_put(t->st, snap);
}

void recover_stop_target(struct target *t)
{
	for (struct recovery *rc = t->recoveries, *next; rc; rc = next) {
		next = rc->next;
		task_end(rc);
	}
	free(t->known);
	t->known = NULL;
	t->known_len = 0;
}
