/*
 * mgmt's state machine over the cluster map (common/cluster_map.h):
 * membership with heartbeat leases, chain building, and every
 * reconfiguration (a node offline or back, a member in sync, a target
 * replaced, a node drained). Pure logic: mgmt_service.c calls it on its
 * thread, and the simulation test drives it directly.
 *
 * Failure handling, as single calls: cm_expire_leases()/cm_set_node_offline()
 * take a node's targets out of their chains; cm_register_node() of a
 * returning node puts them back as SYNCING tails; cm_target_synced() or
 * cm_member_synced() make them SERVING; cm_replace_target() swaps a lost
 * target for a spare; cm_drain_node() adds replicas elsewhere and drops the
 * node's memberships once those replicas are in sync.
 */
#ifndef STRATA_MGMT_MEMBERSHIP_H
#define STRATA_MGMT_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster_map.h"

/* What a storage node reports for each of its targets when registering. */
struct cm_target_info {
	uint32_t id;
	uint64_t capacity, used;
	uint64_t fs;		/* as struct cm_target's */
	uint64_t avail;		/* as struct cm_target's */
};

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

/*
 * What a heartbeat tells of node_id's targets: the capacity, usage, free
 * space and fs of each listed target that belongs to node_id are updated,
 * without a new map version (they are informational, and a version per
 * heartbeat would make every holder refetch the map), except when
 * - a target's fs changed (mgmt does not store it: after its restart the
 *   first heartbeat tells it again), so that clients' capacity totals
 *   (strata_statfs) count the filesystem once again;
 * - a target became full or has room again (struct cm_full_mark); meta
 *   places new files by it.
 * Targets not listed, or of another node, are left alone.
 * Returns how many targets changed.
 */
/* When a target is full: once the share of its capacity in use (capacity
 * - avail) reaches pct percent, or its avail falls below free bytes; it
 * has room again only below pct - CM_FULL_HYSTERESIS_PCT and above twice
 * free (so that one chunk freed does not flip it back). pct 100 and free
 * 0 never hold a target full. */
struct cm_full_mark {
	uint32_t pct;		/* mgmt.full_pct */
	uint64_t free;		/* mgmt.full_free */
};
#define CM_FULL_HYSTERESIS_PCT 2
uint32_t cm_update_space(struct cluster_map *m, uint32_t node_id,
			 const struct cm_target_info *targets, uint32_t n,
			 const struct cm_full_mark *mark);

/*
 * Node identity (cm_node.ident). cm_check_ident: 0 when a daemon whose data
 * directory is ident may act as node_id; -EADDRINUSE when the node was
 * registered by another directory, is not OFFLINE and its lease runs past
 * now_ms (two daemons configured with one node.id: the live one keeps it);
 * 0 also for an unknown node or one whose identity is not known yet (after
 * mgmt's restart). cm_set_ident records ident for a known node (-ENOENT
 * otherwise).
 */
int cm_check_ident(const struct cluster_map *m, uint32_t node_id, uint64_t ident,
		   uint64_t now_ms);
int cm_set_ident(struct cluster_map *m, uint32_t node_id, uint64_t ident);

/* Renews node_id's lease. Returns 0, -ENOENT (unknown node) or -ENOTCONN
 * (the node is OFFLINE, or DRAINING with no target in service and one
 * OFFLINE: drained while offline; it must register again to bring its
 * targets back). */
int cm_heartbeat(struct cluster_map *m, uint32_t node_id, uint64_t lease_expires_ms);
/*
 * A meta or mem service announces itself (mgmt/announce.h): it is added UP,
 * or its entry updated (address, a new incarnation, back UP), bumping the
 * version; an unchanged announcement only renews its lease.
 *   kind: CM_SVC_META..CM_SVC_LAST; node_id nonzero; addr as for
 *   cm_register_node; incarnation nonzero.
 * Returns 1 (the map changed), 0 (lease renewed), -EINVAL, -ENOSPC
 * (CM_MAX_SERVICES reached) or -ENOMEM; on error m is unchanged.
 */
int cm_announce_service(struct cluster_map *m, uint32_t kind, uint32_t node_id, const char *addr,
			uint64_t incarnation, uint64_t lease_expires_ms);
/* Marks offline every UP or DRAINING node, and every UP service, whose
 * lease_expires_ms <= now_ms. Returns the number of chains changed (the
 * version is bumped when anything changed). */
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

/*
 * Retires node_id for good: it and its targets leave the map. Allowed when
 * the node holds no replica (drained, or never in a chain), or when it is
 * dead (OFFLINE, or drained while offline): then every chain that lists
 * one of its targets drops it (as cm_replace_target() drops the old one)
 * and gets SYNCING replacements on UP nodes, chosen as cm_drain_node()
 * does, up to R (or what it held, if less); they resync from the chain's
 * serving members.
 *   count: receives, on success, how many replicas found no replacement
 *   (those chains stay short until storage is added); on -EBUSY or
 *   -EINPROGRESS, how many replicas the node holds; on -ENODATA, in how
 *   many chains it holds the last copy. Not NULL.
 * Returns the number of chains changed (>= 0), -ENOENT (no such node),
 * -EBUSY (the node is up and holds replicas: drain it first),
 * -EINPROGRESS (it is draining and still holds replicas), -ENODATA (it is
 * down and a chain it is in has no other serving member: removing it
 * would lose that chain's data) or -ENOMEM; on error m is unchanged.
 * Keeping the node out afterwards (refusing its registration) is the
 * caller's: the map no longer knows it.
 */
int cm_remove_node(struct cluster_map *m, uint32_t node_id, uint32_t *count);

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
 * One member of a chain moves to another target (the rebalancer,
 * mgmt/rebalance.h), in two calls so that the chain never has fewer than R
 * serving replicas:
 *
 * cm_move_begin: to_target joins chain_id as a SYNCING tail beside
 * from_target, which stays a member. The chain must be whole (R members,
 * all SERVING, none out, every one on an UP node), from_target a member,
 * to_target a SERVING or SYNCING target of an UP node that holds no entry
 * of the chain. Returns 1 (the chain changed: a new version), -ENOENT (no
 * such chain or target) or -EINVAL (any condition above; nothing changed).
 *
 * cm_member_leave: target_id leaves chain_id (a member, or an entry of
 * its out list) once the chain keeps at least R SERVING members without
 * it. Returns 1 (it left: a new version), 0 (not yet: fewer would serve)
 * or -ENOENT (no such chain, or the target is not in it).
 */
int cm_move_begin(struct cluster_map *m, uint32_t chain_id, uint32_t from_target,
		  uint32_t to_target);
int cm_member_leave(struct cluster_map *m, uint32_t chain_id, uint32_t target_id);

#endif
