/*
 * Checkpoints in libstrata: the format shared with python/strata/checkpoint.py
 * (docs/python.md, "Checkpoint format"), for trainers in any language.
 *
 * A checkpoint PATH is a directory that exists under its name only when it
 * is complete:
 *
 *   PATH.tmp-TAG/            written first (TAG: one per save attempt)
 *     shard-RRRRR.bin        rank R's tensors: raw bytes, each starting at a
 *                            multiple of STRATA_CKPT_ALIGN (gaps are holes)
 *     shard-RRRRR.json       rank R's part of the manifest
 *     manifest.json          written last, by rank 0, once every rank's part
 *                            is there; then the directory is renamed to PATH
 *
 * manifest.json: {"format": "strata-checkpoint", "version": 1,
 *   "created_ns": N, "world_size": W,
 *   "shards": [{"rank": R, "file": "shard-RRRRR.bin", "size": BYTES,
 *               "meta": ANY-JSON-OR-NULL}, ...],
 *   "tensors": [{"name": S, "rank": R, "dtype": "float32", "shape": [..],
 *                "offset": O, "length": L, "crc32c": C}, ...]}
 *
 * dtype is a free-form name ("float32", "bfloat16", "int64", "uint8", ...);
 * the library stores and returns it and never interprets it. crc32c is the
 * CRC32C of the tensor's bytes, checked on every load.
 *
 * Every function returns 0 (or a count) or a negative error code, as in
 * strata.h; the library never aborts.
 */
#ifndef STRATA_CHECKPOINT_H
#define STRATA_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "strata/strata.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_CKPT_ALIGN 4096
#define STRATA_CKPT_MAX_DIMS 16

struct strata_ckpt;
struct strata_ckpt_save_stats;

/* One tensor to save: name (unique within a rank), dtype name, ndim and
 * shape, and len bytes at data. Everything is borrowed for the call. */
struct strata_ckpt_tensor {
	const char *name;
	const char *dtype;
	uint32_t ndim;
	const int64_t *shape;
	const void *data;
	uint64_t len;
};

struct strata_ckpt_save_opts {
	size_t opts_size;	/* sizeof(struct strata_ckpt_save_opts) */
	uint32_t rank;		/* this process's rank; default 0 */
	uint32_t world_size;	/* ranks writing this checkpoint; default 1 */
	/* Names this save attempt; every rank of one save passes the same
	 * tag. NULL: "p<pid>-<time>" (only valid when world_size is 1). */
	const char *tag;
	const char *meta_json;	/* JSON stored as this shard's "meta", or NULL */
	uint32_t depth;		/* writes in flight, over all writers; default 8 */
	uint32_t io_size;	/* bytes per write; default 4 MiB */
	uint32_t wait_ms;	/* rank 0: how long to wait for the other ranks'
				 * parts; default 600000 */
	uint32_t keep_last;	/* rank 0: after the commit keep only this many
				 * checkpoints in PATH's parent; 0 keeps all */
	int replace;		/* 1: an existing PATH is replaced; 0: -EEXIST */
	/* Writer threads of this rank's shard, each with its own ring
	 * (depth / writers writes in flight each); the shard is cut into
	 * pieces at chunk boundaries so each write lands on one chain, and
	 * each writer checksums the pieces it writes. Default 4; 1 writes
	 * from the calling thread only. Fewer run when a thread cannot be
	 * started. */
	uint32_t writers;
	/* Filled in when not NULL (set its stats_size first), whatever the
	 * result; owned by the caller. */
	struct strata_ckpt_save_stats *stats;
	/* NULL: every tensor's data is in place at the call. Else a counter
	 * that another thread raises as it fills the tensors in order (a
	 * snapshot copying them while the save already writes): tensor i is
	 * read only once *ready > i. Setting it to UINT64_MAX abandons the
	 * save (-ECANCELED, nothing committed). It must reach n within
	 * wait_ms (else -ETIMEDOUT); read with acquire semantics, so the
	 * filling thread stores it with release semantics (a plain aligned
	 * store on x86). Borrowed for the call. */
	const uint64_t *ready;
};

/* Where a save's time went (seconds, on this rank). */
struct strata_ckpt_save_stats {
	size_t stats_size;	/* sizeof(struct strata_ckpt_save_stats) */
	double write_s;		/* shard data: checksums and writes, all writers */
	double sync_s;		/* strata_fsync of the shard (length published) */
	double part_s;		/* this rank's part of the manifest */
	double wait_s;		/* rank 0: waiting for the other ranks' parts */
	double manifest_s;	/* rank 0: manifest.json written */
	double commit_s;	/* rank 0: the rename into place */
	double prune_s;		/* rank 0: keep_last's removals */
	uint64_t bytes;		/* shard bytes written */
	uint32_t writers;	/* writer threads that ran */
	uint32_t pieces;	/* writes issued */
};

/* Sets opts to the defaults; size = sizeof(*opts). */
void strata_ckpt_save_opts_init(struct strata_ckpt_save_opts *opts, size_t size);

