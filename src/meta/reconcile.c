/*
 * The orphan chunk reconciler: see reconcile.h for what it takes and what
 * it never does.
 *
 * A pass walks the chain table one chain at a time and each chain one
 * page (SP_LIST_PAGE entries) at a time, with REC_PAGE_GAP_MS between
 * pages: OP_CHUNK_LIST costs the head a walk of its chunk index, so a
 * pass must not hammer it. Orphans wait in a hash table keyed by (chain,
 * ino, idx) with the time and version they were first seen; one not seen
 * again by a clean pass (listing and namespace reads without error) is
 * forgotten. A token bucket of `rate` per second gates the queueing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cap.h"
#include "common/clock.h"
#include "common/layout.h"
#include "common/log.h"
#include "meta/reconcile.h"
#include "strata/errors.h"

#define COMP "meta"
#define REC_BUCKETS 4096u
#define REC_CAND_MAX 1000000u	/* orphans remembered at once */
#define REC_PAGE_GAP_MS 20u
#define REC_TOKEN_WAIT_MS 100u
/* Namespace reads per timer run: they run on meta's request thread, so a
 * page of many inodes is looked at in slices, requests in between. */
#define REC_LOOKUPS_PER_RUN 32u

#define STAT_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define STAT_SET(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define STAT_GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)

struct cand {
	struct cand *next;
	uint32_t chain;
	uint64_t ino, idx;
	uint64_t version;
	uint64_t first_ms;	/* first seen orphaned (this version) */
	uint64_t pass;		/* last pass that saw it */
};

struct lease {
	struct lease *next;
	uint64_t ino;
	int64_t expiry_s;
};

struct reconciler {
	struct reactor *r;
	struct ns *ns;
	struct sclient *sc;
	struct reconcile_opts o;
	struct reactor_timer timer;
	bool stopping, listing, have_page, in_pass, pass_dirty;
	uint64_t started_ms;
	bool standby;			/* another meta server holds the claim */

	/* The pass: chain `chain` of `table_len`, listed after the cursor. */
	uint64_t pass;
	uint32_t table_len, chain;
	uint64_t cur_ino, cur_idx;
	bool cur_after;
	struct sc_io io;
	uint32_t pos;			/* next entry of io.list */
	uint64_t span_ino;		/* ns_chunk_span of the last inode asked */
	int span_state;
	uint64_t span_n;
	bool span_valid;
	uint64_t pass_foreign;
	uint32_t lookups;		/* namespace reads in this timer run */

	double tokens;
	uint64_t tokens_ms;

	struct cand *cands[REC_BUCKETS];
	uint64_t ncands;
	struct lease *leases[REC_BUCKETS];

	struct reconcile_stats st;	/* relaxed atomics */
	struct log_limit ll_queued, ll_foreign, ll_err;
};

void reconcile_opts_init(struct reconcile_opts *o, size_t size)
{
	struct reconcile_opts d = {
		.opts_size = size, .interval_ms = 60000, .grace_ms = 900000, .rate = 100,
	};

	memset(o, 0, size);
	memcpy(o, &d, size < sizeof(d) ? size : sizeof(d));
	o->opts_size = size;
}

static uint32_t bucket(uint64_t ino, uint64_t idx, uint32_t chain)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull ^ (idx + 0x632be59bd9b4e019ull) * 0xff51afd7ed558ccdull;

	h ^= chain;
	h ^= h >> 29;
	return (uint32_t)(h % REC_BUCKETS);
}

/* ---- candidates ---- */

static struct cand **cand_slot(struct reconciler *rc, uint32_t chain, uint64_t ino, uint64_t idx)
{
	struct cand **pp = &rc->cands[bucket(ino, idx, chain)];

	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->chain == chain && (*pp)->ino == ino && (*pp)->idx == idx)
			break;
	}
	return pp;
}

static void cand_unlink(struct reconciler *rc, struct cand **pp)
{
	struct cand *c = *pp;

	*pp = c->next;
	free(c);
	rc->ncands--;
	STAT_SET(&rc->st.pending, rc->ncands);
}

/* Forgets the orphans the last (clean) pass did not see. */
static void cand_prune(struct reconciler *rc)
{
	for (uint32_t b = 0; b < REC_BUCKETS; b++) {
		for (struct cand **pp = &rc->cands[b]; *pp;) {
			if ((*pp)->pass != rc->pass)
				cand_unlink(rc, pp);
			else
				pp = &(*pp)->next;
		}
	}
}

/* ---- write leases ---- */

