/*
 * Membership and chain reconfiguration over the cluster map. See
 * membership.h; the model is common/cluster_map.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mgmt/chain_table.h"
#include "mgmt/membership.h"
#include "strata/errors.h"

#define COMP "mgmt"

/* Chain-changing calls bump the map version once, lazily. */
struct cm_change {
	struct cluster_map *m;
	bool bumped;
	int chains;
};

static void change_map(struct cm_change *ch)
{
	if (!ch->bumped) {
		ch->m->version++;
		ch->bumped = true;
	}
}

static void change_chain(struct cm_change *ch, struct cm_chain *c)
{
	change_map(ch);
	/* Count each chain once per call even if touched several times. */
	if (c->version != ch->m->version)
		ch->chains++;
	c->version = ch->m->version;
}

/* Mutable lookups: the map is ours to change here. */
static struct cm_node *node_get(struct cluster_map *m, uint32_t id)
{
	return (struct cm_node *)cm_find_node(m, id);
}

static struct cm_target *target_get(struct cluster_map *m, uint32_t id)
{
	return (struct cm_target *)cm_find_target(m, id);
}

static struct cm_chain *chain_get(struct cluster_map *m, uint32_t id)
{
	return (struct cm_chain *)cm_find_chain(m, id);
}

static int member_idx(const struct cm_chain *c, uint32_t tid)
{
	for (int i = 0; i < c->len; i++)
		if (c->targets[i] == tid)
			return i;
	return -1;
}

static int out_idx(const struct cm_chain *c, uint32_t tid)
{
	for (int i = 0; i < c->nout; i++)
		if (c->out[i] == tid)
			return i;
	return -1;
}

static void member_remove(struct cm_chain *c, int i)
{
	memmove(c->targets + i, c->targets + i + 1, sizeof(*c->targets) * (c->len - i - 1));
	memmove(c->states + i, c->states + i + 1, sizeof(*c->states) * (c->len - i - 1));
	c->len--;
}

static void out_remove(struct cm_chain *c, int i)
{
	memmove(c->out + i, c->out + i + 1, sizeof(*c->out) * (c->nout - i - 1));
	memmove(c->out_states + i, c->out_states + i + 1, sizeof(*c->out_states) * (c->nout - i - 1));
	c->nout--;
}

/* Adds a member: SERVING ones go before the first SYNCING, SYNCING ones at
 * the tail. The caller checked there is a free slot. */
static void member_add(struct cm_chain *c, uint32_t tid, uint8_t state)
{
	int at = c->len;

	if (state == TARGET_SERVING)
		for (at = 0; at < c->len && c->states[at] == TARGET_SERVING; at++)
			;
	memmove(c->targets + at + 1, c->targets + at, sizeof(*c->targets) * (c->len - at));
	memmove(c->states + at + 1, c->states + at, sizeof(*c->states) * (c->len - at));
	c->targets[at] = tid;
	c->states[at] = state;
	c->len++;
}

/* Does the chain hold (as member or out) a target on node_id other than
 * except_tid? */
static bool chain_has_node(const struct cluster_map *m, const struct cm_chain *c,
			   uint32_t node_id, uint32_t except_tid)
{
	for (int i = 0; i < c->len; i++)
		if (c->targets[i] != except_tid && cm_node_of(m, c->targets[i]) == node_id)
			return true;
	for (int i = 0; i < c->nout; i++)
		if (c->out[i] != except_tid && cm_node_of(m, c->out[i]) == node_id)
			return true;
	return false;
}

/* Target state after a membership change: SYNCING if any chain has it
 * SYNCING, else SERVING. OFFLINE and LOST are left alone. */
static void target_refresh(struct cluster_map *m, struct cm_target *t)
{
	if (t->state != TARGET_SERVING && t->state != TARGET_SYNCING)
		return;
	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];
		int i = member_idx(c, t->id);

		if (i >= 0 && c->states[i] == TARGET_SYNCING) {
			t->state = TARGET_SYNCING;
			return;
		}
	}
	t->state = TARGET_SERVING;
}

static bool on_draining(const struct cluster_map *m, uint32_t tid)
{
	const struct cm_node *n = cm_find_node(m, cm_node_of(m, tid));

	return n && n->state == NODE_DRAINING;
}

/*
 * Drain bookkeeping of one chain. nd_all: targets (members and out) not on
 * draining nodes; ndrain: those on draining nodes; want = min(R, nd_all +
 * ndrain) is the size the chain must keep. Draining entries leave once
 * want members off draining nodes are SERVING.
 */
