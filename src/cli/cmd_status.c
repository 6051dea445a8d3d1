/*
 * strata status: the cluster's health at a glance, as text or (--json) as
 * one JSON object. Nodes, targets, chains, services and capacity come from
 * mgmt's cluster map (GET_MAP, which answers from the first moment mgmt
 * runs, also while no node has registered); what mgmt waits for before it
 * builds chains from its STATUS (expect_nodes); file counts from
 * strata_statfs when a meta service is up; quota roots from meta
 * (cmd_quota.c, text only).
 *
 * Exit status: 0 health ok; 1 health not ok (forming, degraded,
 * unavailable); 2 usage error; 3 mgmt cannot be reached or read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/cluster_map.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/strata.h"

#define STATUS_EXIT_NOT_OK 1
#define STATUS_EXIT_NO_MGMT 3

/* Everything status shows, computed once for both forms. */
struct status_view {
	const char *addr;
	struct cluster_map map;
	uint32_t nodes_up, serving, healthy, dark;
	uint32_t resyncing;			/* short chains with a member syncing */
	uint32_t moving;			/* whole chains with an extra member syncing */
	uint32_t idle;				/* targets offline or lost */
	json_t *rebalance;			/* mgmt's STATUS "rebalance", or NULL */
	uint32_t meta_n, meta_up, mem_n, mem_up;
	int64_t expect_nodes, storage_nodes;	/* -1: mgmt did not say */
	int64_t lost_chunks;			/* no intact replica left (mgmt) */
	uint64_t capacity, used;		/* cm_capacity() */
	uint32_t full;				/* targets held full */
	int statrc;				/* of strata_statfs */
	struct strata_statfs sf;
	const char *health;			/* ok, forming, degraded, unavailable */
	char waiting[256];			/* what health waits for; "" when ok */
};

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

static unsigned chain_serving(const struct cm_chain *c)
{
	unsigned n = 0;

	for (uint8_t k = 0; k < c->len && k < CM_CHAIN_SLOTS; k++)
		n += c->states[k] == TARGET_SERVING;
	return n;
}

/* R replicas serving. A chain may serve R and have one more resyncing:
 * a move (a drain's or the rebalancer's) that never leaves it short. */
static bool chain_healthy(const struct cluster_map *m, const struct cm_chain *c)
{
	return chain_serving(c) >= m->replication;
}

/* Is a member of c resyncing (a node back, a drain's or a removed node's
 * replacement)? */
