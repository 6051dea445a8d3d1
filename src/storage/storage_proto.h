/*
 * Bodies of the storage service's requests, encoded field by field
 * (little-endian). Shared by the service, the client and the fuzz target.
 *
 * Every request names the chunk (inode, index), the chain it lives on with
 * the chain version the sender routed by, and the target it is meant for.
 *
 * WRITE/TRUNCATE/REMOVE ("updates", chain-replicated head -> tail)
 *   req:  ref, u8 forwarded (SP_FWD_*), u32 offset, u32 len, u32 crc, u64 version
 *         WRITE: bulk = len bytes of data, crc = CRC32C(data)
 *         TRUNCATE: len = new chunk length; REMOVE: offset = len = 0
 *         version: 0 from clients (the head assigns it); set when forwarded
 *   rep:  u64 version, u32 length           (the chunk after the update)
 * READ
 *   req:  ref, u32 offset, u32 len
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
#define SP_FWD_UPDATE 1		/* from the predecessor: apply on base version - 1 */
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
};

struct sp_read {
	struct sp_ref ref;
	uint32_t offset;
	uint32_t len;
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
