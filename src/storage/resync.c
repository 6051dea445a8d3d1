/*
 * Resync, repair and scrub: how a replica gets back what it lacks.
 *
 * Every chunk a target stores carries the id of its chain (the chunk
 * engine's tag). A replica that lacks a chunk's latest version marks it
 * "needsync" and refuses reads of it; that happens when
 *  - a forwarded update's base version (version - 1) is not the version
 *    it holds (it missed updates while away, or its copy diverged): the
 *    update is acknowledged but not applied;
 *  - a stored checksum does not match (a read, a merge, the scrubber).
 * A repair task per target fetches each needsync chunk whole from a
 * serving replica (the committed tail, or the head when this replica is
 * the tail) and installs it with that replica's version.
 *
 * A target the map shows SYNCING in a chain (it came back, or replaces a
 * lost one) runs a resync of that chain: it lists the source's chunks of
 * the chain page by page, fetches every chunk whose version differs,
 * removes chunks of the chain the source no longer has, and repeats until
 * a pass copies nothing and no chunk of the chain is needsync; then it
 * tells mgmt, which makes it SERVING. Updates keep flowing to it during
 * the resync (it is the chain's tail), applied when their base matches.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "proto/mgmt.h"
#include "storage_int.h"
#include "common/errors_int.h"

#define LIST_PAGE SP_LIST_PAGE
#define SYNC_TICK_MS 300u
/* A lost chunk's repair is tried again this often (one fetch), and mgmt
 * hears again that it is lost (it forgets what is not repeated). */
#define LOST_RECHECK_MS 30000u
#define FETCH_MAX CHUNK_MAX_SIZE
#define FETCH_MIN (64u << 10)	/* the first buffer of a chunk of unknown size */

struct list_ent {
	struct chunk_id id;
	uint64_t version;
	uint32_t length;
	uint32_t crc;
	uint64_t busy;			/* version of an update in flight at the
					 * source, 0: none */
};

/* Where a copy is read from. */
struct source {
	char addr[CM_ADDR_LEN];
	uint32_t target;
	uint64_t chain_ver;
};

struct resync {
	struct resync *next;
	struct target *t;
	uint32_t chain_id;
	bool full;			/* chain resync (else: needsync repairs) */
	bool busy;			/* an RPC or engine op in flight */
	bool done;
	/* the fetch in flight: where it went, what it asked */
	char src_addr[CM_ADDR_LEN];
	struct sp_read src_rd;
	/* listing of the current pass */
	struct list_ent *ents;
	uint32_t nents, pos;
	bool more;
	struct chunk_id cursor;
	bool started;
	struct chunk_id *seen;		/* ids of this pass, for extras */
	uint32_t nseen, capseen;
	struct chunk_id *before;	/* ours of the chain when the pass began */
	uint32_t nbefore;
	uint64_t reported_ok_ms;	/* mgmt took our "in sync": wait for the map */
	uint32_t copied;
	bool pass_failed;		/* a fetch or listing failed: the pass saw
					 * only part of the source's chunks */
	/* the chunk being fetched */
	struct chunk_id cur;
	struct cstate *cur_cs;
	uint32_t cur_gen;
	uint32_t cur_upd;		/* cur_cs->upd_gen when the fetch began */
	uint8_t *buf;
	uint32_t buf_cap;		/* grown to the largest chunk fetched */
	struct source cur_src;		/* where the current chunk is fetched */
	uint64_t fetched_version;
	uint32_t fetched_len;
	uint64_t reported_ms;
	uint32_t fails;			/* failed fetches: picks the next source */
	uint64_t pass_ver;		/* chain version the pass lists at; a pass
					 * that sees another is not clean */
	/* the survey of a chunk this replica may be behind on */
	uint32_t survey_left;		/* replies still awaited */
	bool survey_failed;		/* a serving member did not answer */
	uint32_t survey_serving;	/* serving members that answered */
	bool survey_dirty;		/* of a dirty chunk (else: behind) */
	bool survey_away;		/* members taken out may come back */
	bool survey_absent;		/* we hold no copy (maybe a tombstone) */
	bool survey_fetch;		/* the fetch in flight is a survey's */
	bool dirty_turn;		/* repairs: a dirty chunk goes first */
	uint64_t survey_min, survey_max;
	uint64_t survey_least;		/* survey_min, members without a copy
					 * counted at 0 whatever ours */
	struct source survey_best;	/* holds survey_max */
	uint32_t survey_len;		/* its chunk's length */
	struct source survey_low;	/* holds survey_min */
};

static void task_step(struct resync *rs);
static void snapshot_before(struct resync *rs);
static void fetch_from(struct resync *rs, const struct source *src, uint32_t len);

/* ---- choosing a source ---- */

/* A serving member other than t to copy from: the committed tail, or the
 * head when t is the tail; after a failed fetch (the source may hold a bad
 * copy too), the next serving member in turn. Fills addr/target/chain
 * version. */
static int pick_source(struct target *t, uint32_t chain_id, uint32_t turn, struct source *src)
{
	struct map_snap *snap = map_get(t->st);
	const struct cm_chain *c = snap ? cm_find_chain(&snap->map, chain_id) : NULL;
	const struct cm_target *ct = NULL;
	const struct cm_node *nd = NULL;
	int cand[CM_CHAIN_SLOTS], n = 0;
	int rc = STRATA_EUNAVAIL;

	if (c) {
		int tail = cm_serving_tail(c);

		if (tail >= 0 && c->targets[tail] != t->id)
			cand[n++] = tail;
		for (int i = 0; i < c->len && n < CM_CHAIN_SLOTS; i++) {
			if (i != tail && c->targets[i] != t->id && c->states[i] == TARGET_SERVING)
				cand[n++] = i;
		}
		if (n)
			ct = cm_find_target(&snap->map, c->targets[cand[turn % n]]);
		nd = ct ? cm_find_node(&snap->map, ct->node_id) : NULL;
		if (nd) {
			snprintf(src->addr, sizeof(src->addr), "%s", nd->addr);
			src->target = ct->id;
			src->chain_ver = c->version;
			rc = 0;
		}
	}
	map_put(t->st, snap);
	return rc;
}

/* ---- needsync marks ---- */

/* What a mark says of the copy at hand. */
enum mark_kind {
	MARK_BEHIND,		/* intact, maybe lacking an update it passed on */
	MARK_COPY,		/* intact, not what the chain holds: fetched */
	MARK_DAMAGED,		/* bad (a checksum failed): fetched */
};