static bool chain_resyncing(const struct cm_chain *c)
{
	for (uint8_t k = 0; k < c->len && k < CM_CHAIN_SLOTS; k++)
		if (c->states[k] == TARGET_SYNCING)
			return true;
	return false;
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

/* Appends ", " (unless first) and the formatted text to v->waiting. */
static void __attribute__((format(printf, 2, 3))) waiting_add(struct status_view *v,
							      const char *fmt, ...)
{
	size_t len = strlen(v->waiting);
	va_list ap;

	if (len && len + 2 < sizeof(v->waiting)) {
		memcpy(v->waiting + len, ", ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(v->waiting + len, sizeof(v->waiting) - len, fmt, ap);
	va_end(ap);
}

static const char *plural(uint32_t n)
{
	return n == 1 ? "" : "s";
}

/* Health, and what it waits for, from the counts. */
static void judge(struct status_view *v)
{
	const struct cluster_map *m = &v->map;
	uint32_t down = m->nnodes - v->nodes_up, idle = v->idle;
	uint32_t short_chains = m->nchains - v->healthy;
	uint32_t svc_down = v->meta_n - v->meta_up + v->mem_n - v->mem_up;

	v->waiting[0] = 0;
	if (!m->nchains) {
		v->health = "forming";
		if (v->expect_nodes > v->storage_nodes && v->storage_nodes >= 0)
			waiting_add(v, "%lld of %lld storage nodes registered",
				    (long long)v->storage_nodes, (long long)v->expect_nodes);
		else
			waiting_add(v, "no chains built yet (see mgmt's log)");
		return;
	}
	if (v->dark || !v->meta_up) {
		v->health = "unavailable";
		if (v->dark)
			waiting_add(v, "%u chain%s without a serving replica", v->dark,
				    plural(v->dark));
		if (!v->meta_up)
			waiting_add(v, "no meta service up");
		return;
	}
	if (!down && !idle && !short_chains && !svc_down && v->lost_chunks <= 0) {
		v->health = "ok";
		return;
	}
	v->health = "degraded";
	if (down)
		waiting_add(v, "%u node%s not up", down, plural(down));
	if (idle)
		waiting_add(v, "%u target%s not serving", idle, plural(idle));
	if (v->resyncing)
		waiting_add(v, "re-replicating %u chain%s", v->resyncing, plural(v->resyncing));
	if (short_chains > v->resyncing)
		waiting_add(v, "%u chain%s short of replicas", short_chains - v->resyncing,
			    plural(short_chains - v->resyncing));
	if (svc_down)
		waiting_add(v, "%u service%s down", svc_down, plural(svc_down));
	if (v->lost_chunks > 0)
		waiting_add(v, "%lld chunk%s lost: no intact replica left", (long long)v->lost_chunks,
			    plural((uint32_t)v->lost_chunks));
}

/* Reads the map (required), mgmt's STATUS (for expect_nodes) and, with a
 * meta service up, strata_statfs. Returns 0, or the exit status after
 * reporting why mgmt cannot be read. */
static int gather(const struct fs_args *a, struct status_view *v)
{
	struct rpc_client *cl;
	struct strata_opts o;
	struct strata *s;
	json_t *mg = NULL;
	int rc;

	cm_init(&v->map);
	v->expect_nodes = v->storage_nodes = -1;
	v->statrc = STRATA_EUNAVAIL;
	if (cli_rpc_client("strata-cli", 5000, a->token, a->mgmt, a->dir, &cl))
		return STATUS_EXIT_NO_MGMT;
	rc = cmap_fetch_sync(cl, v->addr, 5000, &v->map);
	if (!rc && !cli_service_status(cl, v->addr, "mgmt", 5000, &mg)) {
		json_t *e = json_object_get(mg, "expect_nodes"), *n = json_object_get(mg, "storage_nodes");
		json_t *lost = json_object_get(mg, "lost_chunks");

		v->rebalance = json_incref(json_object_get(mg, "rebalance"));

		if (json_is_integer(lost))
			v->lost_chunks = json_integer_value(lost);

		if (json_is_integer(e) && json_is_integer(n)) {
			v->expect_nodes = json_integer_value(e);
			v->storage_nodes = json_integer_value(n);
		}
		json_decref(mg);
	}
	rpc_client_free(cl);
	if (rc) {
		cli_err("status: cannot read the cluster map from mgmt '%s': %s; check that a stratad "
			"with the mgmt service listens there (--mgmt, --dir or $STRATA_MGMT)",
			v->addr, strata_strerror(rc));
		return STATUS_EXIT_NO_MGMT;
	}
	for (uint32_t i = 0; i < v->map.nnodes; i++)
		v->nodes_up += v->map.nodes[i].state == NODE_UP;
	for (uint32_t i = 0; i < v->map.ntargets; i++) {
		v->serving += v->map.targets[i].state == TARGET_SERVING;
		v->idle += v->map.targets[i].state != TARGET_SERVING &&
			   v->map.targets[i].state != TARGET_SYNCING;
	}
	for (uint32_t i = 0; i < v->map.nchains; i++) {
		bool ok = chain_healthy(&v->map, &v->map.chains[i]);

		v->healthy += ok;
		v->resyncing += !ok && chain_resyncing(&v->map.chains[i]);
		v->moving += ok && chain_resyncing(&v->map.chains[i]);
		v->dark += chain_serving(&v->map.chains[i]) == 0;
	}
	v->meta_n = count_services(&v->map, CM_SVC_META, &v->meta_up);
	v->mem_n = count_services(&v->map, CM_SVC_MEM, &v->mem_up);
	(void)cm_capacity(&v->map, &v->capacity, &v->used);
	for (uint32_t i = 0; i < v->map.ntargets; i++)
		v->full += v->map.targets[i].full != 0;
	/* Only a meta service the map lists as up is asked: while the
	 * cluster forms there is none, and status answers at once. */
	if (v->meta_up) {
		strata_opts_init(&o, sizeof(o));
		o.retry_ms = 3000;
		v->statrc = strata_connect(v->addr, &o, &s);
		if (!v->statrc) {
			v->statrc = strata_statfs(s, &v->sf);
			strata_disconnect(s);
		}
	}
	judge(v);
	return 0;
}

static void print_tables(const struct cluster_map *m)
{
	char cap[32], used[32], avail[32];

	printf("\n%-6s %-22s %s\n", "NODE", "ADDRESS", "STATE");
	for (uint32_t i = 0; i < m->nnodes; i++)
		printf("%-6u %-22s %s\n", m->nodes[i].id, m->nodes[i].addr, node_state(m->nodes[i].state));
	printf("\n%-6s %-6s %-8s %12s %12s %12s\n", "TARGET", "NODE", "STATE", "CAPACITY", "USED",
	       "FREE");
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		printf("%-6u %-6u %-8s %12s %12s %12s%s\n", t->id, t->node_id, target_state(t->state),
		       fs_human(t->capacity, cap, sizeof(cap)), fs_human(t->used, used, sizeof(used)),
		       fs_human(t->avail, avail, sizeof(avail)), t->full ? "  FULL" : "");
	}
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];
		unsigned ok = chain_serving(c);

		if (chain_healthy(m, c))
			continue;
		if (ok == 0)
			printf("chain %u unavailable: no replica serving\n", c->id);
		else
			printf("chain %u degraded: %u of %u replicas serving\n", c->id, ok,
			       m->replication);
	}
	if (!m->nservices)
		return;
	printf("\n%-8s %-6s %-22s %s\n", "SERVICE", "NODE", "ADDRESS", "STATE");
	for (uint32_t i = 0; i < m->nservices; i++) {
		const struct cm_service *sv = &m->services[i];

		printf("%-8s %-6u %-22s %s\n", cm_service_kind_name(sv->kind), sv->node_id,
		       sv->addr, node_state(sv->state));
	}
}

