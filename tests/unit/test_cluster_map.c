/*
 * Unit tests of the cluster map: registration, chain building, failure
 * handling (offline, return, resync, replace, drain), lease expiry and the
 * wire encoding with malformed input.
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
#include "net/codec.h"
#include "proto/mgmt.h"

#include "cm_fx.h"

/* Every chain consistent; returns how many memberships target tid has. */
static uint32_t memberships(const struct cluster_map *m, uint32_t tid)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];

		assert_true(cm_chain_ok(m, c));
		for (int i = 0; i < c->len; i++)
			n += c->targets[i] == tid;
	}
	return n;
}

/* Position of target tid among the members of c, or -1. */
static int member_pos(const struct cm_chain *c, uint32_t tid)
{
	for (int i = 0; i < c->len; i++) {
		if (c->targets[i] == tid)
			return i;
	}
	return -1;
}

static void assert_maps_equal(const struct cluster_map *a, const struct cluster_map *b)
{
	assert_true(a->version == b->version);
	assert_int_equal(a->replication, b->replication);
	assert_int_equal(a->chain_table_len, b->chain_table_len);
	assert_int_equal(a->nnodes, b->nnodes);
	assert_int_equal(a->ntargets, b->ntargets);
	assert_int_equal(a->nchains, b->nchains);
	assert_int_equal(a->nservices, b->nservices);
	assert_int_equal(a->nrevoked, b->nrevoked);
	for (uint32_t i = 0; i < a->nrevoked; i++)
		assert_string_equal(a->revoked[i], b->revoked[i]);
	for (uint32_t i = 0; i < a->nservices; i++) {
		assert_int_equal(a->services[i].kind, b->services[i].kind);
		assert_int_equal(a->services[i].node_id, b->services[i].node_id);
		assert_string_equal(a->services[i].addr, b->services[i].addr);
		assert_int_equal(a->services[i].state, b->services[i].state);
	}
	for (uint32_t i = 0; i < a->nnodes; i++) {
		assert_int_equal(a->nodes[i].id, b->nodes[i].id);
		assert_string_equal(a->nodes[i].addr, b->nodes[i].addr);
		assert_int_equal(a->nodes[i].state, b->nodes[i].state);
	}
	for (uint32_t i = 0; i < a->ntargets; i++) {
		assert_int_equal(a->targets[i].id, b->targets[i].id);
		assert_int_equal(a->targets[i].node_id, b->targets[i].node_id);
		assert_true(a->targets[i].capacity == b->targets[i].capacity);
		assert_true(a->targets[i].used == b->targets[i].used);
		assert_int_equal(a->targets[i].state, b->targets[i].state);
	}
	for (uint32_t i = 0; i < a->nchains; i++) {
		const struct cm_chain *x = &a->chains[i], *y = &b->chains[i];

		assert_int_equal(x->id, y->id);
		assert_true(x->version == y->version);
		assert_int_equal(x->len, y->len);
		assert_int_equal(x->nout, y->nout);
		for (int k = 0; k < x->len; k++) {
			assert_int_equal(x->targets[k], y->targets[k]);
			assert_int_equal(x->states[k], y->states[k]);
		}
		for (int k = 0; k < x->nout; k++) {
			assert_int_equal(x->out[k], y->out[k]);
			assert_int_equal(x->out_states[k], y->out_states[k]);
		}
	}
}

static int quiet(void **state)
{
	(void)state;
	log_set_level(LOG_OFF);
	return 0;
}

static void test_register_and_build(void **state)
{
	struct cluster_map m;
	struct cm_target_info ti[2] = { { 101, 5, 1, 0, 4 }, { 102, 5, 0, 0, 5 } };
	uint64_t v;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	assert_int_equal(m.nnodes, 3);
	assert_int_equal(m.ntargets, 6);
	assert_int_equal(m.nchains, 6);
	assert_int_equal(m.chain_table_len, 6);
	assert_int_equal(m.replication, 3);
	for (uint32_t k = 0; k < 6; k++) {
		assert_int_equal(m.chains[k].id, k + 1);
		assert_int_equal(m.chains[k].len, 3);
		assert_true(m.chains[k].version == m.version);
	}
	for (uint32_t k = 0; k < m.ntargets; k++)
		assert_int_equal(memberships(&m, m.targets[k].id), 3);
	assert_int_equal(cm_validate(&m), 0);
	assert_non_null(cm_find_node(&m, 2));
	assert_null(cm_find_node(&m, 4));
	assert_int_equal(cm_find_target(&m, 202)->node_id, 2);
	assert_null(cm_find_target(&m, 999));
	assert_int_equal(cm_find_chain(&m, 6)->id, 6);
	assert_null(cm_find_chain(&m, 7));
	assert_int_equal(cm_build_chains(&m, 3, false), -EEXIST);

	/* Re-registering the same thing changes nothing. */
	v = m.version;
	reg(&m, 2, 2);
	assert_true(m.version == v);
	/* New capacity numbers do bump it. */
	assert_int_equal(cm_register_node(&m, 1, "10.0.0.1:7000", ti, 2, 5), 0);
	assert_true(m.version == v + 1);
	assert_true(cm_find_target(&m, 101)->capacity == 5);

	/* Errors leave the map alone. */
	v = m.version;
	ti[0].id = 201;	/* owned by node 2 */
	assert_int_equal(cm_register_node(&m, 1, "10.0.0.1:7000", ti, 2, 5), -EEXIST);
	ti[0].id = 102;	/* duplicate in the list */
	assert_int_equal(cm_register_node(&m, 1, "10.0.0.1:7000", ti, 2, 5), -EINVAL);
	assert_int_equal(cm_register_node(&m, 0, "x:1", NULL, 0, 5), -EINVAL);
	assert_int_equal(cm_register_node(&m, 9, "", NULL, 0, 5), -EINVAL);
	assert_int_equal(cm_register_node(&m, 9,
		"a-very-long-host-name-that-does-not-fit-in-sixty-four-bytes.example:7000",
		NULL, 0, 5), -EINVAL);
	assert_true(m.version == v);
	assert_int_equal(cm_build_chains(&m, 0, true), -EINVAL);
	assert_int_equal(cm_build_chains(&m, CM_MAX_R + 1, true), -EINVAL);

	/* R is reduced to the number of nodes. */
	assert_int_equal(cm_build_chains(&m, 5, true), 6);
	assert_int_equal(m.replication, 3);
	assert_true(m.chains[0].version == m.version);
	cm_release(&m);

	cm_init(&m);
	assert_int_equal(cm_build_chains(&m, 3, false), -ENODEV);
	cm_release(&m);
}

