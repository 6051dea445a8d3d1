/*
 * The composer service (docs/composer.md): runs beside mgmt, keeps the
 * inventory of the pools (compute nodes' GPUs, the storage plane, the mem
 * nodes), composes a job's GPUs, volume, pooled memory and credential out
 * of them, all or nothing, and releases them. Compositions live in
 * DATA/composer.db and survive restarts; the API is redfish.c's.
 *
 * One owner thread (composer_main) holds every composition and the
 * inventory; the HTTP threads hand it jobs (composer_int.h). Between jobs
 * it refreshes the inventory (the cluster map from mgmt, then each UP
 * compute and mem node's STATUS), marks Degraded the compositions of a
 * compute node the map lists offline, releases those whose TTL ran out,
 * and finishes what a restart interrupted: a composition found
 * Allocating is rolled back (Failed), one found Decomposing is released.
 * A recompose (do_recompose) replaces a composition's lost GPUs with
 * free ones under its model and zone constraints.
 *
 * With the store in PostgreSQL and mgmt in the same daemon (every control
 * node of docs/operations.md, "Three control nodes"), each control node
 * runs a composer and the one beside the mgmt leader serves (leads()):
 * the others answer every API request 503, naming the leader's API
 * address, and do no periodic work. A composer that comes to lead loads
 * the compositions from the store again, as at a start, and finishes
 * what its predecessor left half done (an Allocating composition is
 * rolled back, a Decomposing one released).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/errors_int.h"
#include "common/log.h"
#include "common/pg_conn.h"
#include "composer/composer_int.h"
#include "mgmt/mgmt_service.h"
#include "net/proto.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/errors.h"
#include "strata/strata.h"

#define COMP_LOG "composer"
#define STATUS_TIMEOUT_MS 3000

/* ---- jobs ---- */

void composer_run(struct composer *c, struct job *j)
{
	pthread_mutex_lock(&c->mu);
	if (c->stopping) {
		pthread_mutex_unlock(&c->mu);
		j->http = 503;
		j->msg_id = "Base.1.8.ServiceShuttingDown";
		snprintf(j->msg, sizeof(j->msg), "the composer is stopping");
		return;
	}
	j->next = NULL;
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	pthread_cond_signal(&c->work);
	while (!j->done)
		pthread_cond_wait(&c->done, &c->mu);
	pthread_mutex_unlock(&c->mu);
}

struct comp *composer_find(struct composer *c, const char *id)
{
	for (uint32_t i = 0; i < c->ncomps; i++)
		if (strcmp(c->comps[i].id, id) == 0)
			return &c->comps[i];
	return NULL;
}

static void fail_job(struct job *j, unsigned http, const char *msg_id, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail_job(struct job *j, unsigned http, const char *msg_id, const char *fmt, ...)
{
	va_list ap;

	j->http = http;
	j->msg_id = msg_id;
	va_start(ap, fmt);
	vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
}

/* ---- leading ---- */

/* How long the leader's API address read from its STATUS is trusted. */
#define LEADER_API_MS 5000

static json_t *service_status(struct composer *c, const char *addr, const char *svc);
static void recount(struct composer *c);

bool composer_leader(struct composer *c, char *api, size_t len)
{
	bool leads = !c->follows || c->snap_leads;

	pthread_mutex_lock(&c->mu);
	snprintf(api, len, "%s", leads ? "" : c->leader_api);
	pthread_mutex_unlock(&c->mu);
	return leads;
}

/* Loads the compositions from the store again (replacing ours). */
static int reload(struct composer *c)
{
	struct comp *v = NULL;
	uint32_t n = 0;
	int rc = comp_store_load(c->store, &v, &n);

	if (rc) {
		log_error(COMP_LOG, "cannot load the compositions to lead: %s", strata_strerror(rc));
		return rc;
	}
	free(c->comps);
	c->comps = v;
	c->ncomps = c->comps_cap = n;
	c->next_seq = n ? v[n - 1].seq + 1 : 1;
	c->inv_ok = false;
	recount(c);
	return 0;
}

/* The API address of the composer beside mgmt (the leader) at addr:
 * its STATUS's listen, a wildcard host replaced by addr's. */
static void leader_api(struct composer *c, const char *addr, char *api, size_t len)
{
	json_t *sv = service_status(c, addr, "composer");
	const char *listen = json_string_value(json_object_get(sv, "listen"));
	const char *port = listen ? strrchr(listen, ':') : NULL;
	const char *host_end = strrchr(addr, ':');

	api[0] = '\0';
	if (port && (!strncmp(listen, "0.0.0.0:", 8) || !strncmp(listen, "[::]:", 5)) && host_end)
		snprintf(api, len, "%.*s%s", (int)(host_end - addr), addr, port);
	else if (listen)
		snprintf(api, len, "%s", listen);
	json_decref(sv);
}

/* Whether this composer serves now (see the top); owner thread. */
static bool leads(struct composer *c)
{
	char addr[CM_ADDR_LEN], api[CFG_STR_MAX];
	uint64_t term;
	int r;

	if (!c->follows)
		return true;
	r = mgmt_service_leader(addr, sizeof(addr), &term);
	if (r == 1) {
		/* Writes only while that term is the lease's: once a newer
		 * leader took over, what we still write is refused. */
		comp_store_fence(c->store, term);
		if (!c->leads) {
			if (reload(c))
				return false;
			c->leads = true;
			c->snap_leads = 1;
			log_info(COMP_LOG, "serving the API: mgmt here leads (%u composition(s) loaded)",
				 c->ncomps);
		}
		return true;
	}
	if (c->leads) {
		c->leads = false;
		c->snap_leads = 0;
		log_warn(COMP_LOG, "no longer serving the API: mgmt here does not lead%s%s",
			 addr[0] ? "; the leader is " : "", addr);
	}
	if (!addr[0] || (!strcmp(addr, c->leader_mgmt) && mono_ms() - c->leader_at_ms < LEADER_API_MS))
		return false;
	leader_api(c, addr, api, sizeof(api));
	snprintf(c->leader_mgmt, sizeof(c->leader_mgmt), "%s", addr);
	c->leader_at_ms = mono_ms();
	pthread_mutex_lock(&c->mu);
	snprintf(c->leader_api, sizeof(c->leader_api), "%s", api);
	pthread_mutex_unlock(&c->mu);
	return false;
}

/* ---- the inventory ---- */

/* The JSON STATUS of addr's service named svc, or NULL. */
static json_t *service_status(struct composer *c, const char *addr, const char *svc)
{
	struct rpc_sync_args a = { .op = OP_STATUS, .timeout_ms = STATUS_TIMEOUT_MS };
	struct rpc_result res;
	json_t *st = NULL, *found = NULL;

	if (rpc_call_sync(c->cl, addr, &a, &res) == 0)
		st = json_loadb((const char *)res.body.buf, res.body.len, 0, NULL);
	rpc_result_release(&res);
	for (size_t i = 0; i < json_array_size(json_object_get(st, "services")); i++) {
		json_t *sv = json_array_get(json_object_get(st, "services"), i);

		if (strcmp(json_string_value(json_object_get(sv, "name")) ?: "", svc) == 0)
			found = json_incref(sv);
	}
	json_decref(st);
	return found;
}

static void read_gpus(json_t *sv, struct inv_node *n)
{
	json_t *gpus = json_object_get(sv, "gpus");
	const char *zone = json_string_value(json_object_get(sv, "zone"));

	memset(&n->inv, 0, sizeof(n->inv));
	n->inv.source = "status";
	n->host_memory = (uint64_t)json_integer_value(json_object_get(sv, "host_memory"));
	/* A node from before zones says none: it is in the default one. */
	snprintf(n->zone, sizeof(n->zone), "%s", zone && gpu_zone_ok(zone) ? zone : GPU_ZONE_DEFAULT);
	for (size_t i = 0; i < json_array_size(gpus) && n->inv.n < GPU_MAX; i++) {
		json_t *g = json_array_get(gpus, i);
		struct gpu *d = &n->inv.gpus[n->inv.n++];

		d->index = (uint32_t)json_integer_value(json_object_get(g, "index"));
		snprintf(d->model, sizeof(d->model), "%s",
			 json_string_value(json_object_get(g, "model")) ?: "unknown");
		d->memory = (uint64_t)json_integer_value(json_object_get(g, "memory"));
		d->state = strcmp(json_string_value(json_object_get(g, "state")) ?: "", "free") ?
			   GPU_FAILED : GPU_FREE;
	}
}

static struct inv_node *old_node(struct composer *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].node == id)
			return &c->nodes[i];
	return NULL;
}

