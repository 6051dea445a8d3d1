/*
 * The cluster map kept by mgmt: storage nodes, their targets, the
 * replication chains built from them, and a version bumped on every change.
 * Pure logic: no I/O, no locks (the map is owned by mgmt's thread; others
 * get an encoded copy).
 *
 * Model
 *  - A node registers with its address and targets and renews a lease.
 *    States: NODE_UP, NODE_OFFLINE (lease expired or marked), NODE_DRAINING
 *    (admin moves its data away).
 *  - A target is SERVING (healthy; in chains or a spare), SYNCING (in at
 *    least one chain as a member that is resyncing), OFFLINE (its node is
 *    down, or it was missing from its node's last registration) or LOST
 *    (replaced: it never re-enters its old chains).
 *  - A chain is an ordered list head..tail of its current members, each
 *    SERVING or SYNCING, SYNCING ones always after the SERVING ones (a
 *    resyncing replica sits at the tail). Members taken out while offline
 *    are kept in the chain's out list (with the state they had), so that
 *    they re-enter the same chains when they come back. The targets of a
 *    chain (members and out list) are on distinct nodes.
 *  - The chain table is the chains in id order (ids 1..chain_table_len).
 *  - map->version is bumped once per changing call; every chain a call
 *    changes gets chain->version = the new map->version, so chain versions
 *    only grow, also across a rebuild.
 *  - Leases (lease_expires_ms) are mgmt-local: changing them does not bump
 *    the version, and they are neither encoded nor persisted. After loading
 *    a map, call cm_reset_leases() with now + a grace period.
 *
 * Failure handling, as single calls: cm_expire_leases()/cm_set_node_offline()
 * take a node's targets out of their chains; cm_register_node() of a
 * returning node puts them back as SYNCING tails; cm_target_synced() or
 * cm_member_synced() make them SERVING; cm_replace_target() swaps a lost
 * target for a spare; cm_drain_node() adds replicas elsewhere and drops the
 * node's memberships once those replicas are in sync.
 *
 * Pointers returned by cm_find_*() point into the map's arrays and are
 * valid until the next call that changes the map.
 */
#ifndef STRATA_MGMT_CLUSTER_MAP_H
#define STRATA_MGMT_CLUSTER_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "net/codec.h"

#define CM_MAX_R 8
/* One slot beyond R: a drain adds the new replica before dropping the old. */
#define CM_CHAIN_SLOTS (CM_MAX_R + 1)
#define CM_DEFAULT_R 3
#define CM_ADDR_LEN 64
#define CM_MAX_NODES 4096u
#define CM_MAX_TARGETS 65536u
#define CM_MAX_CHAINS 65536u

enum cm_node_state {
	NODE_UP = 1,
	NODE_OFFLINE = 2,
	NODE_DRAINING = 3,
};

enum cm_target_state {
	TARGET_SERVING = 1,
	TARGET_SYNCING = 2,
	TARGET_OFFLINE = 3,
	TARGET_LOST = 4,
};

struct cm_node {
	uint32_t id;			/* nonzero */
	char addr[CM_ADDR_LEN];		/* "host:port" of its storage RPC */
	uint32_t state;			/* enum cm_node_state */
	uint64_t lease_expires_ms;	/* mgmt-local, see above */
};

struct cm_target {
	uint32_t id;			/* nonzero, unique in the cluster */
	uint32_t node_id;
	uint64_t capacity, used;	/* bytes */
	uint32_t state;			/* enum cm_target_state */
};

struct cm_chain {
	uint32_t id;			/* 1..chain_table_len */
	uint64_t version;
	uint8_t len;			/* current members */
	uint32_t targets[CM_CHAIN_SLOTS];	/* head..tail */
	uint8_t states[CM_CHAIN_SLOTS];	/* TARGET_SERVING or TARGET_SYNCING */
	uint8_t nout;			/* members taken out, oldest first */
	uint32_t out[CM_CHAIN_SLOTS];
	uint8_t out_states[CM_CHAIN_SLOTS];	/* their state when taken out */
};

/* What a storage node reports for each of its targets when registering. */
struct cm_target_info {
	uint32_t id;
	uint64_t capacity, used;
};

struct cluster_map {
	uint64_t version;
	uint32_t replication;		/* R the chains were built with */
	uint32_t chain_table_len;	/* == nchains */
	struct cm_node *nodes;		/* sorted by id */
	uint32_t nnodes, nodes_cap;
	struct cm_target *targets;	/* sorted by id */
	uint32_t ntargets, targets_cap;
	struct cm_chain *chains;	/* sorted by id */
	uint32_t nchains, chains_cap;
};