static void test_offline_return_resync(void **state)
{
	struct cluster_map m;
	uint64_t v;
	int rc;

	(void)state;
	make_cluster(&m, 4, 2, 3);
	v = m.version;
	/* Node 2's 2 targets are in 3 chains each, never twice in one. */
	rc = cm_set_node_offline(&m, 2);
	assert_int_equal(rc, 6);
	assert_true(m.version == v + 1);
	assert_int_equal(cm_find_node(&m, 2)->state, NODE_OFFLINE);
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_OFFLINE);
	assert_int_equal(memberships(&m, 201), 0);
	for (uint32_t k = 0; k < m.nchains; k++) {
		const struct cm_chain *c = &m.chains[k];

		if (c->nout) {
			assert_int_equal(c->len, 2);
			assert_true(c->version == m.version);
			assert_true(c->out[0] == 201 || c->out[0] == 202);
		} else {
			assert_int_equal(c->len, 3);
			assert_true(c->version < m.version);
		}
	}
	assert_int_equal(cm_validate(&m), 0);
	/* Again: nothing to do. */
	assert_int_equal(cm_set_node_offline(&m, 2), 0);
	assert_true(m.version == v + 1);
	assert_int_equal(cm_set_node_offline(&m, 99), -ENOENT);
	assert_int_equal(cm_heartbeat(&m, 2, 5000), -ENOTCONN);
	assert_int_equal(cm_heartbeat(&m, 99, 5000), -ENOENT);
	assert_int_equal(cm_heartbeat(&m, 1, 5000), 0);

	/* The node comes back: its targets re-enter as SYNCING tails. */
	v = m.version;
	reg(&m, 2, 2);
	assert_true(m.version == v + 1);
	assert_int_equal(cm_find_node(&m, 2)->state, NODE_UP);
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_SYNCING);
	assert_int_equal(memberships(&m, 201), 3);
	for (uint32_t k = 0; k < m.nchains; k++) {
		const struct cm_chain *c = &m.chains[k];

		assert_int_equal(c->len, 3);
		assert_int_equal(c->nout, 0);
		if (cm_find_target(&m, c->targets[2])->node_id == 2)
			assert_int_equal(c->states[2], TARGET_SYNCING);
		else
			assert_int_equal(c->states[2], TARGET_SERVING);
	}

	/* Per chain, then the rest at once. */
	for (uint32_t k = 0; k < m.nchains; k++)
		if (m.chains[k].targets[2] == 201) {
			assert_int_equal(cm_member_synced(&m, m.chains[k].id, 201), 1);
			assert_int_equal(cm_member_synced(&m, m.chains[k].id, 201), 0);
			break;
		}
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_SYNCING);
	assert_int_equal(cm_target_synced(&m, 201), 2);
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_SERVING);
	assert_int_equal(cm_target_synced(&m, 202), 3);
	assert_int_equal(cm_target_synced(&m, 202), 0);
	assert_int_equal(cm_target_synced(&m, 999), -ENOENT);
	assert_int_equal(cm_member_synced(&m, 999, 202), -ENOENT);
	for (uint32_t k = 0; k < m.nchains; k++)
		for (int i = 0; i < m.chains[k].len; i++)
			assert_int_equal(m.chains[k].states[i], TARGET_SERVING);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/* When every member left, the last SERVING one to leave comes back
 * SERVING (it has every committed write); the others resync from it. */
