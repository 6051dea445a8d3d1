/*
 * Internals of libstrata's checkpoints (include/strata/checkpoint.h),
 * split by concept: checkpoint_save.c writes and commits one,
 * checkpoint_load.c opens and reads one, checkpoint_retention.c lists,
 * prunes and cleans them up, checkpoint_write.c writes a shard's data
 * with several threads. Built only on the public API (and
 * client/fsutil.h, itself built on it), plus CRC32C and jansson.
 */
#ifndef STRATA_CLIENT_CHECKPOINT_INT_H
#define STRATA_CLIENT_CHECKPOINT_INT_H

#include <stdint.h>

#include "strata/checkpoint.h"

#define CK_PATH_MAX 4096
#define CK_DEF_DEPTH 32		/* reads in flight */
/* Writes in flight in a save, over all its writers: more only queues
 * 4 MiB pieces in the storage daemons (docs/python.md, "Where a save's
 * time goes"). */
#define CK_DEF_SAVE_DEPTH 8
#define CK_DEF_IO (4u << 20)
#define CK_DEF_WAIT_MS 600000
#define CK_JSON_MAX (256u << 20)	/* a manifest larger than this is refused */
#define CK_FORMAT "strata-checkpoint"
#define CK_DEF_WRITERS 4
#define CK_MAX_WRITERS 64

struct strata_file;

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

struct ck_write_opts {
	const char *path;	/* the shard's path (for its layout), or NULL */
	uint32_t writers;	/* 0: CK_DEF_WRITERS */
	uint32_t depth;		/* writes in flight in all; 0: CK_DEF_SAVE_DEPTH */
	uint32_t io_size;	/* largest write; 0: CK_DEF_IO */
	const uint64_t *ready;	/* strata_ckpt_save_opts.ready, or NULL */
	uint32_t wait_ms;	/* how long to wait for *ready */
};

struct ck_write_result {
	uint32_t writers;	/* writer threads that ran */
	uint32_t pieces;	/* writes issued */
};

/* Writes n tensors' bytes into f, tensor i at offs[i] (in increasing
 * order), with o->writers threads (the caller's among them), and sets
 * crcs[i] to tensor i's CRC32C. Every write is reaped before it returns.
 * Returns 0 or the first error (crcs then undefined). */
int ck_write_data(struct strata *s, struct strata_file *f, const struct strata_ckpt_tensor *t,
		  size_t n, const uint64_t *offs, uint32_t *crcs, const struct ck_write_opts *o,
		  struct ck_write_result *res);

#endif