/* The rebalancer's line (mgmt's STATUS), and the chains moving. */
static void print_rebalance(const struct status_view *v)
{
	json_t *r = v->rebalance;
	char moved[32];

	if (!r)
		return;
	printf("rebalance  %s: %lld moves done, %lld in flight, %lld pending, %s moved; "
	       "%lld..%lld chain entries per node (mean %.2f)\n",
	       json_string_value(json_object_get(r, "state")) ?: "?",
	       (long long)json_integer_value(json_object_get(r, "moves_done")),
	       (long long)json_integer_value(json_object_get(r, "moves_in_flight")),
	       (long long)json_integer_value(json_object_get(r, "moves_pending")),
	       fs_human((uint64_t)json_integer_value(json_object_get(r, "bytes_moved")), moved,
			sizeof(moved)),
	       (long long)json_integer_value(json_object_get(r, "fill_min")),
	       (long long)json_integer_value(json_object_get(r, "fill_max")),
	       json_real_value(json_object_get(r, "fill_mean")));
	if (v->moving)
		printf("moving     %u chain%s: a new replica resyncs beside R serving ones\n",
		       v->moving, plural(v->moving));
}

static void print_text(const struct status_view *v)
{
	const struct cluster_map *m = &v->map;
	char cap[32], used[32], bytes[32];

	printf("cluster    %s (map version %llu)\n", v->addr, (unsigned long long)m->version);
	printf("nodes      %u up of %u\n", v->nodes_up, m->nnodes);
	printf("targets    %u serving of %u\n", v->serving, m->ntargets);
	printf("chains     %u healthy of %u (replication %u)\n", v->healthy, m->nchains,
	       m->replication);
	printf("services   meta %u up of %u, mem %u up of %u\n", v->meta_up, v->meta_n, v->mem_up,
	       v->mem_n);
	printf("capacity   %s, %s used (%.1f%%)\n", fs_human(v->capacity, cap, sizeof(cap)),
	       fs_human(v->used, used, sizeof(used)),
	       v->capacity ? 100.0 * (double)v->used / (double)v->capacity : 0.0);
	if (v->full)
		printf("full       %u target(s) past mgmt.full_pct: new files are placed on the "
		       "chains without them\n", v->full);
	if (v->statrc == 0)
		printf("namespace  %llu files, %llu directories, %s\n",
		       (unsigned long long)v->sf.files, (unsigned long long)v->sf.dirs,
		       fs_human(v->sf.used, bytes, sizeof(bytes)));
	else
		printf("namespace  unavailable (%s)\n", v->meta_up ? strata_strerror(v->statrc) :
		       "no meta service up in the cluster map");
	if (strcmp(v->health, "forming") == 0)
		printf("health     forming: %s\n", v->waiting);
	else if (v->waiting[0])
		printf("health     %s (%s)\n", v->health, v->waiting);
	else
		printf("health     %s\n", v->health);
	print_rebalance(v);
	print_tables(m);
}

