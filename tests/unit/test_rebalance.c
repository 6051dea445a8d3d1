/*
 * Unit tests of the rebalancer (mgmt/rebalance.h) over a real cluster map:
 * nodes added to a built cluster take chains until every node is within
 * the band, one move at a time (or max_moves), never a chain short of R;
 * pause and resume; moves cancelled when the new member goes away; chains
 * over R trimmed; options checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "common/log.h"
#include "mgmt/membership.h"
#include "mgmt/rebalance.h"

#include "cm_fx.h"

/* Every target uses 600 bytes (the moves' estimates divide them). */
static void set_used(struct cluster_map *m)
{
	for (uint32_t t = 0; t < m->ntargets; t++)
		m->targets[t].used = 600;
}

/* Chain entries of node k's targets; every chain checked on the way:
 * consistent, and never fewer than R serving. */
static uint32_t fill(const struct cluster_map *m, uint32_t k)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < m->nchains; c++) {
		const struct cm_chain *ch = &m->chains[c];
		uint32_t serving = 0;

		assert_true(cm_chain_ok(m, ch));
		for (int i = 0; i < ch->len; i++) {
			n += cm_node_of(m, ch->targets[i]) == k;
			serving += ch->states[i] == TARGET_SERVING;
		}
		assert_true(serving >= m->replication);
	}
	return n;
}

/* The storage nodes resync every SYNCING member (mgmt hears "in sync"). */
static void sync_all(struct cluster_map *m)
{
	for (uint32_t t = 0; t < m->ntargets; t++)
		if (m->targets[t].state == TARGET_SYNCING)
			(void)cm_target_synced(m, m->targets[t].id);
}

static void init_rb(struct rebalancer *rb, uint32_t band, uint32_t max_moves)
{
	struct rebalance_opts o;

	rebalance_opts_init(&o, sizeof(o));
	assert_int_equal(o.band_pct, 10);
	assert_int_equal(o.max_moves, 1);
	o.band_pct = band;
	o.max_moves = max_moves;
	assert_int_equal(rebalance_init(rb, &o), 0);
}

/* Steps until balanced with nothing in flight; returns the steps. */
static uint32_t run_to_balance(struct rebalancer *rb, struct cluster_map *m, uint32_t nodes)
{
	struct rebalance_stats st;
	uint32_t steps = 0;

	for (;;) {
		assert_true(rebalance_step(rb, m) >= 0);
		rebalance_stats(rb, &st);
		assert_true(st.in_flight <= rb->o.max_moves);
		for (uint32_t k = 1; k <= nodes; k++)
			(void)fill(m, k);
		if (!st.in_flight && st.balanced)
			break;
		sync_all(m);
		assert_true(++steps < 5000);
	}
	return steps;
}

static void test_added_nodes_take_chains(void **state)
{
	struct cluster_map m;
	struct rebalancer rb;
	struct rebalance_stats st;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	init_rb(&rb, 10, 1);
	/* Balanced as built: nothing moves. */
	assert_int_equal(rebalance_step(&rb, &m), 0);
	rebalance_stats(&rb, &st);
	assert_true(st.balanced);
	assert_int_equal(st.pending, 0);
	assert_int_equal(st.fill_min, 6);
	assert_int_equal(st.fill_max, 6);

	reg(&m, 4, 2);
	reg(&m, 5, 2);
	set_used(&m);
	assert_int_equal(rebalance_step(&rb, &m), 1);
	rebalance_stats(&rb, &st);
	assert_int_equal(st.in_flight, 1);
	assert_false(st.balanced);
	assert_true(st.pending > 0);
	(void)run_to_balance(&rb, &m, 5);
	rebalance_stats(&rb, &st);
	/* 18 entries over 5 nodes: mean 3.6, band 10%: 3..4 each. */
	for (uint32_t k = 1; k <= 5; k++) {
		assert_true(fill(&m, k) >= 3);
		assert_true(fill(&m, k) <= 4);
	}
	assert_int_equal(st.moves_done, 6);
	assert_int_equal(st.moves_cancelled, 0);
	/* Each move: its old target's 600 bytes over the 3 or fewer chains it
	 * is in then. */
	assert_true(st.bytes_moved >= 6 * 200 && st.bytes_moved <= 6 * 600);
	for (uint32_t c = 0; c < m.nchains; c++)
		assert_int_equal(m.chains[c].len, 3);
	/* Nothing more to do. */
	assert_int_equal(rebalance_step(&rb, &m), 0);
	rebalance_release(&rb);
	cm_release(&m);
}