static void mark(struct target *t, const struct chunk_id *id, uint32_t chain_id,
		 enum mark_kind kind)
{
	struct cstate *c = cstate_find(t, id, true);

	if (!c)
		return;
	c->sync_gen++;
	/* A copy known bad stays so, whatever else is learnt of it, and one
	 * marked to be fetched is not surveyed instead. */
	c->damaged = kind == MARK_DAMAGED || (c->needsync && c->damaged);
	c->behind = kind == MARK_BEHIND && (!c->needsync || c->behind);
	if (chain_id)
		c->sync_chain = chain_id;
	if (!c->needsync) {
		c->needsync = true;
		c->snext = t->needsync;
		t->needsync = c;
		log_info("storage", "target %u: chunk %llx:%llx needs %s from chain %u", t->id,
			 (unsigned long long)id->ino, (unsigned long long)id->idx,
			 c->behind ? "a check" : c->damaged ? "a copy (its own is bad)" : "a copy",
			 c->sync_chain);
	}
}

void resync_mark(struct target *t, const struct chunk_id *id, uint32_t chain_id)
{
	mark(t, id, chain_id, MARK_DAMAGED);
}

void resync_mark_behind(struct target *t, const struct chunk_id *id, uint32_t chain_id)
{
	mark(t, id, chain_id, MARK_BEHIND);
}

void resync_clear(struct target *t, struct cstate *c)
{
	if (c->lost) {
		c->lost = false;
		CNT(t->st, n_lost, (uint64_t)-1);
		log_info("storage", "target %u: chunk %llx:%llx is no longer lost", t->id,
			 (unsigned long long)c->id.ino, (unsigned long long)c->id.idx);
		report_to_mgmt(t->st, t->id, &c->id, 0);
	}
	c->bad_srcs = 0;
	c->bad_ver = 0;
	for (struct cstate **pp = &t->needsync; *pp; pp = &(*pp)->snext) {
		if (*pp == c) {
			*pp = c->snext;
			break;
		}
	}
	c->needsync = false;
	c->behind = false;
	c->damaged = false;
	c->snext = NULL;
	cstate_maybe_free(t, c);
}

/* A chunk whose repair failed goes behind the others: one that cannot be
 * repaired now does not hold up the rest. */
static void needsync_to_back(struct target *t, struct cstate *c)
{
	struct cstate **pp = &t->needsync;

	if (!c->needsync)
		return;
	while (*pp && *pp != c)
		pp = &(*pp)->snext;
	if (!*pp)
		return;
	*pp = c->snext;
	c->snext = NULL;
	while (*pp)
		pp = &(*pp)->snext;
	*pp = c;
}

static bool chain_has_needsync(struct target *t, uint32_t chain_id)
{
	for (struct cstate *c = t->needsync; c; c = c->snext) {
		if (c->sync_chain == chain_id)
			return true;
	}
	return false;
}

/* ---- installing a fetched chunk ---- */

/* Lets go of the chunk being fetched; to_back: its repair failed, it goes
 * behind the other needsync chunks. */
static void release_cur(struct resync *rs, bool to_back)
{
	struct cstate *c = rs->cur_cs;

	if (!c)
		return;
	c->repairing = false;
	if (to_back)
		needsync_to_back(rs->t, c);
	rs->cur_cs = NULL;
	cstate_maybe_free(rs->t, c);
}

/* A fetch or a listing failed: the pass saw only part of the source's
 * chunks. It ends here and is not clean; the next tick starts another. */
static void pass_abort(struct resync *rs)
{
	rs->pos = rs->nents;
	rs->more = false;
	rs->copied++;
	rs->pass_failed = true;
}

static void task_free(struct resync *rs)
{
	struct target *t = rs->t;

	for (struct resync **pp = &t->resyncs; *pp; pp = &(*pp)->next) {
		if (*pp == rs) {
			*pp = rs->next;
			break;
		}
	}
	release_cur(rs, false);
	abuf_free(rs->buf);
	free(rs->ents);
	free(rs->seen);
	free(rs->before);
	free(rs);
}

static void on_installed(void *arg, int status, const struct chunk_info *info)
{
	struct resync *rs = arg;
	struct target *t = rs->t;
	struct cstate *c = rs->cur_cs;

	(void)info;
	rs->busy = false;
	if (status && status != -EALREADY) {
		log_warn("storage", "target %u: cannot install chunk %llx:%llx: %s", t->id,
			 (unsigned long long)rs->cur.ino, (unsigned long long)rs->cur.idx,
			 strata_strerror(status));
		if (c) {
			c->sync_err = status;
			if (status == -ENOSPC && chunk_space_avail(t->cs, &c->sync_err_avail))
				c->sync_err_avail = UINT64_MAX;
		}
		rs->copied++;	/* not clean */
		if (!rs->full) {
			/* Tried again at the next tick, not at once. */
			release_cur(rs, true);
			return;
		}
	} else {
		CNT(t->st, n_synced_chunks, 1);
		CNT(t->st, bytes_synced, rs->fetched_len);
		rs->copied++;
		/* A survey took a newer copy that a serving member lacks (it
		 * came from a dirty or a syncing member): not served here
		 * before every member holds it, as for our own update. A
		 * member without a copy lacks it too, even where survey_min
		 * leaves it out (we held none either). */
		if (c && (rs->src_rd.flags & SP_READ_SURVEY) && rs->fetched_version &&
		    rs->survey_least < rs->fetched_version) {
			c->busy_chain = rs->chain_id;	/* its survey asks there */
			cstate_set_dirty(t, c, true);
		}
		/* Cleared only if nothing new was missed while we fetched. */
		if (c && c->needsync && c->sync_gen == rs->cur_gen) {
			CNT(t->st, n_repaired, 1);
			resync_clear(t, c);
		}
	}
	release_cur(rs, false);
	task_step(rs);
}

static void on_removed_for_install(void *arg, int status, const struct chunk_info *info)
{
	(void)info;
	/* The source has no such chunk: removing ours was the repair. */
	on_installed(arg, status == -ENOENT ? 0 : status, NULL);
}