static void test_empty_chain_return(void **state)
{
	struct cluster_map m;
	const struct cm_chain *c;

	(void)state;
	make_cluster(&m, 2, 1, 2);
	assert_int_equal(m.nchains, 2);
	assert_int_equal(cm_set_node_offline(&m, 1), 2);
	assert_int_equal(cm_set_node_offline(&m, 2), 2);
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 0);
	assert_int_equal(c->nout, 2);
	/* Node 1 left first, so it is not the freshest. */
	reg(&m, 1, 1);
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 1);
	assert_int_equal(c->states[0], TARGET_SYNCING);
	reg(&m, 2, 1);
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 2);
	assert_int_equal(c->targets[0], 201);
	assert_int_equal(c->states[0], TARGET_SERVING);
	assert_int_equal(c->targets[1], 101);
	assert_int_equal(c->states[1], TARGET_SYNCING);
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_SERVING);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/* A second data directory claiming a live node's id is refused; once the
 * node is offline or its lease ran out, a directory may take the id over
 * (a disk replaced: the restart resyncs it). */
static void test_ident(void **state)
{
	struct cluster_map m;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	/* Unknown identity (as after mgmt's restart): anyone. */
	assert_int_equal(cm_check_ident(&m, 2, 0xb, 0), 0);
	assert_int_equal(cm_set_ident(&m, 2, 0xa), 0);
	assert_int_equal(cm_set_ident(&m, 99, 0xa), -ENOENT);
	assert_int_equal(cm_heartbeat(&m, 2, 5000), 0);
	assert_int_equal(cm_check_ident(&m, 2, 0xa, 1000), 0);
	assert_int_equal(cm_check_ident(&m, 2, 0xb, 1000), -EADDRINUSE);
	assert_int_equal(cm_check_ident(&m, 3, 0xb, 1000), 0);
	assert_int_equal(cm_check_ident(&m, 99, 0xb, 1000), 0);
	/* The lease ran out... */
	assert_int_equal(cm_check_ident(&m, 2, 0xb, 5000), 0);
	/* ...or the node is offline. */
	assert_true(cm_set_node_offline(&m, 2) > 0);
	assert_int_equal(cm_check_ident(&m, 2, 0xb, 1000), 0);
	cm_release(&m);
}

static void test_missing_target_and_leases(void **state)
{
	struct cluster_map m;
	struct cm_target_info ti = { 101, 1ull << 40, 0, 0, 1ull << 40 };
	int rc;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	/* Node 1 re-registers without target 102. */
	rc = cm_register_node(&m, 1, "10.0.0.1:7000", &ti, 1, 2000);
	assert_int_equal(rc, 3);
	assert_int_equal(cm_find_target(&m, 102)->state, TARGET_OFFLINE);
	assert_int_equal(memberships(&m, 102), 0);

	/* Leases: node 3 renews, nodes 1 and 2 expire. */
	assert_int_equal(cm_heartbeat(&m, 3, 9000), 0);
	assert_int_equal(cm_expire_leases(&m, 999), 0);
	rc = cm_expire_leases(&m, 2000);
	assert_true(rc > 0);
	assert_int_equal(cm_find_node(&m, 1)->state, NODE_OFFLINE);
	assert_int_equal(cm_find_node(&m, 2)->state, NODE_OFFLINE);
	assert_int_equal(cm_find_node(&m, 3)->state, NODE_UP);
	for (uint32_t k = 0; k < m.nchains; k++) {
		assert_int_equal(m.chains[k].len, 1);
		assert_int_equal(cm_find_target(&m, m.chains[k].targets[0])->node_id, 3);
	}
	cm_reset_leases(&m, 50000);
	assert_int_equal(cm_expire_leases(&m, 40000), 0);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/*
 * A chain loses its members one by one, then its last serving member is
 * replaced: the members that left before it are stale, and none of them
 * may come back serving. The chain stays without a serving member
 * (unavailable) until a member that holds its data returns.
 */
static void test_replace_last_serving(void **state)
{
	struct cluster_map m;
	const struct cm_chain *c;
	uint32_t a, b, cc, spare = 0;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	reg(&m, 4, 1);	/* spare: 401 */
	c = cm_find_chain(&m, 1);
	a = c->targets[0];
	b = c->targets[1];
	cc = c->targets[2];
	spare = 401;
	assert_true(cm_set_node_offline(&m, b / 100) > 0);	/* b leaves first */
	assert_true(cm_set_node_offline(&m, cc / 100) > 0);	/* then cc */
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 1);
	assert_int_equal(c->targets[0], a);
	/* a, the only one with every write, is lost and replaced. */
	assert_true(cm_replace_target(&m, a, spare) > 0);
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 1);
	assert_int_equal(c->targets[0], spare);
	assert_int_equal(c->states[0], TARGET_SYNCING);
	/* cc left last of the two, but after it a took writes: it returns
	 * resyncing, not serving; so does b. */
	reg(&m, cc / 100, 1);
	reg(&m, b / 100, 1);
	c = cm_find_chain(&m, 1);
	for (int i = 0; i < c->len; i++)
		assert_int_equal(c->states[i], TARGET_SYNCING);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/*
 * A member that left SYNCING is replaced: it never was the chain's last
 * up-to-date member, so the last SERVING member to leave still comes back
 * serving (seed 22348 of tests/sim: the chain had only syncing members
 * for ever).
 */