/* 40 nodes of 4 targets, R = 3, then 10 more nodes; 8 moves at once. */
static void test_larger(void **state)
{
	struct cluster_map m;
	struct rebalancer rb;
	struct rebalance_stats st;
	uint32_t steps;

	(void)state;
	make_cluster(&m, 40, 4, 3);
	init_rb(&rb, 10, 8);
	for (uint32_t k = 41; k <= 50; k++)
		reg(&m, k, 4);
	steps = run_to_balance(&rb, &m, 50);
	rebalance_stats(&rb, &st);
	/* 480 entries over 50 nodes: mean 9.6, band 10%: 8..11. */
	for (uint32_t k = 1; k <= 50; k++)
		assert_true(fill(&m, k) >= 8 && fill(&m, k) <= 11);
	assert_true(st.moves_done >= 80);
	assert_true(steps <= st.moves_done);	/* moves ran 8 at a time */
	rebalance_release(&rb);
	cm_release(&m);
}

static void test_max_moves_and_pause(void **state)
{
	struct cluster_map m;
	struct rebalancer rb;
	struct rebalance_stats st;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	init_rb(&rb, 10, 2);
	rebalance_pause(&rb, true);
	reg(&m, 4, 2);
	reg(&m, 5, 2);
	assert_int_equal(rebalance_step(&rb, &m), 0);
	rebalance_stats(&rb, &st);
	assert_true(st.paused);
	assert_false(st.balanced);
	assert_int_equal(st.in_flight, 0);
	rebalance_pause(&rb, false);
	assert_int_equal(rebalance_step(&rb, &m), 2);
	rebalance_stats(&rb, &st);
	assert_int_equal(st.in_flight, 2);
	/* Paused with moves in flight: they finish, none starts. */
	rebalance_pause(&rb, true);
	sync_all(&m);
	assert_int_equal(rebalance_step(&rb, &m), 2);
	rebalance_stats(&rb, &st);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.moves_done, 2);
	rebalance_pause(&rb, false);
	(void)run_to_balance(&rb, &m, 5);
	for (uint32_t k = 1; k <= 5; k++)
		assert_true(fill(&m, k) >= 3 && fill(&m, k) <= 4);
	rebalance_release(&rb);
	cm_release(&m);
}

static void test_cancel_and_trim(void **state)
{
	struct cluster_map m;
	struct rebalancer rb;
	struct rebalance_stats st;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	init_rb(&rb, 10, 1);
	reg(&m, 4, 1);
	assert_int_equal(rebalance_step(&rb, &m), 1);
	assert_int_equal(rb.nmoves, 1);
	/* The new member's node goes away: the move is dropped, and none
	 * starts while it holds entries (out) and is away. */
	assert_true(cm_set_node_offline(&m, 4) > 0);
	assert_int_equal(rebalance_step(&rb, &m), 0);
	rebalance_stats(&rb, &st);
	assert_int_equal(st.moves_cancelled, 1);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(rebalance_step(&rb, &m), 0);
	/* Back and in sync: the chain has R + 1 serving; the trim drops the
	 * member of the fullest node, and the moves go on. */
	reg(&m, 4, 1);
	sync_all(&m);
	assert_true(rebalance_step(&rb, &m) >= 1);
	for (uint32_t c = 0; c < m.nchains; c++)
		assert_true(m.chains[c].len <= 4);
	(void)run_to_balance(&rb, &m, 4);
	for (uint32_t c = 0; c < m.nchains; c++)
		assert_int_equal(m.chains[c].len, 3);
	/* 9 entries over 4 nodes: 2..3 each (mean 2.25, band 10%). */
	for (uint32_t k = 1; k <= 4; k++)
		assert_true(fill(&m, k) >= 2 && fill(&m, k) <= 3);
	rebalance_release(&rb);
	cm_release(&m);
}

