/*
 * Reclaiming the copies of chains a target left (docs/failures.md,
 * "Space of a chain a target left").
 *
 * A member that leaves a chain (a drain, a rebalancing move, `node
 * remove` of a dead node that comes back) keeps its chunk files: nothing
 * reads them any more, but they fill its disk. On its sync tick a target
 * scans its chunks once per new map for those tagged with a chain that:
 *   - does not list it as a member, nor among the members taken out (a
 *     recovering member may still read those copies: recover.c);
 *   - has R (the map's replication) SERVING members, none of them this
 *     target: the chain is whole without it.
 * and removes up to RECLAIM_BATCH of them at a time, skipping any chunk
 * with an update, a repair or a removal in flight here, the way a resync
 * drops the extras of a pass (a needsync or dirty mark goes with the copy:
 * nobody repairs or surveys a chain for a target that left it). A scan that
 * skipped or left some runs again on a later tick. Chunks of chains the
 * map does not hold, and untagged ones, are left alone.
 *
 * Everything runs on the target's reactor.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "storage_int.h"

#define RECLAIM_BATCH 256u

struct reclaim_scan {
	const struct cluster_map *map;
	uint32_t target;
	struct chunk_id ids[RECLAIM_BATCH];
	uint32_t n;
	bool more;		/* found more than fit */
};

/* 1 if chain c is whole without target, and target is none of its
 * members (in service or taken out). */
static bool left_for_good(const struct cluster_map *m, const struct cm_chain *c, uint32_t target)
{
	uint32_t serving = 0;

	for (uint8_t i = 0; i < c->len; i++) {
		if (c->targets[i] == target)
			return false;
		if (c->states[i] == TARGET_SERVING)
			serving++;
	}
	for (uint8_t i = 0; i < c->nout; i++)
		if (c->out[i] == target)
			return false;
	return serving >= m->replication && serving > 0;
}

static const struct cm_chain *chain_of(const struct cluster_map *m, uint32_t id)
{
	uint32_t lo = 0, hi = m->nchains;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (m->chains[mid].id == id)
			return &m->chains[mid];
		if (m->chains[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int collect_left(void *arg, const struct chunk_info *info)
{
	struct reclaim_scan *x = arg;
	const struct cm_chain *c;

	if (!info->tag)
		return 0;
	c = chain_of(x->map, info->tag);
	if (!c || !left_for_good(x->map, c, x->target))
		return 0;
	if (x->n == RECLAIM_BATCH) {
		x->more = true;
		return 1;
	}
	x->ids[x->n++] = info->id;
	return 0;
}

struct reclaim_rm {
	struct target *t;
	struct cstate *c;
	bool reclaim;
};

static void on_removed(void *arg, int status, const struct chunk_info *info)
{
	struct reclaim_rm *x = arg;
	struct target *t = x->t;

	(void)info;
	x->c->removing--;
	cstate_maybe_free(t, x->c);
	if (x->reclaim) {
		t->reclaim_inflight--;
		if (!status)
			__atomic_fetch_add(&t->st->n_reclaimed, 1, __ATOMIC_RELAXED);
	}
	free(x);
}

bool target_remove_idle(struct target *t, const struct chunk_id *id, bool reclaim)
{
	struct cstate *c = cstate_find(t, id, true);
	struct reclaim_rm *x;

	if (!c)
		return false;
	if (c->inflight || c->repairing || c->q_head || (reclaim && c->removing)) {
		cstate_maybe_free(t, c);
		return false;
	}
	x = malloc(sizeof(*x));
	if (!x) {
		cstate_maybe_free(t, c);
		return false;
	}
	*x = (struct reclaim_rm){ .t = t, .c = c, .reclaim = reclaim };
	c->removing++;		/* held from here: the marks below may go */
	if (reclaim) {
		/* Marks of a chain this target left: nobody repairs or
		 * surveys them any more, and the copy goes. */
		if (c->dirty)
			cstate_set_dirty(t, c, false);
		if (c->needsync)
			resync_clear(t, c);
	}
	if (chunk_remove(t->cs, id, 0, on_removed, x)) {
		c->removing--;
		cstate_maybe_free(t, c);
		free(x);
		return false;
	}
	if (reclaim)
		t->reclaim_inflight++;
	return true;
}

void reclaim_check(struct target *t)
{
	struct map_snap *snap;
	struct reclaim_scan *x;
	bool fresh;

	if (t->closing || t->reclaim_inflight)
		return;
	snap = map_get(t->st);
	if (!snap || (snap->map.version == t->reclaim_version && !t->reclaim_more)) {
		map_put(t->st, snap);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		map_put(t->st, snap);
		return;
	}
	x->map = &snap->map;
	x->target = t->id;
	chunk_list(t->cs, collect_left, x);
	fresh = snap->map.version != t->reclaim_version;
	t->reclaim_version = snap->map.version;
	t->reclaim_more = x->more;
	if (x->n && fresh)
		log_info("storage", "target %u: removing its copies of chains it left (whole "
			 "without it, map version %llu): %u%s", t->id,
			 (unsigned long long)snap->map.version, x->n, x->more ? " and more" : "");
	for (uint32_t i = 0; i < x->n; i++)
		if (!target_remove_idle(t, &x->ids[i], true))
			t->reclaim_more = true;	/* busy now: the next tick */
	map_put(t->st, snap);
	free(x);
}