static struct lease **lease_slot(struct reconciler *rc, uint64_t ino)
{
	struct lease **pp = &rc->leases[bucket(ino, 0, 0)];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

void reconcile_note_write(struct reconciler *rc, uint64_t ino, int64_t expiry_s)
{
	struct lease **pp;

	if (!rc)
		return;
	pp = lease_slot(rc, ino);
	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return;	/* counted as no lease: see reconcile_start's guard */
		(*pp)->ino = ino;
	}
	if ((*pp)->expiry_s < expiry_s)
		(*pp)->expiry_s = expiry_s;
}

/* Whether no writer can hold file ino now: see reconcile.h. */
static bool lease_free(struct reconciler *rc, uint64_t ino)
{
	struct lease **pp;

	if (!rc->o.leases || mono_ms() - rc->started_ms < CAP_LIFETIME_S * 1000ull)
		return false;
	pp = lease_slot(rc, ino);
	return !*pp || (*pp)->expiry_s < now_ns() / 1000000000;
}

static void lease_prune(struct reconciler *rc)
{
	int64_t now_s = now_ns() / 1000000000;

	for (uint32_t b = 0; b < REC_BUCKETS; b++) {
		for (struct lease **pp = &rc->leases[b]; *pp;) {
			struct lease *l = *pp;

			if (l->expiry_s < now_s) {
				*pp = l->next;
				free(l);
			} else {
				pp = &l->next;
			}
		}
	}
}

/* ---- the pass ---- */

static void arm(struct reconciler *rc, uint64_t ms)
{
	if (!rc->stopping)
		reactor_timer_arm(rc->r, &rc->timer, ms);
}

static bool take_token(struct reconciler *rc)
{
	uint64_t now = mono_ms();

	rc->tokens += (double)(now - rc->tokens_ms) * rc->o.rate / 1000.0;
	rc->tokens_ms = now;
	if (rc->tokens > rc->o.rate)
		rc->tokens = rc->o.rate;
	if (rc->tokens < 1.0)
		return false;
	rc->tokens -= 1.0;
	return true;
}

static void pass_begin(struct reconciler *rc)
{
	rc->pass++;
	rc->chain = 0;
	rc->cur_ino = rc->cur_idx = 0;
	rc->cur_after = false;
	rc->pass_dirty = false;
	rc->pass_foreign = 0;
	rc->table_len = sclient_table_len(rc->sc);
}

static void pass_end(struct reconciler *rc)
{
	if (!rc->pass_dirty)
		cand_prune(rc);
	lease_prune(rc);
	/* Said when the count changes, not every pass. */
	if (rc->pass_foreign && rc->pass_foreign != STAT_GET(&rc->st.foreign))
		log_limited(&rc->ll_foreign, LOG_WARN, COMP,
			    "%llu chunk(s) on storage belong to inodes this namespace never had;"
			    " kept: is meta.store the database this cluster was made with?",
			    (unsigned long long)rc->pass_foreign);
	STAT_SET(&rc->st.foreign, rc->pass_foreign);
	STAT_ADD(&rc->st.passes, 1);
}

static void pass_error(struct reconciler *rc, const char *what, int err)
{
	rc->pass_dirty = true;
	STAT_ADD(&rc->st.errors, 1);
	log_limited(&rc->ll_err, LOG_WARN, COMP, "orphan reconciler: cannot %s of chain index %u: %s"
		    " (retried next pass)", what, rc->chain, strata_strerror(err));
}

/* The reconciler runs where the chunk GC does: the meta server that holds
 * the database's GC role (ns_gc_claim: on PostgreSQL an advisory lock of
 * its session, free as soon as that server or its connection dies; on
 * SQLite always this one). Asked before every pass and at every chain. */
static bool claim(struct reconciler *rc)
{
	int rc2 = ns_gc_claim(rc->ns);

	if (rc2 < 0) {
		STAT_ADD(&rc->st.errors, 1);
		log_limited(&rc->ll_err, LOG_WARN, COMP, "orphan reconciler: cannot claim its term"
			    " in the namespace database: %s (tried again next pass)",
			    strata_strerror(rc2));
		return false;
	}
	if (!rc2 != rc->standby)
		log_info(COMP, "orphan reconciler %s", rc2 ? "runs here" :
			 "stands by: another meta server of this database runs it");
	rc->standby = !rc2;
	STAT_SET(&rc->st.standby, (uint64_t)rc->standby);
	return rc2 == 1;
}