static void drain_counts(const struct cluster_map *m, const struct cm_chain *c,
			 uint32_t *nd_all, uint32_t *ndrain, uint32_t *nd_serving)
{
	*nd_all = *ndrain = *nd_serving = 0;
	for (int i = 0; i < c->len; i++) {
		if (on_draining(m, c->targets[i])) {
			(*ndrain)++;
		} else {
			(*nd_all)++;
			*nd_serving += c->states[i] == TARGET_SERVING;
		}
	}
	for (int i = 0; i < c->nout; i++) {
		if (on_draining(m, c->out[i]))
			(*ndrain)++;
		else
			(*nd_all)++;
	}
}

static uint32_t drain_want(const struct cluster_map *m, uint32_t nd_all, uint32_t ndrain)
{
	uint32_t want = nd_all + ndrain;

	return want < m->replication ? want : m->replication;
}

/* Drops the draining entries of c when the rest can stand alone. */
static void drain_settle(struct cm_change *ch, struct cm_chain *c)
{
	struct cluster_map *m = ch->m;
	uint32_t nd_all, ndrain, nd_serving;
	uint32_t dropped[2 * CM_CHAIN_SLOTS];
	int nd = 0;

	drain_counts(m, c, &nd_all, &ndrain, &nd_serving);
	if (!ndrain || nd_serving < drain_want(m, nd_all, ndrain))
		return;
	for (int i = c->len - 1; i >= 0; i--)
		if (on_draining(m, c->targets[i])) {
			dropped[nd++] = c->targets[i];
			member_remove(c, i);
		}
	for (int i = c->nout - 1; i >= 0; i--)
		if (on_draining(m, c->out[i])) {
			dropped[nd++] = c->out[i];
			out_remove(c, i);
		}
	change_chain(ch, c);
	for (int i = 0; i < nd; i++) {
		struct cm_target *t = target_get(m, dropped[i]);

		if (t)
			target_refresh(m, t);
	}
}

/* Takes target t out of every chain it is a member of. */
static void target_take_out(struct cm_change *ch, struct cm_target *t)
{
	struct cluster_map *m = ch->m;

	for (uint32_t k = 0; k < m->nchains; k++) {
		struct cm_chain *c = &m->chains[k];
		int i = member_idx(c, t->id);

		if (i < 0)
			continue;
		c->out[c->nout] = t->id;
		c->out_states[c->nout] = c->states[i];
		c->nout++;
		member_remove(c, i);
		change_chain(ch, c);
	}
}

/* Puts target t back into every chain whose out list holds it. */
static void target_bring_back(struct cm_change *ch, struct cm_target *t)
{
	struct cluster_map *m = ch->m;
	bool syncing = false;

	for (uint32_t k = 0; k < m->nchains; k++) {
		struct cm_chain *c = &m->chains[k];
		int i = out_idx(c, t->id), last_serving = -1;
		bool has_serving = false;
		uint8_t st = TARGET_SYNCING;

		if (i < 0)
			continue;
		for (int j = 0; j < c->len; j++)
			has_serving |= c->states[j] == TARGET_SERVING;
		for (int j = 0; j < c->nout; j++)
			if (c->out_states[j] == TARGET_SERVING)
				last_serving = j;
		/* The last SERVING member to leave an empty chain holds every
		 * acknowledged write: it serves again (a resync needs a serving
		 * source). If its process restarted, it lost the marks of the
		 * copies it lacks (updates that failed there after it passed
		 * them on): it holds the chain back until it has the newest
		 * copies of the chain's other targets (storage/recover.c). */
		if (!has_serving && last_serving == i)
			st = TARGET_SERVING;
		out_remove(c, i);
		member_add(c, t->id, st);
		syncing |= st == TARGET_SYNCING;
		change_chain(ch, c);
	}
	t->state = syncing ? TARGET_SYNCING : TARGET_SERVING;
}