static void test_replace_syncing_keeps_last_serving(void **state)
{
	struct cluster_map m;
	const struct cm_chain *c;
	uint32_t a, b, cc;
	int ia, icc;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	reg(&m, 4, 1);	/* spare: 401 */
	c = cm_find_chain(&m, 1);
	a = c->targets[0];
	b = c->targets[1];
	cc = c->targets[2];
	assert_true(cm_set_node_offline(&m, cc / 100) > 0);	/* cc leaves serving */
	assert_true(cm_set_node_offline(&m, b / 100) > 0);
	reg(&m, b / 100, 1);					/* b is back, syncing */
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 2);
	assert_int_equal(c->states[member_pos(c, b)], TARGET_SYNCING);
	assert_true(cm_set_node_offline(&m, a / 100) > 0);	/* a leaves last serving */
	assert_true(cm_set_node_offline(&m, b / 100) > 0);	/* b leaves syncing */
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 0);
	assert_true(cm_replace_target(&m, b, 401) > 0);
	c = cm_find_chain(&m, 1);
	assert_int_equal(c->len, 1);
	assert_int_equal(c->states[0], TARGET_SYNCING);
	/* a holds every write: it serves again; cc, which left before it,
	 * resyncs. */
	reg(&m, cc / 100, 1);
	reg(&m, a / 100, 1);
	c = cm_find_chain(&m, 1);
	ia = member_pos(c, a);
	icc = member_pos(c, cc);
	assert_true(ia >= 0 && icc >= 0);
	assert_int_equal(c->states[ia], TARGET_SERVING);
	assert_int_equal(c->states[icc], TARGET_SYNCING);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

static void test_replace(void **state)
{
	struct cluster_map m;
	uint32_t chains_of_201 = 0;
	int rc;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	reg(&m, 4, 2);	/* spares: 401, 402 */
	assert_int_equal(memberships(&m, 401), 0);
	assert_int_equal(cm_set_node_offline(&m, 2), 6);
	for (uint32_t k = 0; k < m.nchains; k++)
		chains_of_201 += m.chains[k].nout && m.chains[k].out[0] == 201;
	assert_int_equal(chains_of_201, 3);

	/* Not usable: unknown, same, offline, or on a node in the chain. */
	assert_int_equal(cm_replace_target(&m, 201, 999), -ENOENT);
	assert_int_equal(cm_replace_target(&m, 201, 201), -EINVAL);
	assert_int_equal(cm_replace_target(&m, 201, 202), -EINVAL);
	assert_int_equal(cm_replace_target(&m, 201, 101), -EINVAL);

	rc = cm_replace_target(&m, 201, 401);
	assert_int_equal(rc, 3);
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_LOST);
	assert_int_equal(cm_find_target(&m, 401)->state, TARGET_SYNCING);
	assert_int_equal(memberships(&m, 401), 3);
	for (uint32_t k = 0; k < m.nchains; k++) {
		const struct cm_chain *c = &m.chains[k];

		for (int i = 0; i < c->len; i++)
			if (c->targets[i] == 401) {
				assert_int_equal(i, c->len - 1);
				assert_int_equal(c->states[i], TARGET_SYNCING);
			}
	}
	assert_int_equal(cm_target_synced(&m, 401), 3);
	/* The lost target's node returns: 202 re-enters, 201 is a spare. */
	reg(&m, 2, 2);
	assert_int_equal(cm_find_target(&m, 201)->state, TARGET_SERVING);
	assert_int_equal(memberships(&m, 201), 0);
	assert_int_equal(memberships(&m, 202), 3);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/*
 * A node drained while OFFLINE (seeds 62724, 79509, 96743 of sim_chain):
 * its heartbeats are refused until it registers again, so that its
 * targets return to their chains; here 301 is the last SERVING member of
 * a chain whose other members can only resync from it.
 */