/* The state of chunk e, asking the namespace once per inode of a page. */
static int classify(struct reconciler *rc, const struct sp_list_ent *e)
{
	if (!rc->span_valid || rc->span_ino != e->ino) {
		int st = ns_chunk_span(rc->ns, e->ino, &rc->span_n);

		rc->lookups++;
		if (st < 0)
			return st;
		rc->span_ino = e->ino;
		rc->span_state = st;
		rc->span_valid = true;
	}
	if (rc->span_state != NS_CHUNK_OWNED)
		return rc->span_state;
	return e->idx < rc->span_n ? NS_CHUNK_OWNED : NS_CHUNK_BEYOND;
}

/* Queues orphan c (entry e) for removal through the GC queue. */
static void reclaim(struct reconciler *rc, const struct sp_list_ent *e, int state)
{
	struct file_layout l = { 0 };
	int err = 0;

	if (state == NS_CHUNK_NO_INODE)
		err = layout_for_chain(rc->table_len, rc->chain, LAYOUT_MIN_CHUNK, &l);
	if (!err)
		err = ns_chunk_reclaim(rc->ns, e->ino, e->idx, state, &l);
	if (err < 0) {
		pass_error(rc, "queue an orphaned chunk", err);
		return;
	}
	if (err == 1) {
		STAT_ADD(&rc->st.chunks, 1);
		STAT_ADD(&rc->st.bytes, e->length);
		log_limited(&rc->ll_queued, LOG_INFO, COMP,
			    "orphaned chunk %llx:%llx (%u bytes, %s) on chain index %u queued for"
			    " removal", (unsigned long long)e->ino, (unsigned long long)e->idx,
			    e->length, state == NS_CHUNK_NO_INODE ? "its inode is gone"
			    : "beyond its file's size", rc->chain);
	}
}

enum walk { WALK_DONE, WALK_NO_TOKEN, WALK_YIELD };

/* Looks at the entries of the page from rc->pos on. Stops early, the page
 * kept and resumed by a later run, when out of tokens or of this run's
 * namespace reads. */
static enum walk page_walk(struct reconciler *rc)
{
	uint64_t now = mono_ms();

	rc->lookups = 0;
	for (; rc->pos < rc->io.list.ents_n; rc->pos++) {
		const struct sp_list_ent *e = &rc->io.list.ents[rc->pos];
		struct cand **pp, *c;
		int st;

		if (e->busy || !e->version)
			continue;	/* an update in flight: a writer is there */
		if (rc->lookups >= REC_LOOKUPS_PER_RUN &&
		    (!rc->span_valid || rc->span_ino != e->ino))
			return WALK_YIELD;
		st = classify(rc, e);
		if (st < 0) {
			pass_error(rc, "read the namespace for the chunks", st);
			continue;
		}
		if (st == NS_CHUNK_FOREIGN)
			rc->pass_foreign++;
		if (st == NS_CHUNK_OWNED || st == NS_CHUNK_FOREIGN ||
		    (st == NS_CHUNK_BEYOND && !lease_free(rc, e->ino)))
			continue;
		pp = cand_slot(rc, rc->chain, e->ino, e->idx);
		c = *pp;
		if (!c) {
			if (rc->ncands >= REC_CAND_MAX)
				continue;	/* a later pass gets to it */
			c = calloc(1, sizeof(*c));
			if (!c)
				continue;
			*c = (struct cand){ NULL, rc->chain, e->ino, e->idx, e->version, now, rc->pass };
			*pp = c;
			rc->ncands++;
			STAT_SET(&rc->st.pending, rc->ncands);
			continue;
		}
		c->pass = rc->pass;
		if (c->version != e->version) {
			/* Written since: whoever wrote it may come back. */
			c->version = e->version;
			c->first_ms = now;
			continue;
		}
		if (now - c->first_ms < rc->o.grace_ms)
			continue;
		if (!take_token(rc))
			return WALK_NO_TOKEN;
		reclaim(rc, e, st);
		rc->lookups++;
		cand_unlink(rc, pp);
	}
	return WALK_DONE;
}

static void on_list(struct sc_io *io)
{
	struct reconciler *rc = io->user;

	rc->listing = false;
	if (rc->stopping) {
		sp_list_rep_release(&io->list);
		return;
	}
	if (io->status) {
		pass_error(rc, "list the chunks", io->status);
		sp_list_rep_release(&io->list);
		rc->chain++;
		rc->cur_ino = rc->cur_idx = 0;
		rc->cur_after = false;
		arm(rc, REC_PAGE_GAP_MS);
		return;
	}
	rc->have_page = true;
	rc->pos = 0;
	rc->span_valid = false;
	arm(rc, 0);
}

