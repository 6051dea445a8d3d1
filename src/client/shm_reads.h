/*
 * Same-host reads through shared memory: the storage client's side
 * (proto/storage.h, "Same-host reads"; docs/protocol.md).
 *
 * For each storage daemon reads go to, the owner thread tries to attach a
 * region once: a sealed memfd of SHM_SLOTS slots of SHM_SLOT bytes, handed
 * to the daemon over the abstract socket its address names (on the
 * reactor's helper thread), then checked over the storage connection
 * (SHM_CHECK must name this process as the registrant, so a process
 * squatting the socket name gets no reads). A READ_SHM then has the daemon
 * copy the bytes into a slot, and the client copies them out and checks
 * their CRC as for any read: one copy in each process and no TCP.
 *
 * Until a region is ready, and for a daemon on another host (its abstract
 * name is not in our network namespace), one that refuses, reads larger
 * than a slot, or while every slot is busy, reads go over TCP as before.
 * A failed attach is tried again after SHM_RETRY_MS. A slot whose read was
 * lost in transit (a timeout, a closed connection) is never used again:
 * the daemon may still write into it.
 *
 * STRATA_SHM_READS=0 in the environment turns it off for a process.
 * Everything here runs on the owner thread of the sclient.
 */
#ifndef STRATA_CLIENT_SHM_READS_H
#define STRATA_CLIENT_SHM_READS_H

#include <stdbool.h>
#include <stdint.h>

#include "net/reactor.h"
#include "net/rpc.h"
#include "proto/storage.h"

#define SHM_SLOT (1u << 20)	/* the client's read piece */
#define SHM_SLOTS 64u		/* one bit each in a u64 */
#define SHM_RETRY_MS 30000u

struct shm_peers;

/* A slot held by one read: peer < 0 when the read goes over TCP. */
struct shm_slot {
	int32_t peer;
	int32_t slot;
};

/* Reads through r (the owner) and pool (the sclient's); off (or with
 * STRATA_SHM_READS=0) every read goes over TCP. 0 or -ENOMEM. */
int shm_peers_new(struct reactor *r, struct rpc_pool *pool, uint32_t timeout_ms, bool off,
		  struct shm_peers **out);
/* Owner thread, after the pool closed (its calls completed): unmaps and
 * frees, or leaves that to the attach still running on the helper thread. */
void shm_peers_free(struct shm_peers *p);
/* A slot for a read of len bytes from the daemon node_id at addr: fills
 * *s, the region *m and the offset *at, and returns true; or false (s->peer
 * = -1) to read over TCP. Starts an attach to a daemon first seen. */
bool shm_slot_get(struct shm_peers *p, uint32_t node_id, const char *addr, uint32_t len,
		  struct shm_slot *s, struct sp_shm *m, uint64_t *at);
/* The bytes of a held slot. */
const uint8_t *shm_slot_data(struct shm_peers *p, const struct shm_slot *s);
/* Gives the slot back (s->peer becomes -1; nothing when it is already).
 * lost: its read's answer never came, the daemon may still write it.
 * forget: the daemon did not know the region (it restarted): attach again
 * later. */
void shm_slot_put(struct shm_peers *p, struct shm_slot *s, bool lost, bool forget);

#endif
