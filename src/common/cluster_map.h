/*
 * The cluster map: storage nodes, their targets, the replication chains
 * built from them, and a version bumped on every change. This is the model
 * everyone reads (the client routes by it, storage checks requests against
 * it); mgmt changes it through src/mgmt/membership.h, and
 * src/proto/mgmt.h carries it on the wire. Pure data: no I/O, no locks.
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
 *  - Services other than storage (meta, mem, compute) are entries of their own:
 *    a kind, the node id of the daemon that runs it, the address clients
 *    call, and UP or OFFLINE. Each announces itself to mgmt and renews a
 *    lease like a storage node (mgmt/announce.h); clients find them here,
 *    never by assuming where they run. They are not persisted: after a
 *    mgmt restart they reappear with their next announcement.
 *  - The revoked tokens: the ids (common/token.h) of the tokens mgmt's
 *    registry revoked that have not expired, sorted and distinct. Every
 *    process that receives the map hands them to net_revoked_update()
 *    (net/auth.h), so a revocation reaches every daemon with the version
 *    that carries it. mgmt rebuilds the list from its token registry at
 *    start (mgmt_store.h); it is not stored with the map.
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
#ifndef STRATA_COMMON_CLUSTER_MAP_H
#define STRATA_COMMON_CLUSTER_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/token.h"

#define CM_MAX_R 8
/* One slot beyond R: a drain adds the new replica before dropping the old. */
#define CM_CHAIN_SLOTS (CM_MAX_R + 1)
#define CM_DEFAULT_R 3
#define CM_ADDR_LEN 64
#define CM_MAX_NODES 4096u
#define CM_MAX_TARGETS 65536u
#define CM_MAX_CHAINS 65536u
#define CM_MAX_SERVICES 4096u
#define CM_MAX_REVOKED 16384u	/* 20 bytes each on the wire */

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

/* The services the map lists besides storage. */
enum cm_service_kind {
	CM_SVC_META = 1,
	CM_SVC_MEM = 2,
	CM_SVC_COMPUTE = 3,	/* a GPU host (src/compute/): the composer's inventory */
};
#define CM_SVC_LAST CM_SVC_COMPUTE

/* "meta", "mem", "compute", or "?" for a kind out of range. */
const char *cm_service_kind_name(uint32_t kind);

/* A meta, mem or compute service: state NODE_UP or NODE_OFFLINE. */
struct cm_service {
	uint32_t kind;			/* enum cm_service_kind */
	uint32_t node_id;		/* of the daemon that runs it; nonzero */
	char addr[CM_ADDR_LEN];		/* "host:port" clients call */
	uint32_t state;
	uint64_t incarnation;		/* mgmt-local: the announcing process */
	uint64_t lease_expires_ms;	/* mgmt-local */
};

struct cm_node {
	uint32_t id;			/* nonzero */
	char addr[CM_ADDR_LEN];		/* "host:port" of its storage RPC */
	uint32_t state;			/* enum cm_node_state */
	uint64_t lease_expires_ms;	/* mgmt-local, see above */
	/* mgmt-local: the identity of the data directory that registered it
	 * (service_data_ident); 0 until one does after mgmt's start. */
	uint64_t ident;
};

struct cm_target {
	uint32_t id;			/* nonzero, unique in the cluster */
	uint32_t node_id;
	uint64_t capacity, used;	/* bytes */
	uint32_t state;			/* enum cm_target_state */
	/* The filesystem holding it (fs_identity(), common/fileio.h): targets
	 * with the same nonzero fs share one capacity; 0: a capacity of its
	 * own (storage.capacity). Reported with every heartbeat; not stored
	 * by mgmt (0 after its restart until the next heartbeat, whose new
	 * fs makes a new version: cm_update_space()). */
	uint64_t fs;
	/* Bytes a new chunk may still take: the target's own capacity less
	 * its usage, or what its filesystem has free (storage.capacity 0).
	 * As of the last heartbeat, like capacity and used. */
	uint64_t avail;
	/* 1 while mgmt holds the target full (mgmt.full_pct): meta places no
	 * new file on a chain with a full member. A change is a new map
	 * version; not stored (0 after mgmt's restart until the heartbeats). */
	uint32_t full;
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
	struct cm_service *services;	/* sorted by (kind, node_id) */
	uint32_t nservices, services_cap;
	char (*revoked)[TOKEN_ID_LEN + 1];	/* token ids, sorted, distinct */
	uint32_t nrevoked, revoked_cap;
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
int cm_reserve_services(struct cluster_map *m, uint32_t nservices);
int cm_reserve_revoked(struct cluster_map *m, uint32_t nrevoked);
/* Whether token id is in m's revoked list (binary search). */
bool cm_revoked(const struct cluster_map *m, const char *id);

/* Lookups by id (binary search); NULL when absent. */
const struct cm_node *cm_find_node(const struct cluster_map *m, uint32_t id);
const struct cm_target *cm_find_target(const struct cluster_map *m, uint32_t id);
const struct cm_chain *cm_find_chain(const struct cluster_map *m, uint32_t id);
const struct cm_service *cm_find_service(const struct cluster_map *m, uint32_t kind,
					 uint32_t node_id);
/* An UP service of kind: the one after the node id `after` (0: the first),
 * wrapping around, so that a caller that failed with one tries the next.
 * NULL when none is UP. */
const struct cm_service *cm_pick_service(const struct cluster_map *m, uint32_t kind,
					 uint32_t after);
/* Returns true when every node of the chain's members is distinct, the
 * states are ordered (SERVING before SYNCING): a cheap self-check. */
bool cm_chain_ok(const struct cluster_map *m, const struct cm_chain *c);
/* The node holding target_id, or 0. */
uint32_t cm_node_of(const struct cluster_map *m, uint32_t target_id);
/* Index of c's last SERVING member (its committed tail), or -1. */
int cm_serving_tail(const struct cm_chain *c);

/*
 * The cluster's raw space, counting each filesystem once: capacity sums
 * the targets' capacities, except that targets reporting the same nonzero
 * fs (several targets, or several nodes of one machine, on one disk) add
 * it once, the largest they report; used sums what every target holds.
 * LOST targets are left out. Either pointer may be NULL.
 * Returns 0, or -ENOMEM (both left at 0).
 */
int cm_capacity(const struct cluster_map *m, uint64_t *capacity, uint64_t *used);

/*
 * Structural check of a map: ids nonzero and strictly increasing, states
 * valid, targets on known nodes, chain members known, on distinct nodes,
 * SERVING before SYNCING, revoked ids well-formed (token_id_ok), sorted
 * and distinct, bounds respected. Returns 0 or STRATA_EBADMSG.
 */
int cm_validate(const struct cluster_map *m);

#endif
