/*
 * Bodies of the storage service's requests, encoded field by field
 * (little-endian). Shared by the service, the client and the fuzz target.
 *
 * Every request names the chunk (inode, index), the chain it lives on with
 * the chain version the sender routed by, and the target it is meant for.
 *
 * WRITE/TRUNCATE/REMOVE ("updates", chain-replicated head -> tail)
 *   req:  ref, u8 forwarded (SP_FWD_*), u32 offset, u32 len, u32 crc, u64 version,
 *         u64 base
 *         WRITE: bulk = len bytes of data, crc = CRC32C(data)
 *         TRUNCATE: len = new chunk length; REMOVE: offset = len = 0
 *         version, base: 0 from clients; set by the head when forwarded:
 *         the new version and the one the update applies on (0: none)
 *   rep:  u64 version, u32 length           (the chunk after the update)
 * READ
 *   req:  ref, u32 offset, u32 len, u32 flags (SP_READ_*)
 *   rep:  u64 version, u32 nread, u32 crc;  bulk = nread bytes
 *         (a missing chunk reads as version 0, nread 0: a hole)
 * BATCH_READ (many chunks of one target)
 *   req:  u32 target_id, u32 n, n x {u32 chain_id, u64 chain_ver, u64 ino,
 *         u64 idx, u32 offset, u32 len}
 *   rep:  n x {i32 status, u64 version, u32 nread, u32 crc};
 *         bulk = the n slots back to back, slot i is len_i bytes long
 * STAT
 *   req:  ref;  rep: u64 version, u32 length, u32 crc   (-ENOENT if absent)
 * SPACE
 *   req:  u32 target_id;  rep: u64 total, u64 used
 */
#ifndef STRATA_STORAGE_PROTO_H
#define STRATA_STORAGE_PROTO_H

#include <stdint.h>

#include "net/codec.h"

#define SP_BATCH_MAX 4096u

/* sp_update.forwarded */
#define SP_FWD_CLIENT 0		/* from a client, to the head */
#define SP_FWD_UPDATE 1		/* from the predecessor: apply on version base */
#define SP_FWD_FULL 2		/* from the predecessor: the whole chunk, install it */

struct sp_ref {
	uint32_t chain_id;
	uint64_t chain_ver;
	uint32_t target_id;
	uint64_t ino;
	uint64_t idx;
};

struct sp_update {
	struct sp_ref ref;
	uint8_t forwarded;
	uint32_t offset;
	uint32_t len;
	uint32_t crc;
	uint64_t version;
	uint64_t base;
};

/*
 * Chunk versions. The head of a chain gives each update of a chunk the
 * next version, and a version names one content, on every replica, ever:
 *  - the high 32 bits are the epoch, the chain version under which the
 *    head assigned it. Only one target is head of a chain at one chain
 *    version, so two heads never hand out the same version, even when one
 *    of them died holding an update it never forwarded;
 *  - the low 32 bits count updates within an epoch (a chunk taking 2^32
 *    updates under one chain version would carry into the epoch).
 * stored: the highest version the head holds or has handed out for the
 * chunk. Returns the next version.
 */
static inline uint64_t sp_next_version(uint64_t stored, uint64_t chain_ver)
{
	uint64_t epoch = (chain_ver & 0xffffffffull) << 32;

	return stored >= epoch ? stored + 1 : epoch + 1;
}

/* sp_read.flags */
/* A replica repairing its own copy reads from a member of its chain: a
 * copy that may not be committed yet (an update in flight, or dirty) is a
 * state the chain went through and builds on, so it serves the repair. */
#define SP_READ_REPAIR 1u

struct sp_read {
	struct sp_ref ref;
	uint32_t offset;
	uint32_t len;
	uint32_t flags;
};

struct sp_batch_item {
	uint32_t chain_id;
	uint64_t chain_ver;
	uint64_t ino;
	uint64_t idx;
	uint32_t offset;
	uint32_t len;
};

struct sp_read_result {
	int32_t status;
	uint64_t version;
	uint32_t nread;
	uint32_t crc;
};

void sp_ref_encode(struct wbuf *w, const struct sp_ref *r);
void sp_ref_decode(struct rbuf *r, struct sp_ref *out);
void sp_update_encode(struct wbuf *w, const struct sp_update *u);
/* Returns 0 or STRATA_EBADMSG (trailing bytes, short body, bad fields). */
int sp_update_decode(const void *body, uint32_t len, struct sp_update *out);
void sp_read_encode(struct wbuf *w, const struct sp_read *rd);
int sp_read_decode(const void *body, uint32_t len, struct sp_read *out);
/* Batch: *items is allocated (free()) with *n entries; total bytes of all
 * items bounded by FRAME_MAX_BULK. */
void sp_batch_encode(struct wbuf *w, uint32_t target_id, const struct sp_batch_item *items,
		     uint32_t n);
int sp_batch_decode(const void *body, uint32_t len, uint32_t *target_id,
		    struct sp_batch_item **items, uint32_t *n);

struct rpc_pool;
/* Tells the target at addr that the bytes of rd it sent fail their CRC
 * (OP_CHUNK_VERIFY): it checks its stored copy and, if that is damaged,
 * reports it and has it repaired. Nobody waits for the answer. */
int sp_ask_verify(struct rpc_pool *pool, const char *addr, const struct sp_read *rd,
		  uint32_t timeout_ms);

#endif
