/*
 * The rebalancer. See rebalance.h; the moves themselves are membership.c's
 * cm_move_begin() and cm_member_leave().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mgmt/membership.h"
#include "mgmt/rebalance.h"

#define COMP "mgmt"

void rebalance_opts_init(struct rebalance_opts *o, size_t size)
{
	struct rebalance_opts d = { .size = sizeof(d), .band_pct = 10, .max_moves = 1 };

	memset(o, 0, size);
	memcpy(o, &d, size < sizeof(d) ? size : sizeof(d));
	o->size = size;
}

int rebalance_init(struct rebalancer *rb, const struct rebalance_opts *opts)
{
	if (!rb || !opts || opts->size < sizeof(*opts) || opts->band_pct < 1 ||
	    opts->band_pct > 100 || opts->max_moves < 1 || opts->max_moves > REBALANCE_MAX_MOVES)
		return -EINVAL;
	memset(rb, 0, sizeof(*rb));
	rb->o = *opts;
	rb->paused = opts->paused;
	rb->st.paused = rb->paused;
	rb->st.band_pct = opts->band_pct;
	rb->st.max_moves = opts->max_moves;
	rb->st.balanced = true;
	return 0;
}

void rebalance_release(struct rebalancer *rb)
{
	rb->nmoves = 0;
}

void rebalance_pause(struct rebalancer *rb, bool paused)
{
	if (rb->paused != paused)
		log_info(COMP, "rebalance %s (%u move(s) in flight finish)",
			 paused ? "paused" : "resumed", rb->nmoves);
	rb->paused = paused;
	rb->st.paused = paused;
}

void rebalance_forget(struct rebalancer *rb)
{
	rb->nmoves = 0;
	rb->idle_version = 0;
	rb->st.in_flight = 0;
}

void rebalance_stats(const struct rebalancer *rb, struct rebalance_stats *out)
{
	*out = rb->st;
}

/* Working counts of one step. */
struct fill {
	uint32_t *node;		/* entries per node, indexed like m->nodes */
	uint32_t *target;	/* entries per target, indexed like m->targets */
	bool *counted;		/* node counted in the mean */
	uint32_t hi, lo;	/* the band around the mean */
	uint32_t n;		/* nodes counted */
};

static int node_idx(const struct cluster_map *m, uint32_t node_id)
{
	const struct cm_node *n = cm_find_node(m, node_id);

	return n ? (int)(n - m->nodes) : -1;
}

static int target_idx(const struct cluster_map *m, uint32_t tid)
{
	const struct cm_target *t = cm_find_target(m, tid);

	return t ? (int)(t - m->targets) : -1;
}

static bool usable(const struct cm_target *t)
{
	return t->state == TARGET_SERVING || t->state == TARGET_SYNCING;
}

static const struct rebalance_move *move_of(const struct rebalancer *rb, uint32_t chain_id)
{
	for (uint32_t i = 0; i < rb->nmoves; i++)
		if (rb->moves[i].chain_id == chain_id)
			return &rb->moves[i];
	return NULL;
}

static int member_state(const struct cm_chain *c, uint32_t tid)
{
	for (int i = 0; i < c->len; i++)
		if (c->targets[i] == tid)
			return c->states[i];
	return -1;
}

static void move_drop(struct rebalancer *rb, uint32_t i)
{
	rb->moves[i] = rb->moves[--rb->nmoves];
}

/* Finishes the moves whose new member serves; drops the ones that cannot
 * finish. Returns the chains changed. */
static int finish_moves(struct rebalancer *rb, struct cluster_map *m)
{
	int changed = 0;

	for (uint32_t i = 0; i < rb->nmoves;) {
		struct rebalance_move *mv = &rb->moves[i];
		const struct cm_chain *c = cm_find_chain(m, mv->chain_id);
		int st = c ? member_state(c, mv->to) : -1, rc;

		if (st < 0) {
			log_warn(COMP, "rebalance: moving chain %u from target %u to %u is cancelled: "
				 "target %u is no longer in the chain", mv->chain_id, mv->from, mv->to,
				 mv->to);
			rb->st.moves_cancelled++;
			move_drop(rb, i);
			continue;
		}
		if (st != TARGET_SERVING) {
			i++;
			continue;
		}
		rc = cm_member_leave(m, mv->chain_id, mv->from);
		if (rc == 0) {
			i++;	/* another member is out: the old one stays for now */
			continue;
		}
		changed += rc > 0;
		rb->st.moves_done++;
		rb->st.bytes_moved += mv->bytes;
		log_info(COMP, "rebalance: chain %u moved from target %u to %u (%llu moves done)",
			 mv->chain_id, mv->from, mv->to, (unsigned long long)rb->st.moves_done);
		move_drop(rb, i);
	}
	return changed;
}