static int cmp_target_id(const void *a, const void *b)
{
	const struct cm_target *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_info_id(const void *a, const void *b)
{
	const struct cm_target_info *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int cm_register_node(struct cluster_map *m, uint32_t node_id, const char *addr,
		     const struct cm_target_info *targets, uint32_t n,
		     uint64_t lease_expires_ms)
{
	struct cm_change ch = { .m = m };
	struct cm_target_info *info = NULL;
	struct cm_node *node;
	uint32_t nnew = 0;
	size_t alen;
	int rc;

	if (!node_id || !addr || (n && !targets) || n > CM_MAX_TARGETS)
		return -EINVAL;
	alen = strlen(addr);
	if (!alen || alen >= CM_ADDR_LEN)
		return -EINVAL;
	if (n) {
		info = malloc(sizeof(*info) * n);
		if (!info)
			return -ENOMEM;
		memcpy(info, targets, sizeof(*info) * n);
		qsort(info, n, sizeof(*info), cmp_info_id);
	}
	/* Validate everything before changing anything. */
	rc = -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		const struct cm_target *t;

		if (!info[i].id || (i && info[i].id == info[i - 1].id))
			goto out;
		t = cm_find_target(m, info[i].id);
		if (t && t->node_id != node_id) {
			log_warn(COMP, "target %u of node %u already belongs to node %u; "
				 "give each target a cluster-unique id", info[i].id, node_id,
				 t->node_id);
			rc = -EEXIST;
			goto out;
		}
		nnew += !t;
	}
	node = node_get(m, node_id);
	rc = -ENOSPC;
	if ((!node && m->nnodes >= CM_MAX_NODES) || m->ntargets + nnew > CM_MAX_TARGETS)
		goto out;
	rc = -ENOMEM;
	if (cm_reserve(m, m->nnodes + 1, m->ntargets + nnew, 0))
		goto out;

	if (!node) {
		uint32_t at = 0;

		while (at < m->nnodes && m->nodes[at].id < node_id)
			at++;
		memmove(m->nodes + at + 1, m->nodes + at, sizeof(*m->nodes) * (m->nnodes - at));
		m->nnodes++;
		node = &m->nodes[at];
		memset(node, 0, sizeof(*node));
		node->id = node_id;
		node->state = NODE_UP;
		memcpy(node->addr, addr, alen + 1);
		change_map(&ch);
		log_info(COMP, "node %u registered at %s with %u targets", node_id, addr, n);
	} else {
		if (strcmp(node->addr, addr)) {
			memcpy(node->addr, addr, alen + 1);
			change_map(&ch);
		}
		if (node->state == NODE_OFFLINE) {
			node->state = NODE_UP;
			change_map(&ch);
			log_info(COMP, "node %u is back at %s", node_id, addr);
		}
	}
	node->lease_expires_ms = lease_expires_ms;

	/* New targets: append, then sort once. */
	for (uint32_t i = 0; i < n; i++) {
		struct cm_target *t;

		if (cm_find_target(m, info[i].id))
			continue;
		t = &m->targets[m->ntargets++];
		memset(t, 0, sizeof(*t));
		t->id = info[i].id;
		t->node_id = node_id;
		t->capacity = info[i].capacity;
		t->used = info[i].used;
		t->fs = info[i].fs;
		t->avail = info[i].avail;
		t->state = TARGET_SERVING;
		change_map(&ch);
	}
	if (nnew)
		qsort(m->targets, m->ntargets, sizeof(*m->targets), cmp_target_id);

	for (uint32_t k = 0; k < m->ntargets; k++) {
		struct cm_target *t = &m->targets[k];
		const struct cm_target_info *ti;

		if (t->node_id != node_id)
			continue;
		{
			struct cm_target_info key = { .id = t->id };

			ti = n ? bsearch(&key, info, n, sizeof(*info), cmp_info_id) : NULL;
		}
		if (!ti) {
			/* Held before, not reported now: treat as failed. */
			if (t->state == TARGET_SERVING || t->state == TARGET_SYNCING) {
				log_warn(COMP, "node %u no longer reports target %u; "
					 "taking it out of its chains", node_id, t->id);
				target_take_out(&ch, t);
				t->state = TARGET_OFFLINE;
				change_map(&ch);
			}
			continue;
		}
		if (t->capacity != ti->capacity || t->used != ti->used) {
			t->capacity = ti->capacity;
			t->used = ti->used;
			change_map(&ch);
		}
		t->fs = ti->fs;	/* not persisted: no new version for it */
		t->avail = ti->avail;
		if (t->state == TARGET_OFFLINE) {
			target_bring_back(&ch, t);
			change_map(&ch);
		} else if (t->state == TARGET_LOST) {
			/* Replaced while away: its old data is obsolete. */
			t->state = TARGET_SERVING;
			change_map(&ch);
		}
	}
	rc = ch.chains;
out:
	free(info);
	return rc;
}

/*
 * Was node drained while OFFLINE? Draining replaces the node's state, so
 * the map keeps only its targets' states: none in service, one OFFLINE
 * (taken out when the node went offline). Such a node must register again,
 * as an OFFLINE one does, for its targets to return to their chains: one
 * may be the last SERVING member of a chain whose other members can only
 * resync from it, and a drain never ends without them.
 */
static bool drained_offline(const struct cluster_map *m, const struct cm_node *node)
{
	bool offline = false;

	if (node->state != NODE_DRAINING)
		return false;
	for (uint32_t k = 0; k < m->ntargets; k++) {
		const struct cm_target *t = &m->targets[k];

		if (t->node_id != node->id)
			continue;
		if (t->state == TARGET_SERVING || t->state == TARGET_SYNCING)
			return false;
		offline |= t->state == TARGET_OFFLINE;
	}
	return offline;
}

/* Whether t, with capacity and avail as now, is full (struct cm_full_mark). */
static bool target_full(const struct cm_target *t, const struct cm_full_mark *mark)
{
	uint64_t cap = t->capacity, in_use, floor = mark->free;
	uint32_t pct = mark->pct;

	if (!cap)
		return false;
	if (t->full) {
		pct = pct >= CM_FULL_HYSTERESIS_PCT ? pct - CM_FULL_HYSTERESIS_PCT : 0;
		floor = floor > UINT64_MAX / 2 ? UINT64_MAX : floor * 2;
	}
	if (t->avail < floor)
		return true;
	if (mark->pct >= 100)
		return false;
	in_use = cap - (t->avail < cap ? t->avail : cap);
	/* in_use / cap >= pct / 100, without overflow for any cap. */
	return (unsigned __int128)in_use * 100 >= (unsigned __int128)cap * pct;
}

uint32_t cm_update_space(struct cluster_map *m, uint32_t node_id,
			 const struct cm_target_info *targets, uint32_t n,
			 const struct cm_full_mark *mark)
{
	uint32_t changed = 0;
	bool fs_moved = false;

	for (uint32_t i = 0; i < n; i++) {
		struct cm_target *t = target_get(m, targets[i].id);

		if (!t || t->node_id != node_id)
			continue;
		fs_moved |= t->fs != targets[i].fs;
		changed += t->capacity != targets[i].capacity || t->used != targets[i].used ||
			   t->fs != targets[i].fs || t->avail != targets[i].avail;
		t->capacity = targets[i].capacity;
		t->used = targets[i].used;
		t->fs = targets[i].fs;
		t->avail = targets[i].avail;
		if (target_full(t, mark) != (t->full != 0)) {
			t->full = !t->full;
			fs_moved = true;	/* placement changed: a new version */
			if (t->full)
				log_warn(COMP, "target %u of node %u is full (%llu of %llu bytes free): "
					 "no new file is placed on its chains", t->id, node_id,
					 (unsigned long long)t->avail,
					 (unsigned long long)t->capacity);
			else
				log_info(COMP, "target %u of node %u has room again (%llu of %llu bytes "
					 "free)", t->id, node_id, (unsigned long long)t->avail,
					 (unsigned long long)t->capacity);
		}
	}
	if (fs_moved)
		m->version++;
	return changed;
}

int cm_check_ident(const struct cluster_map *m, uint32_t node_id, uint64_t ident,
		   uint64_t now_ms)
{
	const struct cm_node *node = cm_find_node(m, node_id);

	if (!node || !node->ident || node->ident == ident)
		return 0;
	return node->state != NODE_OFFLINE && node->lease_expires_ms > now_ms ? -EADDRINUSE : 0;
}

int cm_set_ident(struct cluster_map *m, uint32_t node_id, uint64_t ident)
{
	struct cm_node *node = node_get(m, node_id);

	if (!node)
		return -ENOENT;
	node->ident = ident;
	return 0;
}

int cm_heartbeat(struct cluster_map *m, uint32_t node_id, uint64_t lease_expires_ms)
{
	struct cm_node *node = node_get(m, node_id);

	if (!node)
		return -ENOENT;
	if (node->state == NODE_OFFLINE || drained_offline(m, node))
		return -ENOTCONN;
	node->lease_expires_ms = lease_expires_ms;
	return 0;
}

void cm_reset_leases(struct cluster_map *m, uint64_t lease_expires_ms)
{
	for (uint32_t i = 0; i < m->nnodes; i++)
		m->nodes[i].lease_expires_ms = lease_expires_ms;
}

static void node_offline(struct cm_change *ch, struct cm_node *node)
{
	struct cluster_map *m = ch->m;

	if (node->state == NODE_OFFLINE)
		return;
	node->state = NODE_OFFLINE;
	change_map(ch);
	for (uint32_t k = 0; k < m->ntargets; k++) {
		struct cm_target *t = &m->targets[k];

		if (t->node_id != node->id)
			continue;
		if (t->state == TARGET_SERVING || t->state == TARGET_SYNCING) {
			target_take_out(ch, t);
			t->state = TARGET_OFFLINE;
		}
	}
}

int cm_set_node_offline(struct cluster_map *m, uint32_t node_id)
{
	struct cm_change ch = { .m = m };
	struct cm_node *node = node_get(m, node_id);

	if (!node)
		return -ENOENT;
	node_offline(&ch, node);
	if (ch.bumped)
		log_warn(COMP, "node %u (%s) is offline: %d chains reconfigured",
			 node_id, node->addr, ch.chains);
	return ch.chains;
}

int cm_expire_leases(struct cluster_map *m, uint64_t now_ms)
{
	struct cm_change ch = { .m = m };

	for (uint32_t i = 0; i < m->nnodes; i++) {
		struct cm_node *node = &m->nodes[i];

		if (node->state == NODE_OFFLINE || node->lease_expires_ms > now_ms)
			continue;
		log_warn(COMP, "node %u (%s) missed its heartbeat lease; marking it offline",
			 node->id, node->addr);
		node_offline(&ch, node);
	}
	for (uint32_t i = 0; i < m->nservices; i++) {
		struct cm_service *s = &m->services[i];

		if (s->state != NODE_UP || s->lease_expires_ms > now_ms)
			continue;
		log_warn(COMP, "%s service of node %u (%s) missed its lease; marking it offline",
			 cm_service_kind_name(s->kind), s->node_id, s->addr);
		s->state = NODE_OFFLINE;
		change_map(&ch);
	}
	return ch.chains;
}

int cm_announce_service(struct cluster_map *m, uint32_t kind, uint32_t node_id, const char *addr,
			uint64_t incarnation, uint64_t lease_expires_ms)
{
	struct cm_change ch = { .m = m };
	struct cm_service *s = NULL;
	size_t alen = addr ? strnlen(addr, CM_ADDR_LEN) : 0;
	uint32_t at = 0;

	if (kind < CM_SVC_META || kind > CM_SVC_LAST || !node_id || !incarnation || !alen ||
	    alen >= CM_ADDR_LEN)
		return -EINVAL;
	/* Sorted by (kind, node_id): find it, or where it goes. */
	for (; at < m->nservices; at++) {
		struct cm_service *e = &m->services[at];

		if (e->kind == kind && e->node_id == node_id)
			s = e;
		if (e->kind > kind || (e->kind == kind && e->node_id >= node_id))
			break;
	}
	if (!s) {
		if (m->nservices >= CM_MAX_SERVICES)
			return -ENOSPC;
		if (cm_reserve_services(m, m->nservices + 1))
			return -ENOMEM;
		memmove(&m->services[at + 1], &m->services[at],
			(m->nservices - at) * sizeof(*m->services));
		m->nservices++;
		s = &m->services[at];
		memset(s, 0, sizeof(*s));
		s->kind = kind;
		s->node_id = node_id;
		change_map(&ch);
	}
	if (strcmp(s->addr, addr) != 0 || s->incarnation != incarnation || s->state != NODE_UP) {
		memcpy(s->addr, addr, alen + 1);
		s->incarnation = incarnation;
		s->state = NODE_UP;
		change_map(&ch);
	}
	s->lease_expires_ms = lease_expires_ms;
	return ch.bumped ? 1 : 0;
}

static int member_synced(struct cm_change *ch, struct cm_chain *c, struct cm_target *t)
{
	int i = member_idx(c, t->id);

	if (i < 0)
		return -ENOENT;
	if (c->states[i] != TARGET_SYNCING)
		return 0;
	member_remove(c, i);
	member_add(c, t->id, TARGET_SERVING);
	change_chain(ch, c);
	drain_settle(ch, c);
	return 1;
}

int cm_member_synced(struct cluster_map *m, uint32_t chain_id, uint32_t target_id)
{
	struct cm_change ch = { .m = m };
	struct cm_chain *c = chain_get(m, chain_id);
	struct cm_target *t = target_get(m, target_id);
	int rc;

	if (!c || !t)
		return -ENOENT;
	rc = member_synced(&ch, c, t);
	if (rc > 0)
		target_refresh(m, t);
	return rc;
}

int cm_target_synced(struct cluster_map *m, uint32_t target_id)
{
	struct cm_change ch = { .m = m };
	struct cm_target *t = target_get(m, target_id);

	if (!t)
		return -ENOENT;
	for (uint32_t k = 0; k < m->nchains; k++)
		(void)member_synced(&ch, &m->chains[k], t);
	target_refresh(m, t);
	return ch.chains;
}

/*
 * Drops a target gone for good from chain c: member i, or (i < 0) out-list
 * entry o. Members that left before it did lack what it took after: none
 * of them may come back serving on its own (see target_bring_back), or a
 * chain left with no serving member would serve stale data instead of
 * staying unavailable. That holds when the target left SERVING (or
 * serves): it may be the chain's last up-to-date member. One that left
 * SYNCING never was: every update it took went through a serving head,
 * and the last SERVING member to leave (or one still serving) keeps its
 * right to come back serving.
 */
static void chain_drop(struct cm_chain *c, int i, int o)
{
	int before = 0;

	if (i >= 0 && c->states[i] == TARGET_SERVING)
		before = c->nout;
	else if (o >= 0 && c->out_states[o] == TARGET_SERVING)
		before = o;
	for (int j = 0; j < before; j++)
		if (c->out_states[j] == TARGET_SERVING)
			c->out_states[j] = TARGET_SYNCING;
	if (i >= 0)
		member_remove(c, i);
	else
		out_remove(c, o);
}

int cm_replace_target(struct cluster_map *m, uint32_t old_target, uint32_t new_target)
{
	struct cm_change ch = { .m = m };
	struct cm_target *ot = target_get(m, old_target);
	struct cm_target *nt = target_get(m, new_target);
	const struct cm_node *nn;
	bool added = false;

	if (!ot || !nt)
		return -ENOENT;
	nn = cm_find_node(m, nt->node_id);
	if (ot == nt || (nt->state != TARGET_SERVING && nt->state != TARGET_SYNCING) ||
	    !nn || nn->state != NODE_UP)
		return -EINVAL;
	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];

		if (member_idx(c, old_target) < 0 && out_idx(c, old_target) < 0)
			continue;
		if (member_idx(c, new_target) >= 0 || out_idx(c, new_target) >= 0 ||
		    chain_has_node(m, c, nt->node_id, old_target))
			return -EINVAL;
	}
	for (uint32_t k = 0; k < m->nchains; k++) {
		struct cm_chain *c = &m->chains[k];
		int i = member_idx(c, old_target), o = out_idx(c, old_target);

		if (i < 0 && o < 0)
			continue;
		chain_drop(c, i, o);
		member_add(c, new_target, TARGET_SYNCING);
		added = true;
		change_chain(&ch, c);
	}
	if (ot->state != TARGET_LOST) {
		ot->state = TARGET_LOST;
		change_map(&ch);
	}
	if (added)
		nt->state = TARGET_SYNCING;
	log_info(COMP, "target %u replaced by target %u in %d chains", old_target,
		 new_target, ch.chains);
	return ch.chains;
}

