/*
 * Chunk capabilities (docs/security.md, "Chunk capabilities").
 *
 * meta checks a client's permission to open a file; storage cannot (it
 * knows chunks, not paths or owners), so meta hands the client a
 * capability at OPEN and CREATE (and with a truncating reply) that the
 * client sends with every chunk request of that file:
 *
 *   cap = { ino, rights (CAP_READ | CAP_WRITE), expiry (seconds since the
 *           epoch), mac = HMAC-SHA256(cluster key,
 *           "strata-cap" | ino (u64 LE) | rights (u8) | expiry (i64 LE)) }
 *
 * Only a holder of the cluster key (a daemon) can make one, so a client
 * cannot reach a chunk of a file it could not open, nor widen its rights,
 * nor keep them past the expiry. Storage checks the cap of a client
 * token's request (cap_check); daemons and the peers of a server without
 * a key send a zero cap and are not checked.
 *
 * A cap is not bound to the token it was issued to: whoever holds one may
 * use it until it expires, as with an open file descriptor passed on. Its
 * lifetime is short (CAP_LIFETIME_S) so that a permission taken away at
 * meta is taken away at storage within it.
 */
#ifndef STRATA_COMMON_CAP_H
#define STRATA_COMMON_CAP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/token.h"

#define CAP_READ 1u
#define CAP_WRITE 2u
#define CAP_RIGHTS (CAP_READ | CAP_WRITE)
#define CAP_MAC_LEN 32
/* How long meta's caps live; a client refreshes one that has less than
 * CAP_REFRESH_S left before it uses it. */
#define CAP_LIFETIME_S 600
#define CAP_REFRESH_S 60

struct chunk_cap {
	uint64_t ino;
	uint8_t rights;			/* CAP_* */
	int64_t expiry;			/* seconds since the epoch */
	uint8_t mac[CAP_MAC_LEN];
};

/* Fills c for ino with rights, good until expiry, signed with k. */
void cap_make(const struct cluster_key *k, uint64_t ino, uint8_t rights, int64_t expiry,
	      struct chunk_cap *c);

/* Whether c lets its holder do need (CAP_*) to chunks of ino at time now
 * (seconds since the epoch): its mac is k's, it has not expired, it names
 * ino and its rights cover need. 0 or -EACCES. */
int cap_check(const struct cluster_key *k, const struct chunk_cap *c, uint64_t ino,
	      uint8_t need, int64_t now);

/*
 * The caps a checker verified last, so a stream of requests with the same
 * cap (a file read chunk by chunk, a batch) costs one HMAC, not one each.
 * Direct-mapped by ino; one thread's (a storage target's reactor). An
 * entry only spares the HMAC: expiry, ino and rights are checked on every
 * use, and the mac is compared in constant time.
 */
#define CAP_CACHE_SLOTS 64

struct cap_cache {
	struct chunk_cap slot[CAP_CACHE_SLOTS];
	bool used[CAP_CACHE_SLOTS];
	uint64_t hits, misses;		/* for the tests and the bench */
};

void cap_cache_init(struct cap_cache *cc);
/* cap_check through cc. */
int cap_cache_check(struct cap_cache *cc, const struct cluster_key *k, const struct chunk_cap *c,
		    uint64_t ino, uint8_t need, int64_t now);

#endif