/* Recomputes what the compositions hold: owners of GPUs, storage and
 * memory in use. */
static void recount(struct composer *c)
{
	uint32_t composed = 0, nfree = 0;

	c->storage_used = c->mem_used = 0;
	for (uint32_t g = 0; g < c->ngpus; g++)
		c->gpus[g].owned = false;
	for (uint32_t i = 0; i < c->ncomps; i++) {
		const struct comp *p = &c->comps[i];

		if (!comp_state_holds(p->state))
			continue;
		composed++;
		c->storage_used += p->rq.storage;
		c->mem_used += p->rq.memory;
		for (uint32_t k = 0; k < p->ngpus; k++)
			for (uint32_t g = 0; g < c->ngpus; g++)
				if (c->gpus[g].node == p->gpus[k].node &&
				    c->gpus[g].index == p->gpus[k].index)
					c->gpus[g].owned = true;
	}
	for (uint32_t g = 0; g < c->ngpus; g++)
		nfree += alloc_gpu_fits(&c->gpus[g], "");
	c->snap_composed = composed;
	c->snap_gpus = c->ngpus;
	c->snap_gpus_free = nfree;
	c->snap_nodes = c->nnodes;
	c->snap_storage_total = c->storage_total;
	c->snap_storage_used = c->storage_used;
	c->snap_mem_total = c->mem_total;
	c->snap_mem_used = c->mem_used;
}

static int cmp_node(const void *a, const void *b)
{
	const struct inv_node *x = a, *y = b;

	return x->node < y->node ? -1 : x->node > y->node;
}

static void free_nodes(struct inv_node *nodes, uint32_t n)
{
	for (uint32_t i = 0; nodes && i < n; i++)
		json_decref(nodes[i].nics);
	free(nodes);
}

/* Reads the map and the nodes' STATUS into a new inventory. A compute
 * node that the map lists offline keeps the GPUs it last reported, as
 * unavailable; one the map does not list (mgmt restarted, the node not
 * announced again yet) is left out until it is. */
