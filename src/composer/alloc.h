/*
 * Placement of a composition request on an inventory: which GPUs, and
 * whether the storage and memory pools have room. Pure: no I/O, no
 * threads; the composer's owner thread calls it with the inventory it
 * holds and records the result (docs/composer.md, "Allocation").
 */
#ifndef STRATA_COMPOSER_ALLOC_H
#define STRATA_COMPOSER_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compute/gpu_inventory.h"

#define ALLOC_MAX_GPUS 64	/* GPUs in one composition */
#define ALLOC_MAX_ZONES 1024	/* zones a same-zone placement weighs */

/* One GPU of the inventory: its node, its index there, what it is and
 * whether it may be given (free on an UP node, no owner). */
struct alloc_gpu {
	uint32_t node;
	uint32_t index;
	char model[GPU_MODEL_MAX + 1];
	char zone[GPU_ZONE_MAX + 1];	/* its node's (compute.zone) */
	uint32_t state;		/* enum gpu_state, as the node reports it */
	bool node_up;		/* its compute service is UP in the map */
	bool owned;		/* a composition holds it */
};

struct alloc_inventory {
	const struct alloc_gpu *gpus;	/* sorted by (node, index) */
	uint32_t ngpus;
	uint64_t storage_total, storage_used;	/* bytes of volumes */
	uint64_t mem_total, mem_used;		/* bytes of pooled memory */
	uint32_t mem_nodes;			/* UP mem nodes */
};

/* A GPU named by its node and index: the ResourceBlock gpu-NODE-INDEX. */
struct alloc_gpu_id {
	uint32_t node, index;
};

struct alloc_request {
	uint32_t gpus;			/* 0: none */
	char model[GPU_MODEL_MAX + 1];	/* "": any model */
	bool same_node;
	char zone[GPU_ZONE_MAX + 1];	/* "": any zone; else only GPUs of this one */
	bool same_zone;			/* all the GPUs in one zone (any) */
	/* Placement only, never stored: 0, or the node every GPU must be
	 * on (a recompose keeping a same-node composition on its node). */
	uint32_t pin_node;
	/* nids > 0: exactly these GPUs (gpus == nids, no model, zone,
	 * same_node or same_zone), e.g. the ones a scheduler gave the job. */
	uint32_t nids;
	struct alloc_gpu_id ids[ALLOC_MAX_GPUS];
	uint64_t storage;		/* bytes; 0: no volume */
	uint64_t memory;		/* bytes; 0: no memory */
};

struct alloc_result {
	uint32_t n;
	uint32_t pick[ALLOC_MAX_GPUS];	/* indices into inv->gpus */
};

/* Whether g may be given to a request for model ("" any). */
bool alloc_gpu_fits(const struct alloc_gpu *g, const char *model);

/*
 * Places rq on inv: the GPUs rq->ids names (each must be in the
 * inventory and fit, or the refusal names it), else GPUs taken in
 * inventory order, of rq->zone when given (with same_node, on the node
 * with the fewest fitting free GPUs that still has enough, so large
 * requests find whole nodes later; with same_zone, likewise in the zone
 * with the fewest that has enough). Returns 0 and *out, or -ENOSPC with a
 * sentence in why that names every part that does not fit, e.g.
 * "needs 4 H100-80GB, 3 free" or "needs 4 H100-80GB in one zone, at most
 * 3 free in zone a (8 free in all)"; -EINVAL for a request out of bounds.
 */
int alloc_place(const struct alloc_inventory *inv, const struct alloc_request *rq,
		struct alloc_result *out, char *why, size_t whylen);

/* "1.5 GiB", "256 MiB", "12 bytes". */
void alloc_human(uint64_t bytes, char *out, size_t len);

#endif