/* Sets up an empty map (version 0, replication CM_DEFAULT_R). */
void cm_init(struct cluster_map *m);
/* Frees what m holds and leaves it as after cm_init(). */
void cm_release(struct cluster_map *m);
/* Makes dst (not initialized; overwritten) a deep copy of src. Returns 0 or
 * -ENOMEM (dst then empty). The caller releases dst. */
int cm_copy(struct cluster_map *dst, const struct cluster_map *src);
/* Grows the arrays to hold at least the given counts (used by loaders).
 * Returns 0 or -ENOMEM (m unchanged). */
int cm_reserve(struct cluster_map *m, uint32_t nnodes, uint32_t ntargets, uint32_t nchains);

/* Lookups by id (binary search); NULL when absent. */
const struct cm_node *cm_find_node(const struct cluster_map *m, uint32_t id);
const struct cm_target *cm_find_target(const struct cluster_map *m, uint32_t id);
const struct cm_chain *cm_find_chain(const struct cluster_map *m, uint32_t id);
/* Returns true when every node of the chain's members is distinct, the
 * states are ordered (SERVING before SYNCING): a cheap self-check. */
bool cm_chain_ok(const struct cluster_map *m, const struct cm_chain *c);

/*
 * Registers node node_id at addr with its n targets, or re-registers it.
 * Idempotent: repeating the same registration changes nothing (the version
 * is not bumped). A returning node becomes UP (a DRAINING node stays
 * DRAINING); its listed targets that had been taken out of chains re-enter
 * them as SYNCING tails (or SERVING, when the chain has no SERVING member
 * and this target was the last SERVING one taken out: it holds every
 * committed write); a listed LOST target comes back as an empty spare;
 * targets it held before but does not list now are taken out as OFFLINE.
 * New targets join as SERVING spares (not in chains until a build, drain or
 * replace uses them). Capacity and usage are updated.
 *   addr: NUL-terminated, 1..CM_ADDR_LEN-1 bytes; copied.
 *   targets: borrowed; ids nonzero and distinct.
 *   lease_expires_ms: the node's new lease deadline.
 * Returns the number of chains changed (>= 0), -EINVAL (bad id, addr or
 * target list), -EEXIST (a target id belongs to another node), -ENOSPC
 * (CM_MAX_NODES/CM_MAX_TARGETS reached) or -ENOMEM; on error m is
 * unchanged.
 */
int cm_register_node(struct cluster_map *m, uint32_t node_id, const char *addr,
		     const struct cm_target_info *targets, uint32_t n,
		     uint64_t lease_expires_ms);

/* Renews node_id's lease. Returns 0, -ENOENT (unknown node) or -ENOTCONN
 * (the node is OFFLINE: it must register again). */
int cm_heartbeat(struct cluster_map *m, uint32_t node_id, uint64_t lease_expires_ms);
/* Marks offline every UP or DRAINING node whose lease_expires_ms <= now_ms.
 * Returns the number of chains changed. */
int cm_expire_leases(struct cluster_map *m, uint64_t now_ms);
/* Sets every node's lease to lease_expires_ms (after a restart). */
void cm_reset_leases(struct cluster_map *m, uint64_t lease_expires_ms);

/*
 * Marks node_id OFFLINE: its SERVING/SYNCING targets become OFFLINE and move
 * from their chains' members to the out lists; each changed chain gets the
 * new version. Returns the number of chains changed (0 when already
 * offline) or -ENOENT.
 */
int cm_set_node_offline(struct cluster_map *m, uint32_t node_id);

/*
 * The SYNCING member target_id of chain chain_id finished its resync: it
 * becomes SERVING in that chain (and the target SERVING when no chain has
 * it SYNCING any more). Members on DRAINING nodes that are no longer needed
 * then leave the chain. Returns 1 (chain changed), 0 (it was not SYNCING
 * there), -ENOENT (no such chain, or target not a member).
 */
int cm_member_synced(struct cluster_map *m, uint32_t chain_id, uint32_t target_id);
/* cm_member_synced() for every chain where target_id is SYNCING. Returns
 * the number of chains changed or -ENOENT (unknown target). */
int cm_target_synced(struct cluster_map *m, uint32_t target_id);

