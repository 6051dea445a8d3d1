/*
 * Status codes that pass between Strata's own processes and never reach a
 * libstrata caller: the chain's answers to a peer or to the storage client
 * inside libstrata (which retries on them, and reports STRATA_EUNAVAIL if
 * it gives up), and the daemon's configuration error. They share the
 * numbering of the public codes (include/strata/errors.h): the numbers are
 * on the wire and never change. strata_strerror() names them too.
 */
#ifndef STRATA_COMMON_ERRORS_INT_H
#define STRATA_COMMON_ERRORS_INT_H

#include "strata/errors.h"

enum strata_err_int {
	/* The request named a chain/map version older than the server's:
	 * refresh the routing table and retry. */
	STRATA_ESTALE_MAP = -(STRATA_ERR_BASE + 1),
	/* The replica holds only a pending (uncommitted) version; read from
	 * the chain tail instead. */
	STRATA_EDIRTY = -(STRATA_ERR_BASE + 3),
	/* The target is not in the position of the chain the request
	 * assumed (e.g. a write sent to a non-head). */
	STRATA_ENOTHEAD = -(STRATA_ERR_BASE + 4),
	/* Configuration error (unknown key, bad value): the daemon's. */
	STRATA_ECONFIG = -(STRATA_ERR_BASE + 8),
	/* The target is syncing from its chain and cannot serve yet. */
	STRATA_ESYNCING = -(STRATA_ERR_BASE + 9),
	/* A replica lacks the base version of a chunk update: its
	 * predecessor resends the whole chunk (between storage nodes). */
	STRATA_ENEEDFULL = -(STRATA_ERR_BASE + 11),
	/* This mgmt is not the leader of the control nodes (a follower, or
	 * deposed): the reply's body, when not empty, is the leader's
	 * address; try there, or the next mgmt address (net/mgmt_addrs.h). */
	STRATA_ENOTLEADER = -(STRATA_ERR_BASE + 16),
	STRATA_ERR_LAST = -(STRATA_ERR_BASE + 16),
};

#endif