static int refresh(struct composer *c)
{
	struct cluster_map m;
	struct inv_node *nodes = NULL;
	struct alloc_gpu *gpus = NULL;
	uint32_t nn = 0, ng = 0, nmem = 0;
	uint64_t storage = 0, mem_min = UINT64_MAX;
	const struct cm_service *meta;
	int rc;

	cm_init(&m);
	rc = cmap_fetch_sync(c->cl, c->mgmt, STATUS_TIMEOUT_MS, &m);
	if (rc) {
		cm_release(&m);
		c->inv_ok = false;
		return rc;
	}
	nodes = calloc(m.nservices ? m.nservices : 1, sizeof(*nodes));
	gpus = calloc((size_t)(m.nservices ? m.nservices : 1) * GPU_MAX, sizeof(*gpus));
	if (!nodes || !gpus) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < m.ntargets; i++)
		if (m.targets[i].state != TARGET_LOST)
			storage += m.targets[i].capacity;
	c->storage_total = storage / (m.replication ? m.replication : 1);
	/* The meta service of this daemon when it runs one (a control node):
	 * alive whenever this composer is, while the map may still list a
	 * dead control node's as up for a lease after a takeover. */
	meta = NULL;
	for (uint32_t i = 0; i < m.nservices && !meta; i++)
		if (m.services[i].kind == CM_SVC_META && m.services[i].state == NODE_UP &&
		    !strcmp(m.services[i].addr, c->env.addr))
			meta = &m.services[i];
	/* Else the first up, or, after one refused us, the next up after it. */
	if (!meta)
		meta = cm_pick_service(&m, CM_SVC_META, c->meta_refused);
	snprintf(c->meta, sizeof(c->meta), "%s", meta ? meta->addr : "");
	c->meta_node = meta ? meta->node_id : 0;
	for (uint32_t i = 0; i < m.nservices; i++) {
		const struct cm_service *s = &m.services[i];
		json_t *sv;

		if (s->kind == CM_SVC_MEM && s->state == NODE_UP && nmem < COMPOSER_MAX_MEM) {
			sv = service_status(c, s->addr, "mem");
			if (sv) {
				uint64_t cap = (uint64_t)json_integer_value(json_object_get(sv, "capacity"));

				snprintf(c->mem_addrs[nmem++], CM_ADDR_LEN, "%s", s->addr);
				mem_min = cap < mem_min ? cap : mem_min;
			}
			json_decref(sv);
		}
		if (s->kind != CM_SVC_COMPUTE || nn >= COMPOSER_MAX_NODES)
			continue;
		struct inv_node *n = &nodes[nn], *was = old_node(c, s->node_id);

		n->node = s->node_id;
		snprintf(n->addr, sizeof(n->addr), "%s", s->addr);
		n->up = s->state == NODE_UP;
		sv = n->up ? service_status(c, s->addr, "compute") : NULL;
		n->nics = NULL;
		if (sv) {
			read_gpus(sv, n);
			n->nics = json_incref(json_object_get(sv, "nics"));
		} else if (was) {
			n->inv = was->inv;
			n->host_memory = was->host_memory;
			memcpy(n->zone, was->zone, sizeof(n->zone));
			n->nics = json_incref(was->nics);
		}
		n->up = n->up && sv;
		json_decref(sv);
		if (sv || was)
			nn++;
	}
	qsort(nodes, nn, sizeof(*nodes), cmp_node);
	for (uint32_t i = 0; i < nn; i++) {
		for (uint32_t k = 0; k < nodes[i].inv.n; k++) {
			struct alloc_gpu *g = &gpus[ng++];

			g->node = nodes[i].node;
			g->index = nodes[i].inv.gpus[k].index;
			snprintf(g->model, sizeof(g->model), "%s", nodes[i].inv.gpus[k].model);
			snprintf(g->zone, sizeof(g->zone), "%s", nodes[i].zone);
			g->state = nodes[i].inv.gpus[k].state;
			g->node_up = nodes[i].up;
		}
	}
	c->nstorage = 0;
	for (uint32_t i = 0; i < m.nnodes && c->storage_addrs && c->nstorage < COMPOSER_MAX_STORAGE;
	     i++)
		if (m.nodes[i].state != NODE_OFFLINE)
			snprintf(c->storage_addrs[c->nstorage++], CM_ADDR_LEN, "%s", m.nodes[i].addr);
	c->mem_nodes = nmem;
	c->mem_total = nmem ? mem_min * nmem : 0;
	free_nodes(c->nodes, c->nnodes);
	free(c->gpus);
	c->nodes = nodes;
	c->nnodes = nn;
	c->gpus = gpus;
	c->ngpus = ng;
	nodes = NULL;
	gpus = NULL;
	c->inv_ok = true;
	c->inv_at_ms = mono_ms();
	recount(c);
out:
	free_nodes(nodes, nn);
	free(gpus);
	cm_release(&m);
	return rc;
}

/* ---- state changes ---- */

static int save(struct composer *c, struct comp *p, uint32_t state, const char *reason)
{
	int rc;

	p->state = state;
	if (reason)
		snprintf(p->reason, sizeof(p->reason), "%s", reason);
	p->changed = (int64_t)time(NULL);
	rc = comp_store_put(c->store, p);
	if (rc)
		log_error(COMP_LOG, "cannot record composition '%s' as %s: %s", p->id,
			  comp_state_name(state), strata_strerror(rc));
	recount(c);
	return rc;
}

/* Undoes what a composition made (credential, volume unless kept) and
 * frees its resources: Released, or Failed with reason when fail is set.
 * A part that cannot be undone now leaves it Decomposing (retried). */
static int release(struct composer *c, struct comp *p, bool fail, const char *reason)
{
	char err[256] = "";
	int rc;

	if (p->state != COMP_DECOMPOSING && (rc = save(c, p, COMP_DECOMPOSING, NULL)))
		return rc;
	rc = detach_credential(c, p, err, sizeof(err));
	if (!rc && p->rq.storage && (!p->retain || fail))
		rc = detach_volume(c, p, err, sizeof(err));
	if (rc) {
		log_warn(COMP_LOG, "composition '%s': %s (retried)", p->id, err);
		snprintf(p->reason, sizeof(p->reason), "%s", err);
		return rc;
	}
	rc = save(c, p, fail ? COMP_FAILED : COMP_RELEASED, reason ? reason : "");
	if (!rc) {
		c->snap_releases++;
		log_info(COMP_LOG, "composition '%s' %s%s%s", p->id, fail ? "failed: " : "released",
			 reason && fail ? reason : "", "");
	}
	return rc;
}

