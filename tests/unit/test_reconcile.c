/*
 * Unit tests for the orphan chunk reconciler (src/meta/reconcile.c), with
 * fakes for the storage client (a chain table whose listings come from a
 * model) and the namespace (inodes with sizes, an allocation high-water
 * mark, and a record of what was queued). The reactor is real but never
 * runs: a test fires the reconciler's timer itself, so a pass is a loop
 * of calls, and time passes only where a test sleeps.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta/reconcile.c"

/* ---- fakes ---- */

#define MAXC 64
#define TABLE 4u

static struct {
	struct sp_list_ent chains[TABLE][MAXC];
	uint32_t n[TABLE];
	uint64_t sizes[16];		/* inode i: chunks it owns; UINT64_MAX: none */
	uint64_t hi_ino;		/* highest inode number handed out */
	struct { uint64_t ino, idx; int state; uint32_t chain; } queued[MAXC];
	uint32_t nqueued;
	int list_err;
	uint32_t listings;
} fk;

uint32_t sclient_table_len(struct sclient *sc)
{
	(void)sc;
	return TABLE;
}

/* Answers a listing from the model, one entry per page (paging is tested
 * along the way). */
void sc_submit(struct sclient *sc, struct sc_io *io)
{
	uint32_t c = io->chain_idx, i;

	(void)sc;
	fk.listings++;
	memset(&io->list, 0, sizeof(io->list));
	io->status = fk.list_err;
	if (!io->status) {
		for (i = 0; i < fk.n[c]; i++) {
			const struct sp_list_ent *e = &fk.chains[c][i];

			if (!io->list_after || e->ino > io->ino ||
			    (e->ino == io->ino && e->idx > io->idx))
				break;
		}
		if (i < fk.n[c]) {
			io->list.ents = calloc(1, sizeof(*io->list.ents));
			io->list.ents[0] = fk.chains[c][i];
			io->list.ents_n = 1;
			io->list.more = i + 1 < fk.n[c];
		}
	}
	io->cb(io);
}

int ns_chunk_span(struct ns *ns, uint64_t ino, uint64_t *nchunks)
{
	(void)ns;
	*nchunks = 0;
	if (ino > fk.hi_ino)
		return NS_CHUNK_FOREIGN;
	if (ino >= 16 || fk.sizes[ino] == UINT64_MAX)
		return NS_CHUNK_NO_INODE;
	*nchunks = fk.sizes[ino];
	return NS_CHUNK_OWNED;
}

static int claim_answer = 1;

int ns_gc_claim(struct ns *ns)
{
	(void)ns;
	return claim_answer;
}

int ns_chunk_reclaim(struct ns *ns, uint64_t ino, uint64_t idx, int state,
		     const struct file_layout *layout)
{
	(void)ns;
	assert_true(fk.nqueued < MAXC);
	fk.queued[fk.nqueued].ino = ino;
	fk.queued[fk.nqueued].idx = idx;
	fk.queued[fk.nqueued].state = state;
	fk.queued[fk.nqueued].chain = state == NS_CHUNK_NO_INODE ?
				      layout_chain_index(layout, idx) : UINT32_MAX;
	fk.nqueued++;
	return 1;
}

static void put(uint32_t chain, uint64_t ino, uint64_t idx, uint64_t version, uint64_t busy)
{
	fk.chains[chain][fk.n[chain]++] = (struct sp_list_ent){ ino, idx, version, 1000, 0, busy };
}

/* ---- the harness ---- */

struct fx {
	struct reactor *r;
	struct reconciler *rc;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	memset(&fk, 0, sizeof(fk));
	for (int i = 0; i < 16; i++)
		fk.sizes[i] = UINT64_MAX;
	fk.hi_ino = 15;
	assert_int_equal(reactor_new("test", &f->r), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	reconcile_free(f->rc);
	reactor_free(f->r);
	free(f);
	return 0;
}

static void make(struct fx *f, uint64_t grace_ms, uint32_t rate, bool leases)
{
	struct reconcile_opts o;

	reconcile_opts_init(&o, sizeof(o));
	o.interval_ms = 1;
	o.grace_ms = grace_ms;
	o.rate = rate;
	o.leases = leases;
	assert_int_equal(reconcile_new(f->r, (struct ns *)1, (struct sclient *)1, &o, &f->rc), 0);
}

/* Fires the timer until one more pass completes; a run stopped by the
 * token bucket waits for it to fill (1 ms steps, 10 s at most). */
static void one_pass(struct fx *f)
{
	struct reconcile_stats s;
	uint64_t passes, deadline = mono_ms() + 10000;

	reconcile_get_stats(f->rc, &s);
	passes = s.passes;
	while (mono_ms() < deadline) {
		reactor_timer_cancel(f->r, &f->rc->timer);
		on_timer(f->rc);
		reconcile_get_stats(f->rc, &s);
		if (s.passes > passes)
			return;
		if (f->rc->have_page)
			usleep(1000);
	}
	fail_msg("no pass completed");
}

/* ---- tests ---- */

static void test_orphan_removed_after_grace(void **state)
{
	struct fx *f = *state;
	struct reconcile_stats s;

	fk.sizes[3] = 2;		/* inode 3 owns chunks 0, 1 */
	put(0, 3, 0, 5, 0);
	put(1, 3, 1, 5, 0);
	put(2, 4, 0, 7, 0);		/* inode 4 is gone */
	put(2, 4, 1, 7, 0);
	put(3, 4, 2, 0, 0);		/* version 0: being created */
	put(3, 4, 3, 9, 1);		/* busy: an update in flight */
	make(f, 50, 1000, false);
	one_pass(f);
	assert_int_equal(fk.nqueued, 0);	/* first seen */
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.pending, 2);
	one_pass(f);
	assert_int_equal(fk.nqueued, 0);	/* within the grace */
	usleep(60 * 1000);
	one_pass(f);
	assert_int_equal(fk.nqueued, 2);
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(fk.queued[i].ino, 4);
		assert_int_equal(fk.queued[i].idx, i);
		assert_int_equal(fk.queued[i].state, NS_CHUNK_NO_INODE);
		assert_int_equal(fk.queued[i].chain, 2);	/* placed where found */
	}
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.chunks, 2);
	assert_int_equal(s.bytes, 2000);
	assert_int_equal(s.pending, 0);
}

