/*
 * Packed datasets in libstrata: many small samples stored as a few large
 * shard files, so a reader issues one open per shard instead of one per
 * sample. This is the only implementation of the format: `strata pack`
 * and python/strata/dataset.py (through ctypes) both call it.
 *
 * A packed dataset DIR (docs/python.md, "Packed datasets"):
 *
 *   DIR/shard-NNNNN.data   samples appended back to back
 *   DIR/shard-NNNNN.idx    "STRPIDX1", u64 count, count x (u64 offset,
 *                          u64 length), little-endian
 *   DIR/dataset.json       {"format": "strata-packed", "version": 1,
 *                           "samples": N, "shards": [{"data": NAME,
 *                           "index": NAME, "samples": n, "bytes": b}, ...]}
 *                          written last: the dataset is complete when it
 *                          exists.
 *
 * Every function returns 0 (or a count) or a negative error code, as in
 * strata.h; the library never aborts.
 */
#ifndef STRATA_DATASET_H
#define STRATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "strata/strata.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_PACK_FORMAT "strata-packed"
#define STRATA_PACK_VERSION 1

/* ---- writing ---- */

struct strata_pack;

struct strata_pack_opts {
	size_t opts_size;		/* sizeof(struct strata_pack_opts) */
	uint64_t samples_per_shard;	/* a shard closes at this many samples (1024) */
	uint64_t shard_bytes;		/* or once it holds this many bytes (1 GiB) */
};

/* Sets the defaults above; size is sizeof(*opts) as the caller knows it. */
void strata_pack_opts_init(struct strata_pack_opts *opts, size_t size);

/*
 * Starts writing a packed dataset into directory dir (created; one that
 * exists already is fine, and its old shards are overwritten as new ones
 * are written). opts may be NULL (the defaults). On success *out is a
 * writer owned by the caller until strata_pack_close or
 * strata_pack_abort; s must outlive it.
 */
int strata_pack_new(struct strata *s, const char *dir, const struct strata_pack_opts *opts,
		    struct strata_pack **out);

/*
 * Appends len bytes to the sample being written (opening a new shard on
 * the first bytes of a sample when none is open). A sample may be appended
 * in any number of pieces; strata_pack_end_sample ends it. buf is not kept.
 */
int strata_pack_append(struct strata_pack *p, const void *buf, size_t len);

/* Ends the current sample (possibly empty) and records it in its shard's
 * index; *index (may be NULL) gets its number in the dataset. Closes the
 * shard when it is full. */
int strata_pack_end_sample(struct strata_pack *p, uint64_t *index);

/* strata_pack_append then strata_pack_end_sample: one whole sample. */
int strata_pack_add(struct strata_pack *p, const void *buf, size_t len, uint64_t *index);

/*
 * Closes the last shard, writes dataset.json (which makes the dataset
 * complete) and frees p, also on error. *samples and *shards (each may be
 * NULL) get the dataset's totals. After an earlier error of p, nothing is
 * written and that error is returned.
 */
int strata_pack_close(struct strata_pack *p, uint64_t *samples, uint32_t *shards);

/* Stops writing and frees p: the open shard is closed without its index
 * and no dataset.json is written, so readers never see the dataset. NULL
 * is a no-op. */
void strata_pack_abort(struct strata_pack *p);

/* ---- reading ---- */

struct strata_pack_index;

/*
 * Reads dir/dataset.json and every shard's index, checking each against
 * the format (a malformed one fails with STRATA_EBADMSG; a missing file
 * with -ENOENT). On success *out (the caller frees it with
 * strata_pack_index_free) knows where every sample is; s is not kept.
 */
int strata_pack_index_open(struct strata *s, const char *dir, struct strata_pack_index **out);
void strata_pack_index_free(struct strata_pack_index *x);

/* The number of samples and of shards. */
uint64_t strata_pack_index_count(const struct strata_pack_index *x);
uint32_t strata_pack_index_shards(const struct strata_pack_index *x);

/* The path of shard k's data file (valid until strata_pack_index_free), or
 * NULL when k is out of range. */
const char *strata_pack_index_shard_path(const struct strata_pack_index *x, uint32_t k);

/* Where sample i is: its shard, offset and length in that shard's data
 * file (each out pointer may be NULL). Returns 0 or -EINVAL (i out of
 * range). */
int strata_pack_index_sample(const struct strata_pack_index *x, uint64_t i, uint32_t *shard,
			     uint64_t *off, uint64_t *len);

/* Copies every sample's shard, offset and length into arrays of
 * strata_pack_index_count() entries (each may be NULL): the whole index in
 * one call, for bindings that keep it in their own arrays. */
void strata_pack_index_export(const struct strata_pack_index *x, int32_t *shard,
			      int64_t *off, int64_t *len);

/*
 * Warms s's read cache (strata/cache.h) for a reader at shard k: queues
 * the data files of shards k+1 .. k+ahead for the background prefetch
 * thread, which skips blocks already cached. Call it when starting to
 * read shard k. Returns 0, -ENOENT when s has no cache, -EINVAL (k out of
 * range), or -EAGAIN (the prefetch queue is full; later shards are not
 * queued).
 */
int strata_pack_prefetch(struct strata *s, const struct strata_pack_index *x, uint32_t k,
			 uint32_t ahead);

#ifdef __cplusplus
}
#endif
#endif
