/*
 * libstrata's metadata cache: answers of the meta service about names and
 * inodes (an inode, or "no such entry"), kept for a fixed time so that a
 * repeated stat, lstat, lookupat or statat needs no call. The semantics a
 * user sees are in docs/namespace.md, "Client metadata cache".
 *
 * Entries are keyed by bytes the caller builds (a path, a directory
 * handle and a name, a handle) and a kind that keeps the key spaces
 * apart. The table is set-associative: a key hashes to one set of
 * MCACHE_WAYS entries under the set's own mutex, so threads that look up
 * different keys seldom meet, and a hit copies the inode out under that
 * lock without allocating. A full set gives up an entry drawn at random
 * (not the oldest: see victim() in meta_cache.c).
 *
 * Correctness across this client's own changes comes from an epoch: every
 * change made through the handle bumps it (mcache_drop_all, after its
 * call), and an entry counts only while it carries the epoch that was
 * current when the call that produced it was sent (mcache_epoch, read
 * before the call). So an answer that raced a change is never served
 * after the change returns, and no entry needs to be found to be dropped.
 * Other clients' changes are seen when an entry expires: there is no
 * revocation.
 *
 * All functions may be called from any thread at once.
 */
#ifndef STRATA_CLIENT_META_CACHE_H
#define STRATA_CLIENT_META_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/meta.h"

#define MCACHE_WAYS 4
/* Bounds of the timeout (ms) and of the entry count. */
#define MCACHE_TTL_MAX_MS 600000u
#define MCACHE_ENTRIES_MIN 64u
#define MCACHE_ENTRIES_MAX (1u << 24)
#define MCACHE_ENTRIES_DEFAULT 65536u

/* What a key names; the same bytes under two kinds are two keys. */
enum mcache_kind {
	MCACHE_PATH = 1,	/* a path, its final symlink followed (stat) */
	MCACHE_LPATH,		/* a path, not followed (lstat) */
	MCACHE_NAME,		/* a directory's (ino, gen), then a name (lookupat) */
	MCACHE_HANDLE,		/* an object's (ino, gen) (statat) */
};

struct mcache;

/* What a cache counted since it was made. */
struct mcache_stats {
	uint64_t hits, neg_hits, misses, inserts, evictions;
};

/* Makes a cache whose entries live ttl_ms (1..MCACHE_TTL_MAX_MS), with
 * room for at least entries (MCACHE_ENTRIES_MIN..MCACHE_ENTRIES_MAX;
 * rounded up to a power of two). Returns 0 and *out (free with
 * mcache_free), -EINVAL for a value out of range, or -ENOMEM. */
int mcache_new(uint32_t ttl_ms, uint32_t entries, struct mcache **out);
/* Frees c and every key it holds; c may be NULL. No call may be running. */
void mcache_free(struct mcache *c);
uint32_t mcache_ttl_ms(const struct mcache *c);

/* The epoch now: read it before the call whose answer mcache_put gets. */
uint64_t mcache_epoch(struct mcache *c);
/* Drops every entry, by moving the epoch on; call it after each change
 * made through the client, whether the change succeeded or not (a call
 * that failed may still have been applied). */
void mcache_drop_all(struct mcache *c);

/* Looks key[len] of kind up: 0 and *out filled (an inode), -ENOENT (an
 * entry known not to exist), or 1 (not cached, or expired). */
int mcache_get(struct mcache *c, enum mcache_kind kind, const void *key, size_t len,
	       struct mt_inode *out);
/* Keeps the answer rc (0: in; -ENOENT: none; any other is not kept) of
 * a call sent at epoch. Nothing is kept when the epoch has moved since,
 * when key is longer than a path can be, or when memory for it runs out
 * (the cache is an optimization: its errors are not the caller's). */
void mcache_put(struct mcache *c, enum mcache_kind kind, const void *key, size_t len,
		uint64_t epoch, int rc, const struct mt_inode *in);

/* Adds up the counters of every set (each under its lock). */
void mcache_stats(struct mcache *c, struct mcache_stats *st);

#endif
