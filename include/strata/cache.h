/*
 * libstrata's compute-node read cache (docs/cache.md).
 *
 * Off unless configured: strata_opts.cache_mem_bytes (or
 * $STRATA_CACHE_MEM) sizes a DRAM tier per connection, and
 * strata_opts.cache_dir (or $STRATA_CACHE_DIR) names a directory on
 * local disk (NVMe) that every process of the node pointing at it shares,
 * bounded by cache_disk_bytes ($STRATA_CACHE_DISK). Only files opened
 * read-only are cached; a block is keyed by the file's inode, a version
 * learned at open (generation, ctime, mtime, size) and its place in the
 * file, so a file changed and published by any client is read afresh
 * after it is opened again (close-to-open).
 *
 * Every function returns 0 or a negative error code, as in strata.h.
 */
#ifndef STRATA_CACHE_H
#define STRATA_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/strata.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counters of a cache. A block lookup is a hit (DRAM or disk tier) or a
 * miss (read from the storage plane and then kept). */
struct strata_cache_stats {
	size_t stats_size;	/* sizeof(struct strata_cache_stats) as the caller knows it */
	uint64_t hits;		/* lookups served from the cache (either tier) */
	uint64_t misses;	/* lookups that went to the storage plane */
	uint64_t hit_bytes;	/* bytes copied out of the cache */
	uint64_t fill_bytes;	/* bytes read from storage into the cache */
	uint64_t disk_hits;	/* of hits: found in the disk tier, not in DRAM */
	uint64_t evictions;	/* DRAM blocks dropped for room */
	uint64_t disk_evictions;	/* disk-tier files removed for room */
	uint64_t disk_corrupt;	/* disk-tier files that failed their checks (dropped) */
	uint64_t prefetched;	/* blocks read by strata_cache_prefetch */
	uint64_t mem_bytes, mem_limit;	/* the DRAM tier now (per process) */
	uint64_t disk_bytes, disk_limit;	/* the disk tier now */
};

/*
 * Fills *st (st->stats_size set by the caller) with the counters of s's
 * cache: this process's, or, with a cache directory, the node's (every
 * process sharing the directory adds to them). -ENOENT when s has no
 * cache.
 */
int strata_cache_stats(struct strata *s, struct strata_cache_stats *st);

/*
 * The node's counters of the cache directory dir, with no connection (for
 * `strata cache stats`): the shared counters and the files there now.
 * -ENOENT when dir holds no cache, STRATA_EBADMSG when its stats file is
 * not one.
 */
int strata_cache_dir_stats(const char *dir, struct strata_cache_stats *st);

/*
 * Queues path to be read into s's cache in the background (one thread per
 * connection, started on first use): blocks already cached are skipped.
 * Returns 0 once queued (errors of the read itself are only counted),
 * -ENOENT when s has no cache, -EAGAIN when the queue is full, -EINVAL.
 */
int strata_cache_prefetch(struct strata *s, const char *path);

#ifdef __cplusplus
}
#endif
#endif