static void test_drain_offline(void **state)
{
	struct cluster_map m;
	const struct cm_chain *c;
	uint32_t k = 0;
	int pos;

	(void)state;
	make_cluster(&m, 3, 1, 2);
	reg(&m, 4, 1);
	assert_true(cm_set_node_offline(&m, 2) > 0);
	assert_true(cm_set_node_offline(&m, 3) > 0);
	/* The chain of 201 and 301 has no member left; 301 left last. */
	while (k < m.nchains && m.chains[k].len)
		k++;
	assert_true(k < m.nchains);
	c = &m.chains[k];
	assert_true(cm_drain_node(&m, 3, NULL) > 0);
	assert_int_equal(cm_find_node(&m, 3)->state, NODE_DRAINING);
	assert_int_equal(c->len, 1);
	assert_int_equal(c->states[0], TARGET_SYNCING);

	assert_int_equal(cm_heartbeat(&m, 3, 5000), -ENOTCONN);
	assert_int_equal(cm_heartbeat(&m, 1, 5000), 0);
	reg(&m, 3, 1);
	assert_int_equal(cm_find_node(&m, 3)->state, NODE_DRAINING);
	pos = member_pos(c, 301);
	assert_true(pos >= 0);
	assert_int_equal(c->states[pos], TARGET_SERVING);
	assert_int_equal(cm_heartbeat(&m, 3, 5000), 0);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/* strata node remove: refused while the node is up in chains; a dead
 * node's chains get replacements from the survivors; the last copy of a
 * chain is never dropped. */
static void test_remove_dead(void **state)
{
	struct cluster_map m;
	uint32_t cnt = 99;
	int rc;

	(void)state;
	make_cluster(&m, 4, 2, 3);
	assert_int_equal(cm_remove_node(&m, 9, &cnt), -ENOENT);
	assert_int_equal(cm_remove_node(&m, 4, &cnt), -EBUSY);
	assert_int_equal(cnt, 6);
	assert_true(cm_set_node_offline(&m, 4) > 0);
	rc = cm_remove_node(&m, 4, &cnt);
	assert_int_equal(rc, 6);
	assert_int_equal(cnt, 0);
	assert_null(cm_find_node(&m, 4));
	assert_null(cm_find_target(&m, 401));
	assert_int_equal(cm_validate(&m), 0);
	for (uint32_t k = 0; k < m.nchains; k++) {
		const struct cm_chain *c = &m.chains[k];
		uint32_t serving = 0;

		assert_true(cm_chain_ok(&m, c));
		assert_int_equal(c->len, 3);
		assert_int_equal(c->nout, 0);
		for (int i = 0; i < c->len; i++)
			serving += c->states[i] == TARGET_SERVING;
		assert_true(serving >= 2);
	}
	/* Replacements resync, then every chain is whole again. */
	for (uint32_t t = 101; t <= 302; t += (t % 100 == 2) ? 99 : 1)
		(void)cm_target_synced(&m, t);
	for (uint32_t k = 0; k < m.nchains; k++)
		for (int i = 0; i < m.chains[k].len; i++)
			assert_int_equal(m.chains[k].states[i], TARGET_SERVING);
	cm_release(&m);

	/* R = 1: the dead node holds the only copy of its chains. */
	make_cluster(&m, 2, 1, 1);
	assert_true(cm_set_node_offline(&m, 2) > 0);
	assert_int_equal(cm_remove_node(&m, 2, &cnt), -ENODATA);
	assert_int_equal(cnt, 1);
	assert_non_null(cm_find_node(&m, 2));
	cm_release(&m);
}

static void test_drain(void **state)
{
	struct cluster_map m;
	uint32_t unplaced = 99, cnt[2];
	int rc;

	(void)state;
	/* 3 nodes, R = 3: nowhere to move node 3's replicas. */
	make_cluster(&m, 3, 2, 3);
	rc = cm_drain_node(&m, 3, &unplaced);
	assert_int_equal(rc, 0);
	assert_int_equal(unplaced, 6);
	assert_int_equal(cm_find_node(&m, 3)->state, NODE_DRAINING);
	assert_int_equal(memberships(&m, 301), 3);
	assert_int_equal(cm_remove_node(&m, 3, &cnt[0]), -EINPROGRESS);
	assert_int_equal(cnt[0], 6);

	/* A new node arrives: draining again places every replica on it. */
	reg(&m, 4, 2);
	rc = cm_drain_node(&m, 3, &unplaced);
	assert_int_equal(rc, 6);
	assert_int_equal(unplaced, 0);
	/* Nothing dropped yet: the new replicas are not in sync. */
	for (uint32_t k = 0; k < m.nchains; k++) {
		const struct cm_chain *c = &m.chains[k];

		assert_int_equal(c->len, 4);
		assert_int_equal(c->states[3], TARGET_SYNCING);
		assert_int_equal(cm_find_target(&m, c->targets[3])->node_id, 4);
	}
	/* Balanced over the two spares. */
	cnt[0] = memberships(&m, 401);
	cnt[1] = memberships(&m, 402);
	assert_int_equal(cnt[0], 3);
	assert_int_equal(cnt[1], 3);
	/* Draining twice adds nothing. */
	assert_int_equal(cm_drain_node(&m, 3, NULL), 0);

	assert_int_equal(cm_target_synced(&m, 401), 3);
	assert_int_equal(cm_target_synced(&m, 402), 3);
	for (uint32_t k = 0; k < m.nchains; k++) {
		const struct cm_chain *c = &m.chains[k];

		assert_int_equal(c->len, 3);
		for (int i = 0; i < c->len; i++) {
			assert_int_equal(c->states[i], TARGET_SERVING);
			assert_int_not_equal(cm_find_target(&m, c->targets[i])->node_id, 3);
		}
	}
	assert_int_equal(memberships(&m, 301), 0);
	assert_int_equal(cm_find_target(&m, 401)->state, TARGET_SERVING);
	assert_int_equal(cm_validate(&m), 0);
	assert_int_equal(cm_remove_node(&m, 3, &cnt[0]), 0);
	assert_null(cm_find_node(&m, 3));
	assert_null(cm_find_target(&m, 301));
	assert_int_equal(cm_remove_node(&m, 3, &cnt[0]), -ENOENT);
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/* The map's wire form (src/proto/mgmt.h), and back. */
static void encode(const struct cluster_map *m, struct bbuf *b)
{
	struct cm_map_w w;

	bbuf_init(b);
	assert_int_equal(cmap_to_wire(m, &w), 0);
	assert_int_equal(cm_map_w_encode(b, &w), 0);
	cm_map_w_release(&w);
}

static int cm_decode(struct rbuf *r, struct cluster_map *d)
{
	struct cm_map_w w;
	int rc = cm_map_w_decode(r->p, (uint32_t)r->len, &w);

	cm_init(d);
	if (rc)
		return rc;
	rc = cmap_from_wire(&w, d);
	cm_map_w_release(&w);
	return rc;
}

/* m survives its wire form and a copy unchanged. */
static void assert_round_trip(const struct cluster_map *m)
{
	struct cluster_map d;
	struct bbuf b;
	struct rbuf r;

	encode(m, &b);
	rbuf_init(&r, b.buf, b.len);
	assert_int_equal(cm_decode(&r, &d), 0);
	assert_maps_equal(m, &d);
	cm_release(&d);
	bbuf_release(&b);
	assert_int_equal(cm_copy(&d, m), 0);
	assert_maps_equal(m, &d);
	cm_release(&d);
}

static void test_codec_roundtrip(void **state)
{
	struct cluster_map m, d;
	struct bbuf b;
	struct wbuf w;
	bool changed;

	(void)state;
	make_cluster(&m, 4, 3, 3);
	assert_int_equal(cm_set_node_offline(&m, 2), 9);
	assert_round_trip(&m);

	/* Since: the version alone (no map), then the full map. */
	bbuf_init(&b);
	assert_int_equal(cmap_encode_since(&m, m.version, &b), 0);
	assert_int_equal(b.len, 12);
	cm_init(&d);
	assert_int_equal(cmap_decode_since(b.buf, (uint32_t)b.len, &d, &changed), 0);
	assert_false(changed);
	b.len = 0;
	assert_int_equal(cmap_encode_since(&m, m.version - 1, &b), 0);
	assert_int_equal(cmap_decode_since(b.buf, (uint32_t)b.len, &d, &changed), 0);
	assert_true(changed);
	assert_maps_equal(&m, &d);
	cm_release(&d);
	put_le32(b.buf + 8, 2);		/* at most one map */
	assert_int_equal(cmap_decode_since(b.buf, (uint32_t)b.len, &d, &changed), STRATA_EBADMSG);
	assert_false(changed);
	bbuf_release(&b);
	(void)w;
	cm_release(&m);
}

static void test_codec_malformed(void **state)
{
	struct cluster_map m, d;
	struct bbuf b;
	struct rbuf r;
	uint8_t *copy;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	encode(&m, &b);
	copy = malloc(b.len + 1);
	assert_non_null(copy);

	/* Every truncation fails without leaking (ASan checks). */
	for (size_t len = 0; len < b.len; len++) {
		memcpy(copy, b.buf, len);
		rbuf_init(&r, copy, len);
		assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
		assert_null(d.nodes);
		assert_null(d.targets);
		assert_null(d.chains);
	}
	/* Trailing byte. */
	memcpy(copy, b.buf, b.len);
	copy[b.len] = 0;
	rbuf_init(&r, copy, b.len + 1);
	assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
	/* Every single-byte corruption either decodes to a valid map or fails
	 * cleanly. */
	for (size_t i = 0; i < b.len; i++)
		for (int bit = 0; bit < 8; bit++) {
			memcpy(copy, b.buf, b.len);
			copy[i] ^= (uint8_t)(1u << bit);
			rbuf_init(&r, copy, b.len);
			if (cm_decode(&r, &d) == 0) {
				assert_int_equal(cm_validate(&d), 0);
				cm_release(&d);
			} else {
				assert_null(d.nodes);
			}
		}
	/* A huge node count with few bytes behind it. */
	memcpy(copy, b.buf, b.len);
	put_le32(copy + 16, 4000);
	rbuf_init(&r, copy, b.len);
	assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
	put_le32(copy + 16, 0xffffffffu);
	rbuf_init(&r, copy, b.len);
	assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
	/* Replication above CM_MAX_R. */
	memcpy(copy, b.buf, b.len);
	put_le32(copy + 8, CM_MAX_R + 1);
	rbuf_init(&r, copy, b.len);
	assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
	free(copy);
	bbuf_release(&b);

	/* Chains on one node twice, found by the validator. */
	m.chains[0].targets[0] = 101;
	m.chains[0].targets[1] = 102;
	encode(&m, &b);
	rbuf_init(&r, b.buf, b.len);
	assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
	bbuf_release(&b);
	cm_release(&m);
}

/* Meta and mem services: announced, renewed, moved, expired, on the wire. */
static void test_services(void **state)
{
	struct cluster_map m;
	uint64_t v;

	(void)state;
	make_cluster(&m, 3, 1, 3);
	cm_reset_leases(&m, 1000000);	/* the storage nodes outlive the test */
	v = m.version;
	assert_null(cm_pick_service(&m, CM_SVC_META, 0));
	/* Added: the version moves; out of order, kept sorted. */
	assert_int_equal(cm_announce_service(&m, CM_SVC_MEM, 9, "10.0.0.9:7", 5, 1000), 1);
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 7, "10.0.0.7:7", 5, 1000), 1);
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 3, "10.0.0.3:7", 5, 1000), 1);
	assert_true(m.version == v + 3);
	assert_int_equal(m.nservices, 3);
	assert_int_equal(m.services[0].node_id, 3);
	assert_int_equal(m.services[1].node_id, 7);
	assert_int_equal(m.services[2].kind, CM_SVC_MEM);
	assert_int_equal(cm_validate(&m), 0);
	/* The same announcement renews the lease only. */
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 3, "10.0.0.3:7", 5, 3000), 0);
	assert_true(m.version == v + 3);
	/* Picks: the first UP, the one after a node, wrapping around. */
	assert_int_equal(cm_pick_service(&m, CM_SVC_META, 0)->node_id, 3);
	assert_int_equal(cm_pick_service(&m, CM_SVC_META, 3)->node_id, 7);
	assert_int_equal(cm_pick_service(&m, CM_SVC_META, 7)->node_id, 3);
	assert_int_equal(cm_pick_service(&m, CM_SVC_MEM, 0)->node_id, 9);
	/* Expiry: node 7's meta and node 9's mem lapse at 2000, node 3's not. */
	assert_int_equal(cm_expire_leases(&m, 2000), 0);
	assert_true(m.version == v + 4);
	assert_int_equal(cm_find_service(&m, CM_SVC_META, 7)->state, NODE_OFFLINE);
	assert_int_equal(cm_find_service(&m, CM_SVC_META, 3)->state, NODE_UP);
	assert_int_equal(cm_pick_service(&m, CM_SVC_META, 3)->node_id, 3);
	assert_null(cm_pick_service(&m, CM_SVC_MEM, 0));
	/* A restart (new incarnation) at a new address: UP again, moved. */
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 7, "10.0.0.8:7", 6, 9000), 1);
	assert_string_equal(cm_find_service(&m, CM_SVC_META, 7)->addr, "10.0.0.8:7");
	assert_int_equal(cm_find_service(&m, CM_SVC_META, 7)->state, NODE_UP);
	/* Bad announcements change nothing. */
	v = m.version;
	assert_int_equal(cm_announce_service(&m, 0, 7, "a:1", 6, 1), -EINVAL);
	assert_int_equal(cm_announce_service(&m, CM_SVC_LAST + 1, 7, "a:1", 6, 1), -EINVAL);
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 0, "a:1", 6, 1), -EINVAL);
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 7, "", 6, 1), -EINVAL);
	assert_int_equal(cm_announce_service(&m, CM_SVC_META, 7, "a:1", 0, 1), -EINVAL);
	assert_true(m.version == v);
	/* On the wire and in a copy. */
	assert_round_trip(&m);
	/* The validator: an unknown kind, out of order, a bad state. */
	m.services[0].kind = CM_SVC_LAST + 1;
	assert_int_equal(cm_validate(&m), STRATA_EBADMSG);
	m.services[0].kind = CM_SVC_META;
	m.services[0].node_id = 8;
	assert_int_equal(cm_validate(&m), STRATA_EBADMSG);
	m.services[0].node_id = 3;
	m.services[0].state = NODE_DRAINING;
	assert_int_equal(cm_validate(&m), STRATA_EBADMSG);
	m.services[0].state = NODE_UP;
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

