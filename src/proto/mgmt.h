/*
 * The mgmt service's operations (src/proto/proto.h explains the tables).
 *
 *   REGISTER   a storage node (re)joins: its address, targets,
 *              incarnation (nonzero, new for every start of the process)
 *              and ident (nonzero, its data directory's identity,
 *              service_data_ident()) -> mg_lease (the map version, and
 *              the lease it renews); -EPERM: the node id was removed
 *              (MGMT_ADMIN_REMOVE) and is never admitted again;
 *              -EADDRINUSE: another data directory holds the node id
 *              and its lease is live (two daemons with one node.id)
 *   HEARTBEAT  renews the lease; the targets' current capacity, usage
 *              and filesystem, which mgmt keeps in its map (without a
 *              new version: a GET_MAP of the whole map sees them)
 *              -> mg_lease (-ENOTCONN / -ENOENT: register again; also
 *              when ident is not the one the node registered with)
 *   GET_MAP    the cluster map, when newer than the caller's version
 *   REPORT     a replica found a chunk damaged; error STRATA_ELOST: no
 *              intact replica is left (repeated every 30 s while so),
 *              0: the chunk is lost no more (mgmt/lost.h)
 *   ADMIN      drain, remove, replace, build chains, "in sync"
 *              (MGMT_ADMIN_*)
 *   ANNOUNCE   a meta or mem service is (still) at addr: adds or renews
 *              its entry in the map -> mg_lease (mgmt/announce.h)
 *   TOKEN_CREATE  claims as JSON (common/token.h): mgmt signs them with
 *              the cluster key and records the token in its registry
 *              -> mg_token (its id and text). -ENOKEY: mgmt has no key;
 *              -EEXIST: the id is taken; STRATA_EBADMSG: bad claims
 *   TOKEN_LIST the registry: ids, tenants, expiry, revoked; no secrets
 *   REBALANCE  the rebalancer (mgmt/rebalance.h): its progress, and pause
 *              or resume it (MGMT_REBALANCE_*) -> mg_rebalance_state
 *   TOKEN_REVOKE  by id: recorded, and the id enters the map's revoked
 *              list (a new map version). until 0: a token of the registry
 *              (-ENOENT otherwise); until > 0: also one mgmt did not make
 *              (signed offline with the key), recorded as revoked until
 *              its expiry `until` (INT64_MAX: it never expires)
 *
 * A node serves clients for lease_ms, less a margin, from when it sent the
 * request that mgmt answered (docs/failures.md).
 *
 * Several mgmt on one PostgreSQL store (mgmt.store): only the leader
 * answers writes and heartbeats; the others answer them STRATA_ENOTLEADER,
 * the body the leader's address (bytes, no NUL; empty when unknown).
 * Followers answer GET_MAP and TOKEN_LIST from the database (the map no
 * older than the leader's last write plus mgmt.heartbeat,
 * mgmt/mgmt_service.c), or STRATA_ENOTLEADER when they cannot read it.
 * Callers move with net/mgmt_addrs.h. No frame changed for this.
 */
#ifndef STRATA_PROTO_MGMT_H
#define STRATA_PROTO_MGMT_H

#include "common/cluster_map.h"
#include "proto/proto.h"

#define MGMT_MAX_TARGETS_PER_NODE 64u
#define MGMT_MAX_TOKENS 8192u		/* in one TOKEN_LIST reply */

enum mgmt_admin_action {
	MGMT_ADMIN_DRAIN = 1,		/* arg: node id */
	MGMT_ADMIN_REPLACE = 2,		/* arg: old target id, arg2: new target id */
	MGMT_ADMIN_BUILD_CHAINS = 3,	/* arg: replication factor */
	MGMT_ADMIN_SYNCED = 4,		/* arg: target id, arg2: chain id, chain_ver:
					 * the version its resync listed at (mgmt
					 * refuses the report, STRATA_ESTALE_MAP,
					 * when the chain moved on) */
	MGMT_ADMIN_REMOVE = 5,		/* arg: node id; retires it (membership.h
					 * cm_remove_node, whose errors it answers):
					 * result = replicas that found no
					 * replacement; -EPERM: the node runs mgmt */
};
#define MGMT_ADMIN_LAST MGMT_ADMIN_REMOVE

