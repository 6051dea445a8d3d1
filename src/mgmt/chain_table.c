/*
 * Deterministic, balanced chain table generation. See chain_table.h for the
 * algorithm and the guarantees.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/chain_table.h"

/* Upper bound of R this generator accepts (the cluster map caps R lower). */
#define CT_MAX_R 64

static int cmp_node_target(const void *a, const void *b)
{
	const struct ct_target *x = a, *y = b;

	if (x->node_id != y->node_id)
		return x->node_id < y->node_id ? -1 : 1;
	if (x->target_id != y->target_id)
		return x->target_id < y->target_id ? -1 : 1;
	return 0;
}

/* A run of targets of one node inside the (node, target)-sorted array. */
struct ct_group {
	uint32_t start;
	uint32_t count;
	uint32_t node_id;
};

static int cmp_group(const void *a, const void *b)
{
	const struct ct_group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->node_id != y->node_id)
		return x->node_id < y->node_id ? -1 : 1;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t count_nodes(const struct ct_target *sorted, uint32_t n)
{
	uint32_t nodes = 0;

	for (uint32_t i = 0; i < n; i++)
		if (i == 0 || sorted[i].node_id != sorted[i - 1].node_id)
			nodes++;
	return nodes;
}

uint32_t chain_table_effective_r(const struct ct_target *targets, uint32_t n,
				 uint32_t r_wanted)
{
	struct ct_target *sorted;
	uint32_t nodes;

	if (!n || !r_wanted)
		return 0;
	sorted = malloc(sizeof(*sorted) * n);
	if (!sorted) {
		/* Fall back to a quadratic count rather than fail. */
		nodes = 0;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t j;

			for (j = 0; j < i; j++)
				if (targets[j].node_id == targets[i].node_id)
					break;
			nodes += j == i;
		}
	} else {
		memcpy(sorted, targets, sizeof(*sorted) * n);
		qsort(sorted, n, sizeof(*sorted), cmp_node_target);
		nodes = count_nodes(sorted, n);
		free(sorted);
	}
	return r_wanted < nodes ? r_wanted : nodes;
}

/*
 * Greedy fill used when no perfect table exists (a node holds more than
 * floor(T / R) targets). ring_node[k] is the node of ring slot k; chains
 * are written as ring slots into idx_out. Chain j: head S[j]; then the R - 1
 * members are chosen by fewest memberships, then ring distance after j;
 * then they are spread over positions 1..R-1, repeatedly giving the free
 * position to the chosen member furthest behind its own average there.
 */
/* How far ahead of its own average over positions 1..r-1 slot c is at
 * position p, times r - 1 (integers only). Lower means it needs p more. */
static int64_t pos_excess(const uint32_t *pos, uint32_t r, uint32_t c, uint32_t p)
{
	int64_t sum = 0;

	for (uint32_t q = 1; q < r; q++)
		sum += pos[(size_t)c * r + q];
	return (int64_t)(r - 1) * pos[(size_t)c * r + p] - sum;
}

/*
 * Local search after the greedy fill: swap two non-head members of a chain
 * when that lowers the sum of squared position counts of the two. Each swap
 * strictly lowers the total, so this ends; the pass count bounds the work.
 */
static void polish_positions(uint32_t *idx, uint32_t *pos, uint32_t t, uint32_t r)
{
	for (int pass = 0; pass < 32; pass++) {
		int changed = 0;

		for (uint32_t j = 0; j < t; j++) {
			uint32_t *chain = idx + (size_t)j * r;

			for (uint32_t p1 = 1; p1 < r; p1++)
				for (uint32_t p2 = p1 + 1; p2 < r; p2++) {
					uint32_t *a1 = &pos[(size_t)chain[p1] * r + p1];
					uint32_t *a2 = &pos[(size_t)chain[p1] * r + p2];
					uint32_t *b1 = &pos[(size_t)chain[p2] * r + p1];
					uint32_t *b2 = &pos[(size_t)chain[p2] * r + p2];
					/* Change of a^2 terms: (a1-1)^2 + (a2+1)^2 - a1^2 - a2^2. */
					int64_t d = 2 * ((int64_t)*a2 - *a1 + 1) +
						    2 * ((int64_t)*b1 - *b2 + 1);
					uint32_t tmp;

					if (d >= 0)
						continue;
					(*a1)--;
					(*a2)++;
					(*b2)--;
					(*b1)++;
					tmp = chain[p1];
					chain[p1] = chain[p2];
					chain[p2] = tmp;
					changed = 1;
				}
		}
		if (!changed)
			break;
	}
}

