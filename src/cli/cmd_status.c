/*
 * strata status: the cluster's health at a glance. Capacity and namespace
 * counts come from strata_statfs (the public API); nodes, targets and
 * chains with their states from mgmt's cluster map (GET_MAP), which the
 * public API does not expose; quota roots from meta (cmd_quota.c). When the map cannot be read the counts of
 * strata_statfs stand in and health is "unknown".
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/cluster_map.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/strata.h"

static const char *node_state(uint32_t st)
{
	switch (st) {
	case NODE_UP: return "up";
	case NODE_OFFLINE: return "offline";
	case NODE_DRAINING: return "draining";
	default: return "?";
	}
}

static const char *target_state(uint32_t st)
{
	switch (st) {
	case TARGET_SERVING: return "serving";
	case TARGET_SYNCING: return "syncing";
	case TARGET_OFFLINE: return "offline";
	case TARGET_LOST: return "lost";
	default: return "?";
	}
}

/* The cluster map from mgmt. Returns 0 and m (the caller releases it) or a
 * negative error. */
static int fetch_map(const struct fs_args *a, const char *addr, struct cluster_map *m)
{
	struct rpc_client *cl;
	int rc;

	cm_init(m);
	if (cli_rpc_client("strata-cli", 5000, a->token, a->mgmt, a->dir, &cl))
		return -EINVAL;
	rc = cmap_fetch_sync(cl, addr, 5000, m);
	rpc_client_free(cl);
	return rc;
}

static bool chain_healthy(const struct cluster_map *m, const struct cm_chain *c)
{
	bool ok = c->len >= m->replication;

	for (uint8_t k = 0; k < c->len && k < CM_CHAIN_SLOTS; k++)
		ok = ok && c->states[k] == TARGET_SERVING;
	return ok;
}

/* The summary lines from the map; returns how many nodes, targets and
 * chains are not healthy. */
static int print_map_summary(const struct cluster_map *m)
{
	uint32_t up = 0, serving = 0, healthy = 0;

	for (uint32_t i = 0; i < m->nnodes; i++)
		up += m->nodes[i].state == NODE_UP;
	for (uint32_t i = 0; i < m->ntargets; i++)
		serving += m->targets[i].state == TARGET_SERVING;
	for (uint32_t i = 0; i < m->nchains; i++)
		healthy += chain_healthy(m, &m->chains[i]);
	printf("nodes      %u up of %u\n", up, m->nnodes);
	printf("targets    %u serving of %u\n", serving, m->ntargets);
	printf("chains     %u healthy of %u (replication %u)\n", healthy, m->nchains,
	       m->replication);
	return (int)(m->nnodes - up) + (int)(m->ntargets - serving) + (int)(m->nchains - healthy);
}

/* How many chains have no replica serving: their data cannot be read or
 * written until a member that holds it returns. */
static uint32_t chains_unavailable(const struct cluster_map *m)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];
		bool any = false;

		for (uint8_t k = 0; k < c->len && k < CM_CHAIN_SLOTS; k++)
			any |= c->states[k] == TARGET_SERVING;
		n += !any;
	}
	return n;
}

static void print_map_tables(const struct cluster_map *m)
{
	char cap[32], used[32];

	printf("\n%-6s %-22s %s\n", "NODE", "ADDRESS", "STATE");
	for (uint32_t i = 0; i < m->nnodes; i++)
		printf("%-6u %-22s %s\n", m->nodes[i].id, m->nodes[i].addr, node_state(m->nodes[i].state));
	printf("\n%-6s %-6s %-8s %12s %12s\n", "TARGET", "NODE", "STATE", "CAPACITY", "USED");
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		printf("%-6u %-6u %-8s %12s %12s\n", t->id, t->node_id, target_state(t->state),
		       fs_human(t->capacity, cap, sizeof(cap)), fs_human(t->used, used, sizeof(used)));
	}
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];

		unsigned ok = 0;

		if (chain_healthy(m, c))
			continue;
		for (uint8_t k = 0; k < c->len && k < CM_CHAIN_SLOTS; k++)
			ok += c->states[k] == TARGET_SERVING;
		if (ok == 0)
			printf("chain %u unavailable: no replica serving\n", c->id);
		else
			printf("chain %u degraded: %u of %u replicas serving\n", c->id, ok,
			       m->replication);
	}
}

