/*
 * libstrata's memory API: keyed objects (tensors, weights, KV cache) in the
 * pooled DRAM of Strata's mem nodes.
 *
 * A struct strata_mem is a handle on one pool: a set of mem nodes over
 * which keys are spread by consistent hashing (each node owns many points
 * of a 64-bit ring). With replicas R > 1 a put writes the key to the R
 * distinct nodes that follow it on the ring, and a get reads the first of
 * them that answers (for hot objects).
 *
 * The handle is thread-safe. A synchronous call runs on the calling
 * thread: it takes one of the handle's lanes (connections of its own,
 * one per node) for the duration of the call, writes its requests from
 * that thread (a batch: one request per node, all nodes at once) and
 * waits on those sockets for the answers, so nothing is handed to another
 * thread. When more threads call at once than there are lanes (twice
 * io_threads, at least 8), and for the asynchronous get and prefetch, the
 * requests go through a few background threads instead (io_threads),
 * pipelined over one connection per node and thread. Either way each
 * request ends by timeout_ms at the latest (a get tries the next replica
 * after a failed one), and a node that dies in the middle of a request
 * fails it at once.
 *
 * Values are at most 64 MiB, keys 1..1024 bytes. Errors: -ENOENT (no such
 * key), -ENAMETOOLONG (key too long), -EINVAL (empty key), -E2BIG (value
 * too large for the protocol or the pool), -ENOSPC (pool full: nothing
 * stored was lost), -EDQUOT (the key's namespace is at its token's mem
 * capacity on that node: nothing stored was lost), -ENOBUFS (the caller's buffer is smaller than the
 * value), -EEXIST (STRATA_MEM_NX and the key exists), transport errors
 * (-ETIMEDOUT, -ECONNREFUSED, ...). Pointers passed in are borrowed for the
 * call, except the buffer of an asynchronous get, which must stay valid
 * until the operation completes.
 */
#ifndef STRATA_MEM_H
#define STRATA_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strata/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

struct strata_mem;
struct strata_mem_op;

#define STRATA_MEM_PIN 0x1u	/* put: never evict until unpinned */
#define STRATA_MEM_NX 0x2u	/* put: only if the key does not exist */

struct strata_mem_opts {
	size_t opts_size;	/* sizeof(struct strata_mem_opts) as the caller knows it */
	uint32_t timeout_ms;	/* one request; default 10000 */
	uint32_t replicas;	/* copies of each put (R); default 1 */
	uint32_t vnodes;	/* ring points per node; default 64 */
	uint32_t io_threads;	/* background threads (each with its own
				 * connections; a calling thread sticks to
				 * one); default 2 */
	/* The credential: a token's text. NULL: $STRATA_TOKEN or
	 * $STRATA_TOKEN_FILE (strata_find_token, locate.h); "": none. A
	 * token reaches the keys of its mem scopes, "NS/...". */
	const char *token;
};

/* Sets opts to the defaults; size = sizeof(*opts). */
void strata_mem_opts_init(struct strata_mem_opts *opts, size_t size);

/* Opens the pool made of the mem nodes at addrs ("host:port,host:port,...",
 * in any order: every client builds the same ring). opts may be NULL.
 * Connects lazily. Returns 0 and *out (free with strata_mem_close), -EINVAL
 * (empty or malformed list) or -ENOMEM. */
int strata_mem_open(const char *addrs, const struct strata_mem_opts *opts,
		    struct strata_mem **out);
/* Waits for operations in flight, then frees m. m may be NULL. */
void strata_mem_close(struct strata_mem *m);

/* Stores len bytes of buf under key (replacing any value). flags:
 * STRATA_MEM_PIN, STRATA_MEM_NX. Returns 0 or a negative error. */
int strata_mem_put(struct strata_mem *m, const char *key, const void *buf, size_t len,
		   unsigned flags);
/* Reads key's value into buf (cap bytes), received straight into it.
 * Returns the value's length, or -ENOBUFS (cap too small: nothing
 * written), -ENOENT, ... */
ssize_t strata_mem_get(struct strata_mem *m, const char *key, void *buf, size_t cap);
/* Reads key's value into a new buffer: *buf (free with strata_mem_free)
 * and *len. Returns 0 or a negative error. */
int strata_mem_get_alloc(struct strata_mem *m, const char *key, void **buf, size_t *len);
void strata_mem_free(void *buf);
/* Returns the value's length, or -ENOENT. */
ssize_t strata_mem_exists(struct strata_mem *m, const char *key);
/* Removes key from every replica. Returns 0 or -ENOENT. */
int strata_mem_remove(struct strata_mem *m, const char *key);
/* Pins (pin != 0) or unpins key: a pinned object is never evicted. */
int strata_mem_pin(struct strata_mem *m, const char *key, int pin);
/* Calls fn(arg, key, len) for every key starting with prefix, on every
 * node (a replicated key is reported once per copy), until fn returns
 * nonzero. Returns the number of keys reported or a negative error. */
ssize_t strata_mem_list(struct strata_mem *m, const char *prefix,
			int (*fn)(void *arg, const char *key, uint64_t len), void *arg);

/* ---- batches: one request per node, every node at once ---- */

struct strata_mem_item {
	const char *key;
	void *buf;		/* put: the value; get: where it lands */
	size_t len;		/* put: value length; get: in cap, out value length */
	unsigned flags;		/* put: STRATA_MEM_* */
	int status;		/* out: 0 or a negative error for this item */
};

/* Each returns 0 when every item succeeded, the first item error
 * otherwise (see each item's status), or a negative error of the whole
 * call. exists sets len. */
int strata_mem_mput(struct strata_mem *m, struct strata_mem_item *items, size_t n);
int strata_mem_mget(struct strata_mem *m, struct strata_mem_item *items, size_t n);
int strata_mem_mremove(struct strata_mem *m, struct strata_mem_item *items, size_t n);
int strata_mem_mexists(struct strata_mem *m, struct strata_mem_item *items, size_t n);

/* ---- asynchronous get and prefetch ---- */

/* Starts reading key into buf (cap bytes; it must stay valid until the
 * operation completes). Returns 0 and *op, or a negative error (no op). */
int strata_mem_get_async(struct strata_mem *m, const char *key, void *buf, size_t cap,
			 struct strata_mem_op **op);
/* Returns 1 when op completed, 0 while it is in flight. */
int strata_mem_op_poll(struct strata_mem_op *op);
/* Waits up to timeout_ms (< 0: no limit) for op. Returns the value's length
 * or a negative error; -EAGAIN when it is still in flight. */
ssize_t strata_mem_op_wait(struct strata_mem_op *op, int timeout_ms);
/* Frees op, waiting for it first when it is in flight. op may be NULL. */
void strata_mem_op_free(struct strata_mem_op *op);
/* Asks key's node to bring it into DRAM ahead of need (reloading it from
 * the storage plane when it was spilled); returns without waiting. 0 or a
 * negative error of the submission. */
int strata_mem_prefetch(struct strata_mem *m, const char *key);

/* ---- pool state ---- */

struct strata_mem_stats {
	uint64_t capacity, used, objects, pinned, evictions, spilled, reloaded;
	uint32_t nodes, nodes_up;
};
/* Sums every node's counters (nodes_up: nodes that answered). */
int strata_mem_stats(struct strata_mem *m, struct strata_mem_stats *st);

#ifdef __cplusplus
}
#endif

#endif
