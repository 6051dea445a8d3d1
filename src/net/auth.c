/* Credentials, identities and the handshake's pieces (auth.h). */
#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/auth.h"
#include "net/codec.h"
#include "strata/errors.h"

void net_cred_init(struct net_cred *c)
{
	memset(c, 0, sizeof(*c));
}

void net_cred_from_key(struct net_cred *c, const struct cluster_key *k)
{
	net_cred_init(c);
	c->kind = NET_CRED_KEY;
	memcpy(c->secret, k->k, sizeof(c->secret));
}

int net_cred_from_token(struct net_cred *c, const char *text, char *err, size_t errlen)
{
	const char *sp;
	size_t sl;
	int rc;

	net_cred_init(c);
	rc = token_split(text, &sp, &sl, c->secret, err, errlen);
	if (rc)
		return rc;
	c->signed_part = strndup(sp, sl);
	if (!c->signed_part)
		return -ENOMEM;
	c->signed_len = sl;
	c->kind = NET_CRED_TOKEN;
	return 0;
}

int net_cred_copy(struct net_cred *dst, const struct net_cred *src)
{
	*dst = *src;
	if (src->signed_part) {
		dst->signed_part = strndup(src->signed_part, src->signed_len);
		if (!dst->signed_part)
			return -ENOMEM;
	}
	return 0;
}

void net_cred_release(struct net_cred *c)
{
	free(c->signed_part);
	memset(c, 0, sizeof(*c));
}

static struct net_cred g_default;

void net_cred_set_default(const struct net_cred *c)
{
	net_cred_release(&g_default);
	if (c && net_cred_copy(&g_default, c))
		net_cred_init(&g_default);
}

const struct net_cred *net_cred_default(void)
{
	return &g_default;
}

/* ---- revoked tokens ---- */

static struct {
	pthread_rwlock_t lock;
	char (*ids)[TOKEN_ID_LEN + 1];	/* sorted */
	uint32_t n;
} g_revoked = { .lock = PTHREAD_RWLOCK_INITIALIZER };

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

int net_revoked_set(const char (*ids)[TOKEN_ID_LEN + 1], uint32_t n)
{
	char (*copy)[TOKEN_ID_LEN + 1] = NULL;

	if (n) {
		copy = malloc((size_t)n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, ids, (size_t)n * sizeof(*copy));
		qsort(copy, n, sizeof(*copy), cmp_id);
	}
	pthread_rwlock_wrlock(&g_revoked.lock);
	free(g_revoked.ids);
	g_revoked.ids = copy;
	g_revoked.n = n;
	pthread_rwlock_unlock(&g_revoked.lock);
	return 0;
}

int net_revoked_update(uint64_t map_version, const char (*ids)[TOKEN_ID_LEN + 1], uint32_t n)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t applied;
	static bool any;
	int rc = 0;

	/* Serialized, so that two maps applied at once cannot end with the
	 * older one's list. */
	pthread_mutex_lock(&lock);
	if (!any || map_version >= applied) {
		rc = net_revoked_set(ids, n);
		if (!rc) {
			applied = map_version;
			any = true;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

bool net_revoked(const char *id)
{
	bool found;

	pthread_rwlock_rdlock(&g_revoked.lock);
	found = g_revoked.n && bsearch(id, g_revoked.ids, g_revoked.n, sizeof(*g_revoked.ids),
				       cmp_id);
	pthread_rwlock_unlock(&g_revoked.lock);
	return found;
}

/* ---- identities ---- */

bool net_ident_admin(const struct net_ident *id)
{
	return id->role != NET_ROLE_CLIENT || (id->claims.flags & TOKEN_F_ADMIN);
}

int net_ident_check(const struct net_ident *id)
{
	if (id->role != NET_ROLE_CLIENT)
		return 0;
	if (id->claims.exp && (int64_t)time(NULL) >= id->claims.exp)
		return -EKEYEXPIRED;
	if (net_revoked(id->claims.id))
		return -EKEYREVOKED;
	return 0;
}

/* ---- the exchange ---- */

void auth_nonce(uint8_t out[AUTH_NONCE_LEN])
{
	if (RAND_bytes(out, AUTH_NONCE_LEN) != 1)
		abort();	/* no randomness: nothing is safe */
}

void auth_proof(const uint8_t secret[TOKEN_SECRET_LEN], const char *label,
		const uint8_t nc[AUTH_NONCE_LEN], const uint8_t ns[AUTH_NONCE_LEN],
		uint8_t out[32])
{
	const void *parts[] = { label, nc, ns };
	size_t lens[] = { strlen(label), AUTH_NONCE_LEN, AUTH_NONCE_LEN };

	hmac_sha256(secret, TOKEN_SECRET_LEN, parts, lens, 3, out);
}

int auth_accept(const struct net_auth *a, enum net_cred_kind kind, const char *signed_part,
		size_t signed_len, struct net_ident *id, uint8_t secret[TOKEN_SECRET_LEN],
		char *err, size_t errlen)
{
	int rc;

	memset(id, 0, sizeof(*id));
	if (!a || !a->has_key) {
		id->role = NET_ROLE_OPEN;
		return 0;
	}
	switch (kind) {
	case NET_CRED_NONE:
		snprintf(err, errlen, "no credential");
		return STRATA_ENOCRED;
	case NET_CRED_KEY:
		id->role = NET_ROLE_DAEMON;
		memcpy(secret, a->key.k, TOKEN_SECRET_LEN);
		return 0;
	case NET_CRED_TOKEN:
		rc = token_parse_claims(signed_part, signed_len, &id->claims, err, errlen);
		if (rc)
			return -EKEYREJECTED;
		id->role = NET_ROLE_CLIENT;
		rc = net_ident_check(id);
		if (rc) {
			snprintf(err, errlen, "token %s %s", id->claims.id,
				 rc == -EKEYEXPIRED ? "has expired" : "is revoked");
			return rc;
		}
		token_secret(&a->key, signed_part, signed_len, secret);
		return 0;
	}
	snprintf(err, errlen, "unknown credential kind %d", (int)kind);
	return -EKEYREJECTED;
}

/* ---- acting for a caller ---- */

static __thread struct net_caller thread_caller;
static __thread bool thread_has_caller;

void net_caller_encode(struct wbuf *w, const struct net_caller *c)
{
	uint32_t n = c->ngids < TOKEN_GIDS_MAX ? c->ngids : TOKEN_GIDS_MAX;

	wb_u32(w, c->uid);
	wb_u32(w, n);
	for (uint32_t i = 0; i < n; i++)
		wb_u32(w, c->gids[i]);
}

int net_caller_decode(struct rbuf *r, struct net_caller *c)
{
	memset(c, 0, sizeof(*c));
	c->uid = rb_u32(r);
	c->ngids = rb_u32(r);
	if (r->err || c->ngids > TOKEN_GIDS_MAX)
		return STRATA_EBADMSG;
	for (uint32_t i = 0; i < c->ngids; i++)
		c->gids[i] = rb_u32(r);
	return r->err ? STRATA_EBADMSG : 0;
}

void net_caller_set(const struct net_caller *c)
{
	thread_has_caller = c != NULL;
	if (c) {
		thread_caller = *c;
		if (thread_caller.ngids > TOKEN_GIDS_MAX)
			thread_caller.ngids = TOKEN_GIDS_MAX;
	}
}

const struct net_caller *net_caller_current(void)
{
	return thread_has_caller ? &thread_caller : NULL;
}