/* Services of kind in the map, and how many are up. */
static uint32_t count_services(const struct cluster_map *m, uint32_t kind, uint32_t *up)
{
	uint32_t n = 0;

	*up = 0;
	for (uint32_t i = 0; i < m->nservices; i++) {
		if (m->services[i].kind != kind)
			continue;
		n++;
		*up += m->services[i].state == NODE_UP;
	}
	return n;
}

static void print_services(const struct cluster_map *m)
{
	if (!m->nservices)
		return;
	printf("\n%-8s %-6s %-22s %s\n", "SERVICE", "NODE", "ADDRESS", "STATE");
	for (uint32_t i = 0; i < m->nservices; i++) {
		const struct cm_service *sv = &m->services[i];

		printf("%-8s %-6u %-22s %s\n", cm_service_kind_name(sv->kind), sv->node_id,
		       sv->addr, node_state(sv->state));
	}
}

int fs_cmd_status(int argc, char **argv)
{
	struct strata_statfs sf;
	struct strata_opts o;
	struct cluster_map m;
	struct fs_args a;
	struct strata *s = NULL;
	char addr[256], cap[32], used[32];
	uint32_t meta_n = 0, meta_up = 0, mem_n = 0, mem_up = 0, dark = 0;
	int rc, maprc, statrc = STRATA_EUNAVAIL, problems = 0;

	rc = fs_parse(argc, argv, "", false, &a);
	if (rc)
		return rc;
	if (a.npos) {
		cli_err("status: unexpected argument '%s'", a.pos[0]);
		return 2;
	}
	rc = fs_mgmt_addr(&a, addr, sizeof(addr));
	if (rc)
		return rc;
	/* The map first: it answers while the namespace is away, and says
	 * whether there is a meta service to ask at all. */
	maprc = fetch_map(&a, addr, &m);
	if (maprc == 0) {
		meta_n = count_services(&m, CM_SVC_META, &meta_up);
		mem_n = count_services(&m, CM_SVC_MEM, &mem_up);
		dark = chains_unavailable(&m);
	}
	if (maprc || meta_up) {
		strata_opts_init(&o, sizeof(o));
		o.retry_ms = 10000;
		statrc = strata_connect(addr, &o, &s);
		if (!statrc) {
			statrc = strata_statfs(s, &sf);
			strata_disconnect(s);
		}
	}
	if (maprc && statrc) {
		cli_err("cannot get the cluster's status from '%s': %s", addr, strata_strerror(statrc));
		return 1;
	}
	if (maprc == 0) {
		printf("cluster    %s (map version %llu)\n", addr, (unsigned long long)m.version);
		problems = print_map_summary(&m);
		printf("services   meta %u up of %u, mem %u up of %u\n", meta_up, meta_n, mem_up,
		       mem_n);
		problems += (int)(meta_n - meta_up + mem_n - mem_up);
	} else {
		printf("cluster    %s\n", addr);
		printf("nodes      %u\n", sf.nodes);
		printf("targets    %u\n", sf.targets);
		printf("chains     %u (replication %u)\n", sf.chains, sf.replication);
	}
	if (statrc == 0) {
		printf("capacity   %s, %s used (%.1f%%)\n", fs_human(sf.capacity, cap, sizeof(cap)),
		       fs_human(sf.used, used, sizeof(used)),
		       sf.capacity ? 100.0 * (double)sf.used / (double)sf.capacity : 0.0);
		printf("namespace  %llu files, %llu directories\n", (unsigned long long)sf.files,
		       (unsigned long long)sf.dirs);
	} else {
		printf("namespace  unavailable (%s)\n", meta_up ? strata_strerror(statrc) :
		       "no meta service up in the cluster map");
	}
	if (maprc == 0) {
		if (dark || !meta_up) {
			printf("health     unavailable (");
			if (dark)
				printf("%u chain%s without a serving replica%s", dark,
				       dark == 1 ? "" : "s", meta_up ? "" : ", ");
			if (!meta_up)
				printf("no meta service up");
			printf(")\n");
		} else {
			printf("health     %s\n", problems ? "degraded" : "ok");
		}
		print_map_tables(&m);
		print_services(&m);
		cm_release(&m);
		/* Quota roots need an admin token (their paths name every
		 * tenant's); without one status leaves them out. */
		if (statrc == 0)
			(void)fs_quota_roots(&a);
	} else {
		printf("health     unknown (cannot read the cluster map: %s)\n", strata_strerror(maprc));
	}
	return 0;
}
