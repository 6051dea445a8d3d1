/*
 * Unit tests of the composer's placement (src/composer/alloc.c): GPUs by
 * count, model, same node, zone and same zone, the pools, refusals that name every part
 * that does not fit, and a randomized run of compose/release against a
 * model that checks no GPU is ever given twice.
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

#include "common/rand.h"
#include "composer/alloc.h"

/* nodes x per GPUs of model, on nodes 1..nodes. */
static void fill(struct alloc_gpu *g, uint32_t nodes, uint32_t per, const char *model)
{
	for (uint32_t n = 0; n < nodes; n++) {
		for (uint32_t i = 0; i < per; i++) {
			struct alloc_gpu *x = &g[n * per + i];

			memset(x, 0, sizeof(*x));
			x->node = n + 1;
			x->index = i;
			snprintf(x->model, sizeof(x->model), "%s", model);
			snprintf(x->zone, sizeof(x->zone), "%s", GPU_ZONE_DEFAULT);
			x->state = GPU_FREE;
			x->node_up = true;
		}
	}
}

static struct alloc_inventory inv_of(const struct alloc_gpu *g, uint32_t n)
{
	return (struct alloc_inventory){ g, n, 1ull << 30, 0, 1ull << 28, 0, 2 };
}

static void test_count_and_model(void **state)
{
	struct alloc_gpu g[12];
	struct alloc_inventory inv;
	struct alloc_request rq = { .gpus = 5 };
	struct alloc_result res;
	char why[256];

	(void)state;
	fill(g, 3, 4, "H100-80GB");
	snprintf(g[11].model, sizeof(g[11].model), "L4-24GB");
	inv = inv_of(g, 12);
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(res.n, 5);
	for (uint32_t i = 0; i < 5; i++)
		assert_int_equal(res.pick[i], i);
	snprintf(rq.model, sizeof(rq.model), "L4-24GB");
	rq.gpus = 1;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(res.pick[0], 11);
	rq.gpus = 2;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 2 L4-24GB, 1 free");
	assert_int_equal(res.n, 0);
	/* Failed GPUs, owned ones and those of a node down are not free. */
	snprintf(rq.model, sizeof(rq.model), "H100-80GB");
	rq.gpus = 12;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 12 H100-80GB, 11 free");
	g[0].state = GPU_FAILED;
	g[1].owned = true;
	for (int i = 4; i < 8; i++)
		g[i].node_up = false;
	rq.gpus = 6;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 6 H100-80GB, 5 free");
	rq.gpus = 5;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(res.pick[0], 2);
	assert_int_equal(res.pick[1], 3);
	assert_int_equal(res.pick[2], 8);
}

static void test_refusal_texts(void **state)
{
	struct alloc_gpu g[8];
	struct alloc_inventory inv;
	struct alloc_request rq = { .gpus = 9 };
	struct alloc_result res;
	char why[512];

	(void)state;
	fill(g, 2, 4, "H100-80GB");
	inv = inv_of(g, 8);
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 9 GPUs, 8 free");
	/* Every part that does not fit is named. */
	rq.gpus = 1;
	rq.storage = 2ull << 30;
	rq.memory = 512ull << 20;
	inv.mem_used = 64ull << 20;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 2 GiB of storage, 1 GiB free of 1 GiB; "
				 "needs 512 MiB of memory, 192 MiB free of 256 MiB on 2 mem node(s)");
	inv.mem_nodes = 0;
	rq.storage = 0;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 512 MiB of memory, no mem node is up");
	/* Exactly what is free fits. */
	inv.mem_nodes = 2;
	rq.memory = 192ull << 20;
	rq.storage = 1ull << 30;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	rq.gpus = ALLOC_MAX_GPUS + 1;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -EINVAL);
}

static void test_same_node(void **state)
{
	struct alloc_gpu g[12];
	struct alloc_inventory inv;
	struct alloc_request rq = { .gpus = 3, .same_node = true };
	struct alloc_result res;
	char why[256];

	(void)state;
	fill(g, 3, 4, "H100-80GB");
	/* Node 1: 2 free, node 2: 3 free, node 3: 4 free. */
	g[0].owned = g[1].owned = true;
	g[4].owned = true;
	inv = inv_of(g, 12);
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(res.n, 3);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(g[res.pick[i]].node, 2);	/* the tightest fit */
	rq.gpus = 4;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(g[res.pick[i]].node, 3);
	g[8].owned = true;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 4 GPUs on one node, at most 3 free on a node (8 free in all)");
	rq.same_node = false;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(res.n, 4);
}