static struct comp *new_comp(struct composer *c)
{
	if (c->ncomps == c->comps_cap) {
		uint32_t cap = c->comps_cap ? c->comps_cap * 2 : 64;
		struct comp *v = realloc(c->comps, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->comps = v;
		c->comps_cap = cap;
	}
	return &c->comps[c->ncomps++];
}

static void do_compose(struct composer *c, struct job *j)
{
	struct alloc_inventory inv;
	struct alloc_result res;
	struct token_claims idgen;
	struct comp *p;
	char why[512], err[256] = "", *cred = NULL;
	int rc;

	if ((!c->inv_ok || mono_ms() - c->inv_at_ms > (uint64_t)c->cfg.refresh_ms) &&
	    refresh(c) && !c->inv_ok) {
		fail_job(j, 503, "Base.1.8.ServiceTemporarilyUnavailable",
			 "cannot read the cluster map from mgmt '%s'; retry", c->mgmt);
		return;
	}
	inv = (struct alloc_inventory){ c->gpus, c->ngpus, c->storage_total, c->storage_used,
					c->mem_total, c->mem_used, c->mem_nodes };
	rc = alloc_place(&inv, &j->req.rq, &res, why, sizeof(why));
	if (rc) {
		c->snap_refusals++;
		log_info(COMP_LOG, "composition refused: %s", why);
		fail_job(j, rc == -ENOSPC ? 409 : 400, rc == -ENOSPC ? "Strata.1.0.InsufficientResources"
								       : "Base.1.8.PropertyValueNotInList",
			 "%s", why);
		return;
	}
	p = new_comp(c);
	if (!p) {
		fail_job(j, 500, "Base.1.8.InternalError", "out of memory");
		return;
	}
	*p = j->req;
	p->seq = c->next_seq++;
	snprintf(p->id, sizeof(p->id), "comp-%llu", (unsigned long long)p->seq);
	p->created = (int64_t)time(NULL);
	p->expires = j->req.expires ? p->created + j->req.expires : 0;
	p->ngpus = res.n;
	for (uint32_t i = 0; i < res.n; i++) {
		const struct alloc_gpu *g = &c->gpus[res.pick[i]];

		p->gpus[i] = (struct comp_gpu){ g->node, g->index, "" };
		snprintf(p->gpus[i].model, sizeof(p->gpus[i].model), "%s", g->model);
	}
	p->mem_nodes = p->rq.memory ? c->mem_nodes : 0;
	p->mem_share = p->rq.memory ? (p->rq.memory + c->mem_nodes - 1) / c->mem_nodes : 0;
	/* The credential's id is recorded before mgmt signs it, so that a
	 * restart in between still revokes it. */
	token_claims_init(&idgen);
	snprintf(p->token_id, sizeof(p->token_id), "%s", idgen.id);
	rc = save(c, p, COMP_ALLOCATING, "");
	if (rc) {
		c->ncomps--;
		recount(c);
		fail_job(j, rc == -EEXIST ? 409 : 500, "Base.1.8.InternalError",
			 "cannot record the composition: %s", strata_strerror(rc));
		return;
	}
	rc = p->rq.storage ? attach_volume(c, p, err, sizeof(err)) : 0;
	for (uint32_t tries = 0; (rc == -ECONNREFUSED || rc == -ENOTCONN) && tries < 3; tries++) {
		/* The meta server the map named is gone (a control node died;
		 * the map lists it until its lease ends), and nothing was
		 * delivered: again through the next one the map lists. */
		c->meta_refused = c->meta_node;
		if (refresh(c))
			break;
		log_warn(COMP_LOG, "composition '%s': %s; again through meta '%s'", p->id, err,
			 c->meta);
		rc = attach_volume(c, p, err, sizeof(err));
	}
	c->meta_refused = 0;
	if (!rc)
		rc = attach_credential(c, p, &cred, err, sizeof(err));
	if (rc) {
		char reason[COMP_REASON_MAX + 1];

		snprintf(reason, sizeof(reason), "%s", err);
		release(c, p, true, reason);
		fail_job(j, 503, "Base.1.8.ServiceTemporarilyUnavailable",
			 "composition '%s' failed and was rolled back: %s", p->id, reason);
		return;
	}
	rc = save(c, p, COMP_COMPOSED, "");
	if (rc) {
		release(c, p, true, "cannot record the composition as Composed");
		free(cred);
		fail_job(j, 500, "Base.1.8.InternalError", "cannot record composition: %s",
			 strata_strerror(rc));
		return;
	}
	c->snap_composes++;
	log_info(COMP_LOG, "composition '%s' for tenant '%s': %u GPU(s), %llu bytes of storage, %llu bytes of memory",
		 p->id, p->tenant, p->ngpus, (unsigned long long)p->rq.storage,
		 (unsigned long long)p->rq.memory);
	j->http = 201;
	j->body = rf_system(c, p);
	json_object_set_new(json_object_get(json_object_get(j->body, "Oem"), "Strata"),
			    "Credential", json_string(cred));
	snprintf(j->location, sizeof(j->location), "/redfish/v1/Systems/%s", p->id);
	memset(cred, 0, strlen(cred));
	free(cred);
}

/* Whether j's If-Match is stale for p: j then holds the 412. */
static bool stale(struct job *j, const struct comp *p)
{
	char etag[32];

	if (!j->if_match[0] || rf_if_match(p, j->if_match))
		return false;
	rf_etag(p, etag, sizeof(etag));
	fail_job(j, 412, "Base.1.8.PreconditionFailed",
		 "composition '%s' has changed: its ETag is %s, not %.64s; GET it again and retry",
		 p->id, etag, j->if_match);
	return true;
}

static void do_decompose(struct composer *c, struct job *j)
{
	struct comp *p = composer_find(c, j->id);

	if (!p) {
		fail_job(j, 404, "Base.1.8.ResourceMissingAtURI", "no composition '%s'", j->id);
		return;
	}
	if (stale(j, p))
		return;
	if (p->state == COMP_RELEASED || p->state == COMP_FAILED) {
		fail_job(j, 409, "Base.1.8.ResourceInUse", "composition '%s' is already %s", p->id,
			 comp_state_name(p->state));
		return;
	}
	if (release(c, p, false, "")) {
		fail_job(j, 503, "Base.1.8.ServiceTemporarilyUnavailable",
			 "composition '%s' is Decomposing: %s; it is retried, or DELETE again",
			 p->id, p->reason);
		return;
	}
	j->http = 200;
	j->body = rf_system(c, p);
}

/* ---- recompose ---- */

/* Whether p's GPU g is lost: the map lists its node offline, or the
 * node reports it failed. A node the map does not list (mgmt restarted,
 * the node not announced again yet) is not judged, as in tick. */
static bool gpu_lost(const struct composer *c, const struct comp_gpu *g)
{
	for (uint32_t i = 0; i < c->ngpus; i++)
		if (c->gpus[i].node == g->node && c->gpus[i].index == g->index)
			return !c->gpus[i].node_up || c->gpus[i].state == GPU_FAILED;
	return false;
}

/* Places a replacement for each lost GPU of p (lost[k]) into gpus[k],
 * all or nothing: of the model of the GPU it replaces, in the request's
 * zone, with same_zone in the zone of the GPUs kept (or any one zone for
 * all of them), with same_node on their node (or any one node). 0, or
 * -ENOSPC with why. The picks are marked owned in c->gpus (the caller
 * recounts). */
static int place_replacements(struct composer *c, const struct comp *p, const bool *lost,
			      struct comp_gpu *gpus, char *why, size_t whylen)
{
	struct alloc_inventory inv = { c->gpus, c->ngpus, 0, 0, 0, 0, 0 };
	struct alloc_request rq;
	bool done[ALLOC_MAX_GPUS] = { false };
	int rc;

