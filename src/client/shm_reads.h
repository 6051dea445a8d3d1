/*
 * Same-host reads and writes through shared memory: the storage client's
 * side (proto/storage.h, "Same-host reads"; docs/protocol.md).
 *
 * For each storage daemon reads go to, the owner thread tries to attach a
 * region once: a sealed memfd of SHM_SLOTS slots of SHM_SLOT bytes, handed
 * to the daemon over the abstract socket its address names (on the
 * reactor's helper thread), then checked over the storage connection
 * (SHM_CHECK must name this process as the registrant, so a process
 * squatting the socket name gets no reads). A READ_SHM then has the daemon
 * copy the bytes into a slot, and the client copies them out and checks
 * their CRC as for any read: one copy in each process and no TCP. A
 * WRITE_SHM is the mirror: the client copies a write's bytes into a slot
 * and the head copies them out before it checks their CRC. One region per
 * daemon serves both; a daemon that answers WRITE_SHM "unknown op" (an
 * older one) gets this client's writes over TCP until it is attached
 * again.
 *
 * Until a region is ready, and for a daemon on another host (its abstract
 * name is not in our network namespace), one that refuses, reads or
 * reads larger than a slot, writes larger than SHM_WRITE_SLOTS slots, or
 * while no slot (no run of a write's slots) is free, they go over TCP as
 * before. A failed attach is tried again after SHM_RETRY_MS. A slot
 * whose read or write was lost in transit (a timeout, a closed
 * connection) is never used again: the daemon may still use it.
 *
 * STRATA_SHM_READS=0 in the environment turns both off for a process.
 * Everything here runs on the owner thread of the sclient.
 */
#ifndef STRATA_CLIENT_SHM_READS_H
#define STRATA_CLIENT_SHM_READS_H

#include <stdbool.h>
#include <stdint.h>

#include "net/reactor.h"
#include "net/rpc.h"
#include "proto/storage.h"

#define SHM_SLOT SP_SHM_SLOT	/* the client's read piece */
#define SHM_WRITE_SLOTS (SP_SHM_WRITE_MAX / SP_SHM_SLOT)	/* a write's most */
#define SHM_SLOTS 64u		/* one bit each in a u64 */
#define SHM_RETRY_MS 30000u

struct shm_peers;

/* The slots held by one read (one) or write (up to SHM_WRITE_SLOTS, side
 * by side): peer < 0 when it goes over TCP. */
struct shm_slot {
	int32_t peer;
	int32_t slot;		/* the first */
	uint32_t n;
};

/* Reads and writes through r (the owner) and pool (the sclient's); off
 * (or with STRATA_SHM_READS=0) every one goes over TCP. 0 or -ENOMEM. */
int shm_peers_new(struct reactor *r, struct rpc_pool *pool, uint32_t timeout_ms, bool off,
		  struct shm_peers **out);
/* Owner thread, after the pool closed (its calls completed): unmaps and
 * frees, or leaves that to the attach still running on the helper thread. */
void shm_peers_free(struct shm_peers *p);
/* The slot for a read (or, write true, the slots for a write) of len
 * bytes from (to) the daemon node_id at addr: fills *s, the region *m and
 * the offset *at, and returns true; or false (s->peer = -1) to go over
 * TCP. Starts an attach to a daemon first seen. */
bool shm_slot_get(struct shm_peers *p, uint32_t node_id, const char *addr, uint32_t len,
		  bool write, struct shm_slot *s, struct sp_shm *m, uint64_t *at);
/* The bytes of held slots. */
uint8_t *shm_slot_data(struct shm_peers *p, const struct shm_slot *s);
/* The daemon of held slot s answered a WRITE_SHM "unknown op": no more
 * writes through its region (until it is attached again). */
void shm_writes_unknown(struct shm_peers *p, const struct shm_slot *s);
/* Gives the slots back (s->peer becomes -1; nothing when it is already).
 * lost: its answer never came, the daemon may still use the slot.
 * forget: the daemon did not know the region (it restarted): attach again
 * later. */
void shm_slot_put(struct shm_peers *p, struct shm_slot *s, bool lost, bool forget);

#endif