/* Membership count (members + out) of every target, indexed like
 * m->targets. */
static uint32_t *membership_counts(const struct cluster_map *m)
{
	uint32_t *cnt = calloc(m->ntargets ? m->ntargets : 1, sizeof(*cnt));

	if (!cnt)
		return NULL;
	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];

		for (int i = 0; i < c->len + c->nout; i++) {
			uint32_t tid = i < c->len ? c->targets[i] : c->out[i - c->len];
			const struct cm_target *t = cm_find_target(m, tid);

			if (t)
				cnt[t - m->targets]++;
		}
	}
	return cnt;
}

/* The replacement for a drained member of c: see cm_drain_node(). Returns
 * an index into m->targets or -1. */
static int pick_replacement(const struct cluster_map *m, const struct cm_chain *c,
			    const uint32_t *cnt)
{
	int best = -1;

	for (uint32_t k = 0; k < m->ntargets; k++) {
		const struct cm_target *t = &m->targets[k];
		const struct cm_node *n;

		if (t->state != TARGET_SERVING && t->state != TARGET_SYNCING)
			continue;
		n = cm_find_node(m, t->node_id);
		if (!n || n->state != NODE_UP || chain_has_node(m, c, t->node_id, 0))
			continue;
		/* Targets are in id order: strict < keeps the lowest id. */
		if (best < 0 || cnt[k] < cnt[best])
			best = (int)k;
	}
	return best;
}