	memset(&rq, 0, sizeof(rq));
	snprintf(rq.zone, sizeof(rq.zone), "%s", p->rq.zone);
	rq.same_node = p->rq.same_node;
	rq.same_zone = p->rq.same_zone;
	for (uint32_t k = 0; k < p->ngpus; k++) {
		const struct inv_node *n = old_node(c, p->gpus[k].node);

		if (lost[k])
			continue;
		if (rq.same_node)
			rq.pin_node = p->gpus[k].node;
		if (rq.same_zone && !rq.zone[0] && n)
			snprintf(rq.zone, sizeof(rq.zone), "%s", n->zone);
		break;
	}
	for (uint32_t k = 0; k < p->ngpus; k++) {
		struct alloc_result res;
		uint32_t m = 0;

		if (!lost[k] || done[k])
			continue;
		snprintf(rq.model, sizeof(rq.model), "%s", p->gpus[k].model);
		rq.gpus = 0;
		for (uint32_t x = k; x < p->ngpus; x++)
			rq.gpus += lost[x] && !done[x] && !strcmp(p->gpus[x].model, rq.model);
		rc = alloc_place(&inv, &rq, &res, why, whylen);
		if (rc)
			return rc;
		for (uint32_t x = k; x < p->ngpus && m < res.n; x++) {
			struct alloc_gpu *g;

			if (!lost[x] || done[x] || strcmp(p->gpus[x].model, rq.model))
				continue;
			g = &c->gpus[res.pick[m++]];
			g->owned = true;
			gpus[x] = (struct comp_gpu){ g->node, g->index, "" };
			snprintf(gpus[x].model, sizeof(gpus[x].model), "%s", g->model);
			done[x] = true;
		}
		/* GPUs of another model go where these went. */
		if (rq.same_node && !rq.pin_node)
			rq.pin_node = gpus[k].node;
		if (rq.same_zone && !rq.zone[0])
			snprintf(rq.zone, sizeof(rq.zone), "%s", c->gpus[res.pick[0]].zone);
	}
	return 0;
}

/* Replaces the lost GPUs of a Composed or Degraded composition with
 * free ones, all or nothing; it is Composed again, at a new generation,
 * its credential, volume and memory untouched. */
static void do_recompose(struct composer *c, struct job *j)
{
	struct comp *p = composer_find(c, j->id);
	struct comp_gpu gpus[ALLOC_MAX_GPUS];
	bool lost[ALLOC_MAX_GPUS];
	char why[512] = "";
	uint32_t nlost = 0;
	int rc;

	if (!p) {
		fail_job(j, 404, "Base.1.8.ResourceMissingAtURI", "no composition '%s'", j->id);
		return;
	}
	if (stale(j, p))
		return;
	if (p->state != COMP_COMPOSED && p->state != COMP_DEGRADED) {
		fail_job(j, 409, "Base.1.8.ResourceInUse",
			 "composition '%s' is %s: only a Composed or Degraded one is recomposed",
			 p->id, comp_state_name(p->state));
		return;
	}
	if (refresh(c)) {
		fail_job(j, 503, "Base.1.8.ServiceTemporarilyUnavailable",
			 "cannot read the cluster map from mgmt '%s'; retry", c->mgmt);
		return;
	}
	for (uint32_t k = 0; k < p->ngpus; k++)
		nlost += lost[k] = gpu_lost(c, &p->gpus[k]);
	if (!nlost && p->state == COMP_COMPOSED) {
		j->http = 200;		/* nothing lost: unchanged */
		j->body = rf_system(c, p);
		return;
	}
	memcpy(gpus, p->gpus, sizeof(gpus));
	rc = place_replacements(c, p, lost, gpus, why, sizeof(why));
	if (rc) {
		recount(c);
		c->snap_refusals++;
		log_info(COMP_LOG, "composition '%s' not recomposed: %s", p->id, why);
		fail_job(j, 409, "Strata.1.0.InsufficientResources",
			 "cannot replace %u lost GPU(s) of '%s': %s", nlost, p->id, why);
		return;
	}
	struct comp old = *p;

	memcpy(p->gpus, gpus, sizeof(gpus));
	rc = save(c, p, COMP_COMPOSED, "");
	if (rc) {
		*p = old;
		recount(c);
		fail_job(j, rc == -EEXIST ? 409 : 500, "Base.1.8.InternalError",
			 "cannot record the recomposed '%s': %s", p->id, strata_strerror(rc));
		return;
	}
	for (uint32_t k = 0; k < p->ngpus; k++)
		if (lost[k])
			log_info(COMP_LOG, "composition '%s' recomposed: gpu-%u-%u replaced by gpu-%u-%u",
				 p->id, old.gpus[k].node, old.gpus[k].index, p->gpus[k].node,
				 p->gpus[k].index);
	j->http = 200;
	j->body = rf_system(c, p);
}

static void run_job(struct composer *c, struct job *j)
{
	struct comp *p;

	if (!leads(c)) {
		pthread_mutex_lock(&c->mu);
		snprintf(j->leader, sizeof(j->leader), "%s", c->leader_api);
		pthread_mutex_unlock(&c->mu);
		fail_job(j, 503, COMPOSER_NOT_SERVING,
			 "this composer does not serve: the one beside the mgmt leader does%s%s%s",
			 j->leader[0] ? ", at '" : " (not known yet: retry)", j->leader,
			 j->leader[0] ? "'" : "");
		return;
	}
	j->http = 200;
	if (!c->inv_ok && j->kind != JOB_COMPOSE)
		refresh(c);
	switch (j->kind) {
	case JOB_SERVICE:
		j->body = rf_composition_service(c);
		break;
	case JOB_BLOCKS:
		j->body = rf_blocks(c);
		break;
	case JOB_BLOCK:
		j->body = rf_block(c, j->id);
		if (!j->body)
			fail_job(j, 404, "Base.1.8.ResourceMissingAtURI", "no resource block '%s'",
				 j->id);
		break;
	case JOB_SYSTEMS:
		j->body = rf_systems(c);
		break;
	case JOB_SYSTEM:
		p = composer_find(c, j->id);
		if (p)
			j->body = rf_system(c, p);
		else
			fail_job(j, 404, "Base.1.8.ResourceMissingAtURI", "no composition '%s'",
				 j->id);
		break;
	case JOB_COMPOSE:
		do_compose(c, j);
		break;
	case JOB_DECOMPOSE:
		do_decompose(c, j);
		break;
	case JOB_RECOMPOSE:
		do_recompose(c, j);
		break;
	case JOB_ZONES:
		j->body = rf_zones(c);
		if (!j->body)
			fail_job(j, 500, "Base.1.8.InternalError", "out of memory");
		break;
	case JOB_ZONE:
		j->body = rf_zone(c, j->id);
		if (!j->body)
			fail_job(j, 404, "Base.1.8.ResourceMissingAtURI", "no resource zone '%s'",
				 j->id);
		break;
	case JOB_STORAGE_SERVICES:
		j->body = rf_storage_services(c);
		break;
	case JOB_STORAGE_SERVICE:
	case JOB_VOLUME:
		j->body = j->kind == JOB_VOLUME ? rf_volume(c, j->id) : rf_storage_service(c, j->id);
		if (!j->body)
			fail_job(j, 404, "Base.1.8.ResourceMissingAtURI", "no %s '%s'",
				 j->kind == JOB_VOLUME ? "volume" : "storage service", j->id);
		break;
	case JOB_VOLUMES:
		j->body = rf_volumes(c);
		if (!j->body)
			fail_job(j, 500, "Base.1.8.InternalError", "out of memory");
		break;
	case JOB_USAGE:
		j->body = rf_usage(c, j->since);
		if (!j->body)
			fail_job(j, 500, "Base.1.8.InternalError", "out of memory");
		break;
	}
}

/* ---- the periodic work ---- */

static const struct inv_node *node_of(struct composer *c, uint32_t id)
{
	return old_node(c, id);
}

/* Adds a storage daemon's count for tenant (read, written now; was: its
 * count at the last sample, NULL: none) into delta {tenant: [r, w]}. A
 * count that went down is a daemon that restarted: all of it is new. */
static void meter_delta(json_t *delta, const char *tenant, uint64_t r, uint64_t w, json_t *was)
{
	uint64_t pr = (uint64_t)json_integer_value(json_array_get(was, 0));
	uint64_t pw = (uint64_t)json_integer_value(json_array_get(was, 1));
	json_t *d = json_object_get(delta, tenant);
	uint64_t dr = r >= pr ? r - pr : r, dw = w >= pw ? w - pw : w;

	if (!dr && !dw)
		return;
	if (!d) {
		d = json_pack("[I,I]", (json_int_t)0, (json_int_t)0);
		json_object_set_new(delta, tenant, d);
	}
	json_array_set_new(d, 0, json_integer(json_integer_value(json_array_get(d, 0)) +
					      (json_int_t)dr));
	json_array_set_new(d, 1, json_integer(json_integer_value(json_array_get(d, 1)) +
					      (json_int_t)dw));
}

/*
 * Bytes moved per tenant (docs/composer.md, "Usage"): each storage
 * daemon's counts (cumulative since it started, its STATUS "tenants")
 * against the last sample's; the deltas go to the store with this
 * sample's time. The first sample after the composer starts sets the
 * baseline only: what moved while no composer watched is not counted. A
 * daemon that does not answer keeps its last counts for the next sample.
 */
static void meter_sample(struct composer *c)
{
	json_t *now = json_object(), *delta = json_object(), *v;
	int64_t at = (int64_t)time(NULL);
	const char *tenant;

	c->meter_at_ms = mono_ms();
	for (uint32_t i = 0; now && delta && i < c->nstorage; i++) {
		const char *addr = c->storage_addrs[i];
		json_t *sv = service_status(c, addr, "storage"), *per, *t;
		json_t *was = json_object_get(c->meter_last, addr);
		size_t k;

		if (!sv) {
			if (was)
				json_object_set(now, addr, was);
			continue;
		}
		per = json_object();
		json_array_foreach(json_object_get(sv, "tenants"), k, t) {
			const char *name = json_string_value(json_object_get(t, "tenant"));
			json_int_t r = json_integer_value(json_object_get(t, "read_bytes"));
			json_int_t w = json_integer_value(json_object_get(t, "write_bytes"));

			if (!name || r < 0 || w < 0)
				continue;
			json_object_set_new(per, name, json_pack("[I,I]", r, w));
			if (c->meter_last)
				meter_delta(delta, name, (uint64_t)r, (uint64_t)w,
					    json_object_get(was, name));
		}
		json_object_set_new(now, addr, per);
		json_decref(sv);
	}
	json_object_foreach(delta, tenant, v) {
		int rc = comp_store_add_bytes(c->store, at, tenant,
					      (uint64_t)json_integer_value(json_array_get(v, 0)),
					      (uint64_t)json_integer_value(json_array_get(v, 1)));

		if (rc)
			log_warn(COMP_LOG, "cannot record the bytes tenant '%s' moved: %s", tenant,
				 strata_strerror(rc));
	}
	json_decref(delta);
	if (now) {
		json_decref(c->meter_last);
		c->meter_last = now;
	}
}

static void tick(struct composer *c)
{
	int64_t now = (int64_t)time(NULL);

	if (!leads(c))
		return;		/* the leader's composer judges */
	if (refresh(c))
		return;		/* mgmt away: nothing is judged without the map */
	if (!c->meter_last || mono_ms() - c->meter_at_ms >= (uint64_t)c->cfg.meter_ms)
		meter_sample(c);
	for (uint32_t i = 0; i < c->ncomps; i++) {
		struct comp *p = &c->comps[i];
		char reason[COMP_REASON_MAX + 1];

		if (p->state == COMP_ALLOCATING) {
			release(c, p, true, "the composer restarted while allocating; rolled back");
			continue;
		}
		if (p->state == COMP_DECOMPOSING) {
			release(c, p, false, NULL);
			continue;
		}
		if (p->state != COMP_COMPOSED && p->state != COMP_DEGRADED)
			continue;
		if (p->expires && p->expires <= now) {
			log_info(COMP_LOG, "composition '%s': its TTL ran out; releasing", p->id);
			release(c, p, false, "TTL expired");
			continue;
		}
		for (uint32_t k = 0; p->state == COMP_COMPOSED && k < p->ngpus; k++) {
			const struct inv_node *n = node_of(c, p->gpus[k].node);

			if (!n || n->up)
				continue;
			snprintf(reason, sizeof(reason), "compute node %u ('%s') missed its lease: GPU %u lost",
				 n->node, n->addr, p->gpus[k].index);
			log_warn(COMP_LOG, "composition '%s' degraded: %s", p->id, reason);
			save(c, p, COMP_DEGRADED, reason);
		}
	}
}

static void *composer_main(void *arg)
{
	struct composer *c = arg;
	uint64_t next = 0;

	pthread_mutex_lock(&c->mu);
	while (!c->stopping) {
		struct job *j = c->head;

		if (j) {
			c->head = j->next;
			if (!c->head)
				c->tail = NULL;
			pthread_mutex_unlock(&c->mu);
			run_job(c, j);
			pthread_mutex_lock(&c->mu);
			j->done = true;
			pthread_cond_broadcast(&c->done);
			continue;
		}
		if (mono_ms() >= next) {
			pthread_mutex_unlock(&c->mu);
			tick(c);
			next = mono_ms() + (uint64_t)c->cfg.refresh_ms;
			pthread_mutex_lock(&c->mu);
			continue;
		}
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)((uint64_t)c->cfg.refresh_ms % 1000) * 1000000L;
		ts.tv_sec += (time_t)((uint64_t)c->cfg.refresh_ms / 1000) + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&c->work, &c->mu, &ts);
	}
	/* Whoever still waits is told the composer is stopping. */
	for (struct job *j = c->head; j; j = j->next) {
		fail_job(j, 503, "Base.1.8.ServiceShuttingDown", "the composer is stopping");
		j->done = true;
	}
	c->head = c->tail = NULL;
	pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- the service ---- */

