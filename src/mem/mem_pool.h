/*
 * The object store of the mem service: keyed objects in DRAM with a
 * capacity, leases, pins and LRU eviction.
 *
 * Thread-safe: one mutex guards the table and the LRU list; a critical
 * section is a hash lookup and a few pointer moves, and the value bytes are
 * copied or sent outside it, under a lease (a reference). So the reactor
 * that owns a connection serves it directly, without a handoff.
 *
 * Accounting: an object is charged its value rounded up to 4 KiB plus its
 * header. An object is freed when it is neither in the table nor leased; a
 * removed or replaced object still leased stays charged until its last
 * lease ends.
 *
 * Namespaces: a key "NS/..." (NS of 1..MEM_NS_MAX bytes) is charged to
 * namespace NS as well, for as long as it is charged to the pool. A put
 * may name a quota for its namespace: one that would take the namespace
 * past it fails with -EDQUOT, before anything is evicted or replaced (the
 * bytes a replaced object frees count, as for the capacity). A namespace's
 * own objects are not evicted to make room under its quota.
 *
 * Eviction (LRU): when a put would pass the capacity, or after a put the
 * use passes the high watermark, the least recently used objects that are
 * neither pinned nor leased are evicted, down to the low watermark. A put
 * that cannot be made to fit fails with -ENOSPC before anything is evicted,
 * so a failed put loses nothing. With eviction off, a put that does not fit
 * fails with -ENOSPC.
 */
#ifndef STRATA_MEM_POOL_H
#define STRATA_MEM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_KEY_MAX 1024u		/* bytes of a key */
#define MEM_VALUE_MAX (64ull << 20)	/* = FRAME_MAX_BULK */

#define MEM_NS_MAX 63u		/* bytes of a namespace (= TOKEN_NS_MAX) */
#define MEM_NO_QUOTA UINT64_MAX

#define MEM_PUT_PIN 0x1u	/* put pinned: never evicted until unpinned */
#define MEM_PUT_NX 0x2u		/* fail with -EEXIST when the key exists */

struct mem_pool;
struct mem_ns;

/* An object; fields are read-only for users. data and len stay valid while
 * the caller holds a lease. */
struct mem_obj {
	struct mem_obj *hnext;
	struct mem_obj *lprev, *lnext;
	struct mem_pool *pool;
	struct mem_ns *ns;	/* the namespace charged, or NULL */
	void *data;		/* abuf_alloc'd */
	uint64_t len;
	uint64_t charge;
	uint32_t refs;		/* 1 while in the table, +1 per lease */
	uint32_t hash;
	uint16_t klen;
	bool pinned;
	bool linked;
	char key[];
};

struct mem_pool_opts {
	size_t opts_size;
	uint64_t capacity;	/* bytes; required */
	uint32_t high_pct;	/* evict above this share of capacity; default 90 */
	uint32_t low_pct;	/* ... down to this; default 80 */
	bool evict;		/* default true */
	uint64_t max_value;	/* default MEM_VALUE_MAX */
	/* Called (outside the lock) for each evicted object, holding a lease
	 * the callee must end with mem_obj_release (spill). May be NULL. */
	void (*on_evict)(void *arg, struct mem_obj *o);
	void *evict_arg;
};

struct mem_pool_stats {
	uint64_t capacity, used, objects, pinned, leased;
	uint64_t puts, gets, hits, misses, evictions, evicted_bytes, refused;
	uint64_t over_quota;	/* puts refused with -EDQUOT */
};

/* A namespace's charge (bytes, as the pool counts them) and objects. */
struct mem_ns_stat {
	char ns[MEM_NS_MAX + 1];
	uint64_t used, objects;
};

void mem_pool_opts_init(struct mem_pool_opts *o, size_t size);
/* Creates a pool. Returns 0 and *out (free with mem_pool_free) or -EINVAL
 * (capacity 0, bad watermarks) or -ENOMEM. */
int mem_pool_new(const struct mem_pool_opts *o, struct mem_pool **out);
/* Frees the pool and every object; no lease may be outstanding. */
void mem_pool_free(struct mem_pool *p);

/* Checks a key and a value length: -EINVAL (empty key), -ENAMETOOLONG
 * (key over MEM_KEY_MAX), -E2BIG (value over max_value or capacity). */
int mem_pool_check(const struct mem_pool *p, size_t klen, uint64_t len);

/* Stores data (an abuf of at least len bytes) under key. On success the
 * pool owns data; on failure the caller keeps it. flags: MEM_PUT_*.
 * quota: the most key's namespace may be charged after the put
 * (MEM_NO_QUOTA: none). Returns 0, -EEXIST (NX), -ENOSPC (cannot fit:
 * nothing was evicted or replaced), -EDQUOT (over quota: the same), or a
 * mem_pool_check error. */
int mem_pool_put(struct mem_pool *p, const void *key, size_t klen, void *data, uint64_t len,
		 unsigned flags, uint64_t quota);
/* Like mem_pool_put, copying len bytes from src. */
int mem_pool_put_copy(struct mem_pool *p, const void *key, size_t klen, const void *src,
		      uint64_t len, unsigned flags, uint64_t quota);
/* Looks key up and takes a lease on it (marks it recently used). Returns 0
 * and *out (end the lease with mem_obj_release) or -ENOENT. */
int mem_pool_get(struct mem_pool *p, const void *key, size_t klen, struct mem_obj **out);
/* Ends a lease; frees the object when it was the last reference. Any
 * thread. */
void mem_obj_release(struct mem_obj *o);
/* Length of key's value, without a lease. Returns 0 or -ENOENT. */
int mem_pool_exists(struct mem_pool *p, const void *key, size_t klen, uint64_t *len);
/* Removes key (readers holding a lease keep their bytes). 0 or -ENOENT. */
int mem_pool_remove(struct mem_pool *p, const void *key, size_t klen);
/* Pins (pin=true) or unpins key. 0 or -ENOENT. */
int mem_pool_pin(struct mem_pool *p, const void *key, size_t klen, bool pin);
/* Calls fn(arg, key, klen, len) for every key starting with prefix, under
 * the lock (fn must not call into the pool), until fn returns nonzero or
 * max keys were seen. Returns the number of calls. */
uint32_t mem_pool_list(struct mem_pool *p, const void *prefix, size_t plen, uint32_t max,
		       int (*fn)(void *arg, const char *key, size_t klen, uint64_t len),
		       void *arg);
/* Evicts down to the low watermark now (also done by puts). Returns the
 * number of objects evicted. */
uint32_t mem_pool_evict(struct mem_pool *p);
void mem_pool_stats(struct mem_pool *p, struct mem_pool_stats *st);
/* The namespaces charged now, the largest first: fills up to max entries
 * of out and returns how many namespaces there are. */
uint32_t mem_pool_ns_stats(struct mem_pool *p, struct mem_ns_stat *out, uint32_t max);

#endif