int cm_drain_node(struct cluster_map *m, uint32_t node_id, uint32_t *unplaced)
{
	struct cm_change ch = { .m = m };
	struct cm_node *node = node_get(m, node_id);
	uint32_t *cnt, missing = 0;

	if (unplaced)
		*unplaced = 0;
	if (!node)
		return -ENOENT;
	cnt = membership_counts(m);
	if (!cnt)
		return -ENOMEM;
	if (node->state != NODE_DRAINING) {
		node->state = NODE_DRAINING;
		change_map(&ch);
	}
	for (uint32_t k = 0; k < m->nchains; k++) {
		struct cm_chain *c = &m->chains[k];
		uint32_t nd_all, ndrain, nd_serving, want;

		drain_counts(m, c, &nd_all, &ndrain, &nd_serving);
		if (!ndrain)
			continue;
		want = drain_want(m, nd_all, ndrain);
		while (nd_all < want) {
			int r;

			if (c->len + c->nout >= CM_CHAIN_SLOTS ||
			    (r = pick_replacement(m, c, cnt)) < 0) {
				missing += want - nd_all;
				break;
			}
			member_add(c, m->targets[r].id, TARGET_SYNCING);
			m->targets[r].state = TARGET_SYNCING;
			cnt[r]++;
			nd_all++;
			change_chain(&ch, c);
		}
		drain_settle(&ch, c);
	}
	free(cnt);
	if (missing)
		log_warn(COMP, "draining node %u: no target available for %u replicas; "
			 "add storage nodes, then drain again", node_id, missing);
	if (unplaced)
		*unplaced = missing;
	return ch.chains;
}

