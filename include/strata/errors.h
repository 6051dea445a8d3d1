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

/* The codes libstrata returns besides -errno ones. The numbers between
 * them belong to statuses Strata's processes exchange among themselves;
 * libstrata never returns those (it retries, then says STRATA_EUNAVAIL). */
enum strata_err {
	/* Checksum mismatch: the data is corrupt on disk or in flight, and no
	 * replica had a good copy. */
	STRATA_EINTEGRITY = -(STRATA_ERR_BASE + 2),
	/* No replica of the chain can serve the request right now (all down,
	 * resyncing, or the retry time ran out). */
	STRATA_EUNAVAIL = -(STRATA_ERR_BASE + 5),
	/* The peer speaks another protocol version, or is not Strata. */
	STRATA_EPROTOVER = -(STRATA_ERR_BASE + 6),
	/* A malformed reply, or a file of Strata's own format (a checkpoint
	 * manifest, a dataset index) that does not parse. */
	STRATA_EBADMSG = -(STRATA_ERR_BASE + 7),
	/* The server does not know the operation: it is older than the
	 * client. */
	STRATA_EBADOP = -(STRATA_ERR_BASE + 10),
	/* The cluster requires a credential and none was given. A credential
	 * that is refused is -EKEYREJECTED (not this cluster's), -EKEYEXPIRED
	 * or -EKEYREVOKED; one that does not reach what was asked, -EACCES. */
	STRATA_ENOCRED = -(STRATA_ERR_BASE + 12),
	/* The server accepts only TLS connections and no CA was given to
	 * check its certificate with (tls_ca, $STRATA_TLS_CA). */
	STRATA_ETLSREQ = -(STRATA_ERR_BASE + 13),
	/* The TLS handshake failed: the server's certificate is not signed by
	 * the CA given or does not name the host connected to, or the server
	 * does not speak TLS. The log says which. */
	STRATA_ETLS = -(STRATA_ERR_BASE + 14),
	/* No intact replica of a chunk is left: every member of its chain
	 * found its copy damaged (or has none while the others' are damaged).
	 * The chunk's data is lost; retrying does not help. */
	STRATA_ELOST = -(STRATA_ERR_BASE + 15),
};

/* Returns a static, human-readable description of err (negative code,
 * errno-style or Strata's own). Never returns NULL. Thread-safe. */
const char *strata_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