#define JSET(o, k, v) json_object_set_new(o, k, v)

static json_t *json_chains(const struct status_view *v)
{
	const struct cluster_map *m = &v->map;
	json_t *o = json_object(), *bad = json_array();

	JSET(o, "total", json_integer(m->nchains));
	JSET(o, "healthy", json_integer(v->healthy));
	JSET(o, "resyncing", json_integer(v->resyncing));
	JSET(o, "moving", json_integer(v->moving));
	JSET(o, "replication", json_integer(m->replication));
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];
		json_t *e;

		if (chain_healthy(m, c))
			continue;
		e = json_object();
		JSET(e, "id", json_integer(c->id));
		JSET(e, "serving", json_integer(chain_serving(c)));
		JSET(e, "resyncing", json_boolean(chain_resyncing(c)));
		JSET(e, "state", json_string(chain_serving(c) ? "degraded" : "unavailable"));
		json_array_append_new(bad, e);
	}
	JSET(o, "unhealthy", bad);
	return o;
}

static json_t *json_members(const struct status_view *v)
{
	const struct cluster_map *m = &v->map;
	json_t *o = json_object(), *nodes = json_array(), *targets = json_array();
	json_t *svcs = json_array();
	char fs[20];

	for (uint32_t i = 0; i < m->nnodes; i++) {
		json_t *e = json_object();

		JSET(e, "id", json_integer(m->nodes[i].id));
		JSET(e, "address", json_string(m->nodes[i].addr));
		JSET(e, "state", json_string(node_state(m->nodes[i].state)));
		json_array_append_new(nodes, e);
	}
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];
		json_t *e = json_object();

		snprintf(fs, sizeof(fs), "%016llx", (unsigned long long)t->fs);
		JSET(e, "id", json_integer(t->id));
		JSET(e, "node", json_integer(t->node_id));
		JSET(e, "state", json_string(target_state(t->state)));
		JSET(e, "capacity", json_integer((json_int_t)t->capacity));
		JSET(e, "used", json_integer((json_int_t)t->used));
		JSET(e, "free", json_integer((json_int_t)t->avail));
		JSET(e, "full", json_boolean(t->full));
		JSET(e, "fs", t->fs ? json_string(fs) : json_null());
		json_array_append_new(targets, e);
	}
	for (uint32_t i = 0; i < m->nservices; i++) {
		const struct cm_service *sv = &m->services[i];
		json_t *e = json_object();

		JSET(e, "kind", json_string(cm_service_kind_name(sv->kind)));
		JSET(e, "node", json_integer(sv->node_id));
		JSET(e, "address", json_string(sv->addr));
		JSET(e, "state", json_string(node_state(sv->state)));
		json_array_append_new(svcs, e);
	}
	JSET(o, "nodes", nodes);
	JSET(o, "targets", targets);
	JSET(o, "services", svcs);
	return o;
}

