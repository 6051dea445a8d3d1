/*
 * The cluster key and the client tokens signed with it (docs/security.md).
 *
 * The cluster key: 32 random bytes, kept as 64 hex digits and a newline in
 * a file no one but its owner may read or write (mode 0600 or stricter;
 * key_load refuses anything else). Every daemon of a cluster holds it;
 * holding it is being a daemon.
 *
 * A token: "st1." BASE64URL(claims JSON) "." BASE64URL(signature), where
 * signature = HMAC-SHA256(cluster key, "st1." BASE64URL(claims JSON)). The
 * signature is also the token's secret: a client proves that it holds the
 * token by an HMAC keyed with it (net/auth.h), so the secret never crosses
 * the wire, and any daemon recomputes it from the claims and the key.
 *
 * Claims (all keys optional except id, tenant and exp):
 *   id      16 hex digits, names the token (list, revoke)
 *   tenant  1..63 bytes of [A-Za-z0-9._-]
 *   uid, gids   the identity the token acts as (default 65534, [65534])
 *   squash  true: act as nobody (65534) whatever uid says
 *   root    true: uid 0 stays 0 (without it uid 0 is squashed)
 *   caller  true: a client may act as its caller's uid and gids (a
 *           multi-user FUSE mount); root is still squashed without "root"
 *   admin   true: cluster administration (tokens, quotas, drain)
 *   paths   [{"prefix": "/abs/path", "access": "r" | "rw"}]: the subtrees
 *           of the namespace the token reaches
 *   mem     [{"ns": NAME, "capacity": BYTES}]: the memory namespaces it
 *           reaches (keys "NAME/..."), with the namespace's capacity on
 *           each mem node (a put past it: -EDQUOT)
 *   qos     {"bw": BYTES_PER_S, "iops": OPS_PER_S}: storage caps, enforced
 *           by each storage daemon for this credential (storage/qos.h);
 *           0: no cap. Written only when one is set, so a token without
 *           caps reads the same on a daemon that predates them (and one
 *           with caps is refused there as an unknown claim, loudly)
 *   exp     expiry, seconds since the epoch; 0: never
 */
#ifndef STRATA_COMMON_TOKEN_H
#define STRATA_COMMON_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_KEY_LEN 32
#define TOKEN_SECRET_LEN 32
#define TOKEN_ID_LEN 16		/* hex digits */
#define TOKEN_TENANT_MAX 63
#define TOKEN_GIDS_MAX 32
#define TOKEN_PATHS_MAX 16
#define TOKEN_PATH_MAX 1023
#define TOKEN_MEMS_MAX 16
#define TOKEN_NS_MAX 63
#define TOKEN_TEXT_MAX 16384	/* a whole token, as text */
#define TOKEN_NOBODY 65534u
#define TOKEN_QOS_BW_MAX (1ull << 40)	/* bytes/s: 1 TiB/s */
#define TOKEN_QOS_IOPS_MAX 100000000u	/* operations/s */

struct cluster_key {
	uint8_t k[CLUSTER_KEY_LEN];
};

/* Fills k from the kernel's random source. 0 or a negative error. */
int cluster_key_generate(struct cluster_key *k);
/* Writes k to path (created, mode 0600; an existing file is an error:
 * -EEXIST). */
int cluster_key_save(const char *path, const struct cluster_key *k);
/* Reads path. -EPERM when the file can be read or written by group or
 * others, -EINVAL when it is not 64 hex digits (and a newline); err gets
 * a sentence. */
int cluster_key_load(const char *path, struct cluster_key *k, char *err, size_t errlen);

enum {
	TOKEN_F_SQUASH = 1u << 0,
	TOKEN_F_ROOT = 1u << 1,
	TOKEN_F_CALLER = 1u << 2,
	TOKEN_F_ADMIN = 1u << 3,
};

struct token_path {
	char prefix[TOKEN_PATH_MAX + 1];	/* absolute, normalized, no trailing / */
	bool write;
};

struct token_mem {
	char ns[TOKEN_NS_MAX + 1];
	uint64_t capacity;
};

