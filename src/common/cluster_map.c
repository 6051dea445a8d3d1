/*
 * The cluster map model: lookups, copies and the structural check. See
 * cluster_map.h; mgmt's state machine is src/mgmt/membership.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cluster_map.h"
#include "strata/errors.h"

void cm_init(struct cluster_map *m)
{
	memset(m, 0, sizeof(*m));
	m->replication = CM_DEFAULT_R;
}

void cm_release(struct cluster_map *m)
{
	free(m->nodes);
	free(m->targets);
	free(m->chains);
	free(m->services);
	free(m->revoked);
	cm_init(m);
}

static int grow(void **arr, uint32_t *cap, uint32_t want, size_t elem)
{
	uint32_t ncap;
	void *p;

	if (want <= *cap)
		return 0;
	ncap = *cap ? *cap : 8;
	while (ncap < want)
		ncap = ncap > UINT32_MAX / 2 ? want : ncap * 2;
	p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

int cm_reserve(struct cluster_map *m, uint32_t nnodes, uint32_t ntargets, uint32_t nchains)
{
	if (grow((void **)&m->nodes, &m->nodes_cap, nnodes, sizeof(*m->nodes)) ||
	    grow((void **)&m->targets, &m->targets_cap, ntargets, sizeof(*m->targets)) ||
	    grow((void **)&m->chains, &m->chains_cap, nchains, sizeof(*m->chains)))
		return -ENOMEM;
	return 0;
}

int cm_reserve_services(struct cluster_map *m, uint32_t nservices)
{
	return grow((void **)&m->services, &m->services_cap, nservices, sizeof(*m->services));
}

int cm_reserve_revoked(struct cluster_map *m, uint32_t nrevoked)
{
	return grow((void **)&m->revoked, &m->revoked_cap, nrevoked, sizeof(*m->revoked));
}

bool cm_revoked(const struct cluster_map *m, const char *id)
{
	uint32_t lo = 0, hi = m->nrevoked;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->revoked[mid], id);

		if (!c)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

int cm_copy(struct cluster_map *dst, const struct cluster_map *src)
{
	cm_init(dst);
	if (cm_reserve(dst, src->nnodes, src->ntargets, src->nchains) ||
	    cm_reserve_services(dst, src->nservices) || cm_reserve_revoked(dst, src->nrevoked)) {
		cm_release(dst);
		return -ENOMEM;
	}
	dst->version = src->version;
	dst->replication = src->replication;
	dst->chain_table_len = src->chain_table_len;
	dst->nnodes = src->nnodes;
	dst->ntargets = src->ntargets;
	dst->nchains = src->nchains;
	if (src->nnodes)
		memcpy(dst->nodes, src->nodes, sizeof(*src->nodes) * src->nnodes);
	if (src->ntargets)
		memcpy(dst->targets, src->targets, sizeof(*src->targets) * src->ntargets);
	if (src->nchains)
		memcpy(dst->chains, src->chains, sizeof(*src->chains) * src->nchains);
	dst->nservices = src->nservices;
	if (src->nservices)
		memcpy(dst->services, src->services, sizeof(*src->services) * src->nservices);
	dst->nrevoked = src->nrevoked;
	if (src->nrevoked)
		memcpy(dst->revoked, src->revoked, sizeof(*src->revoked) * src->nrevoked);
	return 0;
}

/* Binary search over an id-sorted array whose elements start with a u32 id. */
static void *bsearch_id(const void *arr, uint32_t n, size_t elem, uint32_t id)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const void *e = (const char *)arr + (size_t)mid * elem;
		uint32_t v;

		memcpy(&v, e, sizeof(v));
		if (v == id)
			return (void *)e;
		if (v < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct cm_node *cm_find_node(const struct cluster_map *m, uint32_t id)
{
	return bsearch_id(m->nodes, m->nnodes, sizeof(*m->nodes), id);
}

const struct cm_target *cm_find_target(const struct cluster_map *m, uint32_t id)
{
	return bsearch_id(m->targets, m->ntargets, sizeof(*m->targets), id);
}

const struct cm_chain *cm_find_chain(const struct cluster_map *m, uint32_t id)
{
	return bsearch_id(m->chains, m->nchains, sizeof(*m->chains), id);
}

const char *cm_service_kind_name(uint32_t kind)
{
	static const char *const names[] = { "?", "meta", "mem", "compute" };

	return kind <= CM_SVC_LAST ? names[kind] : "?";
}

const struct cm_service *cm_find_service(const struct cluster_map *m, uint32_t kind,
					 uint32_t node_id)
{
	for (uint32_t i = 0; i < m->nservices; i++) {
		if (m->services[i].kind == kind && m->services[i].node_id == node_id)
			return &m->services[i];
	}
	return NULL;
}

const struct cm_service *cm_pick_service(const struct cluster_map *m, uint32_t kind,
					 uint32_t after)
{
	const struct cm_service *first = NULL;

	for (uint32_t i = 0; i < m->nservices; i++) {
		const struct cm_service *s = &m->services[i];

		if (s->kind != kind || s->state != NODE_UP)
			continue;
		if (s->node_id > after)
			return s;
		if (!first)
			first = s;
	}
	return first;
}

uint32_t cm_node_of(const struct cluster_map *m, uint32_t target_id)
{
	const struct cm_target *t = cm_find_target(m, target_id);

	return t ? t->node_id : 0;
}

bool cm_chain_ok(const struct cluster_map *m, const struct cm_chain *c)
{
	uint32_t all[2 * CM_CHAIN_SLOTS];
	int n = 0;

	if (c->len + c->nout > CM_CHAIN_SLOTS)
		return false;
	for (int i = 0; i < c->len; i++) {
		if (c->states[i] != TARGET_SERVING && c->states[i] != TARGET_SYNCING)
			return false;
		if (i && c->states[i] == TARGET_SERVING && c->states[i - 1] == TARGET_SYNCING)
			return false;
		all[n++] = c->targets[i];
	}
	for (int i = 0; i < c->nout; i++) {
		if (c->out_states[i] != TARGET_SERVING && c->out_states[i] != TARGET_SYNCING)
			return false;
		all[n++] = c->out[i];
	}
	for (int i = 0; i < n; i++) {
		uint32_t ni = cm_node_of(m, all[i]);

		if (!ni)
			return false;
		for (int j = 0; j < i; j++)
			if (all[j] == all[i] || cm_node_of(m, all[j]) == ni)
				return false;
	}
	return true;
}

struct fs_cap {
	uint64_t fs, capacity;
};

static int cmp_fs_cap(const void *a, const void *b)
{
	const struct fs_cap *x = a, *y = b;

	return x->fs < y->fs ? -1 : x->fs > y->fs;
}

int cm_capacity(const struct cluster_map *m, uint64_t *capacity, uint64_t *used)
{
	struct fs_cap *shared = m->ntargets ? malloc(m->ntargets * sizeof(*shared)) : NULL;
	uint64_t cap = 0, use = 0;
	uint32_t n = 0;

	if (capacity)
		*capacity = 0;
	if (used)
		*used = 0;
	if (m->ntargets && !shared)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		if (t->state == TARGET_LOST)
			continue;
		use += t->used;
		if (t->fs)
			shared[n++] = (struct fs_cap){ t->fs, t->capacity };
		else
			cap += t->capacity;
	}
	if (n)
		qsort(shared, n, sizeof(*shared), cmp_fs_cap);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t most = shared[i].capacity;

		while (i + 1 < n && shared[i + 1].fs == shared[i].fs) {
			i++;
			if (shared[i].capacity > most)
				most = shared[i].capacity;
		}
		cap += most;
	}
	free(shared);
	if (capacity)
		*capacity = cap;
	if (used)
		*used = use;
	return 0;
}