/* How many chain entries (members and out) are targets of node_id. */
static uint32_t node_replicas(const struct cluster_map *m, uint32_t node_id)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];

		for (int i = 0; i < c->len; i++)
			n += cm_node_of(m, c->targets[i]) == node_id;
		for (int i = 0; i < c->nout; i++)
			n += cm_node_of(m, c->out[i]) == node_id;
	}
	return n;
}

/* Does c keep a SERVING member off node_id? */
static bool chain_serves_without(const struct cluster_map *m, const struct cm_chain *c,
				 uint32_t node_id)
{
	for (int i = 0; i < c->len; i++)
		if (c->states[i] == TARGET_SERVING && cm_node_of(m, c->targets[i]) != node_id)
			return true;
	return false;
}

/* Drops the entries of dead node_id from every chain, each chain getting
 * replacements up to R (or to what it held, if less) on survivors. The
 * caller checked that every such chain serves without the node. */
static int chains_drop_node(struct cm_change *ch, uint32_t node_id, uint32_t *unplaced)
{
	struct cluster_map *m = ch->m;
	uint32_t *cnt = membership_counts(m);

	if (!cnt)
		return -ENOMEM;
	for (uint32_t k = 0; k < m->nchains; k++) {
		struct cm_chain *c = &m->chains[k];
		uint32_t had = (uint32_t)(c->len + c->nout), have, want;
		bool dropped = false;

		for (int i = c->len - 1; i >= 0; i--)
			if (cm_node_of(m, c->targets[i]) == node_id) {
				chain_drop(c, i, -1);
				dropped = true;
			}
		for (int o = c->nout - 1; o >= 0; o--)
			if (cm_node_of(m, c->out[o]) == node_id) {
				chain_drop(c, -1, o);
				dropped = true;
			}
		if (!dropped)
			continue;
		change_chain(ch, c);
		want = had < m->replication ? had : m->replication;
		for (have = (uint32_t)(c->len + c->nout); have < want; have++) {
			int r;

			if (c->len + c->nout >= CM_CHAIN_SLOTS || (r = pick_replacement(m, c, cnt)) < 0) {
				*unplaced += want - have;
				break;
			}
			member_add(c, m->targets[r].id, TARGET_SYNCING);
			m->targets[r].state = TARGET_SYNCING;
			cnt[r]++;
		}
	}
	free(cnt);
	return 0;
}

