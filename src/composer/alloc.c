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
		for (uint32_t k = 0; k < inv->ngpus; k++)
			nfree += inv->gpus[k].node == node && alloc_gpu_fits(&inv->gpus[k], rq->model);
		if (nfree > *most)
			*most = nfree;
		if (nfree >= rq->gpus && nfree < best_free) {
			best = node;
			best_free = nfree;
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
	uint32_t nfree = 0, node = 0, most = 0;
	char part[256];

	for (uint32_t i = 0; i < inv->ngpus; i++)
		nfree += alloc_gpu_fits(&inv->gpus[i], rq->model);
	if (nfree < rq->gpus) {
		snprintf(part, sizeof(part), "needs %u %s, %u free", rq->gpus, what, nfree);
		append(why, whylen, part);
		return;
	}
	if (rq->same_node) {
		node = best_node(inv, rq, &most);
		if (!node) {
			snprintf(part, sizeof(part), "needs %u %s on one node, at most %u free on a node (%u free in all)",
				 rq->gpus, what, most, nfree);
			append(why, whylen, part);
			return;
		}
	}
	for (uint32_t i = 0; i < inv->ngpus && out->n < rq->gpus; i++)
		if (alloc_gpu_fits(&inv->gpus[i], rq->model) && (!node || inv->gpus[i].node == node))
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
			 rq->same_node)) {
		snprintf(why, whylen, "named GPUs take no count, model or same-node of their own");
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