static void fill_release(struct fill *f)
{
	free(f->node);
	free(f->target);
	free(f->counted);
}

/* Entries per node and per target; moves in flight already count as
 * done (their old member as gone). */
static int fill_count(const struct rebalancer *rb, const struct cluster_map *m, struct fill *f)
{
	memset(f, 0, sizeof(*f));
	f->node = calloc(m->nnodes ? m->nnodes : 1, sizeof(*f->node));
	f->target = calloc(m->ntargets ? m->ntargets : 1, sizeof(*f->target));
	f->counted = calloc(m->nnodes ? m->nnodes : 1, sizeof(*f->counted));
	if (!f->node || !f->target || !f->counted) {
		fill_release(f);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];

		for (int i = 0; i < c->len + c->nout; i++) {
			uint32_t tid = i < c->len ? c->targets[i] : c->out[i - c->len];
			int t = target_idx(m, tid), n = t < 0 ? -1 : node_idx(m, m->targets[t].node_id);

			if (t < 0 || n < 0)
				continue;
			f->target[t]++;
			f->node[n]++;
		}
	}
	for (uint32_t i = 0; i < rb->nmoves; i++) {
		int t = target_idx(m, rb->moves[i].from);
		int n = t < 0 ? -1 : node_idx(m, m->targets[t].node_id);

		if (n >= 0 && f->node[n])
			f->node[n]--;
	}
	for (uint32_t k = 0; k < m->ntargets; k++) {
		int n = node_idx(m, m->targets[k].node_id);

		if (n >= 0 && m->nodes[n].state == NODE_UP && usable(&m->targets[k]))
			f->counted[n] = true;
	}
	return 0;
}

/* The band and the stats from the counts. */
static void fill_judge(struct rebalancer *rb, const struct cluster_map *m, struct fill *f)
{
	struct rebalance_stats *st = &rb->st;
	uint64_t total = 0, excess = 0, deficit = 0;
	uint32_t min = UINT32_MAX, max = 0;

	f->n = 0;
	for (uint32_t i = 0; i < m->nnodes; i++) {
		if (!f->counted[i])
			continue;
		f->n++;
		total += f->node[i];
		min = f->node[i] < min ? f->node[i] : min;
		max = f->node[i] > max ? f->node[i] : max;
	}
	st->nodes = f->n;
	st->in_flight = rb->nmoves;
	st->paused = rb->paused;
	if (!f->n) {
		st->fill_min = st->fill_max = st->fill_mean_x100 = 0;
		st->balanced = true;
		st->pending = 0;
		f->hi = UINT32_MAX;
		f->lo = 0;
		return;
	}
	st->fill_min = min;
	st->fill_max = max;
	st->fill_mean_x100 = (uint32_t)(total * 100 / f->n);
	/* ceil and floor of total / n * (100 +- band) / 100, in integers. */
	f->hi = (uint32_t)((total * (100 + rb->o.band_pct) + (uint64_t)f->n * 100 - 1) /
			   ((uint64_t)f->n * 100));
	f->lo = (uint32_t)(total * (100 - rb->o.band_pct) / ((uint64_t)f->n * 100));
	st->balanced = max <= f->hi && min >= f->lo;
	for (uint32_t i = 0; i < m->nnodes; i++) {
		uint64_t up = (total + f->n - 1) / f->n, down = total / f->n;

		if (!f->counted[i])
			continue;
		excess += f->node[i] > up ? f->node[i] - up : 0;
		deficit += f->node[i] < down ? down - f->node[i] : 0;
	}
	st->pending = st->balanced ? 0 : (uint32_t)(excess > deficit ? excess : deficit);
	if (!st->pending && !st->balanced)
		st->pending = max - min >= 2;
}

