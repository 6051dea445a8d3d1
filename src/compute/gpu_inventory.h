/*
 * The GPUs of a compute node: declared in config (`compute.gpus`), or
 * read from NVML, which is loaded at run time (dlopen of
 * "libnvidia-ml.so.1"), so the daemon builds and runs on machines without
 * a GPU driver. Pure data and two readers; no threads.
 */
#ifndef STRATA_COMPUTE_GPU_INVENTORY_H
#define STRATA_COMPUTE_GPU_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPU_MAX 64		/* GPUs on one node */
#define GPU_MODEL_MAX 63	/* [A-Za-z0-9._-], as a token's tenant */
#define GPU_ZONE_MAX 31		/* a compute node's zone: [A-Za-z0-9._-] */
#define GPU_ZONE_DEFAULT "default"

enum gpu_state {
	GPU_FREE = 0,		/* healthy; the composer may give it to a job */
	GPU_COMPOSED = 1,	/* part of a composition (the composer's view) */
	GPU_FAILED = 2,		/* the node reports it unusable */
};

struct gpu {
	uint32_t index;			/* the device index on its node */
	char model[GPU_MODEL_MAX + 1];	/* "H100-80GB" */
	uint64_t memory;		/* bytes; 0: unknown */
	uint32_t state;			/* enum gpu_state */
};

struct gpu_inventory {
	struct gpu gpus[GPU_MAX];
	uint32_t n;
	const char *source;		/* "config", "nvml" or "none" (static strings) */
};

/* Whether zone is a zone name: 1..GPU_ZONE_MAX of [A-Za-z0-9._-]. */
bool gpu_zone_ok(const char *zone);

/* "free", "composed", "failed" (or "?"). */
const char *gpu_state_name(uint32_t state);

/*
 * Parses a declaration: comma-separated groups COUNTxMODEL, e.g.
 * "4xH100-80GB" or "2xA100-40GB,1xL4-24GB"; a model's memory is read
 * from a trailing "-<N>GB" (0 otherwise). The GPUs are numbered from 0 in
 * the order given, all free. "" declares none. Returns 0, or -EINVAL with
 * a sentence in err naming the part that is wrong.
 */
int gpu_parse_decl(const char *text, struct gpu_inventory *inv, char *err, size_t errlen);

/*
 * Reads the GPUs of this machine through NVML, when the library can be
 * loaded. Returns 0 (inv filled, source "nvml"), -ENOENT when there is no
 * NVML (or it finds no device), or -EIO with a sentence in err.
 */
int gpu_probe_nvml(struct gpu_inventory *inv, char *err, size_t errlen);

/* Makes a device name a model: "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3"
 * (the vendor dropped, spaces to '-', anything else outside the allowed
 * set dropped). */
void gpu_model_from_name(const char *name, char *out, size_t len);

#endif
