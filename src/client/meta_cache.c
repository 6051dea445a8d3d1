/*
 * libstrata's metadata cache (meta_cache.h): a set-associative table of
 * answers, each stamped with the epoch it was asked in and the time it
 * expires.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "client/meta_cache.h"
#include "common/clock.h"

/* Longest key: a path (4 KiB) or a handle and a name. */
#define MCACHE_KEY_MAX 4096u

struct mc_entry {
	uint64_t hash;
	uint64_t epoch;
	uint64_t expires_ms;	/* 0: empty */
	char *key;		/* owned; kept for the slot's next key when long enough */
	uint32_t key_len, key_cap;
	uint8_t kind;
	bool negative;		/* known not to exist: in is unused */
	struct mt_inode in;
};

struct mc_set {
	pthread_mutex_t lock;
	uint32_t rnd;		/* picks the victim of a full set */
	struct mcache_stats st;
	struct mc_entry e[MCACHE_WAYS];
} __attribute__((aligned(64)));

struct mcache {
	uint64_t epoch;		/* atomic */
	uint32_t ttl_ms;
	uint32_t mask;		/* sets - 1 */
	struct mc_set *sets;
};

/* FNV-1a over the key, then the kind, finished by a multiply-xorshift so
 * that the low bits (the set) depend on every byte. */
static uint64_t key_hash(enum mcache_kind kind, const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)kind;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	return h;
}

int mcache_new(uint32_t ttl_ms, uint32_t entries, struct mcache **out)
{
	struct mcache *c;
	uint32_t sets = 1;

	if (!out || !ttl_ms || ttl_ms > MCACHE_TTL_MAX_MS || entries < MCACHE_ENTRIES_MIN ||
	    entries > MCACHE_ENTRIES_MAX)
		return -EINVAL;
	while (sets * MCACHE_WAYS < entries)
		sets <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sets = aligned_alloc(64, sizeof(*c->sets) * sets);
	if (!c->sets) {
		free(c);
		return -ENOMEM;
	}
	memset(c->sets, 0, sizeof(*c->sets) * sets);
	for (uint32_t i = 0; i < sets; i++)
		pthread_mutex_init(&c->sets[i].lock, NULL);
	c->ttl_ms = ttl_ms;
	c->mask = sets - 1;
	c->epoch = 1;
	*out = c;
	return 0;
}

void mcache_free(struct mcache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i <= c->mask; i++) {
		for (int w = 0; w < MCACHE_WAYS; w++)
			free(c->sets[i].e[w].key);
		pthread_mutex_destroy(&c->sets[i].lock);
	}
	free(c->sets);
	free(c);
}

uint32_t mcache_ttl_ms(const struct mcache *c)
{
	return c->ttl_ms;
}

uint64_t mcache_epoch(struct mcache *c)
{
	return __atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE);
}

void mcache_drop_all(struct mcache *c)
{
	__atomic_add_fetch(&c->epoch, 1, __ATOMIC_ACQ_REL);
}

static bool live(const struct mc_entry *e, uint64_t epoch, uint64_t now)
{
	return e->expires_ms > now && e->epoch == epoch;
}

static bool same(const struct mc_entry *e, uint64_t h, enum mcache_kind kind, const void *key,
		 size_t len)
{
	return e->key && e->hash == h && e->kind == (uint8_t)kind && e->key_len == len &&
	       memcmp(e->key, key, len) == 0;
}

int mcache_get(struct mcache *c, enum mcache_kind kind, const void *key, size_t len,
	       struct mt_inode *out)
{
	uint64_t h = key_hash(kind, key, len), epoch = mcache_epoch(c), now = mono_ms();
	struct mc_set *set = &c->sets[h & c->mask];
	int rc = 1;

	pthread_mutex_lock(&set->lock);
	for (int w = 0; w < MCACHE_WAYS; w++) {
		const struct mc_entry *e = &set->e[w];

		if (!live(e, epoch, now) || !same(e, h, kind, key, len))
			continue;
		if (e->negative) {
			rc = -ENOENT;
			set->st.neg_hits++;
		} else {
			*out = e->in;
			rc = 0;
			set->st.hits++;
		}
		break;
	}
	if (rc == 1)
		set->st.misses++;
	pthread_mutex_unlock(&set->lock);
	return rc;
}

/* The way of set that key goes in: its own entry if there is one, else an
 * empty or dead one, else one drawn at random. Not the oldest: a scan
 * over more names than a set holds, repeated (stat of every file of a
 * directory, twice), would then evict each entry just before its turn
 * and miss every time; a random victim keeps most of them. */
static int victim(struct mc_set *set, uint64_t h, enum mcache_kind kind, const void *key,
		  size_t len, uint64_t epoch, uint64_t now)
{
	for (int w = 0; w < MCACHE_WAYS; w++)
		if (same(&set->e[w], h, kind, key, len))
			return w;
	for (int w = 0; w < MCACHE_WAYS; w++)
		if (!live(&set->e[w], epoch, now))
			return w;
	set->rnd = set->rnd * 1664525u + 1013904223u;
	return (int)((set->rnd >> 16) % MCACHE_WAYS);
}

void mcache_put(struct mcache *c, enum mcache_kind kind, const void *key, size_t len,
		uint64_t epoch, int rc, const struct mt_inode *in)
{
	uint64_t h = key_hash(kind, key, len), now = mono_ms();
	struct mc_set *set = &c->sets[h & c->mask];
	struct mc_entry *e;

	if ((rc != 0 && rc != -ENOENT) || (rc == 0 && !in) || len > MCACHE_KEY_MAX)
		return;
	pthread_mutex_lock(&set->lock);
	/* Checked under the lock: a change that returned before this point
	 * moved the epoch, and the answer may predate it. */
	if (epoch != mcache_epoch(c))
		goto out;
	e = &set->e[victim(set, h, kind, key, len, epoch, now)];
	if (live(e, epoch, now) && !same(e, h, kind, key, len))
		set->st.evictions++;
	if (!e->key || e->key_cap < len) {
		char *k = realloc(e->key, len ? len : 1);

		if (!k) {
			e->expires_ms = 0;	/* the old key stays e's */
			goto out;
		}
		e->key = k;
		e->key_cap = (uint32_t)(len ? len : 1);
	}
	memcpy(e->key, key, len);
	e->key_len = (uint32_t)len;
	e->hash = h;
	e->kind = (uint8_t)kind;
	e->epoch = epoch;
	e->expires_ms = now + c->ttl_ms;
	e->negative = rc != 0;
	if (rc == 0)
		e->in = *in;
	set->st.inserts++;
out:
	pthread_mutex_unlock(&set->lock);
}

void mcache_stats(struct mcache *c, struct mcache_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (uint32_t i = 0; i <= c->mask; i++) {
		struct mc_set *set = &c->sets[i];

		pthread_mutex_lock(&set->lock);
		st->hits += set->st.hits;
		st->neg_hits += set->st.neg_hits;
		st->misses += set->st.misses;
		st->inserts += set->st.inserts;
		st->evictions += set->st.evictions;
		pthread_mutex_unlock(&set->lock);
	}
}
