/*
 * The block cache of a compute node (docs/cache.md): fixed-size blocks of
 * files, kept in DRAM under a segmented LRU (SLRU: a probation segment
 * that new blocks enter and a protected one for blocks hit again, 80% of
 * the space) and, optionally, as checksummed files in a directory on
 * local disk that the processes of a node share.
 *
 * Thread-safe: any thread may call any function but cache_free. The DRAM
 * tier is split into shards, each with its own lock. The disk tier is
 * best effort: a file that cannot be written is skipped, one that fails
 * its checks (magic, key, length, CRC32C of header and data) is removed
 * and read as a miss, never as data.
 *
 * No knowledge of files or storage: libstrata's glue (cache_client.c)
 * makes the keys.
 */
#ifndef STRATA_CLIENT_CACHE_H
#define STRATA_CLIENT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/cache.h"

#define CACHE_BLOCK_MIN (4u << 10)
#define CACHE_BLOCK_MAX (16u << 20)
/* The DRAM tier is this many shards, each 1/CACHE_SHARDS_MIN_BLOCKS of
 * mem_bytes: it must hold at least that many blocks to keep any. */
#define CACHE_SHARDS_MIN_BLOCKS 16u

struct cache_opts {
	size_t opts_size;
	uint64_t mem_bytes;	/* DRAM tier; 0: none */
	const char *dir;	/* disk tier (created, mode 0700); NULL: none; copied */
	uint64_t disk_bytes;	/* disk tier bound; default 4 GiB */
	uint32_t block;		/* block size: power of two, 4 KiB..16 MiB; default 1 MiB */
};

void cache_opts_init(struct cache_opts *o, size_t size);

/* A block: bsize bytes at blk * bsize of chunk idx of file ino at
 * version ver (any value that changes whenever the file's content may
 * have). */
struct cache_key {
	uint64_t ino, ver, idx;
	uint32_t blk, bsize;
};

struct cache;

/* Makes a cache. Returns 0 and *out (free with cache_free), -EINVAL (a
 * bad block size, neither tier), or the error of creating the
 * directory's files. */
int cache_new(const struct cache_opts *o, struct cache **out);
/* Frees c and every DRAM block; the disk tier stays. c may be NULL. */
void cache_free(struct cache *c);
/* The configured block size. */
uint32_t cache_block(const struct cache *c);

/*
 * Copies len bytes at off of block k into buf when the block is cached
 * (DRAM, else the disk tier, which then fills DRAM too). Counts a hit or
 * a miss. off + len must lie within k->bsize. No allocation on a DRAM
 * hit.
 */
bool cache_get(struct cache *c, const struct cache_key *k, uint32_t off, uint32_t len, void *buf);
/* Whether block k is in DRAM or on disk (counts nothing). */
bool cache_has(struct cache *c, const struct cache_key *k);

/* A buffer for one block of k->bsize bytes to fill and hand to
 * cache_put, or to drop with cache_buf_free. NULL on ENOMEM. */
void *cache_buf_new(const struct cache_key *k);
void cache_buf_free(void *data);
/* Keeps block k, k->bsize bytes at data: c takes data (a cache_buf_new
 * buffer) whatever happens. Writes the disk tier's file too. */
void cache_put(struct cache *c, const struct cache_key *k, void *data);

/* Counts n blocks read by a prefetch. */
void cache_note_prefetch(struct cache *c, uint64_t n);
/* Fills *st (st->stats_size as the caller knows it). */
void cache_stats(struct cache *c, struct strata_cache_stats *st);
/* The counters of the cache directory dir (no cache object needed). */
int cache_dir_stats(const char *dir, struct strata_cache_stats *st);

#endif