static void set_revoked(struct cluster_map *m, const char *const *ids, uint32_t n)
{
	assert_int_equal(cm_reserve_revoked(m, n), 0);
	for (uint32_t i = 0; i < n; i++)
		snprintf(m->revoked[i], sizeof(m->revoked[i]), "%s", ids[i]);
	m->nrevoked = n;
}

/* The revoked token ids: carried on the wire and by cm_copy, found by
 * cm_revoked, and checked strictly: well-formed, sorted, distinct. */
static void test_revoked(void **state)
{
	static const char *const ok[] = { "0000000000000001", "00ff00ff00ff00ff",
					  "fedcba9876543210" };
	static const char *const bad[][2] = {
		{ "00ff00ff00ff00ff", "0000000000000001" },	/* unsorted */
		{ "00ff00ff00ff00ff", "00ff00ff00ff00ff" },	/* twice */
		{ "0000000000000001", "00FF00FF00FF00FF" },	/* upper case */
		{ "0000000000000001", "00ff00ff" },		/* short */
		{ "0000000000000001", "00ff00ff00ff00fg" },	/* not hex */
	};
	struct cluster_map m, d;
	struct bbuf b;
	struct rbuf r;

	(void)state;
	make_cluster(&m, 3, 2, 3);
	set_revoked(&m, ok, 3);
	assert_int_equal(cm_validate(&m), 0);
	assert_true(cm_revoked(&m, "00ff00ff00ff00ff"));
	assert_true(cm_revoked(&m, "fedcba9876543210"));
	assert_false(cm_revoked(&m, "00ff00ff00ff00fe"));
	assert_round_trip(&m);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		set_revoked(&m, bad[i], 2);
		assert_int_equal(cm_validate(&m), STRATA_EBADMSG);
		/* The wire form is refused the same way. */
		encode(&m, &b);
		rbuf_init(&r, b.buf, b.len);
		assert_int_equal(cm_decode(&r, &d), STRATA_EBADMSG);
		cm_release(&d);
		bbuf_release(&b);
	}
	m.nrevoked = 0;
	assert_int_equal(cm_validate(&m), 0);
	cm_release(&m);
}