int cm_remove_node(struct cluster_map *m, uint32_t node_id, uint32_t *count)
{
	struct cm_change ch = { .m = m };
	struct cm_node *node = node_get(m, node_id);
	uint32_t held, last = 0, w = 0;
	int rc;

	*count = 0;
	if (!node)
		return -ENOENT;
	held = node_replicas(m, node_id);
	if (held && node->state != NODE_OFFLINE && !drained_offline(m, node)) {
		*count = held;
		return node->state == NODE_DRAINING ? -EINPROGRESS : -EBUSY;
	}
	/* Dead: its replicas are rebuilt from the survivors, so each of its
	 * chains must have one that serves. */
	for (uint32_t k = 0; held && k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];

		if (chain_has_node(m, c, node_id, 0) && !chain_serves_without(m, c, node_id))
			last++;
	}
	if (last) {
		*count = last;
		return -ENODATA;
	}
	if (held && (rc = chains_drop_node(&ch, node_id, count)))
		return rc;
	for (uint32_t k = 0; k < m->ntargets; k++)
		if (m->targets[k].node_id != node_id)
			m->targets[w++] = m->targets[k];
	m->ntargets = w;
	memmove(node, node + 1, sizeof(*node) * (m->nnodes - (node - m->nodes) - 1));
	m->nnodes--;
	change_map(&ch);
	if (held)
		log_warn(COMP, "node %u removed from the cluster map while down: %d chain(s) "
			 "re-replicate from the survivors%s", node_id, ch.chains,
			 *count ? "; some found no node to take a replica: add storage nodes" : "");
	else
		log_info(COMP, "node %u removed from the cluster map", node_id);
	return ch.chains;
}