/* Chains over R with no move of their own lose the member of their
 * fullest node (rebalance.h). */
static int trim_chains(struct rebalancer *rb, struct cluster_map *m, struct fill *f)
{
	int changed = 0;

	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];
		uint32_t serving = 0, best = 0;
		int bn = -1;
		bool draining = false;

		if (c->nout || c->len <= m->replication || move_of(rb, c->id))
			continue;
		for (int i = 0; i < c->len; i++) {
			int n = node_idx(m, cm_node_of(m, c->targets[i]));

			draining |= n < 0 || m->nodes[n].state != NODE_UP;
			serving += c->states[i] == TARGET_SERVING;
			if (n >= 0 && c->states[i] == TARGET_SERVING && (bn < 0 || f->node[n] > f->node[bn])) {
				bn = n;
				best = c->targets[i];
			}
		}
		/* A drain or a node away has its own bookkeeping (membership.c). */
		if (draining || serving <= m->replication || bn < 0)
			continue;
		if (cm_member_leave(m, c->id, best) > 0) {
			log_info(COMP, "rebalance: chain %u had %u serving replicas: target %u of node %u "
				 "left", c->id, serving, best, m->nodes[bn].id);
			f->node[bn]--;
			changed++;
		}
	}
	return changed;
}

/* The target of node i a new member goes to: usable, not full, the one
 * in fewest chains (lowest id); -1 when none. */
static int dest_target(const struct cluster_map *m, const struct fill *f, uint32_t i)
{
	int best = -1;

	for (uint32_t k = 0; k < m->ntargets; k++) {
		const struct cm_target *t = &m->targets[k];

		if (t->node_id != m->nodes[i].id || !usable(t) || t->full)
			continue;
		if (best < 0 || f->target[k] < f->target[best])
			best = (int)k;
	}
	return best;
}

struct rank {
	uint32_t fill, idx;
};

static int cmp_rank(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;

	if (x->fill != y->fill)
		return x->fill < y->fill ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The candidate move of one chain. */
struct cand {
	uint32_t chain, from;	/* chain id, the member that leaves */
	int fi, ei;		/* node indexes: fullest member, emptiest other */
};

/* Is c whole (R members, all serving, each on an UP node) and free of
 * moves? Its member on the fullest node into *from and *fi. */
static bool chain_candidate(const struct rebalancer *rb, const struct cluster_map *m,
			    const struct fill *f, const struct cm_chain *c, uint32_t *from, int *fi)
{
	*fi = -1;
	if (c->nout || c->len != m->replication || move_of(rb, c->id))
		return false;
	for (int i = 0; i < c->len; i++) {
		int n = node_idx(m, cm_node_of(m, c->targets[i]));

		if (n < 0 || c->states[i] != TARGET_SERVING || m->nodes[n].state != NODE_UP)
			return false;
		if (*fi < 0 || f->node[n] > f->node[*fi] ||
		    (f->node[n] == f->node[*fi] && n < *fi)) {
			*fi = n;
			*from = c->targets[i];
		}
	}
	return *fi >= 0;
}

static bool chain_has(const struct cluster_map *m, const struct cm_chain *c, uint32_t i)
{
	for (int k = 0; k < c->len; k++)
		if (cm_node_of(m, c->targets[k]) == m->nodes[i].id)
			return true;
	return false;
}

/*
 * Picks the move: over every whole chain, its member on the fullest node
 * F and the emptiest counted node E not in it that can take a member (a
 * target neither full nor out of service); the highest fill[F] wins, then
 * the lowest fill[E], then the lowest chain id. A move must lower the
 * spread (fill[F] >= fill[E] + 2) and a node must be out of the band.
 * One pass over the chains, each trying at most R + 1 of the emptiest
 * nodes beyond the full ones.
 */
static bool pick_move(const struct rebalancer *rb, const struct cluster_map *m,
		      const struct fill *f, const struct rank *r, uint32_t nr,
		      const int *dest, struct cand *best)
{
	bool found = false;

	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];
		struct cand cd = { .chain = c->id, .ei = -1 };

		if (!chain_candidate(rb, m, f, c, &cd.from, &cd.fi))
			continue;
		if (found && f->node[cd.fi] < f->node[best->fi])
			continue;
		for (uint32_t e = 0; e < nr && cd.ei < 0; e++)
			if (dest[r[e].idx] >= 0 && !chain_has(m, c, r[e].idx))
				cd.ei = (int)r[e].idx;
		if (cd.ei < 0 || f->node[cd.fi] < f->node[cd.ei] + 2 ||
		    (f->node[cd.fi] <= f->hi && f->node[cd.ei] >= f->lo))
			continue;
		if (!found || f->node[cd.fi] > f->node[best->fi] ||
		    f->node[cd.ei] < f->node[best->ei]) {
			*best = cd;
			found = true;
		}
	}
	return found;
}