/* fs: the filesystem holding the target (fs_identity(), common/fileio.h),
 * or 0 when the target has a capacity of its own (storage.capacity). */
#define MG_TARGET_INFO_FIELDS(X) \
	X(U32, id) \
	X(U64, capacity) \
	X(U64, used) \
	X(U64, fs) \
	X(U64, avail)
PROTO_MSG(mg_target_info, MG_TARGET_INFO_FIELDS)

#define MG_REGISTER_FIELDS(X) \
	X(U32, node_id) \
	X(STR, addr, CM_ADDR_LEN - 1) \
	X(ARR, targets, mg_target_info, MGMT_MAX_TARGETS_PER_NODE) \
	X(U64, incarnation) \
	X(U64, ident)
PROTO_MSG(mg_register, MG_REGISTER_FIELDS)

#define MG_HEARTBEAT_FIELDS(X) \
	X(U32, node_id) \
	X(ARR, targets, mg_target_info, MGMT_MAX_TARGETS_PER_NODE) \
	X(U64, ident)
PROTO_MSG(mg_heartbeat, MG_HEARTBEAT_FIELDS)

#define MG_LEASE_FIELDS(X) \
	X(U64, map_version) \
	X(U32, lease_ms)
PROTO_MSG(mg_lease, MG_LEASE_FIELDS)

#define MG_ANNOUNCE_FIELDS(X) \
	X(U32R, kind, CM_SVC_LAST) \
	X(U32, node_id) \
	X(STR, addr, CM_ADDR_LEN - 1) \
	X(U64, incarnation)
PROTO_MSG(mg_announce, MG_ANNOUNCE_FIELDS)

#define MG_SINCE_FIELDS(X) \
	X(U64, since_version)
PROTO_MSG(mg_since, MG_SINCE_FIELDS)

/* The cluster map on the wire (src/proto/cmap.c converts it to and from
 * struct cluster_map, and validates it). */
#define CM_NODE_W_FIELDS(X) \
	X(U32, id) \
	X(STR, addr, CM_ADDR_LEN - 1) \
	X(U32R, state, NODE_DRAINING)
PROTO_MSG(cm_node_w, CM_NODE_W_FIELDS)

#define CM_TARGET_W_FIELDS(X) \
	X(U32, id) \
	X(U32, node_id) \
	X(U64, capacity) \
	X(U64, used) \
	X(U32R, state, TARGET_LOST) \
	X(U64, fs) \
	X(U64, avail) \
	X(U32R, full, 1)
PROTO_MSG(cm_target_w, CM_TARGET_W_FIELDS)

#define CM_MEMBER_W_FIELDS(X) \
	X(U32, target) \
	X(U8R, state, TARGET_LOST)
PROTO_MSG(cm_member_w, CM_MEMBER_W_FIELDS)

#define CM_CHAIN_W_FIELDS(X) \
	X(U32, id) \
	X(U64, version) \
	X(ARR, members, cm_member_w, CM_CHAIN_SLOTS) \
	X(ARR, out, cm_member_w, CM_CHAIN_SLOTS)
PROTO_MSG(cm_chain_w, CM_CHAIN_W_FIELDS)

#define CM_SERVICE_W_FIELDS(X) \
	X(U32R, kind, CM_SVC_LAST) \
	X(U32, node_id) \
	X(STR, addr, CM_ADDR_LEN - 1) \
	X(U32R, state, NODE_OFFLINE)
PROTO_MSG(cm_service_w, CM_SERVICE_W_FIELDS)