/* Zones: a named zone, one zone (the tightest that fits), the refusal
 * naming the zone with the most, a pinned node, and named GPUs refusing
 * zone constraints. Nodes 1 and 2 are in zone a, node 3 in zone b. */
static void test_zones(void **state)
{
	struct alloc_gpu g[12];
	struct alloc_inventory inv;
	struct alloc_request rq = { .gpus = 4 };
	struct alloc_result res;
	char why[256];

	(void)state;
	fill(g, 3, 4, "H100-80GB");
	for (int i = 0; i < 12; i++)
		snprintf(g[i].zone, sizeof(g[i].zone), "%s", i < 8 ? "a" : "b");
	inv = inv_of(g, 12);
	snprintf(rq.zone, sizeof(rq.zone), "b");
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(g[res.pick[i]].node, 3);
	rq.gpus = 5;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 5 GPUs in zone b, 4 free there");
	snprintf(rq.zone, sizeof(rq.zone), "nowhere");
	rq.gpus = 1;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 1 GPU in zone nowhere, 0 free there");
	/* One zone, any: the tightest that has enough. */
	rq.zone[0] = 0;
	rq.same_zone = true;
	rq.gpus = 3;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	for (uint32_t i = 0; i < 3; i++)
		assert_string_equal(g[res.pick[i]].zone, "b");
	rq.gpus = 6;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	for (uint32_t i = 0; i < 6; i++)
		assert_string_equal(g[res.pick[i]].zone, "a");	/* across nodes 1 and 2 */
	assert_int_equal(g[res.pick[5]].node, 2);
	/* Zone a: 3 free, zone b: 2 free; 5 free in all, but not in one. */
	g[0].owned = g[1].owned = g[4].owned = g[5].owned = g[6].owned = true;
	g[8].owned = g[9].owned = true;
	rq.gpus = 4;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 4 GPUs in one zone, at most 3 free in zone a (5 free in all)");
	snprintf(rq.model, sizeof(rq.model), "H100-80GB");
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 4 H100-80GB in one zone, at most 3 free in zone a (5 free in all)");
	rq.same_zone = false;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	/* Same node within a zone. */
	rq.model[0] = 0;
	rq.same_node = true;
	rq.gpus = 2;
	snprintf(rq.zone, sizeof(rq.zone), "a");
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(g[res.pick[0]].node, 1);
	assert_int_equal(g[res.pick[1]].node, 1);
	rq.gpus = 3;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 3 GPUs on one node in zone a, at most 2 free on a node (3 free in all)");
	/* A pinned node (a recompose keeping a same-node composition). */
	rq.zone[0] = 0;
	rq.gpus = 1;
	rq.pin_node = 3;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(g[res.pick[0]].node, 3);
	rq.gpus = 3;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "needs 3 GPUs on node 3, 2 free there");
	/* Named GPUs take no zone. */
	memset(&rq, 0, sizeof(rq));
	rq.gpus = rq.nids = 1;
	rq.ids[0] = (struct alloc_gpu_id){ 3, 3 };
	rq.same_zone = true;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -EINVAL);
}

/* Random composes and releases: every placement takes free GPUs only,
 * never one held, and the pools never go past their totals. */