int cm_validate(const struct cluster_map *m)
{
	if (m->replication > CM_MAX_R || m->nnodes > CM_MAX_NODES ||
	    m->ntargets > CM_MAX_TARGETS || m->nchains > CM_MAX_CHAINS ||
	    m->chain_table_len != m->nchains)
		return STRATA_EBADMSG;
	for (uint32_t i = 0; i < m->nnodes; i++) {
		const struct cm_node *n = &m->nodes[i];

		if (!n->id || (i && n->id <= m->nodes[i - 1].id) ||
		    n->state < NODE_UP || n->state > NODE_DRAINING ||
		    !memchr(n->addr, 0, sizeof(n->addr)) || !n->addr[0])
			return STRATA_EBADMSG;
	}
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		if (!t->id || (i && t->id <= m->targets[i - 1].id) ||
		    t->state < TARGET_SERVING || t->state > TARGET_LOST ||
		    !cm_find_node(m, t->node_id))
			return STRATA_EBADMSG;
	}
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];

		if (!c->id || (i && c->id <= m->chains[i - 1].id) || c->version > m->version ||
		    !cm_chain_ok(m, c))
			return STRATA_EBADMSG;
	}
	if (m->nservices > CM_MAX_SERVICES)
		return STRATA_EBADMSG;
	for (uint32_t i = 0; i < m->nservices; i++) {
		const struct cm_service *s = &m->services[i], *p = i ? s - 1 : NULL;

		if (s->kind < CM_SVC_META || s->kind > CM_SVC_LAST || !s->node_id ||
		    (p && (s->kind < p->kind || (s->kind == p->kind && s->node_id <= p->node_id))) ||
		    (s->state != NODE_UP && s->state != NODE_OFFLINE) ||
		    !memchr(s->addr, 0, sizeof(s->addr)) || !s->addr[0])
			return STRATA_EBADMSG;
	}
	if (m->nrevoked > CM_MAX_REVOKED)
		return STRATA_EBADMSG;
	for (uint32_t i = 0; i < m->nrevoked; i++) {
		if (!token_id_ok(m->revoked[i]) ||
		    (i && strcmp(m->revoked[i], m->revoked[i - 1]) <= 0))
			return STRATA_EBADMSG;
	}
	return 0;
}

int cm_serving_tail(const struct cm_chain *c)
{
	for (int i = c->len - 1; i >= 0; i--) {
		if (c->states[i] == TARGET_SERVING)
			return i;
	}
	return -1;
}