/* Starts one move (pick_move). 1 (started), 0 (nothing to do) or
 * -ENOMEM. */
static int start_move(struct rebalancer *rb, struct cluster_map *m, struct fill *f)
{
	struct rank *r = calloc(m->nnodes ? m->nnodes : 1, sizeof(*r));
	int *dest = calloc(m->nnodes ? m->nnodes : 1, sizeof(*dest));
	const struct cm_target *ft;
	struct rebalance_move *mv;
	struct cand cd = { 0 };
	uint32_t nr = 0;
	int rc = -ENOMEM, fti;

	if (!r || !dest)
		goto out;
	for (uint32_t i = 0; i < m->nnodes; i++) {
		dest[i] = f->counted[i] ? dest_target(m, f, i) : -1;
		if (f->counted[i])
			r[nr++] = (struct rank){ f->node[i], i };
	}
	qsort(r, nr, sizeof(*r), cmp_rank);
	rc = 0;
	if (!pick_move(rb, m, f, r, nr, dest, &cd) ||
	    cm_move_begin(m, cd.chain, cd.from, m->targets[dest[cd.ei]].id) <= 0)
		goto out;
	mv = &rb->moves[rb->nmoves++];
	mv->chain_id = cd.chain;
	mv->from = cd.from;
	mv->to = m->targets[dest[cd.ei]].id;
	ft = cm_find_target(m, cd.from);
	fti = target_idx(m, cd.from);
	mv->bytes = ft && fti >= 0 && f->target[fti] ? ft->used / f->target[fti] : 0;
	log_info(COMP, "rebalance: moving chain %u from node %u (%u entries) to node %u "
		 "(%u entries): target %u resyncs, then target %u leaves", cd.chain,
		 m->nodes[cd.fi].id, f->node[cd.fi], m->nodes[cd.ei].id, f->node[cd.ei], mv->to,
		 mv->from);
	f->node[cd.fi]--;
	f->node[cd.ei]++;
	f->target[dest[cd.ei]]++;
	rc = 1;
out:
	free(r);
	free(dest);
	return rc;
}

/* Is a node that holds chain entries offline? Its return would undo
 * moves made without it: no move starts meanwhile. */
static bool node_away(const struct cluster_map *m, const struct fill *f)
{
	for (uint32_t i = 0; i < m->nnodes; i++)
		if (m->nodes[i].state == NODE_OFFLINE && f->node[i])
			return true;
	return false;
}

int rebalance_step(struct rebalancer *rb, struct cluster_map *m)
{
	struct fill f;
	int changed, rc;

	/* Nothing in flight and nothing to do at this version: the fills
	 * only change with the map's version (and a pause with a resume). */
	if (!rb->nmoves && rb->idle_version == m->version && rb->idle_paused == rb->paused)
		return 0;
	changed = finish_moves(rb, m);
	if (fill_count(rb, m, &f)) {
		rb->st.in_flight = rb->nmoves;
		return changed ? changed : -ENOMEM;
	}
	changed += trim_chains(rb, m, &f);
	fill_judge(rb, m, &f);
	while (!rb->paused && rb->nmoves < rb->o.max_moves && m->nchains && !node_away(m, &f)) {
		rc = start_move(rb, m, &f);
		if (rc <= 0)
			break;
		changed += rc;
		fill_judge(rb, m, &f);
	}
	fill_judge(rb, m, &f);
	fill_release(&f);
	rb->idle_version = changed || rb->nmoves ? 0 : m->version;
	rb->idle_paused = rb->paused;
	return changed;
}
