/* Chunk capabilities: making and checking them (cap.h). */
#include <errno.h>
#include <string.h>

#include "common/cap.h"

static const char cap_label[] = "strata-cap";

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The mac of (ino, rights, expiry): the fields in a fixed byte order, so
 * every daemon computes the same whatever its platform. */
static void cap_mac(const struct cluster_key *k, uint64_t ino, uint8_t rights, int64_t expiry,
		    uint8_t out[CAP_MAC_LEN])
{
	uint8_t fields[17];
	const void *parts[2] = { cap_label, fields };
	size_t lens[2] = { sizeof(cap_label) - 1, sizeof(fields) };

	put_le64(fields, ino);
	fields[8] = rights;
	put_le64(fields + 9, (uint64_t)expiry);
	hmac_sha256(k->k, sizeof(k->k), parts, lens, 2, out);
}

void cap_make(const struct cluster_key *k, uint64_t ino, uint8_t rights, int64_t expiry,
	      struct chunk_cap *c)
{
	memset(c, 0, sizeof(*c));
	c->ino = ino;
	c->rights = rights;
	c->expiry = expiry;
	cap_mac(k, ino, rights, expiry, c->mac);
}

/* What every check does besides the mac. */
static int cap_fields_ok(const struct chunk_cap *c, uint64_t ino, uint8_t need, int64_t now)
{
	if (c->ino != ino || (c->rights & need) != need || (c->rights & ~CAP_RIGHTS))
		return -EACCES;
	return now < c->expiry ? 0 : -EACCES;
}

int cap_check(const struct cluster_key *k, const struct chunk_cap *c, uint64_t ino,
	      uint8_t need, int64_t now)
{
	uint8_t want[CAP_MAC_LEN];

	if (cap_fields_ok(c, ino, need, now))
		return -EACCES;
	cap_mac(k, c->ino, c->rights, c->expiry, want);
	return mac_equal(want, c->mac, CAP_MAC_LEN) ? 0 : -EACCES;
}

void cap_cache_init(struct cap_cache *cc)
{
	memset(cc, 0, sizeof(*cc));
}

int cap_cache_check(struct cap_cache *cc, const struct cluster_key *k, const struct chunk_cap *c,
		    uint64_t ino, uint8_t need, int64_t now)
{
	uint32_t i = (uint32_t)((ino ^ (ino >> 17)) * 0x9e3779b1u) % CAP_CACHE_SLOTS;
	struct chunk_cap *s = &cc->slot[i];
	int rc;

	if (cap_fields_ok(c, ino, need, now))
		return -EACCES;
	/* The same cap as one verified before: its mac is k's. Compared in
	 * constant time, or the cache would tell a forger how much of a
	 * cached mac it guessed. */
	if (cc->used[i] && s->ino == c->ino && s->rights == c->rights && s->expiry == c->expiry &&
	    mac_equal(s->mac, c->mac, CAP_MAC_LEN)) {
		cc->hits++;
		return 0;
	}
	cc->misses++;
	rc = cap_check(k, c, ino, need, now);
	if (!rc) {
		*s = *c;
		cc->used[i] = true;
	}
	return rc;
}
