/* strata_strerror: names both negated errno codes and Strata's own. */
#include <errno.h>
#include <string.h>

#include "common/errors_int.h"

static const char *const strata_msgs[] = {
	[1] = "stale cluster map version: refresh the routing table and retry",
	[2] = "checksum mismatch: data is corrupt",
	[3] = "replica holds an uncommitted version: read from the chain tail",
	[4] = "target is not at the expected position of its chain",
	[5] = "no replica of the chain is available",
	[6] = "the peer is not Strata, or speaks another protocol version",
	[7] = "malformed message",
	[8] = "configuration error",
	[9] = "target is resyncing and cannot serve yet",
	[10] = "unknown operation",
	[11] = "replica lacks the chunk's base version: the whole chunk is resent",
	[12] = "permission denied: no credential (give --token, STRATA_TOKEN or "
	       "STRATA_TOKEN_FILE)",
	[13] = "the server requires TLS: give the cluster's CA certificate (tls_ca, "
	       "STRATA_TLS_CA)",
	[14] = "TLS handshake failed: certificate not trusted or not for this host, or the "
	       "server does not speak TLS",
	[15] = "no intact replica of the chunk is left: its data is lost (restore the file"
	       " from a copy, or remove it)",
	[16] = "this mgmt is not the leader: retry at the leader the reply names, or at"
	       " the next mgmt address",
};

/* A new code in errors.h or errors_int.h needs its message here. */
_Static_assert(sizeof(strata_msgs) / sizeof(strata_msgs[0]) ==
	       (size_t)(-STRATA_ERR_LAST - STRATA_ERR_BASE + 1), "one message per strata error code");

const char *strata_strerror(int err)
{
	static __thread char buf[64];
	/* Negate in a wider type: -INT_MIN does not fit in an int. */
	long long code = -(long long)err;

	if (err == 0)
		return "success";
	if (err > 0)
		return "invalid error code (positive)";
	if (code > STRATA_ERR_BASE) {
		long long idx = code - STRATA_ERR_BASE;

		if (idx < (long long)(sizeof(strata_msgs) / sizeof(strata_msgs[0])) && strata_msgs[idx])
			return strata_msgs[idx];
		return "unknown strata error";
	}
	/* The key errors are how a credential is refused: say so. */
	if (code == EKEYREJECTED)
		return "permission denied: credential rejected (not signed with this cluster's key)";
	if (code == EKEYEXPIRED)
		return "permission denied: the token has expired";
	if (code == EKEYREVOKED)
		return "permission denied: the token has been revoked";
	/* Here 0 < code <= STRATA_ERR_BASE. strerror_r (GNU) may return a
	 * static string or fill buf. */
	return strerror_r((int)code, buf, sizeof(buf));
}
