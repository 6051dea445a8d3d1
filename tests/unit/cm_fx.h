/*
 * Cluster-map fixture of the unit tests (test_cluster_map.c,
 * test_rebalance.c): nodes with numbered targets, and a built cluster.
 * Include after <cmocka.h> and "mgmt/membership.h".
 */
#ifndef STRATA_TESTS_CM_FX_H
#define STRATA_TESTS_CM_FX_H

#include <stdio.h>

/* Node k (1-based) at "10.0.0.k:7000" with targets k*100+1 .. k*100+per
 * (target i using i bytes). */
static void reg(struct cluster_map *m, uint32_t k, uint32_t per)
{
	struct cm_target_info ti[16];
	char addr[32];

	for (uint32_t i = 0; i < per; i++)
		ti[i] = (struct cm_target_info){ .id = k * 100 + 1 + i, .capacity = 1ull << 40,
						 .used = i };
	snprintf(addr, sizeof(addr), "10.0.0.%u:7000", k);
	assert_true(cm_register_node(m, k, addr, ti, per, 1000) >= 0);
}

/* nodes nodes of per targets each, chains of r built over them. */
static void make_cluster(struct cluster_map *m, uint32_t nodes, uint32_t per, uint32_t r)
{
	cm_init(m);
	for (uint32_t k = 1; k <= nodes; k++)
		reg(m, k, per);
	assert_int_equal(cm_build_chains(m, r, false), nodes * per);
}

#endif