static void composer_free(struct composer *c)
{
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		c->stopping = true;
		pthread_cond_signal(&c->work);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->th, NULL);
	}
	strata_disconnect(c->fs);
	if (c->cl)
		rpc_client_free(c->cl);
	comp_store_close(c->store);
	pthread_cond_destroy(&c->work);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->mu);
	free(c->comps);
	free_nodes(c->nodes, c->nnodes);
	free(c->gpus);
	free(c->storage_addrs);
	json_decref(c->meter_last);
	free(c);
}

/*
 * With the store in PostgreSQL, compositions left in DATA/composer.db (a
 * node whose mgmt.store moved to PostgreSQL) would be forgotten, their
 * volumes and credentials orphaned: refuse to start instead, unless the
 * database holds compositions already. 0 or STRATA_ECONFIG (logged).
 */
static int check_left_behind(const struct service_env *env, const char *key, uint32_t in_store)
{
	char path[CFG_STR_MAX + 32];
	struct comp_store *old = NULL;
	struct comp *v = NULL;
	struct stat st;
	uint32_t n = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/composer.db", env->data);
	if (in_store || stat(path, &st) < 0)
		return 0;
	rc = comp_store_open(path, &old);
	if (!rc)
		rc = comp_store_load(old, &v, &n);
	free(v);
	comp_store_close(old);
	if (rc || !n)
		return rc;
	log_error(COMP_LOG, "'%s' holds %u composition(s) and the store in PostgreSQL (%s) none:"
		  " they would be forgotten; set composer.store=sqlite to keep using the file"
		  " (copying it into PostgreSQL is not done yet)", path, n, key);
	return STRATA_ECONFIG;
}