/*
 * Lost chunks. A damaged copy is repaired from another member; a member
 * whose own copy is damaged answers the repair with STRATA_EINTEGRITY
 * (chain_read.c). Once every other member of the chain, all serving, said
 * so at one chain version, no intact copy is left anywhere: the chunk is
 * lost. It stays marked (needsync, damaged) and reads of it answer
 * STRATA_ELOST at once, instead of "resyncing" until the reader gives up;
 * mgmt hears of it (status and /metrics count lost chunks). Its repair is
 * tried again every LOST_RECHECK_MS only, quietly (a source may come back
 * with a copy), and a removal of it is taken (chain_update.c): the file's
 * owner can clean it up.
 */
static void source_bad(struct resync *rs)
{
	struct target *t = rs->t;
	struct cstate *c = rs->cur_cs;
	struct map_snap *snap = map_get(t->st);
	const struct cm_chain *ch = snap ? cm_find_chain(&snap->map, rs->chain_id) : NULL;
	int pos = ch ? chain_pos(ch, rs->cur_src.target) : -1;
	bool all = ch != NULL;

	if (ch && c->bad_ver != ch->version) {
		c->bad_srcs = 0;
		c->bad_ver = ch->version;
	}
	if (pos >= 0)
		c->bad_srcs |= (uint16_t)(1u << pos);
	for (int i = 0; ch && i < ch->len; i++) {
		if (ch->targets[i] == t->id)
			continue;
		/* A member away or syncing may still hold a good copy. */
		if (ch->states[i] != TARGET_SERVING || !(c->bad_srcs & (1u << i)))
			all = false;
	}
	map_put(t->st, snap);
	if (!all)
		return;
	c->lost_ms = reactor_now_ms();
	if (!c->lost) {
		c->lost = true;
		CNT(t->st, n_lost, 1);
		log_error("storage", "target %u: chunk %llx:%llx of chain %u is lost: every replica's"
			  " copy is damaged; reads of it fail, remove or rewrite its file", t->id,
			  (unsigned long long)c->id.ino, (unsigned long long)c->id.idx, rs->chain_id);
	}
	report_to_mgmt(t->st, t->id, &c->id, STRATA_ELOST);
}

static void on_fetched(void *arg, int status, struct rpc_msg *resp)
{
	struct resync *rs = arg;
	struct target *t = rs->t;
	struct sp_read_rep rep;
	uint32_t nread = 0, crc = 0;
	int rc;

	if (rs->done) {
		rs->busy = false;
		task_free(rs);
		return;
	}
	if (!status) {
		rc = st_read_rep(resp, &rep);
		rs->fetched_version = rep.version;
		nread = rep.nread;
		crc = rep.crc;
		if (rc || nread != resp->hdr.bulk_len) {
			status = STRATA_EBADMSG;
		} else if (nread < rep.length && nread == rs->src_rd.len &&
			   rep.length <= FETCH_MAX) {
			/* Larger than our buffer: again, with room for all. */
			rs->busy = false;
			rs->survey_fetch = rs->src_rd.flags & SP_READ_SURVEY;
			fetch_from(rs, &rs->cur_src, rep.length);
			rs->survey_fetch = false;
			return;
		} else if (crc32c(0, rs->buf, nread) != crc) {
			/* The source's copy may be damaged: it sends cached
			 * blocks unverified, the reader checking them. */
			status = STRATA_EINTEGRITY;
			sp_ask_verify(t->pool, rs->src_addr, &rs->src_rd, t->st->timeout_ms);
		}
		rs->fetched_len = nread;
	}
	if (status) {
		if (status == STRATA_EINTEGRITY && !rs->full && rs->cur_cs && rs->cur_cs->damaged)
			source_bad(rs);
		else if (!rs->cur_cs || !rs->cur_cs->lost)
			log_warn_limited("storage", "target %u: fetching chunk %llx:%llx of chain %u failed: %s (will retry)",
					 t->id, (unsigned long long)rs->cur.ino,
					 (unsigned long long)rs->cur.idx, rs->chain_id,
					 strata_strerror(status));
		rs->busy = false;
		rs->fails++;
		release_cur(rs, true);
		pass_abort(rs);
		return;
	}
	/* An update reached this chunk while we fetched: installing the
	 * copy would take back what it wrote. Look again later (a needsync
	 * chunk's next forwarded update brings it whole anyway). */
	if (rs->cur_cs && rs->cur_cs->upd_gen != rs->cur_upd) {
		rs->busy = false;
		/* A chunk written faster than it can be fetched: marked, its
		 * next forwarded update brings it whole (and the chain is not
		 * reported in sync before). */
		if (rs->full)
			mark(t, &rs->cur, rs->chain_id, MARK_COPY);
		release_cur(rs, false);
		rs->copied++;	/* not clean: another pass */
		if (!rs->full)
			rs->pos = rs->nents;
		task_step(rs);
		return;
	}
	rs->fails = 0;
	/* Replace whatever we hold by the source's version, whole and
	 * atomically; a chunk the source lacks goes. */
	if (rs->fetched_version == 0)
		rc = chunk_remove(t->cs, &rs->cur, 0, on_removed_for_install, rs);
	else
		rc = chunk_replace(t->cs, &rs->cur, rs->buf, rs->fetched_len, crc,
				   rs->fetched_version, rs->chain_id, on_installed, rs);
	if (rc)
		on_installed(rs, rc, NULL);
}

/* Takes chunk id as the one this task works on. */
static void begin_cur(struct resync *rs, const struct chunk_id *id)
{
	rs->cur = *id;
	rs->cur_cs = cstate_find(rs->t, id, true);
	if (rs->cur_cs) {
		rs->cur_cs->repairing = true;
		rs->cur_cs->sync_err = 0;	/* this attempt tells anew */
		rs->cur_gen = rs->cur_cs->sync_gen;
		rs->cur_upd = rs->cur_cs->upd_gen;
	}
}

/* Room in rs->buf for a chunk of len bytes (at most FETCH_MAX). */
static int ensure_buf(struct resync *rs, uint32_t len)
{
	uint32_t cap = len < FETCH_MIN ? FETCH_MIN : len;

	if (cap > FETCH_MAX)
		cap = FETCH_MAX;
	if (rs->buf && rs->buf_cap >= cap)
		return 0;
	abuf_free(rs->buf);
	rs->buf = abuf_alloc(cap);
	rs->buf_cap = rs->buf ? cap : 0;
	return rs->buf ? 0 : -ENOMEM;
}

/* Fetches the current chunk whole from src; len: its length if known (0:
 * not known; a larger chunk is fetched again with the room it needs). */