static void list_next(struct reconciler *rc)
{
	memset(&rc->io, 0, sizeof(rc->io));
	rc->io.kind = SC_LIST;
	rc->io.chain_idx = rc->chain;
	rc->io.ino = rc->cur_ino;
	rc->io.idx = rc->cur_idx;
	rc->io.list_after = rc->cur_after;
	rc->io.len = SP_LIST_PAGE;
	rc->io.cb = on_list;
	rc->io.user = rc;
	rc->listing = true;
	sc_submit(rc->sc, &rc->io);
}

static void on_timer(void *arg)
{
	struct reconciler *rc = arg;

	if (rc->stopping || rc->listing)
		return;
	if (rc->have_page) {
		uint32_t n = rc->io.list.ents_n;

		switch (page_walk(rc)) {
		case WALK_NO_TOKEN:
			arm(rc, REC_TOKEN_WAIT_MS);
			return;
		case WALK_YIELD:
			arm(rc, 1);
			return;
		case WALK_DONE:
			break;
		}
		if (n) {
			rc->cur_ino = rc->io.list.ents[n - 1].ino;
			rc->cur_idx = rc->io.list.ents[n - 1].idx;
			rc->cur_after = true;
		}
		if (!n || !rc->io.list.more) {
			rc->chain++;
			rc->cur_ino = rc->cur_idx = 0;
			rc->cur_after = false;
		}
		sp_list_rep_release(&rc->io.list);
		rc->have_page = false;
		arm(rc, REC_PAGE_GAP_MS);
		return;
	}
	if (!rc->in_pass) {
		pass_begin(rc);
		if (!rc->table_len || !claim(rc)) {
			arm(rc, rc->o.interval_ms);	/* no map yet, or standing by */
			return;
		}
		rc->in_pass = true;
	} else if (rc->cur_ino == 0 && !rc->cur_after && rc->chain && !claim(rc)) {
		rc->in_pass = false;		/* another took over */
		arm(rc, rc->o.interval_ms);
		return;
	}
	if (rc->chain >= rc->table_len) {
		pass_end(rc);
		rc->in_pass = false;
		arm(rc, rc->o.interval_ms);
		return;
	}
	list_next(rc);
}

int reconcile_new(struct reactor *r, struct ns *ns, struct sclient *sc,
		  const struct reconcile_opts *o, struct reconciler **out)
{
	struct reconciler *rc;

	if (!r || !ns || !sc || !o || !out || o->opts_size < sizeof(size_t))
		return -EINVAL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	reconcile_opts_init(&rc->o, sizeof(rc->o));
	memcpy(&rc->o, o, o->opts_size < sizeof(rc->o) ? o->opts_size : sizeof(rc->o));
	rc->o.opts_size = sizeof(rc->o);
	rc->r = r;
	rc->ns = ns;
	rc->sc = sc;
	rc->started_ms = mono_ms();
	rc->tokens_ms = rc->started_ms;
	reactor_timer_init(&rc->timer, on_timer, rc);
	*out = rc;
	return 0;
}

void reconcile_start(struct reconciler *rc)
{
	if (rc && rc->o.interval_ms)
		arm(rc, rc->o.interval_ms);
}

void reconcile_stop(struct reconciler *rc)
{
	if (!rc)
		return;
	rc->stopping = true;
	reactor_timer_cancel(rc->r, &rc->timer);
}

void reconcile_free(struct reconciler *rc)
{
	if (!rc)
		return;
	reactor_timer_cancel(rc->r, &rc->timer);
	sp_list_rep_release(&rc->io.list);
	for (uint32_t b = 0; b < REC_BUCKETS; b++) {
		while (rc->cands[b])
			cand_unlink(rc, &rc->cands[b]);
		while (rc->leases[b]) {
			struct lease *l = rc->leases[b];

			rc->leases[b] = l->next;
			free(l);
		}
	}
	free(rc);
}

void reconcile_get_stats(const struct reconciler *rc, struct reconcile_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!rc)
		return;
	out->passes = STAT_GET(&rc->st.passes);
	out->chunks = STAT_GET(&rc->st.chunks);
	out->bytes = STAT_GET(&rc->st.bytes);
	out->pending = STAT_GET(&rc->st.pending);
	out->foreign = STAT_GET(&rc->st.foreign);
	out->errors = STAT_GET(&rc->st.errors);
	out->standby = STAT_GET(&rc->st.standby);
}