static void test_random_against_model(void **state)
{
	enum { NODES = 4, PER = 8, N = NODES * PER, SLOTS = 64 };
	struct alloc_gpu g[N];
	uint32_t holder[N];
	struct { bool live; uint32_t n, pick[ALLOC_MAX_GPUS]; uint64_t st, mem; } c[SLOTS];
	struct alloc_inventory inv;
	uint64_t rng = 42;
	uint32_t placed = 0, refused = 0;

	(void)state;
	fill(g, NODES, PER, "H100-80GB");
	for (uint32_t i = 0; i < N; i++)	/* two zones of two nodes */
		snprintf(g[i].zone, sizeof(g[i].zone), "%s", g[i].node <= NODES / 2 ? "a" : "b");
	memset(holder, 0, sizeof(holder));
	memset(c, 0, sizeof(c));
	inv = inv_of(g, N);
	for (int step = 0; step < 20000; step++) {
		uint32_t s = (uint32_t)(rng_below(&rng, SLOTS));
		struct alloc_request rq = { 0 };
		struct alloc_result res;
		char why[256];

		if (c[s].live) {
			for (uint32_t i = 0; i < c[s].n; i++) {
				assert_int_equal(holder[c[s].pick[i]], s + 1);
				holder[c[s].pick[i]] = 0;
				g[c[s].pick[i]].owned = false;
			}
			inv.storage_used -= c[s].st;
			inv.mem_used -= c[s].mem;
			c[s].live = false;
			continue;
		}
		rq.gpus = (uint32_t)(rng_below(&rng, 6));
		rq.same_node = rng_below(&rng, 2);
		rq.same_zone = rng_below(&rng, 2);
		if (!rng_below(&rng, 4))
			snprintf(rq.zone, sizeof(rq.zone), "%s", rng_below(&rng, 2) ? "a" : "b");
		rq.storage = (rng_below(&rng, 5)) << 27;
		rq.memory = (rng_below(&rng, 5)) << 24;
		if (!rq.gpus && !rq.storage && !rq.memory)
			continue;
		if (alloc_place(&inv, &rq, &res, why, sizeof(why))) {
			refused++;
			continue;
		}
		assert_int_equal(res.n, rq.gpus);
		for (uint32_t i = 0; i < res.n; i++) {
			uint32_t k = res.pick[i];

			assert_true(k < N);
			assert_int_equal(holder[k], 0);
			assert_true(!rq.same_node || g[k].node == g[res.pick[0]].node);
			assert_true(!rq.same_zone || !strcmp(g[k].zone, g[res.pick[0]].zone));
			assert_true(!rq.zone[0] || !strcmp(g[k].zone, rq.zone));
			holder[k] = s + 1;
			g[k].owned = true;
		}
		c[s].live = true;
		c[s].n = res.n;
		memcpy(c[s].pick, res.pick, sizeof(res.pick));
		c[s].st = rq.storage;
		c[s].mem = rq.memory;
		inv.storage_used += rq.storage;
		inv.mem_used += rq.memory;
		assert_true(inv.storage_used <= inv.storage_total);
		assert_true(inv.mem_used <= inv.mem_total);
		placed++;
	}
	assert_true(placed > 1000);
	assert_true(refused > 100);
}

static void test_human(void **state)
{
	char b[32];

	(void)state;
	alloc_human(12, b, sizeof(b));
	assert_string_equal(b, "12 bytes");
	alloc_human(256ull << 20, b, sizeof(b));
	assert_string_equal(b, "256 MiB");
	alloc_human(3ull << 29, b, sizeof(b));
	assert_string_equal(b, "1.5 GiB");
}

/* Named GPUs: exactly those, in the order named; a refusal names each
 * one that cannot be given, and why. */
static void test_named_gpus(void **state)
{
	struct alloc_gpu g[8];
	struct alloc_inventory inv;
	struct alloc_request rq = { .gpus = 2, .nids = 2, .ids = { { 2, 3 }, { 1, 0 } } };
	struct alloc_result res;
	char why[256];

	(void)state;
	fill(g, 2, 4, "H100-80GB");
	inv = inv_of(g, 8);
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), 0);
	assert_int_equal(res.n, 2);
	assert_int_equal(res.pick[0], 7);
	assert_int_equal(res.pick[1], 0);
	g[7].owned = true;
	g[0].node_up = false;
	rq.ids[1] = (struct alloc_gpu_id){ 1, 1 };
	rq.nids = rq.gpus = 3;
	rq.ids[2] = (struct alloc_gpu_id){ 9, 0 };
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "gpu-2-3 is composed already; gpu-9-0 is not in the inventory");
	assert_int_equal(res.n, 0);
	rq.nids = rq.gpus = 1;
	rq.ids[0] = (struct alloc_gpu_id){ 1, 0 };
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "gpu-1-0 is on a node that is down");
	/* Names take no count, model or same-node of their own. */
	rq.ids[0] = (struct alloc_gpu_id){ 1, 1 };
	rq.same_node = true;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -EINVAL);
	rq.same_node = false;
	rq.gpus = 2;
	assert_int_equal(alloc_place(&inv, &rq, &res, why, sizeof(why)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count_and_model),
		cmocka_unit_test(test_refusal_texts),
		cmocka_unit_test(test_same_node),
		cmocka_unit_test(test_zones),
		cmocka_unit_test(test_named_gpus),
		cmocka_unit_test(test_random_against_model),
		cmocka_unit_test(test_human),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
