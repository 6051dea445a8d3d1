/*
 * Internals of libstrata's checkpoints (include/strata/checkpoint.h),
 * split by concept: checkpoint_save.c writes and commits one,
 * checkpoint_load.c opens and reads one, checkpoint_retention.c lists,
 * prunes and cleans them up. Built only on the public API (and
 * client/fsutil.h, itself built on it), plus CRC32C and jansson.
 */
#ifndef STRATA_CLIENT_CHECKPOINT_INT_H
#define STRATA_CLIENT_CHECKPOINT_INT_H

#include <stdint.h>

#include "strata/checkpoint.h"

#define CK_PATH_MAX 4096
#define CK_DEF_DEPTH 32
#define CK_DEF_IO (4u << 20)
#define CK_DEF_WAIT_MS 600000
#define CK_JSON_MAX (256u << 20)	/* a manifest larger than this is refused */
#define CK_FORMAT "strata-checkpoint"

/* A tensor as the manifest records it. */
struct ck_tensor {
	char *name;
	char *dtype;
	uint32_t rank;
	uint32_t ndim;
	int64_t shape[STRATA_CKPT_MAX_DIMS];
	uint64_t off, len;
	uint32_t crc;
};

/* An opened checkpoint (strata_ckpt_open). */
struct strata_ckpt {
	struct strata *s;
	char *path;
	uint32_t world;
	struct ck_tensor *t;
	size_t n;
	char **meta;			/* per rank: JSON text or NULL */
	char **files;			/* per rank: shard file name */
	struct strata_file **open;	/* per rank, opened on first read */
};

#endif
