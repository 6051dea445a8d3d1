/*
 * The storage service's operations (src/proto/proto.h explains the
 * tables). Every request names the chunk (inode, index), the chain it
 * lives on with the chain version the sender routed by, and the target it
 * is meant for; docs/protocol.md and docs/failures.md say what they do.
 *
 *   WRITE/TRUNCATE/REMOVE ("updates", chain-replicated head -> tail)
 *     sp_update: WRITE carries len bytes of bulk, crc = CRC32C(bulk);
 *     TRUNCATE: len = the new length; REMOVE: offset = len = 0.
 *     version, base: 0 from clients; the head sets the new version and
 *     the one it applies on (0: none) when it forwards.
 *     -> sp_update_rep: the chunk after the update.
 *   READ, VERIFY   sp_read -> sp_read_rep, bulk = nread bytes (a missing
 *                  chunk reads as nread 0 at the version of its removal)
 *   BATCH_READ     sp_batch (many chunks of one target) -> sp_batch_rep,
 *                  bulk = the items' slots back to back (slot i is len_i)
 *   STAT           sp_ref -> sp_stat_rep (-ENOENT when absent)
 *   SPACE          sp_target -> sp_space_rep
 *   LIST           sp_list (a resync pages through a chain's chunks at a
 *                  source) -> sp_list_rep
 *   READ_SHM       sp_shm_read -> sp_read_rep, no bulk: the nread bytes
 *                  are in the reader's shared-memory region (below)
 *   SHM_CHECK      sp_shm -> sp_shm_rep: who registered a region
 *   WRITE_SHM      sp_shm_write -> sp_update_rep: a client's WRITE whose
 *                  len bytes are in its shared-memory region (below)
 */
#ifndef STRATA_PROTO_STORAGE_H
#define STRATA_PROTO_STORAGE_H

#include <sys/socket.h>
#include <sys/un.h>

#include "common/cap.h"
#include "net/frame.h"
#include "proto/proto.h"

#define SP_BATCH_MAX 4096u
#define SP_LIST_PAGE 512u

/* sp_update.forwarded */
#define SP_FWD_CLIENT 0		/* from a client, to the head */
#define SP_FWD_UPDATE 1		/* from the predecessor: apply on version base */
#define SP_FWD_FULL 2		/* from the predecessor: the whole chunk, install it */
#define SP_FWD_PUSH 3		/* from a member holding a newer copy: install it
				 * if newer, pass it on to no one */

/* sp_read.flags */
/* A replica repairing its own copy reads from a member of its chain: a
 * copy that may not be committed yet (an update in flight, or dirty) is a
 * state the chain went through and builds on, so it serves the repair. */
#define SP_READ_REPAIR 1u
/* A survey of the members (resync.c) also reads a copy held back because
 * it may lack something (its own write failed, or a resync has yet to
 * copy it): an intact copy is still a state the chunk went through, and
 * the newest of the members' copies is the one to keep. A copy found
 * damaged answers STRATA_EINTEGRITY. */
#define SP_READ_SURVEY 2u
/* A member recovering the chain (storage/recover.c) reads the stored copy
 * whatever this replica's marks: a copy marked for a repair is still a
 * state the chunk went through, maybe the newest one, and one that is
 * damaged fails its checksum. */
#define SP_READ_RECOVER 4u

/*
 * A chunk capability (common/cap.h): what meta gave a client at OPEN or
 * CREATE, sent back with every request for a chunk of that file. Storage
 * checks it for client tokens only (-EACCES: a bad mac, expired, another
 * ino, rights that do not cover the operation); daemons send zeros.
 * rights: CAP_READ (READ, VERIFY, BATCH_READ, STAT), CAP_WRITE (WRITE,
 * TRUNCATE, REMOVE).
 */
#define SP_CAP_FIELDS(X) \
	X(U64, ino) \
	X(U8R, rights, CAP_RIGHTS) \
	X(I64, expiry) \
	X(RAW, mac, CAP_MAC_LEN)
PROTO_MSG(sp_cap, SP_CAP_FIELDS)

static inline void sp_cap_get(const struct sp_cap *w, struct chunk_cap *c)
{
	c->ino = w->ino;
	c->rights = w->rights;
	c->expiry = w->expiry;
	memcpy(c->mac, w->mac, CAP_MAC_LEN);
}

static inline void sp_cap_set(struct sp_cap *w, const struct chunk_cap *c)
{
	w->ino = c->ino;
	w->rights = c->rights;
	w->expiry = c->expiry;
	memcpy(w->mac, c->mac, CAP_MAC_LEN);
}

#define SP_REF_FIELDS(X) \
	X(U32, chain_id) \
	X(U64, chain_ver) \
	X(U32, target_id) \
	X(U64, ino) \
	X(U64, idx) \
	X(OBJ, cap, sp_cap)
PROTO_MSG(sp_ref, SP_REF_FIELDS)