#define CM_REVOKED_W_FIELDS(X) \
	X(STR, id, TOKEN_ID_LEN)
PROTO_MSG(cm_revoked_w, CM_REVOKED_W_FIELDS)

#define CM_MAP_W_FIELDS(X) \
	X(U64, version) \
	X(U32R, replication, CM_MAX_R) \
	X(U32, chain_table_len) \
	X(ARR, nodes, cm_node_w, CM_MAX_NODES) \
	X(ARR, targets, cm_target_w, CM_MAX_TARGETS) \
	X(ARR, chains, cm_chain_w, CM_MAX_CHAINS) \
	X(ARR, services, cm_service_w, CM_MAX_SERVICES) \
	X(ARR, revoked, cm_revoked_w, CM_MAX_REVOKED)
PROTO_MSG(cm_map_w, CM_MAP_W_FIELDS)

/* maps: none when the caller's version is current, else the whole map
 * (also when the caller is ahead, e.g. after mgmt lost state). */
#define MG_MAP_FIELDS(X) \
	X(U64, version) \
	X(ARR, maps, cm_map_w, 1)
PROTO_MSG(mg_map, MG_MAP_FIELDS)

#define MG_REPORT_FIELDS(X) \
	X(U32, target_id) \
	X(U64, ino) \
	X(U64, idx) \
	X(I32, error)
PROTO_MSG(mg_report, MG_REPORT_FIELDS)

#define MG_ADMIN_FIELDS(X) \
	X(U32R, action, MGMT_ADMIN_LAST) \
	X(U32, arg) \
	X(U32, arg2) \
	X(U64, chain_ver)
PROTO_MSG(mg_admin, MG_ADMIN_FIELDS)

#define MG_RESULT_FIELDS(X) \
	X(U32, result)
PROTO_MSG(mg_result, MG_RESULT_FIELDS)

/* REBALANCE: the action, and the rebalancer's state after it (counts as
 * struct rebalance_stats; moves: the ones in flight). */
enum mgmt_rebalance_action {
	MGMT_REBALANCE_STATUS = 0,
	MGMT_REBALANCE_PAUSE = 1,	/* no move starts; moves in flight finish */
	MGMT_REBALANCE_RESUME = 2,
};
#define MGMT_REBALANCE_LAST MGMT_REBALANCE_RESUME
#define MGMT_MAX_MOVES 64u		/* REBALANCE_MAX_MOVES */

#define MG_REBALANCE_FIELDS(X) \
	X(U32R, action, MGMT_REBALANCE_LAST)
PROTO_MSG(mg_rebalance, MG_REBALANCE_FIELDS)

#define MG_MOVE_FIELDS(X) \
	X(U32, chain) \
	X(U32, from) \
	X(U32, to)
PROTO_MSG(mg_move, MG_MOVE_FIELDS)

#define MG_REBALANCE_STATE_FIELDS(X) \
	X(U8R, paused, 1) \
	X(U8R, balanced, 1) \
	X(U32, band_pct) \
	X(U32, max_moves) \
	X(U32, nodes) \
	X(U32, fill_min) \
	X(U32, fill_max) \
	X(U32, fill_mean_x100) \
	X(U32, pending) \
	X(U64, moves_done) \
	X(U64, moves_cancelled) \
	X(U64, bytes_moved) \
	X(ARR, moves, mg_move, MGMT_MAX_MOVES)
PROTO_MSG(mg_rebalance_state, MG_REBALANCE_STATE_FIELDS)

/* The token registry (TOKEN_*). */
#define MG_TOKEN_CREATE_FIELDS(X) \
	X(STR, claims, TOKEN_TEXT_MAX)
PROTO_MSG(mg_token_create, MG_TOKEN_CREATE_FIELDS)

#define MG_TOKEN_FIELDS(X) \
	X(STR, id, TOKEN_ID_LEN) \
	X(STR, token, TOKEN_TEXT_MAX)
PROTO_MSG(mg_token, MG_TOKEN_FIELDS)

