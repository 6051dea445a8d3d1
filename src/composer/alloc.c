/* Placement of a composition request (alloc.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "composer/alloc.h"

bool alloc_gpu_fits(const struct alloc_gpu *g, const char *model)
{
	return g->node_up && !g->owned && g->state == GPU_FREE &&
	       (!model[0] || strcmp(g->model, model) == 0);
}

void alloc_human(uint64_t bytes, char *out, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(out, len, "%llu bytes", (unsigned long long)bytes);
		return;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (v == (double)(uint64_t)v)
		snprintf(out, len, "%llu %s", (unsigned long long)v, units[u]);
	else
		snprintf(out, len, "%.1f %s", v, units[u]);
}

static void append(char *why, size_t len, const char *part)
{
	size_t used = strlen(why);

	if (used && used + 2 < len) {
		snprintf(why + used, len - used, "; ");
		used += 2;
	}
	if (used < len)
		snprintf(why + used, len - used, "%s", part);
}

/* Whether g may be given to rq: its model, its zone, its pinned node. */
static bool fits(const struct alloc_gpu *g, const struct alloc_request *rq)
{
	return alloc_gpu_fits(g, rq->model) && (!rq->zone[0] || strcmp(g->zone, rq->zone) == 0) &&
	       (!rq->pin_node || g->node == rq->pin_node);
}

/* Same node: the node with the fewest fitting GPUs that has enough. */
static uint32_t best_node(const struct alloc_inventory *inv, const struct alloc_request *rq,
			  uint32_t *most)
{
	uint32_t best = 0, best_free = UINT32_MAX;

	*most = 0;
	for (uint32_t i = 0; i < inv->ngpus; i++) {
		uint32_t node = inv->gpus[i].node, nfree = 0;

		if (i && inv->gpus[i - 1].node == node)
			continue;	/* counted with the node's first GPU */
		for (uint32_t k = i; k < inv->ngpus && inv->gpus[k].node == node; k++)
			nfree += fits(&inv->gpus[k], rq);
		if (nfree > *most)
			*most = nfree;
		if (nfree >= rq->gpus && nfree < best_free) {
			best = node;
			best_free = nfree;
		}
	}
	return best;
}

/* Same zone: the zone with the fewest fitting GPUs that has enough, or
 * NULL; *most_zone the zone with the most (NULL when none fits). */
static const char *best_zone(const struct alloc_inventory *inv, const struct alloc_request *rq,
			     uint32_t *most, const char **most_zone)
{
	struct zone_free {
		const char *zone;
		uint32_t nfree;
	} z[ALLOC_MAX_ZONES];
	uint32_t nz = 0, best_free = UINT32_MAX;
	const char *best = NULL;

	*most = 0;
	*most_zone = NULL;
	for (uint32_t i = 0; i < inv->ngpus; i++) {
		uint32_t k;

		if (!fits(&inv->gpus[i], rq))
			continue;
		for (k = 0; k < nz && strcmp(z[k].zone, inv->gpus[i].zone); k++)
			;
		if (k == nz) {
			if (nz == ALLOC_MAX_ZONES)
				continue;	/* more zones than nodes: not reached */
			z[nz++] = (struct zone_free){ inv->gpus[i].zone, 0 };
		}
		z[k].nfree++;
	}
	for (uint32_t k = 0; k < nz; k++) {
		if (z[k].nfree > *most) {
			*most = z[k].nfree;
			*most_zone = z[k].zone;
		}
		if (z[k].nfree >= rq->gpus && z[k].nfree < best_free) {
			best = z[k].zone;
			best_free = z[k].nfree;
		}
	}
	return best;
}

/* Named GPUs: each one, or the refusal says which and why. */
static void place_ids(const struct alloc_inventory *inv, const struct alloc_request *rq,
		      struct alloc_result *out, char *why, size_t whylen)
{
	char part[256];

	for (uint32_t k = 0; k < rq->nids; k++) {
		const struct alloc_gpu_id *id = &rq->ids[k];
		const struct alloc_gpu *g = NULL;
		uint32_t i;

		for (i = 0; i < inv->ngpus && !g; i++)
			if (inv->gpus[i].node == id->node && inv->gpus[i].index == id->index)
				g = &inv->gpus[i];
		if (g && alloc_gpu_fits(g, ""))
			out->pick[out->n++] = i - 1;
		else {
			snprintf(part, sizeof(part), "gpu-%u-%u %s", id->node, id->index,
				 !g ? "is not in the inventory" : g->owned ? "is composed already" :
				 !g->node_up ? "is on a node that is down" : "is not free");
			append(why, whylen, part);
		}
	}
}