/*
 * Replaces old_target (gone for good: it becomes LOST) by new_target in
 * every chain that holds it as a member or in its out list; new_target
 * enters each as a SYNCING tail. new_target must be a SERVING or SYNCING
 * target of an UP node and its node must not already be in any of those chains (other
 * than through old_target). Returns the number of chains changed, -ENOENT
 * (unknown target), -EINVAL (same target, new target not usable, node
 * conflict: nothing changed).
 */
int cm_replace_target(struct cluster_map *m, uint32_t old_target, uint32_t new_target);

/*
 * Starts draining node_id: it becomes DRAINING, and every chain holding one
 * of its targets gets a replacement SYNCING tail on another node, so that
 * no chain is ever short of replicas: the draining member stays until the
 * replacements are in sync (cm_member_synced/cm_target_synced then drop
 * it). A replacement is a SERVING or SYNCING target of an UP node not yet
 * in the chain, the one with the fewest chain memberships (lowest id on ties);
 * chains are processed in id order, so the choice is deterministic.
 *   unplaced: if not NULL, receives how many replicas found no candidate.
 * Returns the number of chains changed or -ENOENT.
 */
int cm_drain_node(struct cluster_map *m, uint32_t node_id, uint32_t *unplaced);

/* Forgets node_id and its targets; allowed only when none of them is in a
 * chain (members or out lists). Returns 0, -ENOENT or -EBUSY. */
int cm_remove_node(struct cluster_map *m, uint32_t node_id);

/*
 * Builds the chain table (see chain_table.h) from the SERVING targets of UP
 * nodes, with replication r (1..CM_MAX_R, reduced to the number of such
 * nodes). Only when no chains exist, unless force (an explicit admin
 * rebuild: it discards the old chains and so the placement of existing
 * data). Returns the number of chains built, -EEXIST (chains exist and not
 * force), -EINVAL (bad r), -ENODEV (no usable target), -ENOSPC (too many
 * targets) or -ENOMEM; on error m is unchanged.
 */
int cm_build_chains(struct cluster_map *m, uint32_t r, bool force);

/*
 * Structural check of a map: ids nonzero and strictly increasing, states
 * valid, targets on known nodes, chain members known, on distinct nodes,
 * SERVING before SYNCING, bounds respected. Returns 0 or STRATA_EBADMSG.
 */
int cm_validate(const struct cluster_map *m);

/*
 * Wire form (little-endian, field by field):
 *   u64 version, u32 replication, u32 chain_table_len,
 *   u32 nnodes,   nnodes   x { u32 id, str addr, u32 state },
 *   u32 ntargets, ntargets x { u32 id, u32 node_id, u64 capacity, u64 used,
 *                              u32 state },
 *   u32 nchains,  nchains  x { u32 id, u64 version, u8 len,
 *                              len x { u32 target, u8 state },
 *                              u8 nout, nout x { u32 target, u8 state } }
 * Leases are not sent. Returns 0 or the wbuf's error (-ENOMEM).
 */
int cm_encode(const struct cluster_map *m, struct wbuf *w);
/*
 * Decodes a map written by cm_encode() and consumes the rest of r (trailing
 * bytes are an error). out is overwritten (not released first). Every count
 * is checked against its maximum and the bytes left before allocating; the
 * result must pass cm_validate(). Returns 0 (the caller releases out) or
 * STRATA_EBADMSG / -ENOMEM, with out left empty and nothing allocated.
 */
int cm_decode(struct rbuf *r, struct cluster_map *out);

/*
 * Change notification without sending the whole map every time. A client
 * sends the version it holds; the reply is
 *   u8 0, u64 version            when since_version == m->version, or
 *   u8 1, <cm_encode() map>      otherwise (also when the client is ahead,
 *                                e.g. after mgmt lost state).
 * The map is small (a few MB at the limits) and changes rarely, so the
 * full map on any change keeps clients simple and always consistent; a
 * per-chain delta can replace form 1 later under a new marker value.
 * Returns 0 or -ENOMEM.
 */
int cm_encode_since(const struct cluster_map *m, uint64_t since_version, struct wbuf *w);
/* Decodes a cm_encode_since() reply. *changed = false: out untouched;
 * true: out holds the new map (as cm_decode(): overwritten, not released
 * first, so pass a spare map). Returns 0, STRATA_EBADMSG or -ENOMEM; on
 * error *changed is false (and out, if the reply held a map, is empty). */
int cm_decode_since(struct rbuf *r, struct cluster_map *out, bool *changed);

#endif