static void fetch_from(struct resync *rs, const struct source *src, uint32_t len)
{
	struct target *t = rs->t;
	struct sp_read rd = { 0 };
	struct proto_call c = { .cb = on_fetched, .arg = rs, .timeout_ms = t->st->timeout_ms };
	int rc = ensure_buf(rs, len);

	if (!rc && rs->full && src->chain_ver != rs->pass_ver)
		rc = STRATA_ESTALE_MAP;	/* the chain changed under this pass */
	if (!rc) {
		rd.ref.chain_id = rs->chain_id;
		rd.ref.chain_ver = src->chain_ver;
		rd.ref.target_id = src->target;
		rd.ref.ino = rs->cur.ino;
		rd.ref.idx = rs->cur.idx;
		rd.len = rs->buf_cap;
		/* A copy not committed yet is a state the chain went through
		 * (a resync never fetches one held back: it is listed busy). */
		rd.flags = rs->survey_fetch ? SP_READ_SURVEY : SP_READ_REPAIR;
		rs->src_rd = rd;
		rs->cur_src = *src;
		snprintf(rs->src_addr, sizeof(rs->src_addr), "%s", src->addr);
		c.bulk_dst = rs->buf;
		c.bulk_cap = rs->buf_cap;
		rs->busy = true;
		rc = st_read_call(t->pool, src->addr, &rd, &c);
		if (rc)
			rs->busy = false;
	}
	if (rc) {
		release_cur(rs, true);
		pass_abort(rs);
	}
}

static void fetch(struct resync *rs, const struct chunk_id *id, uint32_t len)
{
	struct source src;

	begin_cur(rs, id);
	if (pick_source(rs->t, rs->chain_id, rs->fails, &src)) {
		release_cur(rs, true);
		pass_abort(rs);
		return;
	}
	fetch_from(rs, &src, len);
}

/* ---- a chunk this replica may be behind on ----
 *
 * Its own write of an update failed, after the update was passed on: the
 * members below (and above) may hold the update, or not. Its copy is
 * intact, and every member's intact copy is a state the chunk went
 * through, even one a syncing member holds back from clients. So it asks
 * every other member for its version (a read of nothing): the newest copy
 * among them and ours is the one to hold. Newer elsewhere, on a serving or
 * a syncing member: fetched from there. Ours the newest: kept, and if some
 * serving member holds less (nobody else applied the update), ours is
 * dirty (below). A member that does not answer fails the survey, which is
 * tried again later; with no other serving member to ask and members away,
 * ours is held back until one returns.
 *
 * A dirty chunk (applied here, its forward failed) is surveyed the same
 * way, every member counted, syncing ones too: once all hold what we
 * applied, it is committed and served again.
 */

static void on_pushed(void *arg, int status, struct rpc_msg *resp)
{
	struct resync *rs = arg;

	(void)resp;
	rs->busy = false;
	if (rs->done) {
		task_free(rs);
		return;
	}
	if (status)
		log_warn("storage", "target %u: sending chunk %llx:%llx to target %u failed: %s (will retry)",
			 rs->t->id, (unsigned long long)rs->cur.ino, (unsigned long long)rs->cur.idx,
			 rs->cur_src.target, strata_strerror(status));
	release_cur(rs, status != 0);
}

static void on_push_read(void *arg, int status, const struct chunk_info *info, uint32_t nread,
			 uint32_t crc)
{
	struct resync *rs = arg;
	struct target *t = rs->t;
	struct sp_update u = { .ref = { rs->chain_id, rs->cur_src.chain_ver, rs->cur_src.target,
					rs->cur.ino, rs->cur.idx },
			       .forwarded = SP_FWD_PUSH, .len = nread, .crc = crc };
	struct proto_call c = { .bulk = rs->buf, .bulk_len = nread, .cb = on_pushed, .arg = rs,
				.timeout_ms = t->st->timeout_ms };

	if (!status && info)
		u.version = info->version;
	if (status || !info || rs->done ||
	    st_write_call(t->pool, rs->cur_src.addr, &u, &c)) {
		rs->busy = false;
		if (rs->done)
			task_free(rs);
		else
			release_cur(rs, true);
	}
}

/* Sends our copy of the current chunk to dst, which holds an older one. */
static void push_copy(struct resync *rs, const struct source *dst, const struct chunk_info *ci)
{
	rs->cur_src = *dst;
	if (ensure_buf(rs, ci->length) ||
	    chunk_read(rs->t->cs, &rs->cur, 0, ci->length, rs->buf, on_push_read, rs)) {
		release_cur(rs, true);
		return;
	}
	rs->busy = true;
}

struct probe {
	struct resync *rs;
	struct source src;
	bool serving;		/* a serving member (else syncing) */
};

static void survey_done(struct resync *rs)
{
	struct target *t = rs->t;
	struct cstate *c = rs->cur_cs;
	struct chunk_info ci;

	rs->busy = false;
	if (rs->done) {
		task_free(rs);
		return;
	}
	(void)chunk_stat(t->cs, &rs->cur, &ci);
	if (rs->survey_failed || !c || c->sync_gen != rs->cur_gen || c->upd_gen != rs->cur_upd) {
		/* A member did not answer, or the chunk moved meanwhile. */
		rs->fails++;
		release_cur(rs, true);
		return;
	}
	if (rs->survey_max > ci.version) {
		rs->survey_fetch = true;
		fetch_from(rs, &rs->survey_best, rs->survey_len);
		rs->survey_fetch = false;
		return;
	}
	if (rs->survey_dirty) {
		/* Every member holds what we applied (or more): it is
		 * committed. Else the member with the least gets our copy
		 * (the newest copy wins, on every member), dirty there while
		 * the others lack it (chain_update.c); the next survey looks
		 * again. */
		if (rs->survey_min >= ci.version) {
			cstate_set_dirty(t, c, false);
			release_cur(rs, false);
		} else {
			push_copy(rs, &rs->survey_low, &ci);
		}
		return;
	}
	if (!rs->survey_serving && rs->survey_away) {
		/* No serving member to compare with, and members that may hold
		 * the update are away: ours is held back until one is back. */
		rs->fails++;
		release_cur(rs, true);
		return;
	}
	if (!rs->survey_serving)
		log_warn("storage", "target %u: chunk %llx:%llx: no other member of chain %u holds or may return with a newer copy; keeping ours",
			 t->id, (unsigned long long)rs->cur.ino, (unsigned long long)rs->cur.idx,
			 rs->chain_id);
	if (rs->survey_min < ci.version)
		cstate_set_dirty(t, c, true);
	CNT(t->st, n_repaired, 1);
	resync_clear(t, c);
	release_cur(rs, false);
	task_step(rs);
}