/* Is c whole: R members, all SERVING, none out, each on an UP node? */
static bool chain_whole(const struct cluster_map *m, const struct cm_chain *c)
{
	if (c->nout || c->len != m->replication)
		return false;
	for (int i = 0; i < c->len; i++) {
		const struct cm_node *n = cm_find_node(m, cm_node_of(m, c->targets[i]));

		if (c->states[i] != TARGET_SERVING || !n || n->state != NODE_UP)
			return false;
	}
	return true;
}

int cm_move_begin(struct cluster_map *m, uint32_t chain_id, uint32_t from_target,
		  uint32_t to_target)
{
	struct cm_change ch = { .m = m };
	struct cm_chain *c = chain_get(m, chain_id);
	struct cm_target *to = target_get(m, to_target);
	const struct cm_node *tn;

	if (!c || !to || !cm_find_target(m, from_target))
		return -ENOENT;
	tn = cm_find_node(m, to->node_id);
	if (!chain_whole(m, c) || member_idx(c, from_target) < 0 ||
	    c->len + c->nout >= CM_CHAIN_SLOTS || !tn || tn->state != NODE_UP ||
	    (to->state != TARGET_SERVING && to->state != TARGET_SYNCING) ||
	    chain_has_node(m, c, to->node_id, 0))
		return -EINVAL;
	member_add(c, to_target, TARGET_SYNCING);
	to->state = TARGET_SYNCING;
	change_chain(&ch, c);
	log_info(COMP, "chain %u: target %u joins to take the place of target %u (map version %llu)",
		 chain_id, to_target, from_target, (unsigned long long)m->version);
	return 1;
}

int cm_member_leave(struct cluster_map *m, uint32_t chain_id, uint32_t target_id)
{
	struct cm_change ch = { .m = m };
	struct cm_chain *c = chain_get(m, chain_id);
	struct cm_target *t = target_get(m, target_id);
	uint32_t others = 0;
	int i, o;

	if (!c || !t)
		return -ENOENT;
	i = member_idx(c, target_id);
	o = out_idx(c, target_id);
	if (i < 0 && o < 0)
		return -ENOENT;
	for (int k = 0; k < c->len; k++)
		others += k != i && c->states[k] == TARGET_SERVING;
	if (others < m->replication)
		return 0;
	chain_drop(c, i, i < 0 ? o : -1);
	change_chain(&ch, c);
	target_refresh(m, t);
	log_info(COMP, "chain %u: target %u left, %u replicas serving (map version %llu)", chain_id,
		 target_id, others, (unsigned long long)m->version);
	return 1;
}

int cm_build_chains(struct cluster_map *m, uint32_t r, bool force)
{
	struct ct_target *in = NULL;
	struct cm_chain *chains = NULL;
	uint32_t *tab = NULL, n = 0, r_eff;
	int rc;

	if (!r || r > CM_MAX_R)
		return -EINVAL;
	if (m->nchains && !force)
		return -EEXIST;
	in = malloc(sizeof(*in) * (m->ntargets ? m->ntargets : 1));
	if (!in)
		return -ENOMEM;
	for (uint32_t k = 0; k < m->ntargets; k++) {
		const struct cm_target *t = &m->targets[k];
		const struct cm_node *node = cm_find_node(m, t->node_id);

		if ((t->state != TARGET_SERVING && t->state != TARGET_SYNCING) ||
		    !node || node->state != NODE_UP)
			continue;
		in[n].target_id = t->id;
		in[n].node_id = t->node_id;
		n++;
	}
	rc = -ENODEV;
	if (!n)
		goto out;
	rc = -ENOSPC;
	if (n > CM_MAX_CHAINS)
		goto out;
	rc = chain_table_build(in, n, r, &r_eff, &tab);
	if (rc)
		goto out;
	rc = -ENOMEM;
	chains = calloc(n, sizeof(*chains));
	if (!chains)
		goto out;
	m->version++;
	for (uint32_t j = 0; j < n; j++) {
		struct cm_chain *c = &chains[j];

		c->id = j + 1;
		c->version = m->version;
		c->len = (uint8_t)r_eff;
		for (uint32_t p = 0; p < r_eff; p++) {
			c->targets[p] = tab[(size_t)j * r_eff + p];
			c->states[p] = TARGET_SERVING;
		}
	}
	free(m->chains);
	m->chains = chains;
	m->nchains = m->chains_cap = n;
	m->chain_table_len = n;
	m->replication = r_eff;
	chains = NULL;
	/* Fresh chains: every member starts SERVING. */
	for (uint32_t k = 0; k < m->ntargets; k++)
		if (m->targets[k].state == TARGET_SYNCING)
			m->targets[k].state = TARGET_SERVING;
	log_info(COMP, "built %u chains with replication %u (asked %u)", n, r_eff, r);
	rc = (int)n;
out:
	free(in);
	free(tab);
	free(chains);
	return rc;
}