/* Targets on one filesystem (same nonzero fs, on one node or several)
 * count it once; fs 0 is a capacity of its own; a heartbeat's figures
 * land without a new version, and only for the node's own targets. */
static void test_capacity_counts_each_fs_once(void **state)
{
	struct cluster_map m;
	struct cm_target_info a[2] = { { 101, 100, 10, 7, 70 }, { 102, 100, 20, 7, 70 } };
	struct cm_target_info b[2] = { { 201, 100, 5, 7, 70 }, { 202, 30, 1, 0, 29 } };
	struct cm_target_info hb[2] = { { 101, 120, 40, 7, 80 }, { 201, 999, 999, 9, 0 } };
	struct cm_full_mark mark = { 95, 0 };
	uint64_t cap, used, v;

	(void)state;
	cm_init(&m);
	assert_int_equal(cm_capacity(&m, &cap, &used), 0);
	assert_true(cap == 0 && used == 0);
	assert_true(cm_register_node(&m, 1, "10.0.0.1:7000", a, 2, 1000) >= 0);
	assert_true(cm_register_node(&m, 2, "10.0.0.2:7000", b, 2, 1000) >= 0);
	assert_int_equal(cm_capacity(&m, &cap, &used), 0);
	assert_true(cap == 100 + 30);
	assert_true(used == 10 + 20 + 5 + 1);
	assert_true(cm_find_target(&m, 101)->fs == 7);

	v = m.version;
	/* Node 1 tells about its 101, and (wrongly) about node 2's 201. */
	assert_int_equal(cm_update_space(&m, 1, hb, 2, &mark), 1);
	assert_true(m.version == v);
	assert_true(cm_find_target(&m, 101)->used == 40);
	assert_true(cm_find_target(&m, 201)->used == 5);
	assert_int_equal(cm_update_space(&m, 1, hb, 1, &mark), 0);
	assert_int_equal(cm_capacity(&m, &cap, NULL), 0);
	assert_true(cap == 120 + 30);	/* the largest figure of fs 7 */
	/* A new fs (as after mgmt's restart: it does not store it) is a new
	 * version, so that clients count the filesystem once again. */
	hb[0].fs = 8;
	assert_int_equal(cm_update_space(&m, 1, hb, 1, &mark), 1);
	assert_true(m.version == v + 1);
	assert_int_equal(cm_capacity(&m, &cap, NULL), 0);
	assert_true(cap == 120 + 100 + 30);
	cm_release(&m);
}