/*
 * Opens the store composer.store names and loads the compositions: ""
 * follows mgmt.store (the compositions live where mgmt's state does),
 * "sqlite" is DATA/composer.db, a postgresql:// URI that database. what
 * (len bytes) receives where, for logs, never a password.
 */
static int open_store(struct composer *c, const struct service_env *env, char *what, size_t len)
{
	const char *spec = c->cfg.store, *pass = c->cfg.store_passfile, *key = "composer.store";
	char path[CFG_STR_MAX + 32];
	int rc;

	if (!spec[0] && env->all_keys) {
		spec = cfg_get_str(env->all_keys, env->all_cfg, "mgmt.store");
		pass = cfg_get_str(env->all_keys, env->all_cfg, "mgmt.store_passfile");
		key = "mgmt.store";
	}
	if (spec && pg_conn_is_uri(spec)) {
		char leader[CM_ADDR_LEN];

		/* Shared by the composers of every control node: the one
		 * beside the mgmt leader serves. */
		c->follows = mgmt_service_leader(leader, sizeof(leader), NULL) != -ENOENT;
		snprintf(what, len, "PostgreSQL (%s)", key);
		rc = comp_store_open_pg(spec, pass, &c->store);
		if (!rc)
			rc = comp_store_load(c->store, &c->comps, &c->ncomps);
		return rc ? rc : check_left_behind(env, key, c->ncomps);
	}
	snprintf(path, sizeof(path), "%s/composer.db", env->data);
	snprintf(what, len, "'%s'", path);
	rc = comp_store_open(path, &c->store);
	return rc ? rc : comp_store_load(c->store, &c->comps, &c->ncomps);
}

static int composer_start(const struct service_env *env, void **out)
{
	const struct composer_cfg *cfg = env->cfg;
	struct composer *c;
	pthread_condattr_t ca;
	char path[CFG_STR_MAX + 48];
	int rc;

	if (!env->key) {
		log_error(COMP_LOG, "the composer needs the cluster key (node.key_file): it signs credentials and checks the API's tokens");
		return STRATA_ECONFIG;
	}
	if (cfg->volumes[0] != '/' || strstr(cfg->volumes, "//") ||
	    (strlen(cfg->volumes) > 1 && cfg->volumes[strlen(cfg->volumes) - 1] == '/')) {
		log_error(COMP_LOG, "composer.volumes: '%s' is not an absolute path without a trailing '/'",
			  cfg->volumes);
		return STRATA_ECONFIG;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->storage_addrs = calloc(COMPOSER_MAX_STORAGE, sizeof(*c->storage_addrs));
	if (!c->storage_addrs) {
		free(c);
		return -ENOMEM;
	}
	c->env = *env;
	c->cfg = *cfg;
	c->key = env->key;
	snprintf(c->mgmt, sizeof(c->mgmt), "%s", env->mgmt_addr);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&c->done, NULL);
	rc = open_store(c, env, path, sizeof(path));
	if (rc) {
		log_error(COMP_LOG, "cannot load the compositions from %s: %s", path,
			  strata_strerror(rc));
		goto fail;
	}
	c->comps_cap = c->ncomps;
	c->next_seq = c->ncomps ? c->comps[c->ncomps - 1].seq + 1 : 1;
	recount(c);
	rc = rpc_client_new("strata-composer", env->rpc_timeout_ms, &c->cl);
	if (rc)
		goto fail;
	rc = -pthread_create(&c->th, NULL, composer_main, c);
	if (rc)
		goto fail;
	c->started = true;
	rc = http_start(c, cfg->listen, &c->http);
	if (rc < 0) {
		log_error(COMP_LOG, "cannot serve the API on '%s': %s", cfg->listen,
			  strata_strerror(rc));
		goto fail;
	}
	c->port = rc;
	log_info(COMP_LOG, "Redfish API on '%s' (port %d), %u composition(s) loaded, %u holding resources",
		 cfg->listen, c->port, c->ncomps, c->snap_composed);
	*out = c;
	return 0;
fail:
	composer_free(c);
	return rc;
}