#define SP_UPDATE_FIELDS(X) \
	X(OBJ, ref, sp_ref) \
	X(U8R, forwarded, SP_FWD_PUSH) \
	X(U32, offset) \
	X(U32, len) \
	X(U32, crc) \
	X(U64, version) \
	X(U64, base)
PROTO_MSG_CHECKED(sp_update, SP_UPDATE_FIELDS)

#define SP_UPDATE_REP_FIELDS(X) \
	X(U64, version) \
	X(U32, length)
PROTO_MSG(sp_update_rep, SP_UPDATE_REP_FIELDS)

#define SP_READ_FIELDS(X) \
	X(OBJ, ref, sp_ref) \
	X(U32, offset) \
	X(U32R, len, FRAME_MAX_BULK) \
	X(FLAGS, flags, SP_READ_REPAIR | SP_READ_SURVEY | SP_READ_RECOVER)
PROTO_MSG(sp_read, SP_READ_FIELDS)

/* length: the chunk's whole length (a reader that asked for less learns
 * how much there is). */
#define SP_READ_REP_FIELDS(X) \
	X(U64, version) \
	X(U32, nread) \
	X(U32, crc) \
	X(U32, length)
PROTO_MSG(sp_read_rep, SP_READ_REP_FIELDS)

/* cap: the index in the batch's caps of the one covering the item's
 * ino (items of one file share it). */
#define SP_BATCH_ITEM_FIELDS(X) \
	X(U32, chain_id) \
	X(U64, chain_ver) \
	X(U64, ino) \
	X(U64, idx) \
	X(U32, offset) \
	X(U32, len) \
	X(U32, cap)
PROTO_MSG(sp_batch_item, SP_BATCH_ITEM_FIELDS)

/* caps: none from a daemon; from a client, every item's cap index lies
 * within it. */
#define SP_BATCH_FIELDS(X) \
	X(U32, target_id) \
	X(ARR, items, sp_batch_item, SP_BATCH_MAX) \
	X(ARR, caps, sp_cap, SP_BATCH_MAX)
PROTO_MSG_CHECKED(sp_batch, SP_BATCH_FIELDS)

#define SP_READ_RESULT_FIELDS(X) \
	X(I32, status) \
	X(U64, version) \
	X(U32, nread) \
	X(U32, crc)
PROTO_MSG(sp_read_result, SP_READ_RESULT_FIELDS)

#define SP_BATCH_REP_FIELDS(X) \
	X(ARR, results, sp_read_result, SP_BATCH_MAX)
PROTO_MSG(sp_batch_rep, SP_BATCH_REP_FIELDS)

#define SP_STAT_REP_FIELDS(X) \
	X(U64, version) \
	X(U32, length) \
	X(U32, crc)
PROTO_MSG(sp_stat_rep, SP_STAT_REP_FIELDS)

#define SP_TARGET_FIELDS(X) \
	X(U32, target_id)
PROTO_MSG(sp_target, SP_TARGET_FIELDS)

#define SP_SPACE_REP_FIELDS(X) \
	X(U64, total) \
	X(U64, used)
PROTO_MSG(sp_space_rep, SP_SPACE_REP_FIELDS)

/* after: 1 lists strictly after the cursor (after_ino, after_idx). */
#define SP_LIST_FIELDS(X) \
	X(U32, chain_id) \
	X(U64, chain_ver) \
	X(U32, target_id) \
	X(U64, after_ino) \
	X(U64, after_idx) \
	X(U32R, max, SP_LIST_PAGE) \
	X(U8R, after, 1)
PROTO_MSG_CHECKED(sp_list, SP_LIST_FIELDS)

/* busy: the version of an update of the chunk in flight at the source (0:
 * none); a chunk being created is listed with version 0. */
#define SP_LIST_ENT_FIELDS(X) \
	X(U64, ino) \
	X(U64, idx) \
	X(U64, version) \
	X(U32, length) \
	X(U32, crc) \
	X(U64, busy)
PROTO_MSG(sp_list_ent, SP_LIST_ENT_FIELDS)

#define SP_LIST_REP_FIELDS(X) \
	X(ARR, ents, sp_list_ent, SP_LIST_PAGE) \
	X(U8R, more, 1)
PROTO_MSG(sp_list_rep, SP_LIST_REP_FIELDS)

/*
 * Same-host reads through shared memory (docs/protocol.md, "Same-host
 * reads"). A reader on the storage daemon's host hands the daemon a sealed
 * memfd over the abstract Unix socket sp_shm_sockname() names, with an
 * sp_shm_attach; the daemon maps it and answers with an sp_shm_attach_rep
 * (the region's number and a random secret). The region lives until that
 * Unix connection closes. Before using it, the reader asks SHM_CHECK over
 * its authenticated connection who registered the region: the pid must be
 * its own, so a process squatting the socket name never gets reads. A
 * READ_SHM then names the region, secret and offset: the daemon copies the
 * bytes there before it answers; a WRITE_SHM (same-host writes) has the
 * head copy a write's bytes out of it. Clients without such a region use
 * READ and WRITE.
 */