/* Writes this rank's n tensors of checkpoint path (opts->writers threads,
 * opts->depth writes in flight), then its part of the manifest. Rank 0 then waits for
 * every rank's part, writes manifest.json and renames PATH.tmp-TAG to path
 * (atomically: a reader sees the old checkpoint or the new one). Other
 * ranks return once their shard is durable. opts may be NULL. Returns 0,
 * -EEXIST (path exists and !replace), -ETIMEDOUT (rank 0: a rank's part
 * never came), -EINVAL, or an I/O error; on error the previous checkpoint
 * under path is untouched and PATH.tmp-TAG may remain. */
int strata_ckpt_save(struct strata *s, const char *path, const struct strata_ckpt_tensor *t,
		     size_t n, const struct strata_ckpt_save_opts *opts);

/* Opens the committed checkpoint at path (reads and checks its manifest).
 * Returns 0 and *out (free with strata_ckpt_close), -ENOENT, or
 * -STRATA_EBADMSG-style errors for a malformed manifest. */
int strata_ckpt_open(struct strata *s, const char *path, struct strata_ckpt **out);
void strata_ckpt_close(struct strata_ckpt *c);

/* Number of tensors, of ranks (world_size). */
size_t strata_ckpt_count(const struct strata_ckpt *c);
uint32_t strata_ckpt_world_size(const struct strata_ckpt *c);

/* Describes tensor i: its strings point into c (valid until close). */
struct strata_ckpt_info {
	const char *name;
	const char *dtype;
	uint32_t rank;
	uint32_t ndim;
	int64_t shape[STRATA_CKPT_MAX_DIMS];
	uint64_t len;
	uint32_t crc32c;
};
int strata_ckpt_info(const struct strata_ckpt *c, size_t i, struct strata_ckpt_info *out);
/* Index of the tensor named name of rank (or of any rank when rank < 0),
 * or -ENOENT. */
ssize_t strata_ckpt_find(const struct strata_ckpt *c, const char *name, int rank);
/* The "meta" JSON of rank's shard as text (owned by c), or NULL. */
const char *strata_ckpt_meta(const struct strata_ckpt *c, uint32_t rank);

/* One tensor to load: index (from strata_ckpt_find), destination buffer of
 * len bytes (the tensor's length exactly). */
struct strata_ckpt_dst {
	size_t index;
	void *data;
	uint64_t len;
};
/* Reads n tensors straight into their buffers (the caller's, written
 * only by this call; none may overlap another), up to depth I/Os in
 * flight over all readers (0: 64). Several reader threads (the calling
 * thread among them, each with its own ring) take the tensors' pieces in
 * file order, cut at chunk boundaries and at 1 MiB; each piece is
 * checksummed as it lands and a tensor's CRC32C, combined from its
 * pieces', is checked against the manifest. Returns 0, -EINVAL (a length
 * differs), -ENODATA (a shard is shorter than the manifest says),
 * STRATA_EINTEGRITY (checksum mismatch) or an I/O error; on error the
 * buffers' contents are undefined. */
int strata_ckpt_read(struct strata_ckpt *c, const struct strata_ckpt_dst *d, size_t n,
		     uint32_t depth);

/* Keeps the keep_last newest committed checkpoints (by manifest
 * created_ns) among dir's entries and removes the others (never a
 * PATH.tmp-* in progress). Returns the number removed. */
int strata_ckpt_prune(struct strata *s, const char *dir, uint32_t keep_last);
/* Removes the partial saves among dir's entries (PATH.tmp-* directories
 * left by a save that died, PATH.old-* left by a commit that died) in
 * which nothing changed for older_than_s seconds: neither the directory
 * (entries created, renamed, removed) nor an entry in it (a file's time
 * moves when its writer fsyncs or closes it, not with every write). A
 * rank writing one large shard, or rank 0 waiting for the others' parts,
 * changes nothing for that long: pass more than the slowest save takes.
 * A commit that died between its two renames leaves no PATH, the old
 * checkpoint in PATH.old-TAG and the new one in PATH.tmp-TAG: those two
 * are left alone (they may be the only copies), as is anything that
 * cannot be checked. Each is renamed out of the way before it is removed,
 * so a commit racing it fails instead of committing a partial directory.
 * Returns the number removed, or a negative error. */
int strata_ckpt_clean_partial(struct strata *s, const char *dir, uint32_t older_than_s);
/* Copies the path of dir's newest committed checkpoint into buf. Returns
 * its length, -ENOENT when there is none, -ENAMETOOLONG. */
ssize_t strata_ckpt_latest(struct strata *s, const char *dir, char *buf, size_t len);

/* One copy of an async save's snapshot: len bytes from src to dst (the
 * caller's buffers; they must not overlap). */
struct strata_ckpt_copy {
	void *dst;
	const void *src;
	size_t len;
};
/* Takes an async save's snapshot: does the n copies, cut into 4 MiB
 * pieces shared by threads threads (0: 4, or the online CPUs if fewer;
 * the calling thread is one of them; fewer run when a thread cannot be
 * started). A large piece is
 * copied with streaming stores, which bypass the cache (only the save's
 * writers read the snapshot back, later) and move a third less memory
 * than memcpy. Every copy is done when it returns. Returns 0, -EINVAL
 * (a NULL buffer with a length) or -ENOMEM. */
int strata_ckpt_snapshot(const struct strata_ckpt_copy *c, size_t n, uint32_t threads);

/* CRC32C of len bytes at buf, continuing crc (0 to start). */
uint32_t strata_crc32c(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
