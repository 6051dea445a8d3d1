/*
 * Finding a cluster: the one rule by which every Strata program (the
 * strata CLI, python/strata, tools linked against libstrata) turns what its
 * user named into the mgmt address to connect to.
 *
 *   1. mgmt, when given: "host:port" (or a comma-separated list of them:
 *      the control nodes of a cluster whose mgmt is on PostgreSQL), or
 *      the directory of a cluster started by 'strata local up' (its
 *      cluster.json names mgmt);
 *   2. else dir, when given: the directory of 'strata local up';
 *   3. else $STRATA_MGMT, read as mgmt is.
 */
#ifndef STRATA_LOCATE_H
#define STRATA_LOCATE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Applies the rule above and writes the mgmt address, NUL-terminated, into
 * out (len bytes). mgmt and dir may be NULL or "" (not given); nothing is
 * kept after the call. Reads the environment and at most one
 * DIR/cluster.json; connects to nothing.
 *
 * Returns 0, or:
 *   -EDESTADDRREQ   nothing names a cluster (no mgmt, no dir, no
 *                   $STRATA_MGMT);
 *   -ENOENT (or another -errno)  DIR/cluster.json cannot be read;
 *   STRATA_EBADMSG  cluster.json is not JSON or names no "mgmt";
 *   -ENAMETOOLONG   the address does not fit in out;
 *   -EINVAL         out is NULL or len is 0.
 */
int strata_find_mgmt(const char *mgmt, const char *dir, char *out, size_t len);

/*
 * Finding a credential, by the same kind of rule:
 *
 *   1. token, when given: the token's text ("st1....") or a file holding it;
 *   2. else $STRATA_TOKEN, read as token is;
 *   3. else $STRATA_TOKEN_FILE, a file holding it;
 *   4. else the cluster directory that named the cluster (dir, or mgmt or
 *      $STRATA_MGMT when it is a directory): DIR/admin.token, written by
 *      'strata local up', when it exists.
 *
 * A token file must be a regular file that only its owner can read or
 * write (mode 0600): anything else is -EPERM. Writes the token's text into
 * out (len bytes: 16385 fit any token), or "" when no rule applies (the
 * caller goes without a credential). Returns 0, -EPERM, -ENOENT (or
 * another -errno) for a named file that cannot be read, -ENAMETOOLONG,
 * or -EINVAL.
 */
int strata_find_token(const char *token, const char *mgmt, const char *dir, char *out,
		      size_t len);

#ifdef __cplusplus
}
#endif
#endif