struct token_claims {
	char id[TOKEN_ID_LEN + 1];
	char tenant[TOKEN_TENANT_MAX + 1];
	uint32_t uid;
	uint32_t ngids;
	uint32_t gids[TOKEN_GIDS_MAX];
	uint32_t flags;			/* TOKEN_F_* */
	uint32_t npaths;
	struct token_path paths[TOKEN_PATHS_MAX];
	uint32_t nmems;
	struct token_mem mems[TOKEN_MEMS_MAX];
	uint64_t qos_bw;		/* bytes/s at each storage daemon, 0: no cap */
	uint32_t qos_iops;		/* chunk operations/s, likewise */
	int64_t exp;			/* seconds since the epoch, 0: never */
};

/* Defaults: nobody, no scope, a fresh random id, no expiry. */
void token_claims_init(struct token_claims *c);
/* Checks c (id, tenant, paths normalized, counts). 0 or -EINVAL, with err. */
int token_claims_check(const struct token_claims *c, char *err, size_t errlen);
/* Whether p is a path a scope may name: absolute, normalized (no ".",
 * "..", "//" or trailing "/"; "/" itself is). */
bool token_path_normal(const char *p);
/* Reads a scope written "r:/models" or "rw:/data" into p: 0, or -EINVAL
 * (another access, a path that is not token_path_normal or too long). */
int token_path_parse(const char *s, struct token_path *p);

/* The claims as compact JSON text (the form tokens carry, and what mgmt's
 * TOKEN_CREATE takes and its registry keeps): *out is malloc'd. 0,
 * -EINVAL (c fails token_claims_check) or -ENOMEM. */
int token_claims_to_json(const struct token_claims *c, char **out);
/* Parses and checks claims from JSON text of len bytes (as a token's
 * claims: unknown keys refused). 0 or -EINVAL with err. */
int token_claims_from_json(const char *text, size_t len, struct token_claims *c, char *err,
			   size_t errlen);
/* Whether id is TOKEN_ID_LEN lowercase hex digits (and a NUL). */
bool token_id_ok(const char *id);

/* Signs c with k: *out is a malloc'd token text. 0 or a negative error. */
int token_sign(const struct cluster_key *k, const struct token_claims *c, char **out);

/* The client's side, without the key: splits text (surrounding white space
 * ignored) into the signed part ("st1." BASE64URL(claims), pointed into
 * text) and the secret. 0 or -EINVAL with err. */
int token_split(const char *text, const char **signed_part, size_t *signed_len,
		uint8_t secret[TOKEN_SECRET_LEN], char *err, size_t errlen);

/* A daemon's side: the secret of a signed part under k. */
void token_secret(const struct cluster_key *k, const char *signed_part, size_t len,
		  uint8_t secret[TOKEN_SECRET_LEN]);
/* Decodes and checks the claims of a signed part (does not check the
 * signature: that is token_secret's and the handshake's job). 0 or
 * -EINVAL with err. */
int token_parse_claims(const char *signed_part, size_t len, struct token_claims *c,
		       char *err, size_t errlen);
/* Whole-token check with the key (tools, mgmt): signature, then claims.
 * -EKEYREJECTED for a bad signature, -EINVAL for bad text. */
int token_verify(const struct cluster_key *k, const char *text, struct token_claims *c,
		 char *err, size_t errlen);

/* The identity a request acts as: the token's uid (squashed as the flags
 * say), or, with TOKEN_F_CALLER, the caller's (caller_uid != UINT32_MAX),
 * squashed the same way. */
uint32_t token_effective_uid(const struct token_claims *c, uint32_t caller_uid);
/* Whether path (absolute, normalized) lies in one of the token's path
 * scopes, with write access when write is set. */
bool token_allows_path(const struct token_claims *c, const char *path, bool write);
/* The mem scope covering key (its namespace: the bytes before the first
 * '/'), or NULL. */
const struct token_mem *token_mem_scope(const struct token_claims *c, const void *key,
					size_t len);

/* Constant-time comparison of two MACs. */
bool mac_equal(const uint8_t *a, const uint8_t *b, size_t len);
/* HMAC-SHA256 of the concatenation of n (pointer, length) pieces. */
void hmac_sha256(const uint8_t *key, size_t key_len, const void *const *parts,
		 const size_t *lens, int n, uint8_t out[32]);

#endif