#define SP_SHM_MAGIC 0x5348u		/* "SH" */
#define SP_SHM_MIN (1u << 20)		/* a region's size: 1 MiB ... */
#define SP_SHM_MAX (1u << 30)		/* ... to 1 GiB, whole pages */
#define SP_SHM_SLOT (1u << 20)		/* a WRITE_SHM's bytes start at a slot */
#define SP_SHM_WRITE_MAX (4u << 20)	/* ... and are at most 4 slots (a chunk) */

#define SP_SHM_ATTACH_FIELDS(X) \
	X(U32, magic) \
	X(U64, size)
PROTO_MSG(sp_shm_attach, SP_SHM_ATTACH_FIELDS)

#define SP_SHM_ATTACH_REP_FIELDS(X) \
	X(I32, status) \
	X(U32, region) \
	X(U64, secret)
PROTO_MSG(sp_shm_attach_rep, SP_SHM_ATTACH_REP_FIELDS)

#define SP_SHM_FIELDS(X) \
	X(U32, region) \
	X(U64, secret)
PROTO_MSG(sp_shm, SP_SHM_FIELDS)

/* pid: the registrant's, as the daemon sees it (SO_PEERCRED); size: the
 * region's. */
#define SP_SHM_REP_FIELDS(X) \
	X(U32, pid) \
	X(U64, size)
PROTO_MSG(sp_shm_rep, SP_SHM_REP_FIELDS)

/* at: where in the region the rd.len bytes go. The sp_read comes first,
 * so the request's prefix routes it like a READ. */
#define SP_SHM_READ_FIELDS(X) \
	X(OBJ, rd, sp_read) \
	X(OBJ, shm, sp_shm) \
	X(U64, at)
PROTO_MSG(sp_shm_read, SP_SHM_READ_FIELDS)

/* Same-host writes: a client's WRITE (upd, forwarded SP_FWD_CLIENT) whose
 * upd.len bytes (at most SP_SHM_WRITE_MAX) it put at offset at of its
 * region, a multiple of SP_SHM_SLOT. The head copies them out of the region before it
 * checks upd.crc and uses them (the writer could change them at any
 * time), then handles a WRITE; the slots are the writer's again once the
 * answer arrives. The sp_update comes first, so the request's prefix
 * routes it like a WRITE. */
#define SP_SHM_WRITE_FIELDS(X) \
	X(OBJ, upd, sp_update) \
	X(OBJ, shm, sp_shm) \
	X(U64, at)
PROTO_MSG(sp_shm_write, SP_SHM_WRITE_FIELDS)

/* The abstract socket name ("\0strata-shm:" addr) the storage daemon that
 * listens on addr takes for attaches. Abstract names live in a network
 * namespace, so only readers that share the daemon's reach it. Returns the
 * address length, or 0 when addr is too long. */
socklen_t sp_shm_sockname(const char *addr, struct sockaddr_un *sun);

/* Stubs are named st_<op>: st_write_call(), st_read_req(), ... */
#define STORAGE_OPS(OP) \
	OP(CHUNK_WRITE,      32, st_write,    sp_update, sp_update_rep, ANY) \
	OP(CHUNK_READ,       33, st_read,     sp_read,   sp_read_rep, ANY) \
	OP(CHUNK_BATCH_READ, 34, st_batch,    sp_batch,  sp_batch_rep, ANY) \
	OP(CHUNK_REMOVE,     35, st_remove,   sp_update, sp_update_rep, ANY) \
	OP(CHUNK_STAT,       36, st_stat,     sp_ref,    sp_stat_rep, ANY) \
	OP(CHUNK_TRUNCATE,   37, st_truncate, sp_update, sp_update_rep, ANY) \
	OP(TARGET_SPACE,     38, st_space,    sp_target, sp_space_rep, ANY) \
	OP(CHUNK_LIST,       39, st_list,     sp_list,   sp_list_rep, DAEMON) \
	OP(CHUNK_VERIFY,     41, st_verify,   sp_read,   sp_read_rep, ANY) \
	OP(CHUNK_READ_SHM,   42, st_read_shm, sp_shm_read, sp_read_rep, ANY) \
	OP(SHM_CHECK,        43, st_shm_check, sp_shm,   sp_shm_rep, ANY) \
	OP(CHUNK_WRITE_SHM,  44, st_write_shm, sp_shm_write, sp_update_rep, ANY)
PROTO_OPS(storage, STORAGE_OPS)

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

/* Tells the target at addr that the bytes of rd it sent fail their CRC
 * (OP_CHUNK_VERIFY): it checks its stored copy and, if that is damaged,
 * reports it and has it repaired. Nobody waits for the answer. */
int sp_ask_verify(struct rpc_pool *pool, const char *addr, const struct sp_read *rd,
		  uint32_t timeout_ms);

#endif
