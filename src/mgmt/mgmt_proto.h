/*
 * Bodies of the mgmt service's requests (field by field, little-endian).
 *
 * REGISTER   req: u32 node_id, str addr, u32 n, n x {u32 target_id,
 *                 u64 capacity, u64 used}, u64 incarnation
 *            (incarnation: nonzero, new for every start of the process)
 *            rep: u64 map_version, u32 lease_ms
 * HEARTBEAT  req: u32 node_id, u32 n (0)
 *            rep: u64 map_version, u32 lease_ms  (-ENOTCONN: register again)
 *            (a node serves clients for lease_ms, less a margin, from when
 *            it sent the request that was answered)
 * GET_MAP    req: u64 since_version
 *            rep: cm_encode_since() form
 * REPORT     req: u32 target_id, u64 ino, u64 idx, i32 error
 *            rep: empty
 * ADMIN      req: u32 action, u32 arg [, u32 arg2 [, u64 chain_ver]]
 *            (MGMT_ADMIN_*; SYNCED carries the chain version its resync
 *            ran at, and is refused with STRATA_ESTALE_MAP when the chain
 *            has moved on)
 *            rep: u32 result
 */
#ifndef STRATA_MGMT_PROTO_H
#define STRATA_MGMT_PROTO_H

#define MGMT_MAX_TARGETS_PER_NODE 64

enum mgmt_admin_action {
	MGMT_ADMIN_DRAIN = 1,		/* arg: node id */
	MGMT_ADMIN_REPLACE = 2,		/* arg: target id (old); new chosen by mgmt */
	MGMT_ADMIN_BUILD_CHAINS = 3,	/* arg: replication factor */
	MGMT_ADMIN_SYNCED = 4,		/* arg: target id, arg2: chain id,
					 * chain_ver */
};

#endif