static void place_gpus(const struct alloc_inventory *inv, const struct alloc_request *rq,
		       struct alloc_result *out, char *why, size_t whylen)
{
	const char *what = rq->model[0] ? rq->model : (rq->gpus == 1 ? "GPU" : "GPUs");
	const char *zone = NULL, *most_zone = NULL;
	uint32_t nfree = 0, node = 0, most = 0;
	char part[256], where[GPU_ZONE_MAX + 32] = "";

	if (rq->pin_node)
		snprintf(where, sizeof(where), " on node %u", rq->pin_node);
	else if (rq->zone[0])
		snprintf(where, sizeof(where), " in zone %s", rq->zone);
	for (uint32_t i = 0; i < inv->ngpus; i++)
		nfree += fits(&inv->gpus[i], rq);
	if (nfree < rq->gpus) {
		snprintf(part, sizeof(part), "needs %u %s%s, %u free%s", rq->gpus, what, where, nfree,
			 where[0] ? " there" : "");
		append(why, whylen, part);
		return;
	}
	if (rq->same_node && !rq->pin_node) {
		node = best_node(inv, rq, &most);
		if (!node) {
			snprintf(part, sizeof(part), "needs %u %s on one node%s, at most %u free on a node (%u free in all)",
				 rq->gpus, what, where, most, nfree);
			append(why, whylen, part);
			return;
		}
	} else if (rq->same_zone && !rq->zone[0] && !rq->pin_node) {
		zone = best_zone(inv, rq, &most, &most_zone);
		if (!zone) {
			snprintf(part, sizeof(part), "needs %u %s in one zone, at most %u free in zone %s (%u free in all)",
				 rq->gpus, what, most, most_zone ? most_zone : "-", nfree);
			append(why, whylen, part);
			return;
		}
	}
	for (uint32_t i = 0; i < inv->ngpus && out->n < rq->gpus; i++)
		if (fits(&inv->gpus[i], rq) && (!node || inv->gpus[i].node == node) &&
		    (!zone || strcmp(inv->gpus[i].zone, zone) == 0))
			out->pick[out->n++] = i;
}

int alloc_place(const struct alloc_inventory *inv, const struct alloc_request *rq,
		struct alloc_result *out, char *why, size_t whylen)
{
	char part[256], need[32], have[32], total[32];

	memset(out, 0, sizeof(*out));
	if (whylen)
		why[0] = 0;
	if (rq->gpus > ALLOC_MAX_GPUS) {
		snprintf(why, whylen, "at most %d GPUs in one composition", ALLOC_MAX_GPUS);
		return -EINVAL;
	}
	if (rq->nids && (rq->nids != rq->gpus || rq->nids > ALLOC_MAX_GPUS || rq->model[0] ||
			 rq->same_node || rq->zone[0] || rq->same_zone || rq->pin_node)) {
		snprintf(why, whylen, "named GPUs take no count, model, zone, same-node or same-zone of their own");
		return -EINVAL;
	}
	if (rq->nids)
		place_ids(inv, rq, out, why, whylen);
	else if (rq->gpus)
		place_gpus(inv, rq, out, why, whylen);
	if (rq->storage) {
		uint64_t avail = inv->storage_total > inv->storage_used ?
				 inv->storage_total - inv->storage_used : 0;

		if (rq->storage > avail) {
			alloc_human(rq->storage, need, sizeof(need));
			alloc_human(avail, have, sizeof(have));
			alloc_human(inv->storage_total, total, sizeof(total));
			snprintf(part, sizeof(part), "needs %s of storage, %s free of %s", need, have,
				 total);
			append(why, whylen, part);
		}
	}
	if (rq->memory) {
		uint64_t avail = inv->mem_total > inv->mem_used ? inv->mem_total - inv->mem_used : 0;

		alloc_human(rq->memory, need, sizeof(need));
		if (!inv->mem_nodes) {
			snprintf(part, sizeof(part), "needs %s of memory, no mem node is up", need);
			append(why, whylen, part);
		} else if (rq->memory > avail) {
			alloc_human(avail, have, sizeof(have));
			alloc_human(inv->mem_total, total, sizeof(total));
			snprintf(part, sizeof(part), "needs %s of memory, %s free of %s on %u mem node(s)",
				 need, have, total, inv->mem_nodes);
			append(why, whylen, part);
		}
	}
	if (whylen && why[0]) {
		out->n = 0;
		return -ENOSPC;
	}
	return 0;
}
