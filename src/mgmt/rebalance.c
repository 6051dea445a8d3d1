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

/* The target of node n a new member goes to: usable, not full, the one in
 * fewest chains (lowest id). -1 when none. */
static int dest_target(const struct cluster_map *m, const struct fill *f, uint32_t node_id)
{
	int best = -1;

	for (uint32_t k = 0; k < m->ntargets; k++) {
		const struct cm_target *t = &m->targets[k];

		if (t->node_id != node_id || !usable(t) || t->full)
			continue;
		if (best < 0 || f->target[k] < f->target[best])
			best = (int)k;
	}
	return best;
}

/* A whole chain (R members, all serving) with a member on node from and
 * none on node to, with no move in flight: its member's target id, and
 * the chain in *chain; 0 when none. */
static uint32_t pick_chain(const struct rebalancer *rb, const struct cluster_map *m,
			   uint32_t from, uint32_t to, uint32_t *chain)
{
	for (uint32_t k = 0; k < m->nchains; k++) {
		const struct cm_chain *c = &m->chains[k];
		uint32_t mine = 0;
		bool ok = !c->nout && c->len == m->replication && !move_of(rb, c->id);

		for (int i = 0; ok && i < c->len; i++) {
			uint32_t nid = cm_node_of(m, c->targets[i]);
			const struct cm_node *n = cm_find_node(m, nid);

			ok = c->states[i] == TARGET_SERVING && n && n->state == NODE_UP && nid != to;
			if (nid == from)
				mine = c->targets[i];
		}
		if (ok && mine) {
			*chain = c->id;
			return mine;
		}
	}
	return 0;
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

/* Starts one move: the fullest node that has a chain the emptiest lacks.
 * 1 (started), 0 (nothing to do) or -ENOMEM. */
static int start_move(struct rebalancer *rb, struct cluster_map *m, struct fill *f)
{
	struct rank *r = calloc(f->n ? f->n : 1, sizeof(*r));
	uint32_t nr = 0;
	int rc = 0;

	if (!r)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nnodes; i++)
		if (f->counted[i])
			r[nr++] = (struct rank){ f->node[i], i };
	qsort(r, nr, sizeof(*r), cmp_rank);
	/* Fullest first (from the end), emptiest first (from the start). */
	for (uint32_t a = nr; a-- > 0 && !rc;) {
		for (uint32_t b = 0; b < a && !rc; b++) {
			const struct cm_node *F = &m->nodes[r[a].idx], *E = &m->nodes[r[b].idx];
			struct rebalance_move *mv;
			uint32_t chain = 0, from;
			int t;

			if (r[a].fill < r[b].fill + 2 || (r[a].fill <= f->hi && r[b].fill >= f->lo))
				break;
			t = dest_target(m, f, E->id);
			if (t < 0 || !(from = pick_chain(rb, m, F->id, E->id, &chain)))
				continue;
			if (cm_move_begin(m, chain, from, m->targets[t].id) <= 0)
				continue;
			mv = &rb->moves[rb->nmoves++];
			mv->chain_id = chain;
			mv->from = from;
			mv->to = m->targets[t].id;
			{
				const struct cm_target *ft = cm_find_target(m, from);
				int fi = target_idx(m, from);

				mv->bytes = ft && fi >= 0 && f->target[fi] ? ft->used / f->target[fi] : 0;
			}
			f->node[r[a].idx]--;
			f->node[r[b].idx]++;
			f->target[t]++;
			log_info(COMP, "rebalance: moving chain %u from node %u (%u entries) to node %u "
				 "(%u entries): target %u resyncs, then target %u leaves", chain, F->id,
				 r[a].fill, E->id, r[b].fill, mv->to, from);
			rc = 1;
		}
	}
	free(r);
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
	return changed;
}
