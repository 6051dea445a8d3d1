/*
 * Wire protocol of the mem service (opcodes OP_MEM_FIRST.. in net/proto.h),
 * encoded field by field, little-endian. Shared by the service, the client
 * library and the fuzz target. A key is length-prefixed bytes (u32 len).
 *
 * PUT      req: u32 flags (MEM_PUT_*), u64 0, key;  bulk = the value
 *          rep: empty
 * GET      req: u32 0, u64 cap (largest value the caller takes), key
 *          rep: u64 len; bulk = the value.  -ENOBUFS (len > cap): u64 len
 * REMOVE   req: u32 0, u64 0, key;            rep: empty (-ENOENT)
 * EXISTS   req: u32 0, u64 0, key;            rep: u64 len (-ENOENT)
 * PIN      req: u32 pin (1 pin, 0 unpin), u64 0, key;  rep: empty
 * LIST     req: u32 max, u64 0, prefix
 *          rep: u32 n, n x {key, u64 len}, u8 truncated
 * MPUT     req: u32 n, u64 0, n x {u32 flags, u64 len, key}
 *          bulk = the n values back to back
 * MGET     req: u32 n, u64 cap (of the reply's bulk), n x {u32 0, u64 0, key}
 * MREMOVE, MEXISTS  req: as MGET with cap 0
 *          rep (all batch ops): u32 n, n x {i32 status, u64 len}
 *          MGET bulk = the values with status 0, back to back; a value that
 *          no longer fits in cap gets -ENOBUFS (ask for it again)
 * STATS    req: empty;  rep: MP_NSTATS x u64 (struct mp_stats order)
 */
#ifndef STRATA_MEM_PROTO_H
#define STRATA_MEM_PROTO_H

#include <stdint.h>

#include "net/codec.h"
#include "net/proto.h"

enum mem_op {
	OP_MEM_PUT = OP_MEM_FIRST,
	OP_MEM_GET,
	OP_MEM_REMOVE,
	OP_MEM_EXISTS,
	OP_MEM_PIN,
	OP_MEM_LIST,
	OP_MEM_MPUT,
	OP_MEM_MGET,
	OP_MEM_MREMOVE,
	OP_MEM_MEXISTS,
	OP_MEM_STATS,
};

#define MP_BATCH_MAX 4096u
#define MP_LIST_MAX 65536u

/* One keyed request, or one item of a batch. key borrows the body. */
struct mp_item {
	uint32_t flags;
	uint64_t arg;		/* cap (GET), len (MPUT item) */
	const uint8_t *key;
	uint32_t klen;
};

/* Encodes a single-key request (PUT, GET, REMOVE, EXISTS, PIN, LIST). */
void mp_item_encode(struct wbuf *w, const struct mp_item *it);
/* Decodes it from body; key points into body. Returns 0 or
 * STRATA_EBADMSG. */
int mp_item_decode(const uint8_t *body, uint32_t len, struct mp_item *it);

/* Encodes a batch header; append n items with mp_item_encode. */
void mp_batch_encode_hdr(struct wbuf *w, uint32_t n, uint64_t cap);
/* Decodes a batch: *items (malloc'd, free() it; keys point into body) and
 * *n, *cap. n <= MP_BATCH_MAX. Returns 0, STRATA_EBADMSG or -ENOMEM. */
int mp_batch_decode(const uint8_t *body, uint32_t len, struct mp_item **items, uint32_t *n,
		    uint64_t *cap);

/* Result of one batch item. */
struct mp_result {
	int32_t status;
	uint64_t len;
};

/* Decodes a batch reply of exactly n results into res[n]. Returns 0 or
 * STRATA_EBADMSG. */
int mp_results_decode(const uint8_t *body, uint32_t len, struct mp_result *res, uint32_t n);

#define MP_NSTATS 14
struct mp_stats {
	uint64_t capacity, used, objects, pinned, leased, puts, gets, hits, misses, evictions,
		evicted_bytes, refused, spilled, reloaded;
};
void mp_stats_encode(struct wbuf *w, const struct mp_stats *s);
int mp_stats_decode(const uint8_t *body, uint32_t len, struct mp_stats *s);

#endif
