/*
 * Strata error codes.
 *
 * Every function of libstrata returns 0 (or a non-negative count) on
 * success and a negative error code on failure. Codes in the errno range
 * are the negated errno value (-ENOENT, -EIO, ...); codes from
 * STRATA_ERR_BASE down are Strata's own. strata_strerror() names both.
 */
#ifndef STRATA_ERRORS_H
#define STRATA_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_ERR_BASE 4096

enum strata_err {
	/* The request named a chain/map version older than the server's:
	 * refresh the routing table and retry. */
	STRATA_ESTALE_MAP = -(STRATA_ERR_BASE + 1),
	/* Checksum mismatch: the data is corrupt on disk or in flight. */
	STRATA_EINTEGRITY = -(STRATA_ERR_BASE + 2),
	/* The replica holds only a pending (uncommitted) version; read from
	 * the chain tail instead. */
	STRATA_EDIRTY = -(STRATA_ERR_BASE + 3),
	/* The target is not in the position of the chain the request
	 * assumed (e.g. a write sent to a non-head). */
	STRATA_ENOTHEAD = -(STRATA_ERR_BASE + 4),
	/* No replica of the chain can serve the request right now. */
	STRATA_EUNAVAIL = -(STRATA_ERR_BASE + 5),
	/* Peer speaks another protocol version or bad magic. */
	STRATA_EPROTOVER = -(STRATA_ERR_BASE + 6),
	/* Malformed frame or message body. */
	STRATA_EBADMSG = -(STRATA_ERR_BASE + 7),
	/* Configuration error (unknown key, bad value). */
	STRATA_ECONFIG = -(STRATA_ERR_BASE + 8),
	/* The target is syncing from its chain and cannot serve yet. */
	STRATA_ESYNCING = -(STRATA_ERR_BASE + 9),
	/* Unknown operation code. */
	STRATA_EBADOP = -(STRATA_ERR_BASE + 10),
	/* A replica lacks the base version of a chunk update: its
	 * predecessor resends the whole chunk (between storage nodes). */
	STRATA_ENEEDFULL = -(STRATA_ERR_BASE + 11),
	STRATA_ERR_LAST = -(STRATA_ERR_BASE + 11),
};

/* Returns a static, human-readable description of err (negative code,
 * errno-style or Strata's own). Never returns NULL. Thread-safe. */
const char *strata_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