static void composer_stop(void *svc)
{
	struct composer *c = svc;

	http_stop(c->http);
	composer_free(c);
}

static void composer_status(void *svc, json_t *o)
{
	struct composer *c = svc;
	char listen[CFG_STR_MAX + 16], *colon;

	/* The port bound, in place of a 0 asked for. */
	snprintf(listen, sizeof(listen), "%s", c->cfg.listen);
	colon = strrchr(listen, ':');
	if (colon)
		snprintf(colon + 1, sizeof(listen) - (size_t)(colon + 1 - listen), "%d", c->port);
	json_object_set_new(o, "listen", json_string(listen));
	json_object_set_new(o, "compositions_holding", json_integer(c->snap_composed));
	json_object_set_new(o, "gpus", json_integer(c->snap_gpus));
	json_object_set_new(o, "gpus_free", json_integer(c->snap_gpus_free));
	json_object_set_new(o, "compute_nodes", json_integer(c->snap_nodes));
	json_object_set_new(o, "composed_total", json_integer((json_int_t)c->snap_composes));
	json_object_set_new(o, "refused_total", json_integer((json_int_t)c->snap_refusals));
	json_object_set_new(o, "released_total", json_integer((json_int_t)c->snap_releases));
	/* Beside mgmt on PostgreSQL: whether this one serves (false: it
	 * answers 503 naming the leader's API). */
	json_object_set_new(o, "serving", json_boolean(!c->follows || c->snap_leads));
}

static void composer_metrics(void *svc, struct bbuf *out)
{
	struct composer *c = svc;

	metrics_put(out, "strata_composer_compositions", "gauge",
		    "compositions holding resources", c->snap_composed);
	metrics_put(out, "strata_composer_gpus", "gauge", "GPUs in the inventory", c->snap_gpus);
	metrics_put(out, "strata_composer_gpus_free", "gauge", "GPUs free to compose",
		    c->snap_gpus_free);
	metrics_put(out, "strata_composer_refused_total", "counter", "composition requests refused",
		    (double)c->snap_refusals);
	metrics_put(out, "strata_composer_storage_bytes", "gauge", "the storage pool's capacity",
		    (double)c->snap_storage_total);
	metrics_put(out, "strata_composer_storage_used_bytes", "gauge",
		    "storage held by compositions", (double)c->snap_storage_used);
	metrics_put(out, "strata_composer_memory_bytes", "gauge", "the memory pool's capacity",
		    (double)c->snap_mem_total);
	metrics_put(out, "strata_composer_memory_used_bytes", "gauge",
		    "pooled memory held by compositions", (double)c->snap_mem_used);
	/* Stranded: free in one pool, but no job that also needs the other
	 * can use it, because that pool is exhausted. */
	metrics_put(out, "strata_composer_gpus_stranded", "gauge",
		    "free GPUs while the storage or memory pool has nothing free",
		    (c->snap_storage_used >= c->snap_storage_total ||
		     c->snap_mem_used >= c->snap_mem_total) ? c->snap_gpus_free : 0);
	metrics_put(out, "strata_composer_storage_stranded_bytes", "gauge",
		    "free storage while no GPU is free",
		    c->snap_gpus && !c->snap_gpus_free && c->snap_storage_total > c->snap_storage_used ?
		    (double)(c->snap_storage_total - c->snap_storage_used) : 0);
}

static int composer_check(const void *cfg, char *err, size_t errlen)
{
	const struct composer_cfg *c = cfg;

	if (!strchr(c->listen, ':')) {
		snprintf(err, errlen, "composer.listen: '%s' is not host:port", c->listen);
		return STRATA_ECONFIG;
	}
	return comp_store_check_spec(c->store, c->store_passfile, err, errlen) ? STRATA_ECONFIG : 0;
}

#define K(name, type, field, def, min, max, help) \
	CFG_KEY(struct composer_cfg, "composer", name, type, field, def, min, max, help)
static const struct cfg_key composer_keys[] = {
	K("listen", CFG_STR, listen, "127.0.0.1:7380", 0, 0,
	  "host:port of the Redfish HTTP API (loopback by default)"),
	K("volumes", CFG_STR, volumes, "/volumes", 0, 0,
	  "the directory of the namespace that holds the volumes"),
	K("refresh", CFG_MS, refresh_ms, "500ms", 50, 60000,
	  "how often the inventory is read again (and TTLs and leases judged)"),
	K("meter_interval", CFG_MS, meter_ms, "30s", 100, 3600000,
	  "how often the bytes each tenant moved are read from the storage daemons"),
	K("store", CFG_STR, store, "", 0, 0,
	  "where the compositions are kept: \"\" follows mgmt.store (its database, or "
	  "DATA/composer.db when mgmt's is SQLite), 'sqlite' is DATA/composer.db, a "
	  "postgresql://USER@HOST:PORT/DB URI that database (tables composer_*)"),
	K("store_passfile", CFG_STR, store_passfile, "", 0, 0,
	  "the password file (mode 0600) for composer.store's PostgreSQL; \"\": libpq's "
	  "default (following mgmt.store: mgmt.store_passfile)"),
};
#undef K
static const struct cfg_schema composer_schema = CFG_SCHEMA(composer_keys);

const struct service_def composer_service = {
	.name = "composer",
	.schema = &composer_schema,
	.cfg_size = sizeof(struct composer_cfg),
	.check = composer_check,
	.start = composer_start,
	.stop = composer_stop,
	.status = composer_status,
	.metrics = composer_metrics,
};