/* A serving member's version counts both ways; a syncing member's only
 * when newer (it may hold the update, or be empty because it is new). So
 * a member that does not answer fails the survey, syncing or not: its copy
 * may be the newest, and the survey is tried again at a later tick. A
 * syncing member whose own copy is bad (STRATA_EINTEGRITY) has nothing to
 * offer and does not hold a survey of a behind chunk up: it is repaired
 * from the serving members, maybe from this one once the survey is done. */
static void on_probed(void *arg, int status, struct rpc_msg *resp)
{
	struct probe *p = arg;
	struct resync *rs = p->rs;
	struct sp_read_rep rep;

	if (!status)
		status = st_read_rep(resp, &rep);
	if (status) {
		if (p->serving || rs->survey_dirty || status != STRATA_EINTEGRITY)
			rs->survey_failed = true;
	} else {
		if (rep.version > rs->survey_max) {
			rs->survey_max = rep.version;
			rs->survey_best = p->src;
			rs->survey_len = rep.length;
		}
		if (p->serving)
			rs->survey_serving++;
		if ((p->serving || rs->survey_dirty) && rep.version < rs->survey_least)
			rs->survey_least = rep.version;
		/* A member without a copy answers version 0. When we hold none
		 * either, it holds what we hold, whatever our tombstone's
		 * version: compared with that, it would look older for ever
		 * (and there is no copy to push it). */
		if ((p->serving || rs->survey_dirty) && rep.version < rs->survey_min &&
		    !(rs->survey_absent && rep.version == 0)) {
			rs->survey_min = rep.version;
			rs->survey_low = p->src;
		}
	}
	free(p);
	if (--rs->survey_left == 0)
		survey_done(rs);
}

static void survey(struct resync *rs, const struct chunk_id *id, bool dirty)
{
	struct target *t = rs->t;
	struct chunk_info ci;
	struct map_snap *snap = map_get(t->st);
	const struct cm_chain *c = snap ? cm_find_chain(&snap->map, rs->chain_id) : NULL;

	begin_cur(rs, id);
	rs->survey_failed = !c || chain_pos(c, t->id) < 0;
	rs->survey_absent = chunk_stat(t->cs, id, &ci) == -ENOENT;
	rs->survey_min = rs->survey_least = UINT64_MAX;
	rs->survey_max = 0;
	rs->survey_serving = 0;
	rs->survey_dirty = dirty;
	rs->survey_away = c && c->nout > 0;
	rs->survey_left = 1;	/* ours, released below */
	rs->busy = true;
	for (int i = 0; c && i < c->len && !rs->survey_failed; i++) {
		const struct cm_target *ct = cm_find_target(&snap->map, c->targets[i]);
		const struct cm_node *nd = ct ? cm_find_node(&snap->map, ct->node_id) : NULL;
		struct sp_read rd = { .ref = { c->id, c->version, c->targets[i], id->ino, id->idx },
				      .flags = SP_READ_SURVEY };
		struct proto_call pc = { .cb = on_probed, .timeout_ms = t->st->timeout_ms };
		struct probe *p;

		if (c->targets[i] == t->id)
			continue;
		p = nd ? calloc(1, sizeof(*p)) : NULL;
		if (!p) {
			rs->survey_failed = true;
			break;
		}
		p->rs = rs;
		p->serving = c->states[i] == TARGET_SERVING;
		snprintf(p->src.addr, sizeof(p->src.addr), "%s", nd->addr);
		p->src.target = ct->id;
		p->src.chain_ver = c->version;
		pc.arg = p;
		rs->survey_left++;
		if (st_read_call(t->pool, nd->addr, &rd, &pc)) {
			rs->survey_left--;
			rs->survey_failed = true;
			free(p);
		}
	}
	map_put(t->st, snap);
	if (--rs->survey_left == 0)
		survey_done(rs);
}

/* ---- a full resync's listing ---- */

static int cmp_id(const struct chunk_id *a, const struct chunk_id *b)
{
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	if (a->idx != b->idx)
		return a->idx < b->idx ? -1 : 1;
	return 0;
}

static void on_list(void *arg, int status, struct rpc_msg *resp)
{
	struct resync *rs = arg;
	struct sp_list_rep rep = { 0 };
	uint32_t n;

	rs->busy = false;
	if (rs->done) {
		task_free(rs);
		return;
	}
	if (!status)
		status = st_list_rep(resp, &rep);
	if (status) {
		log_warn("storage", "target %u: listing chain %u at its source failed: %s (will retry)",
			 rs->t->id, rs->chain_id, strata_strerror(status));
		pass_abort(rs);
		return;
	}
	n = rep.ents_n;
	free(rs->ents);
	rs->ents = calloc(n ? n : 1, sizeof(*rs->ents));
	for (uint32_t i = 0; rs->ents && i < n; i++) {
		const struct sp_list_ent *e = &rep.ents[i];

		rs->ents[i] = (struct list_ent){ { e->ino, e->idx }, e->version, e->length, e->crc,
						 e->busy };
	}
	rs->more = rep.more;
	sp_list_rep_release(&rep);
	if (!rs->ents) {
		rs->nents = 0;
		pass_abort(rs);
		return;
	}
	rs->nents = n;
	rs->pos = 0;
	if (n)
		rs->cursor = rs->ents[n - 1].id;
	task_step(rs);
}

static void list_page(struct resync *rs)
{
	struct target *t = rs->t;
	struct source src;
	struct sp_list rq;
	struct proto_call c = { .cb = on_list, .arg = rs, .timeout_ms = t->st->timeout_ms };

	/* One pass lists one source (the committed tail): remove_extras
	 * trusts the listing as a whole. */
	if (pick_source(t, rs->chain_id, 0, &src) ||
	    (rs->started && src.chain_ver != rs->pass_ver)) {
		pass_abort(rs);
		return;
	}
	if (!rs->started) {
		rs->pass_ver = src.chain_ver;
		snapshot_before(rs);
	}
	rq = (struct sp_list){ rs->chain_id, src.chain_ver, src.target, rs->cursor.ino,
			       rs->cursor.idx, LIST_PAGE, rs->started ? 1 : 0 };
	rs->started = true;
	rs->busy = true;
	if (st_list_call(t->pool, src.addr, &rq, &c)) {
		rs->busy = false;
		pass_abort(rs);
	}
}

