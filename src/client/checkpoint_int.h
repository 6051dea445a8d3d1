/*
 * Internals of libstrata's checkpoints (include/strata/checkpoint.h),
 * split by concept: checkpoint_save.c writes and commits one,
 * checkpoint_load.c opens and reads one, checkpoint_retention.c lists,
 * prunes and cleans them up, checkpoint_write.c writes a shard's data
 * and reads tensors back with several threads. Built only on the public API (and
 * client/fsutil.h, itself built on it), plus CRC32C and jansson.
 */
#ifndef STRATA_CLIENT_CHECKPOINT_INT_H
#define STRATA_CLIENT_CHECKPOINT_INT_H

#include <stdint.h>

#include "strata/checkpoint.h"

#define CK_PATH_MAX 4096
/* Reads in flight over all of a restore's readers: more than a save's
 * writes, as a read costs the daemons less; on 2 shared cores 4 readers
 * with 64 reads in flight restored faster than 1 or 2 with 32 (docs/python.md,
 * "How a restore reads"). */
#define CK_DEF_DEPTH 64
/* A restore's largest read: 1 MiB, the piece the client sends to one
 * replica anyway, so each piece is checksummed while it is still in the
 * CPU's cache (docs/python.md, "How a restore reads"). */
#define CK_DEF_READ_IO (1u << 20)
#define CK_DEF_READERS 4
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
/* An async save's snapshot (strata_ckpt_snapshot): threads, and the piece
 * each takes at a time. */
#define CK_DEF_COPIERS 4
#define CK_MAX_COPIERS 64
#define CK_COPY_PIECE (4u << 20)

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
	uint64_t *chunk;		/* per rank: its file's chunk size, 0 unknown */
};

/* How ck_write_data and ck_read_data run; zeros take the defaults. */
struct ck_write_opts {
	const char *path;	/* the shard's path (for its layout), or NULL */
	uint32_t writers;	/* threads; 0: CK_DEF_WRITERS */
	uint32_t depth;		/* I/Os in flight in all; 0: CK_DEF_SAVE_DEPTH
				 * (writes), CK_DEF_DEPTH (reads) */
	uint32_t io_size;	/* largest I/O; 0: CK_DEF_IO (writes),
				 * CK_DEF_READ_IO (reads) */
	const uint64_t *ready;	/* strata_ckpt_save_opts.ready, or NULL */
	uint32_t wait_ms;	/* how long to wait for *ready */
};

struct ck_write_result {
	uint32_t writers;	/* threads that ran */
	uint32_t pieces;	/* I/Os issued */
};

/* Writes n tensors' bytes into f, tensor i at offs[i] (in increasing
 * order), with o->writers threads (the caller's among them), and sets
 * crcs[i] to tensor i's CRC32C. Every write is reaped before it returns.
 * Returns 0 or the first error (crcs then undefined). */
int ck_write_data(struct strata *s, struct strata_file *f, const struct strata_ckpt_tensor *t,
		  size_t n, const uint64_t *offs, uint32_t *crcs, const struct ck_write_opts *o,
		  struct ck_write_result *res);

/* One tensor to read: len bytes of f at off into buf (the caller's,
 * borrowed for the call); chunk: f's chunk size (0: unknown). */
struct ck_read {
	struct strata_file *f;
	uint8_t *buf;
	uint64_t off, len;
	uint64_t chunk;
};

/* Reads n tensors with o->writers threads (the caller's among them), each
 * cut at chunk boundaries and at o->io_size, straight into rd[i].buf, and
 * sets crcs[i] to the CRC32C of what landed there (each piece checksummed
 * as it lands). Every read is reaped before it returns. Returns 0 or the
 * first error (-ENODATA: a file is shorter than its manifest says; crcs
 * then undefined). o->path, ready and wait_ms are not used. */
int ck_read_data(struct strata *s, const struct ck_read *rd, size_t n, uint32_t *crcs,
		 const struct ck_write_opts *o, struct ck_write_result *res);

#endif