/* A target is full from full_pct percent of its capacity in use (what its
 * free space says), and has room again only below full_pct - 2: each flip
 * is a new version, the figures in between are not. */
static void test_full_watermark(void **state)
{
	struct cluster_map m;
	struct cm_target_info a = { 101, 1000, 0, 0, 1000 };
	struct cm_full_mark mark = { 95, 0 }, never = { 100, 0 }, floor = { 100, 30 };
	uint64_t v;

	(void)state;
	cm_init(&m);
	assert_true(cm_register_node(&m, 1, "10.0.0.1:7000", &a, 1, 1000) >= 0);
	v = m.version;
	a.avail = 51;				/* 94.9% in use */
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 0);
	assert_true(m.version == v);
	a.avail = 50;				/* 95% */
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 1);
	assert_true(m.version == v + 1);
	a.avail = 60;				/* 94%: still full */
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 1);
	assert_true(m.version == v + 1);
	a.avail = 71;				/* 92.9%: room again */
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 0);
	assert_true(m.version == v + 2);
	/* 100: never full, even with nothing free; capacity 0: never. */
	a.avail = 0;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &never), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 0);
	/* Less free than the floor: full; room again above twice the floor. */
	a.avail = 29;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &floor), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 1);
	a.avail = 59;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &floor), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 1);
	a.avail = 60;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &floor), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 0);
	a.capacity = 0;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 0);
	/* Huge figures do not overflow. */
	a.capacity = UINT64_MAX;
	a.avail = UINT64_MAX / 100 * 10;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 0);
	a.avail = UINT64_MAX / 100 * 4;
	assert_int_equal(cm_update_space(&m, 1, &a, 1, &mark), 1);
	assert_int_equal(cm_find_target(&m, 101)->full, 1);
	cm_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_and_build),
		cmocka_unit_test(test_offline_return_resync),
		cmocka_unit_test(test_empty_chain_return),
		cmocka_unit_test(test_missing_target_and_leases),
		cmocka_unit_test(test_ident),
		cmocka_unit_test(test_full_watermark),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_replace_last_serving),
		cmocka_unit_test(test_replace_syncing_keeps_last_serving),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_remove_dead),
		cmocka_unit_test(test_drain_offline),
		cmocka_unit_test(test_codec_roundtrip),
		cmocka_unit_test(test_codec_malformed),
		cmocka_unit_test(test_services),
		cmocka_unit_test(test_revoked),
		cmocka_unit_test(test_capacity_counts_each_fs_once),
	};

	return cmocka_run_group_tests(tests, quiet, NULL);
}