static int seen_has(const struct resync *rs, const struct chunk_id *id)
{
	uint32_t lo = 0, hi = rs->nseen;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		int c = cmp_id(&rs->seen[mid], id);

		if (c == 0)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static void seen_add(struct resync *rs, const struct chunk_id *id)
{
	if (rs->nseen == rs->capseen) {
		uint32_t cap = rs->capseen ? rs->capseen * 2 : 1024;
		struct chunk_id *v = realloc(rs->seen, cap * sizeof(*v));

		if (!v)
			return;
		rs->seen = v;
		rs->capseen = cap;
	}
	rs->seen[rs->nseen++] = *id;	/* pages come sorted */
}

struct extras_ctx {
	struct resync *rs;
	struct chunk_id *v;
	uint32_t n, cap;
};

static int collect_tagged(void *arg, const struct chunk_info *info)
{
	struct extras_ctx *x = arg;

	if (info->tag != x->rs->chain_id)
		return 0;
	if (x->n == x->cap) {
		uint32_t cap = x->cap ? x->cap * 2 : 64;
		struct chunk_id *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return 1;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = info->id;
	return 0;
}

static int cmp_chunk_id(const void *a, const void *b)
{
	return cmp_id(a, b);
}

/* At the start of a pass: the chunks of the chain this target holds. Only
 * those can be extras at its end: a chunk created during the pass may not
 * be in the source's listing yet (the source forwards an update before its
 * own write commits). */
static void snapshot_before(struct resync *rs)
{
	struct extras_ctx x = { rs, NULL, 0, 0 };

	chunk_list(rs->t->cs, collect_tagged, &x);
	if (x.n)
		qsort(x.v, x.n, sizeof(*x.v), cmp_chunk_id);
	free(rs->before);
	rs->before = x.v;
	rs->nbefore = x.n;
}

/* End of a complete pass: drop chunks of the chain the source no longer
 * has (held since the pass began, not listed by the source, not being
 * written). Updates of a chunk with a removal queued are taken whole. */
static void remove_extras(struct resync *rs)
{
	for (uint32_t i = 0; i < rs->nbefore; i++) {
		if (!seen_has(rs, &rs->before[i]) &&
		    target_remove_idle(rs->t, &rs->before[i], false))
			rs->copied++;
	}
}

static void report_synced(struct resync *rs);

/* Advances a task: the next chunk to fetch, the next page, or the end of
 * a pass. Runs on the target's thread. */
static void task_step(struct resync *rs)
{
	struct target *t = rs->t;

	if (rs->busy)
		return;
	if (rs->done) {
		task_free(rs);
		return;
	}
	/* mgmt took our "in sync": the map will make us SERVING and end the
	 * task; no more passes meanwhile (unless the map never comes). */
	if (rs->full && rs->reported_ok_ms && reactor_now_ms() - rs->reported_ok_ms < 5000)
		return;
	rs->reported_ok_ms = 0;
	if (!rs->full) {
		/* Repairs: one chunk at a time, needsync and dirty ones in
		 * turn (a needsync chunk that cannot be repaired now does not
		 * hold the dirty ones up). */
		struct cstate *pick = NULL, *dpick = NULL;
		uint64_t now = reactor_now_ms();

		for (struct cstate *c = t->needsync; c && !pick; c = c->snext) {
			if (!c->repairing && c->inflight == 0 &&
			    (!c->lost || now - c->lost_ms >= LOST_RECHECK_MS))
				pick = c;
		}
		/* A lost chunk once per LOST_RECHECK_MS: one source asked
		 * anew (they take turns); a bad answer confirms the loss. */
		if (pick && pick->lost)
			pick->lost_ms = now;
		for (struct cstate *c = t->dirty; c && !dpick; c = c->dnext) {
			if (!c->repairing && c->inflight == 0 && !c->needsync)
				dpick = c;
		}
		if (dpick && (rs->dirty_turn || !pick)) {
			rs->dirty_turn = false;
			rs->chain_id = dpick->busy_chain;
			survey(rs, &dpick->id, true);
		} else if (pick) {
			rs->dirty_turn = true;
			rs->chain_id = pick->sync_chain;
			if (pick->behind)
				survey(rs, &pick->id, false);
			else
				fetch(rs, &pick->id, 0);
		}
		return;
	}
	while (rs->pos < rs->nents) {
		struct list_ent *e = &rs->ents[rs->pos++];
		struct chunk_info ci;
		struct cstate *c = cstate_find(t, &e->id, false);
		/* Same version is the same content (a version is never handed
		 * out twice); length and CRC32C are checked all the same. */
		bool same = chunk_stat(t->cs, &e->id, &ci) == 0 && ci.version == e->version &&
			    ci.length == e->length && ci.crc == e->crc;

		seen_add(rs, &e->id);
		if (e->busy) {
			/* An update is in flight at the source: its committed
			 * copy is about to change. Holding that update already
			 * (we are after the source) or the copy it had is in
			 * sync; anything else is marked, so the pass is not
			 * clean and the next update brings the chunk whole. */
			if ((ci.version == e->busy || same) && !(c && c->needsync))
				continue;
			mark(t, &e->id, rs->chain_id, MARK_COPY);
			rs->copied++;
			continue;
		}
		if (c && (c->inflight || c->repairing)) {
			/* An update in flight here: not fetched now. If the
			 * copies differ, the chunk is marked so that the pass is
			 * not clean and the next update brings it whole. */
			if (!c->repairing && !same) {
				mark(t, &e->id, rs->chain_id, MARK_COPY);
				rs->copied++;
			}
			continue;
		}
		if (same && !(c && c->needsync))
			continue;
		fetch(rs, &e->id, e->length);
		return;
	}
	if (rs->more) {
		list_page(rs);
		return;
	}
	/* A pass is over. Only a complete listing tells what the source
	 * no longer has. */
	if (!rs->pass_failed)
		remove_extras(rs);
	if (rs->copied == 0 && !chain_has_needsync(t, rs->chain_id)) {
		report_synced(rs);
	} else {
		log_info("storage", "target %u: resync pass of chain %u copied %u chunk(s); another pass",
			 t->id, rs->chain_id, rs->copied);
	}
	/* Next pass from the start, at the next tick. */
	rs->copied = 0;
	rs->pass_failed = false;
	rs->started = false;
	rs->nseen = 0;
	rs->nents = rs->pos = 0;
	rs->more = true;
	memset(&rs->cursor, 0, sizeof(rs->cursor));
}

static void on_sync_reported(void *arg, int status, struct rpc_msg *resp)
{
	struct resync *rs = arg;

	(void)resp;
	rs->busy = false;
	if (status)
		log_warn("storage", "target %u: mgmt refused sync of chain %u: %s", rs->t->id,
			 rs->chain_id, strata_strerror(status));
	else
		rs->reported_ok_ms = reactor_now_ms();
	if (rs->done)
		task_free(rs);
}

static void report_synced(struct resync *rs)
{
	struct target *t = rs->t;
	/* With the chain version the clean pass ran at: mgmt ignores a report
	 * the chain has moved on from (it may have missed writes since). */
	struct mg_admin rq = { MGMT_ADMIN_SYNCED, t->id, rs->chain_id, rs->pass_ver };
	struct proto_call c = { .cb = on_sync_reported, .arg = rs, .timeout_ms = t->st->timeout_ms };
	uint64_t now = reactor_now_ms();

	if (now - rs->reported_ms < 1000)
		return;
	rs->reported_ms = now;
	log_info("storage", "target %u caught up with chain %u: telling mgmt", t->id, rs->chain_id);
	rs->busy = true;
	/* The mgmt the heartbeats found: they move it on a leader change. */
	if (mg_admin_call(t->pool, mgmt_addrs_cur(&t->st->mgmt), &rq, &c))
		rs->busy = false;
}

/* ---- task management (target thread) ---- */

static struct resync *task_new(struct target *t, uint32_t chain_id, bool full)
{
	struct resync *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->t = t;
	rs->chain_id = chain_id;
	rs->full = full;
	rs->more = true;
	rs->next = t->resyncs;
	t->resyncs = rs;
	if (full)
		log_info("storage", "target %u: resync of chain %u starts", t->id, chain_id);
	return rs;
}

void resync_check(struct target *t)
{
	struct map_snap *snap = map_get(t->st);
	bool have_repair = false;

	for (struct resync *rs = t->resyncs; rs; rs = rs->next) {
		if (!rs->full)
			have_repair = true;
	}
	for (uint32_t i = 0; snap && i < snap->map.nchains; i++) {
		const struct cm_chain *c = &snap->map.chains[i];
		int pos = chain_pos(c, t->id);
		struct resync *rs;

		for (rs = t->resyncs; rs; rs = rs->next) {
			if (rs->full && rs->chain_id == c->id)
				break;
		}
		if (pos >= 0 && c->states[pos] == TARGET_SYNCING) {
			if (!rs)
				rs = task_new(t, c->id, true);
		} else if (rs && !rs->done) {
			log_info("storage", "target %u: resync of chain %u complete", t->id, c->id);
			rs->done = true;
			if (!rs->busy)
				task_free(rs);
		}
	}
	map_put(t->st, snap);
	if (!have_repair && (t->needsync || t->dirty))
		task_new(t, 0, false);
	for (struct resync *rs = t->resyncs, *next; rs; rs = next) {
		next = rs->next;
		if (!rs->full && !rs->busy && !t->needsync && !t->dirty) {
			task_free(rs);
			continue;
		}
		task_step(rs);
	}
}

static void on_sync_tick(void *arg)
{
	struct target *t = arg;

	resync_check(t);
	recover_check(t);
	reclaim_check(t);
	reactor_timer_arm(t->r, &t->sync_timer, SYNC_TICK_MS);
}

void resync_start_target(struct target *t)
{
	reactor_timer_init(&t->sync_timer, on_sync_tick, t);
	reactor_timer_arm(t->r, &t->sync_timer, SYNC_TICK_MS);
}

void resync_stop_target(struct target *t)
{
	reactor_timer_cancel(t->r, &t->sync_timer);
	reactor_timer_cancel(t->r, &t->scrub_timer);
	/* Tasks with an RPC in flight are freed by its callback when the
	 * pool closes (it runs with an error); the others now. */
	for (struct resync *rs = t->resyncs, *next; rs; rs = next) {
		next = rs->next;
		rs->done = true;
		/* The target frees every cstate next. */
		rs->cur_cs = NULL;
		if (!rs->busy)
			task_free(rs);
	}
	abuf_free(t->scrub_buf);
	t->scrub_buf = NULL;
	free(t->scrub_ids);
	t->scrub_ids = NULL;
}

/* ---- OP_CHUNK_LIST (at the source): sp_list -> sp_list_rep ---- */

struct list_ctx {
	uint32_t chain;
	struct list_ent *v;
	uint32_t n, cap;
	int err;
};

static struct list_ent *list_add(struct list_ctx *x)
{
	if (x->n == x->cap) {
		uint32_t cap = x->cap ? x->cap * 2 : 1024;
		struct list_ent *v = realloc(x->v, cap * sizeof(*v));

		if (!v) {
			x->err = -ENOMEM;
			return NULL;
		}
		x->v = v;
		x->cap = cap;
	}
	memset(&x->v[x->n], 0, sizeof(x->v[x->n]));
	return &x->v[x->n++];
}

static int collect_chain(void *arg, const struct chunk_info *info)
{
	struct list_ctx *x = arg;
	struct list_ent *e;

	if (info->tag != x->chain)
		return 0;
	e = list_add(x);
	if (!e)
		return 1;
	e->id = info->id;
	e->version = info->version;
	e->length = info->length;
	e->crc = info->crc;
	return 0;
}

static int cmp_ent(const void *a, const void *b)
{
	return cmp_id(&((const struct list_ent *)a)->id, &((const struct list_ent *)b)->id);
}

/* The entry of id among the first n (sorted) of v, or NULL. */
static struct list_ent *find_ent(struct list_ent *v, uint32_t n, const struct chunk_id *id)
{
	struct list_ent key = { .id = *id };

	return n ? bsearch(&key, v, n, sizeof(*v), cmp_ent) : NULL;
}

/* Chunks of the chain with an update in flight here: their committed copy
 * is about to change (a chunk being created has none yet), and the
 * resyncing replica after us may hold the update already. */
static void collect_busy(struct target *t, struct list_ctx *x)
{
	uint32_t committed = x->n;

	for (uint32_t b = 0; b < CSTATE_BUCKETS && !x->err; b++) {
		for (struct cstate *c = t->buckets[b]; c && !x->err; c = c->next) {
			struct list_ent *e;

			if (!(c->inflight && c->busy_chain == x->chain) &&
			    !(c->needsync && c->sync_chain == x->chain))
				continue;
			e = find_ent(x->v, committed, &c->id);
			if (!e) {
				e = list_add(x);
				if (!e)
					break;
				e->id = c->id;
			}
			/* A copy this source lacks or holds back matches
			 * nothing: the pass is not clean while it is so. */
			e->busy = c->needsync ? UINT64_MAX : c->busy_ver ? c->busy_ver : 1;
		}
	}
}

void op_chunk_list(void *svc, struct svc_req *req)
{
	struct storage *st = svc;
	struct list_ctx x = { 0 };
	struct sp_list rq;
	struct sp_list_rep rep = { 0 };
	struct chunk_id after;
	struct target *t;
	struct sp_ref ref = { 0 };
	struct map_snap *snap;
	const struct cm_chain *chain;
	uint32_t i, n = 0;
	int pos, rc;

	if (st_list_req(req, &rq))
		return;
	ref = (struct sp_ref){ .chain_id = rq.chain_id, .chain_ver = rq.chain_ver,
			       .target_id = rq.target_id };
	x.chain = rq.chain_id;
	after = (struct chunk_id){ rq.after_ino, rq.after_idx };
	t = find_target(st, ref.target_id);
	if (!t) {
		svc_reply(req, STRATA_ESTALE_MAP);
		return;
	}
	/* Listed at the chain version the resyncing replica works at, so a
	 * pass never mixes two configurations of the chain. */
	snap = map_get(st);
	/* A target taken out of the chain lists its copies too: a member
	 * recovering the chain asks it (recover.c); a resync lists serving
	 * members only. */
	rc = check_ref_or_out(st, snap, &ref, &chain, &pos);
	/* A chain held back (recover.c) is no source: a resync from it would
	 * remove or replace copies newer than its own. */
	if (!rc && pos >= 0 && chain_held(t, &snap->map, chain, pos))
		rc = STRATA_ESYNCING;
	map_put(st, snap);
	if (rc) {
		svc_reply(req, rc);
		return;
	}
	chunk_list(t->cs, collect_chain, &x);
	if (!x.err && x.n)
		qsort(x.v, x.n, sizeof(*x.v), cmp_ent);
	if (!x.err)
		collect_busy(t, &x);
	if (x.err) {
		free(x.v);
		svc_reply(req, x.err);
		return;
	}
	if (x.n)
		qsort(x.v, x.n, sizeof(*x.v), cmp_ent);
	for (i = 0; i < x.n; i++) {
		int c = cmp_id(&x.v[i].id, &after);

		if (rq.after ? c > 0 : c >= 0)
			break;
	}
	n = x.n - i < rq.max ? x.n - i : rq.max;
	rep.ents = calloc(n ? n : 1, sizeof(*rep.ents));
	if (!rep.ents) {
		free(x.v);
		svc_reply(req, -ENOMEM);
		return;
	}
	rep.ents_n = n;
	for (uint32_t k = 0; k < n; k++) {
		const struct list_ent *e = &x.v[i + k];

		rep.ents[k] = (struct sp_list_ent){ e->id.ino, e->id.idx, e->version, e->length,
						    e->crc, e->busy };
	}
	rep.more = i + n < x.n;
	free(x.v);
	st_list_reply(req, 0, &rep);
	sp_list_rep_release(&rep);
}

/* ---- scrubber ---- */

#define SCRUB_TICK_MS 100u

struct scrub_ctx {
	struct target *t;
	uint64_t budget;
};

static int collect_ids(void *arg, const struct chunk_info *info)
{
	struct target *t = arg;

	if (t->scrub_n % 1024 == 0) {
		struct chunk_id *v = realloc(t->scrub_ids, (t->scrub_n + 1024) * sizeof(*v));

		if (!v)
			return 1;
		t->scrub_ids = v;
	}
	t->scrub_ids[t->scrub_n++] = info->id;
	return 0;
}

static void on_scrubbed(void *arg, int status, const struct chunk_info *info, uint32_t nread,
			uint32_t crc)
{
	struct target *t = arg;

	(void)nread;
	(void)crc;
	t->scrub_busy = false;
	CNT(t->st, n_scrubbed, 1);
	if (status == STRATA_EINTEGRITY && info) {
		CNT(t->st, n_integrity, 1);
		report_to_mgmt(t->st, t->id, &info->id, status);
		resync_mark(t, &info->id, info->tag);
	}
}

static void on_scrub_tick(void *arg)
{
	struct target *t = arg;
	uint64_t per_tick = t->scrub_rate_mb * 1024 * 1024 * SCRUB_TICK_MS / 1000;
	struct chunk_info ci;

	if (!t->scrub_busy) {
		if (t->scrub_pos >= t->scrub_n) {
			t->scrub_n = 0;
			t->scrub_pos = 0;
			chunk_list(t->cs, collect_ids, t);
		}
		/* One chunk per tick, skipped ticks pay for big chunks. */
		t->scrub_credit += per_tick;
		while (t->scrub_pos < t->scrub_n) {
			struct chunk_id *id = &t->scrub_ids[t->scrub_pos];

			if (chunk_stat(t->cs, id, &ci)) {
				t->scrub_pos++;
				continue;
			}
			if (t->scrub_credit < ci.length)
				break;
			t->scrub_credit -= ci.length;
			t->scrub_pos++;
			if (!t->scrub_buf)
				t->scrub_buf = abuf_alloc(CHUNK_MAX_SIZE);
			if (t->scrub_buf && chunk_read(t->cs, id, 0, ci.length, t->scrub_buf,
						       on_scrubbed, t) == 0)
				t->scrub_busy = true;
			break;
		}
		if (t->scrub_credit > per_tick * 100 + CHUNK_MAX_SIZE)
			t->scrub_credit = per_tick * 100 + CHUNK_MAX_SIZE;
	}
	reactor_timer_arm(t->r, &t->scrub_timer, SCRUB_TICK_MS);
}

void scrub_start(struct target *t, uint64_t rate_mb)
{
	t->scrub_rate_mb = rate_mb;
	reactor_timer_init(&t->scrub_timer, on_scrub_tick, t);
	if (rate_mb)
		reactor_timer_arm(t->r, &t->scrub_timer, SCRUB_TICK_MS);
}