/* Leadership lost mid-move: the record is forgotten, the trim finishes. */
static void test_forget(void **state)
{
	struct cluster_map m;
	struct rebalancer rb;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	init_rb(&rb, 10, 1);
	rebalance_pause(&rb, false);
	reg(&m, 4, 1);
	assert_int_equal(rebalance_step(&rb, &m), 1);
	rebalance_forget(&rb);
	rebalance_pause(&rb, true);
	sync_all(&m);
	assert_int_equal(rebalance_step(&rb, &m), 1);
	for (uint32_t c = 0; c < m.nchains; c++)
		assert_int_equal(m.chains[c].len, 3);
	assert_int_equal(fill(&m, 4), 1);
	rebalance_release(&rb);
	cm_release(&m);
}

static void test_move_calls(void **state)
{
	struct cluster_map m;
	const struct cm_chain *c;
	uint32_t from, other;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	reg(&m, 4, 1);
	c = &m.chains[0];
	from = c->targets[0];
	other = c->targets[1];
	assert_int_equal(cm_move_begin(&m, 99, from, 401), -ENOENT);
	assert_int_equal(cm_move_begin(&m, c->id, from, 999), -ENOENT);
	/* A member of the chain, or a node already in it: refused. */
	assert_int_equal(cm_move_begin(&m, c->id, from, other), -EINVAL);
	assert_int_equal(cm_move_begin(&m, c->id, 401, 401), -EINVAL);
	assert_int_equal(cm_move_begin(&m, c->id, from, 401), 1);
	assert_int_equal(c->len, 4);
	assert_int_equal(c->states[3], TARGET_SYNCING);
	/* Not whole any more: a second move waits. */
	assert_int_equal(cm_move_begin(&m, c->id, other, 401), -EINVAL);
	/* The old member stays until the new one serves. */
	assert_int_equal(cm_member_leave(&m, c->id, from), 0);
	assert_int_equal(cm_member_leave(&m, c->id, 401 + 1000), -ENOENT);
	assert_int_equal(cm_target_synced(&m, 401), 1);
	assert_int_equal(cm_member_leave(&m, c->id, from), 1);
	assert_int_equal(c->len, 3);
	assert_int_equal(cm_member_leave(&m, c->id, from), -ENOENT);
	assert_int_equal(cm_member_leave(&m, c->id, other), 0);
	cm_release(&m);
}

static void test_opts(void **state)
{
	struct rebalance_opts o;
	struct rebalancer rb;

	(void)state;
	rebalance_opts_init(&o, sizeof(o));
	assert_int_equal(rebalance_init(&rb, NULL), -EINVAL);
	o.band_pct = 0;
	assert_int_equal(rebalance_init(&rb, &o), -EINVAL);
	o.band_pct = 101;
	assert_int_equal(rebalance_init(&rb, &o), -EINVAL);
	o.band_pct = 10;
	o.max_moves = 0;
	assert_int_equal(rebalance_init(&rb, &o), -EINVAL);
	o.max_moves = REBALANCE_MAX_MOVES + 1;
	assert_int_equal(rebalance_init(&rb, &o), -EINVAL);
	o.max_moves = REBALANCE_MAX_MOVES;
	o.size = 4;
	assert_int_equal(rebalance_init(&rb, &o), -EINVAL);
	o.size = sizeof(o);
	assert_int_equal(rebalance_init(&rb, &o), 0);
	rebalance_release(&rb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_added_nodes_take_chains),
		cmocka_unit_test(test_max_moves_and_pause),
		cmocka_unit_test(test_larger),
		cmocka_unit_test(test_cancel_and_trim),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_move_calls),
		cmocka_unit_test(test_opts),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