static int greedy_fill(const uint32_t *ring_node, uint32_t t, uint32_t r, uint32_t *idx_out)
{
	uint32_t *total = calloc(t, sizeof(*total));
	uint32_t *pos = calloc((size_t)t * r, sizeof(*pos));
	uint32_t pick[CT_MAX_R];
	int rc = -ENOMEM;

	if (!total || !pos)
		goto out;
	/* Every slot will be head of its own chain: count that up front so
	 * the early chains do not overload the slots whose turn comes late. */
	for (uint32_t j = 0; j < t; j++)
		total[j] = 1;
	for (uint32_t j = 0; j < t; j++) {
		uint32_t *chain = idx_out + (size_t)j * r;
		uint32_t npick = 0;

		chain[0] = j;
		pos[(size_t)j * r]++;
		for (uint32_t p = 1; p < r; p++) {
			uint32_t best = UINT32_MAX;

			/* Scan the ring from j + 1: the first slot wins ties. */
			for (uint32_t k = 1; k < t; k++) {
				uint32_t c = (j + k) % t;
				uint32_t q;

				if (ring_node[c] == ring_node[j])
					continue;
				for (q = 0; q < npick; q++)
					if (ring_node[pick[q]] == ring_node[c])
						break;
				if (q < npick)
					continue;
				if (best == UINT32_MAX || total[c] < total[best])
					best = c;
			}
			/* r <= distinct nodes, so a candidate always exists. */
			pick[npick++] = best;
			total[best]++;
		}
		/* Assign positions 1..r-1: repeatedly the (member, position)
		 * pair where the member is furthest behind at the position. */
		for (uint32_t p = 1; p < r; p++)
			chain[p] = UINT32_MAX;
		for (uint32_t round = 1; round < r; round++) {
			uint32_t bq = 0, bp = 0;
			int64_t be = INT64_MAX;

			for (uint32_t q = 0; q < npick; q++) {
				if (pick[q] == UINT32_MAX)
					continue;
				for (uint32_t p = 1; p < r; p++) {
					int64_t e;

					if (chain[p] != UINT32_MAX)
						continue;
					e = pos_excess(pos, r, pick[q], p);
					if (e < be) {
						be = e;
						bq = q;
						bp = p;
					}
				}
			}
			chain[bp] = pick[bq];
			pos[(size_t)pick[bq] * r + bp]++;
			pick[bq] = UINT32_MAX;
		}
	}
	polish_positions(idx_out, pos, t, r);
	rc = 0;
out:
	free(total);
	free(pos);
	return rc;
}

int chain_table_build(const struct ct_target *targets, uint32_t n, uint32_t r_wanted,
		      uint32_t *r_out, uint32_t **out)
{
	struct ct_target *sorted = NULL;
	struct ct_group *groups = NULL;
	struct ct_target *ring = NULL;
	uint32_t *ring_node = NULL, *idx = NULL, *res = NULL;
	uint32_t ngroups, r, f, i, li;
	int perfect, rc = -EINVAL;

	*out = NULL;
	*r_out = 0;
	if (!targets || !n || !r_wanted || r_wanted > CT_MAX_R)
		return -EINVAL;
	rc = -ENOMEM;
	sorted = malloc(sizeof(*sorted) * n);
	groups = malloc(sizeof(*groups) * n);
	ring = malloc(sizeof(*ring) * n);
	ring_node = malloc(sizeof(*ring_node) * n);
	if (!sorted || !groups || !ring || !ring_node)
		goto out;
	memcpy(sorted, targets, sizeof(*sorted) * n);
	qsort(sorted, n, sizeof(*sorted), cmp_node_target);

	ngroups = 0;
	for (i = 0; i < n; i++) {
		if (i == 0 || sorted[i].node_id != sorted[i - 1].node_id) {
			groups[ngroups].start = i;
			groups[ngroups].count = 0;
			groups[ngroups].node_id = sorted[i].node_id;
			ngroups++;
		}
		groups[ngroups - 1].count++;
	}
	/* Target ids must be distinct (also across nodes). */
	for (i = 0; i < n; i++)
		ring_node[i] = sorted[i].target_id;
	qsort(ring_node, n, sizeof(*ring_node), cmp_u32);
	for (i = 1; i < n; i++)
		if (ring_node[i] == ring_node[i - 1]) {
			rc = -EINVAL;
			goto out;
		}
	qsort(groups, ngroups, sizeof(*groups), cmp_group);
	r = r_wanted < ngroups ? r_wanted : ngroups;
	f = n / r;
	perfect = groups[0].count <= f;

	/* L is the groups concatenated; deal L[li] into frame li % f. */
	li = 0;
	{
		uint32_t *frame_fill = calloc(f, sizeof(*frame_fill));
		uint32_t *frame_start = calloc(f, sizeof(*frame_start));

		if (!frame_fill || !frame_start) {
			free(frame_fill);
			free(frame_start);
			goto out;
		}
		for (i = 1; i < f; i++)
			frame_start[i] = frame_start[i - 1] + (n - (i - 1) + f - 1) / f;
		for (uint32_t g = 0; g < ngroups; g++)
			for (uint32_t k = 0; k < groups[g].count; k++, li++) {
				uint32_t fr = li % f;

				ring[frame_start[fr] + frame_fill[fr]++] = sorted[groups[g].start + k];
			}
		free(frame_fill);
		free(frame_start);
	}
	for (i = 0; i < n; i++)
		ring_node[i] = ring[i].node_id;

	idx = malloc(sizeof(*idx) * (size_t)n * r);
	res = malloc(sizeof(*res) * (size_t)n * r);
	if (!idx || !res)
		goto out;
	if (perfect) {
		for (uint32_t j = 0; j < n; j++)
			for (uint32_t p = 0; p < r; p++)
				idx[(size_t)j * r + p] = (j + p) % n;
	} else {
		rc = greedy_fill(ring_node, n, r, idx);
		if (rc)
			goto out;
	}
	for (size_t k = 0; k < (size_t)n * r; k++)
		res[k] = ring[idx[k]].target_id;
	*out = res;
	*r_out = r;
	res = NULL;
	rc = 0;
out:
	free(sorted);
	free(groups);
	free(ring);
	free(ring_node);
	free(idx);
	free(res);
	return rc;
}
