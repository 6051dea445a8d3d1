/*
 * Who is on the other end of a connection (docs/security.md).
 *
 * A connecting side presents a credential (struct net_cred): the cluster
 * key (a daemon), a token (a client, common/token.h), or nothing. An
 * accepting side that holds the cluster key (struct net_auth) requires
 * one; without a key it trusts every peer, which stratad allows only on
 * loopback.
 *
 * The exchange (docs/protocol.md, "Opening a connection"): HELLO carries
 * the client's nonce, its credential kind and, for a token, the token's
 * signed part; the reply carries the server's nonce and the server's
 * proof HMAC(S, "strata-server" nc ns); the client checks it and sends
 * AUTH with HMAC(S, "strata-client" nc ns) before any request. S is the
 * cluster key, or the token's secret (which a daemon recomputes from the
 * signed part). No secret crosses the wire, a captured exchange cannot be
 * replayed (fresh nonces on both sides), and each side proves it holds
 * the secret, so a client also knows it reached the cluster.
 *
 * Identities are checked again on every request against the expiry and
 * the revoked tokens (net_revoked_*), which mgmt distributes with the
 * cluster map.
 */
#ifndef STRATA_NET_AUTH_H
#define STRATA_NET_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/token.h"

#define AUTH_NONCE_LEN 16

enum net_cred_kind {
	NET_CRED_NONE = 0,
	NET_CRED_KEY = 1,
	NET_CRED_TOKEN = 2,
};

/* What the connecting side presents. Copied by whatever keeps it. */
struct net_cred {
	enum net_cred_kind kind;
	uint8_t secret[TOKEN_SECRET_LEN];	/* the key, or the token's secret */
	char *signed_part;			/* token: malloc'd, NUL-terminated */
	size_t signed_len;
};

void net_cred_init(struct net_cred *c);		/* NET_CRED_NONE */
void net_cred_from_key(struct net_cred *c, const struct cluster_key *k);
/* Parses token text. 0 or -EINVAL with err. */
int net_cred_from_token(struct net_cred *c, const char *text, char *err, size_t errlen);
int net_cred_copy(struct net_cred *dst, const struct net_cred *src);
void net_cred_release(struct net_cred *c);

/* The credential connections present when their pool was given none
 * (rpc_pool_set_cred): stratad sets its cluster key here before any
 * thread starts; a process that sets nothing presents NET_CRED_NONE. */
void net_cred_set_default(const struct net_cred *c);
const struct net_cred *net_cred_default(void);

/* What an accepting side requires. */
struct net_auth {
	bool has_key;		/* false: every peer is trusted (loopback only) */
	struct cluster_key key;
};

enum net_role {
	NET_ROLE_OPEN = 0,	/* a server without a key: trusted */
	NET_ROLE_DAEMON = 1,	/* proved the cluster key */
	NET_ROLE_CLIENT = 2,	/* proved a token: claims say what it may do */
};

struct net_ident {
	enum net_role role;
	struct token_claims claims;	/* NET_ROLE_CLIENT */
};

/* Full rights: a daemon, an open server's peer, or an admin token. */
bool net_ident_admin(const struct net_ident *id);
/* Whether id may still act now: 0, -EKEYEXPIRED or -EKEYREVOKED. */
int net_ident_check(const struct net_ident *id);

/* The tokens revoked and not yet expired, as the newest map says (ids of
 * TOKEN_ID_LEN hex digits). Process-wide; any thread. */
int net_revoked_set(const char (*ids)[TOKEN_ID_LEN + 1], uint32_t n);
bool net_revoked(const char *id);
/* net_revoked_set with the ids of the cluster map of version map_version,
 * unless a map newer than it was applied already: a process may hold maps
 * in several places (mgmt, storage, its clients) that learn of new
 * versions at different times, and an older one must not forget a
 * revocation a newer one brought. 0 or -ENOMEM. */
int net_revoked_update(uint64_t map_version, const char (*ids)[TOKEN_ID_LEN + 1], uint32_t n);

/*
 * Acting for a caller: a client serving several users (a multi-user FUSE
 * mount) names, per request, the user it acts for. Such a request carries
 * FRAME_F_CALLER and its body starts with the caller:
 *
 *   u32 uid, u32 ngids (<= TOKEN_GIDS_MAX), ngids x u32 gid
 *
 * The server strips it before the operation's body is decoded
 * (svc_req_caller, net/server.h). Only a token with "caller" may send it
 * (-EACCES otherwise); meta then checks permissions as that uid and gids,
 * root squashed unless the token has "root" (token_effective_uid).
 */
struct net_caller {
	uint32_t uid;
	uint32_t ngids;
	uint32_t gids[TOKEN_GIDS_MAX];
};

struct wbuf;
struct rbuf;
void net_caller_encode(struct wbuf *w, const struct net_caller *c);
/* 0 or STRATA_EBADMSG (short, or more than TOKEN_GIDS_MAX gids). */
int net_caller_decode(struct rbuf *r, struct net_caller *c);

/* The caller the calling thread acts for (copied), or NULL to act for no
 * one: what libstrata's meta calls from this thread carry. */
void net_caller_set(const struct net_caller *c);
const struct net_caller *net_caller_current(void);

/* ---- the exchange's pieces (used by conn.c) ---- */

/* HMAC(secret, label nc ns). label: "strata-server" or "strata-client". */
void auth_proof(const uint8_t secret[TOKEN_SECRET_LEN], const char *label,
		const uint8_t nc[AUTH_NONCE_LEN], const uint8_t ns[AUTH_NONCE_LEN],
		uint8_t out[32]);
void auth_nonce(uint8_t out[AUTH_NONCE_LEN]);
/* The accepting side's answer to a credential: fills id and the secret to
 * prove with. 0, STRATA_ENOCRED (none given), -EKEYREJECTED (a daemon
 * credential, or claims that do not parse: err says which),
 * -EKEYEXPIRED, -EKEYREVOKED. */
int auth_accept(const struct net_auth *a, enum net_cred_kind kind, const char *signed_part,
		size_t signed_len, struct net_ident *id, uint8_t secret[TOKEN_SECRET_LEN],
		char *err, size_t errlen);

#endif
