/*
 * The mgmt addresses a caller knows, and which one to call now.
 *
 * With mgmt.store on PostgreSQL every control daemon runs mgmt and one of
 * them leads (docs/failures.md, "mgmt leader change"); the others answer
 * STRATA_ENOTLEADER, naming the leader in the reply's body. A caller is
 * configured with the list (mgmt.address, or the client's mgmt address:
 * "host:port[,host:port...]") and calls mgmt_addrs_cur(); when a call
 * fails, mgmt_addrs_failed() moves to the named leader, or to the next
 * address when none is named or the failure was the transport's (the
 * leader died). The caller retries on its own schedule (a heartbeat, a
 * map refetch, an I/O's backoff): that is the backoff.
 *
 * Reads of the map (GET_MAP) have a cursor of their own
 * (mgmt_addrs_read): followers answer them too, from the database
 * (docs/operations.md, "Three control nodes"), so each caller starts at
 * an address drawn at init, which spreads many clients' reads over the
 * control nodes instead of all on the first or the leader.
 *
 * Thread-safety: the list is fixed at init; the current indexes are read
 * and moved atomically, so several threads may share one struct.
 */
#ifndef STRATA_CLIENT_MGMT_ADDRS_H
#define STRATA_CLIENT_MGMT_ADDRS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cluster_map.h"

struct rpc_msg;

#define MGMT_ADDRS_MAX 16

struct mgmt_addrs {
	char addr[MGMT_ADDRS_MAX][CM_ADDR_LEN];
	uint32_t n;
	uint32_t cur;		/* index into addr; atomic */
	uint32_t rd;		/* index into addr for reads; atomic */
};

/*
 * Parses spec, a comma-separated list of 1..MGMT_ADDRS_MAX addresses
 * (blanks around each ignored; each 1..CM_ADDR_LEN-1 bytes). Returns 0 or
 * -EINVAL (empty list or entry, too many, too long), a caller-owned
 * struct with nothing to release.
 */
int mgmt_addrs_init(struct mgmt_addrs *a, const char *spec);

/* The address to call now (valid as long as a). */
const char *mgmt_addrs_cur(const struct mgmt_addrs *a);

/* The address to read the map from now (valid as long as a): drawn at
 * init, then moved by mgmt_addrs_read_failed. */
const char *mgmt_addrs_read(const struct mgmt_addrs *a);

/* How long a call to mgmt may wait: timeout_ms, but with several mgmt at
 * most MGMT_ADDRS_CALL_MS, so that a leader that hangs (a paused process,
 * a lost host: no reset tells) is given up on well within a storage
 * node's lease (mgmt.lease, 5 s) and the next one is tried. */
#define MGMT_ADDRS_CALL_MS 2000u
uint32_t mgmt_addrs_timeout(const struct mgmt_addrs *a, uint32_t timeout_ms);

/* Whether a call's status says another mgmt may answer: STRATA_ENOTLEADER
 * or a transport failure (refused, reset, timed out, unreachable). */
bool mgmt_addrs_retry_elsewhere(int status);

/*
 * A call to called (an address this list returned) failed with status;
 * resp is its reply (NULL when none arrived). When the status says so
 * (mgmt_addrs_retry_elsewhere), the current address moves to the leader
 * the reply names when it is in the list, else to the one after called,
 * once however many calls to called fail. Returns true when it moved.
 */
bool mgmt_addrs_failed(struct mgmt_addrs *a, const char *called, int status,
		       const struct rpc_msg *resp);
/* The same for a read (called: an address mgmt_addrs_read returned),
 * moving the read cursor: to the leader a follower that cannot read the
 * database names, else to the next address. */
bool mgmt_addrs_read_failed(struct mgmt_addrs *a, const char *called, int status,
			    const struct rpc_msg *resp);

#endif