static int print_json(const struct status_view *v)
{
	json_t *o = json_object(), *cap = json_object(), *ns = json_null(), *w = json_array();
	int rc;

	JSET(o, "cluster", json_string(v->addr));
	JSET(o, "map_version", json_integer((json_int_t)v->map.version));
	JSET(o, "health", json_string(v->health));
	JSET(o, "lost_chunks", json_integer(v->lost_chunks > 0 ? v->lost_chunks : 0));
	/* One reason a string, as the text form lists them. */
	for (const char *p = v->waiting; *p;) {
		size_t n = strcspn(p, ",");

		json_array_append_new(w, json_stringn(p, n));
		p += n;
		p += strspn(p, ", ");
	}
	JSET(o, "waiting_for", w);
	JSET(o, "nodes_up", json_integer(v->nodes_up));
	JSET(o, "targets_serving", json_integer(v->serving));
	JSET(o, "targets_full", json_integer(v->full));
	JSET(o, "storage_nodes", v->storage_nodes >= 0 ? json_integer(v->storage_nodes) : json_null());
	JSET(o, "expect_nodes", v->expect_nodes >= 0 ? json_integer(v->expect_nodes) : json_null());
	JSET(o, "chains", json_chains(v));
	JSET(cap, "total", json_integer((json_int_t)v->capacity));
	JSET(cap, "used", json_integer((json_int_t)v->used));
	JSET(o, "capacity", cap);
	if (v->statrc == 0) {
		ns = json_object();
		JSET(ns, "files", json_integer((json_int_t)v->sf.files));
		JSET(ns, "directories", json_integer((json_int_t)v->sf.dirs));
		JSET(ns, "bytes", json_integer((json_int_t)v->sf.used));
	}
	JSET(o, "namespace", ns);
	JSET(o, "rebalance", v->rebalance ? json_incref(v->rebalance) : json_null());
	json_object_update_new(o, json_members(v));
	rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (rc) {
		cli_err("status: cannot write the JSON: out of memory");
		return 1;
	}
	putchar('\n');
	return 0;
}

int fs_cmd_status(int argc, char **argv)
{
	struct status_view v;
	struct fs_args a;
	char addr[256];
	int rc;

	rc = fs_parse(argc, argv, "J", false, &a);
	if (rc)
		return rc;
	if (a.npos) {
		cli_err("status: unexpected argument '%s'", a.pos[0]);
		return 2;
	}
	rc = fs_mgmt_addr(&a, addr, sizeof(addr));
	if (rc)
		return rc == 1 ? STATUS_EXIT_NO_MGMT : rc;
	memset(&v, 0, sizeof(v));
	v.addr = addr;
	rc = gather(&a, &v);
	if (rc) {
		cm_release(&v.map);
		json_decref(v.rebalance);
		return rc;
	}
	if (a.flag['J']) {
		rc = print_json(&v);
	} else {
		print_text(&v);
		/* Quota roots need an admin token (their paths name every
		 * tenant's); without one status leaves them out. */
		if (v.statrc == 0)
			(void)fs_quota_roots(&a);
	}
	cm_release(&v.map);
	json_decref(v.rebalance);
	if (rc)
		return rc;
	return strcmp(v.health, "ok") ? STATUS_EXIT_NOT_OK : 0;
}