static void test_rewritten_or_adopted_orphan_kept(void **state)
{
	struct fx *f = *state;
	struct reconcile_stats s;

	put(0, 5, 0, 1, 0);
	put(1, 6, 0, 1, 0);
	make(f, 50, 1000, false);
	one_pass(f);
	usleep(60 * 1000);
	/* Chunk 5:0 written since (a new version): its wait starts again.
	 * Chunk 6:0 listed no more (removed): forgotten. */
	fk.chains[0][0].version = 2;
	fk.n[1] = 0;
	one_pass(f);
	assert_int_equal(fk.nqueued, 0);
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.pending, 1);
	/* Inode 5 appears (a create it belonged to): owned, nothing queued. */
	fk.sizes[5] = 1;
	usleep(60 * 1000);
	one_pass(f);
	assert_int_equal(fk.nqueued, 0);
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.pending, 0);
}

static void test_beyond_size_needs_no_lease_foreign_kept(void **state)
{
	struct fx *f = *state;
	struct reconcile_stats s;
	struct lease *l;

	fk.sizes[7] = 1;
	put(0, 7, 3, 1, 0);		/* past inode 7's size */
	put(1, 99, 0, 1, 0);		/* an inode number never handed out */
	/* Without capabilities (no cluster key) a writer may hold any file:
	 * chunks past a size are never taken. */
	make(f, 0, 1000, false);
	for (int i = 0; i < 3; i++)
		one_pass(f);
	assert_int_equal(fk.nqueued, 0);
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.foreign, 1);
	assert_int_equal(s.pending, 0);
	/* With them, not while this process may have handed one out that is
	 * still valid (it has not run CAP_LIFETIME_S yet). */
	reconcile_free(f->rc);
	f->rc = NULL;
	make(f, 0, 1000, true);
	for (int i = 0; i < 3; i++)
		one_pass(f);
	assert_int_equal(fk.nqueued, 0);
	/* Past that, and no write capability for the file valid now. */
	f->rc->started_ms -= CAP_LIFETIME_S * 1000ull + 1;
	reconcile_note_write(f->rc, 7, now_ns() / 1000000000 + 60);
	for (int i = 0; i < 3; i++)
		one_pass(f);
	assert_int_equal(fk.nqueued, 0);
	l = *lease_slot(f->rc, 7);
	assert_non_null(l);
	if (l)
		l->expiry_s = now_ns() / 1000000000 - 1;
	for (int i = 0; i < 3; i++)
		one_pass(f);
	assert_int_equal(fk.nqueued, 1);
	assert_int_equal(fk.queued[0].ino, 7);
	assert_int_equal(fk.queued[0].idx, 3);
	assert_int_equal(fk.queued[0].state, NS_CHUNK_BEYOND);
}

static void test_rate_and_listing_errors(void **state)
{
	struct fx *f = *state;
	struct reconcile_stats s;
	uint32_t before;

	for (uint64_t i = 0; i < 20; i++)
		put(i % TABLE, 8, i, 1, 0);
	make(f, 0, 10, false);
	/* A failed listing makes the pass unclean: nothing forgotten, an
	 * error counted. */
	fk.list_err = -ETIMEDOUT;
	one_pass(f);
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.errors, TABLE);
	fk.list_err = 0;
	one_pass(f);
	/* 10 per second: the queueing pass takes its time; each timer run
	 * stops when the bucket is empty. */
	usleep(200 * 1000);
	before = fk.nqueued;
	reactor_timer_cancel(f->r, &f->rc->timer);
	on_timer(f->rc);
	assert_true(fk.nqueued - before <= 3);
	one_pass(f);
	assert_int_equal(fk.nqueued, 20);
}

/* Another meta server of the database holds the term: no listing. */
static void test_standby(void **state)
{
	struct fx *f = *state;
	struct reconcile_stats s;

	put(0, 4, 0, 1, 0);
	make(f, 0, 1000, false);
	claim_answer = 0;
	for (int i = 0; i < 5; i++) {
		reactor_timer_cancel(f->r, &f->rc->timer);
		on_timer(f->rc);
	}
	assert_int_equal(fk.listings, 0);
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.standby, 1);
	assert_int_equal(s.passes, 0);
	claim_answer = 1;
	one_pass(f);
	assert_true(fk.listings >= TABLE);
	reconcile_get_stats(f->rc, &s);
	assert_int_equal(s.standby, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_orphan_removed_after_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rewritten_or_adopted_orphan_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_beyond_size_needs_no_lease_foreign_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rate_and_listing_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_standby, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