/* created, exp: seconds since the epoch (exp 0: never). */
#define MG_TOKEN_INFO_FIELDS(X) \
	X(STR, id, TOKEN_ID_LEN) \
	X(STR, tenant, TOKEN_TENANT_MAX) \
	X(I64, created) \
	X(I64, exp) \
	X(U8R, admin, 1) \
	X(U8R, revoked, 1)
PROTO_MSG(mg_token_info, MG_TOKEN_INFO_FIELDS)

/* total: tokens in the registry; tokens: the first MGMT_MAX_TOKENS of
 * them, oldest first. */
#define MG_TOKEN_LIST_FIELDS(X) \
	X(U32, total) \
	X(ARR, tokens, mg_token_info, MGMT_MAX_TOKENS)
PROTO_MSG(mg_token_list, MG_TOKEN_LIST_FIELDS)

#define MG_TOKEN_ID_FIELDS(X) \
	X(STR, id, TOKEN_ID_LEN) \
	X(I64, until)
PROTO_MSG(mg_token_id, MG_TOKEN_ID_FIELDS)

/* Stubs: mg_register_call(), mg_heartbeat_req(), mg_get_map_rep(), ... */
#define MGMT_OPS(OP) \
	OP(MGMT_REGISTER,  16, mg_register,  mg_register,  mg_lease, DAEMON) \
	OP(MGMT_HEARTBEAT, 17, mg_heartbeat, mg_heartbeat, mg_lease, DAEMON) \
	OP(MGMT_GET_MAP,   18, mg_get_map,   mg_since,     mg_map, ANY) \
	OP(MGMT_REPORT,    19, mg_report,    mg_report,    proto_void, DAEMON) \
	OP(MGMT_ADMIN,     20, mg_admin,     mg_admin,     mg_result, ADMIN) \
	OP(MGMT_ANNOUNCE,  21, mg_announce,  mg_announce,  mg_lease, DAEMON) \
	OP(MGMT_TOKEN_CREATE, 22, mg_token_create, mg_token_create, mg_token, ADMIN) \
	OP(MGMT_TOKEN_LIST,   23, mg_token_list,   proto_void,      mg_token_list, ADMIN) \
	OP(MGMT_TOKEN_REVOKE, 24, mg_token_revoke, mg_token_id,     proto_void, ADMIN) \
	OP(MGMT_REBALANCE,    28, mg_rebalance,    mg_rebalance,    mg_rebalance_state, ADMIN)
PROTO_OPS(mgmt, MGMT_OPS)

/*
 * The cluster map to and from its wire form. cmap_to_wire fills w with
 * arrays it allocates (cm_map_w_release frees them). cmap_from_wire
 * builds out (overwritten, not released first) and validates it
 * (cm_validate): 0 (the caller releases out), STRATA_EBADMSG or -ENOMEM
 * with out left empty.
 */
int cmap_to_wire(const struct cluster_map *m, struct cm_map_w *w);
int cmap_from_wire(const struct cm_map_w *w, struct cluster_map *out);
/* A GET_MAP reply for a caller at since_version (encoded into b). */
int cmap_encode_since(const struct cluster_map *m, uint64_t since_version, struct bbuf *b);
/* Decodes a GET_MAP reply body: *changed = false leaves out untouched;
 * true: out holds the new map (as cmap_from_wire). */
int cmap_decode_since(const void *body, uint32_t len, struct cluster_map *out, bool *changed);

/* Blocking: the whole cluster map of mgmt at addr into out (the caller
 * releases it); addr may be a comma-separated list (net/mgmt_addrs.h):
 * the first mgmt that answers, from the list's read address on (a
 * follower's map may be mgmt.heartbeat older than the leader's). 0 or a
 * negative error. */
int cmap_fetch_sync(struct rpc_client *cl, const char *addr, uint32_t timeout_ms,
		    struct cluster_map *out);

#endif
