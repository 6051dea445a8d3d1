/* The admission gate (gate.h): a count in all and one per address, in an
 * open-addressed table under one mutex (an accept and a close each take
 * it once; neither is on a request's path). */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/rand.h"
#include "gate.h"

/* One address and its count. A slot whose count drops to 0 stays in
 * place (a tombstone, reused by the next address that hashes past it) so
 * that probes of other addresses keep working. */
struct peer_slot {
	uint8_t ip[16];
	uint32_t count;
	bool used;
};

struct net_gate {
	pthread_mutex_t mu;
	struct net_gate_opts o;
	struct peer_slot *slots;
	uint32_t cap;		/* a power of two */
	uint32_t used;		/* slots ever taken (counted or tombstones) */
	uint64_t held, refused_full, refused_peer;
};

void net_gate_opts_init(struct net_gate_opts *o, size_t size)
{
	struct net_gate_opts def = { .size = sizeof(def) };

	memset(o, 0, size);
	memcpy(o, &def, size < sizeof(def) ? size : sizeof(def));
	o->size = size;
}

int net_gate_new(const struct net_gate_opts *opts, struct net_gate **out)
{
	struct net_gate *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	net_gate_opts_init(&g->o, sizeof(g->o));
	if (opts)
		memcpy(&g->o, opts, opts->size < sizeof(g->o) ? opts->size : sizeof(g->o));
	g->o.size = sizeof(g->o);
	pthread_mutex_init(&g->mu, NULL);
	*out = g;
	return 0;
}

void net_gate_free(struct net_gate *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g->slots);
	free(g);
}

/* peer's address as 16 bytes (IPv4 as IPv4-mapped IPv6); false for other
 * families. */
static bool peer_key(const struct sockaddr_storage *peer, uint8_t key[16])
{
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)peer;

		memset(key, 0, 10);
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &in->sin_addr, 4);
		return true;
	}
	if (peer->ss_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
		return true;
	}
	return false;
}

static uint32_t key_hash(const uint8_t key[16])
{
	uint64_t a, b;

	memcpy(&a, key, 8);
	memcpy(&b, key + 8, 8);
	return (uint32_t)splitmix64(a ^ splitmix64(b));
}

/* The slot of key: its own, else (create) the first free or tombstone
 * slot on its probe path. NULL when absent (create false) or when the
 * table cannot grow. */
static struct peer_slot *find_slot(struct net_gate *g, const uint8_t key[16], bool create);

static int grow(struct net_gate *g)
{
	uint32_t ncap = g->cap ? g->cap * 2 : 64;
	struct peer_slot *old = g->slots, *ns = calloc(ncap, sizeof(*ns));
	uint32_t ocap = g->cap;

	if (!ns)
		return -ENOMEM;
	g->slots = ns;
	g->cap = ncap;
	g->used = 0;
	for (uint32_t i = 0; i < ocap; i++) {
		struct peer_slot *s;

		if (!old[i].used || !old[i].count)
			continue;	/* tombstones are dropped */
		s = find_slot(g, old[i].ip, true);
		*s = old[i];
	}
	free(old);
	return 0;
}

static struct peer_slot *find_slot(struct net_gate *g, const uint8_t key[16], bool create)
{
	struct peer_slot *free_slot = NULL;

	if (create && (g->used + 1) * 4 > g->cap * 3 && grow(g))
		return NULL;
	if (!g->cap)
		return NULL;
	for (uint32_t i = 0, h = key_hash(key); i < g->cap; i++) {
		struct peer_slot *s = &g->slots[(h + i) & (g->cap - 1)];

		if (!s->used) {
			if (!create)
				return NULL;
			if (!free_slot) {
				free_slot = s;
				g->used++;
			}
			break;
		}
		if (!memcmp(s->ip, key, 16))
			return s;
		if (!s->count && !free_slot)
			free_slot = s;
	}
	if (free_slot) {
		free_slot->used = true;
		memcpy(free_slot->ip, key, 16);
		free_slot->count = 0;
	}
	return free_slot;
}

int net_gate_enter(struct net_gate *g, const struct sockaddr_storage *peer)
{
	uint8_t key[16];
	struct peer_slot *s = NULL;
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	if (g->o.max_conns && g->held >= g->o.max_conns) {
		g->refused_full++;
		rc = -EMFILE;
		goto out;
	}
	if (g->o.max_per_peer && peer_key(peer, key)) {
		s = find_slot(g, key, true);
		if (!s) {
			rc = -ENOMEM;
			goto out;
		}
		if (s->count >= g->o.max_per_peer) {
			g->refused_peer++;
			rc = -EUSERS;
			goto out;
		}
		s->count++;
	}
	g->held++;
out:
	pthread_mutex_unlock(&g->mu);
	return rc;
}

void net_gate_leave(struct net_gate *g, const struct sockaddr_storage *peer)
{
	uint8_t key[16];

	pthread_mutex_lock(&g->mu);
	if (g->o.max_per_peer && peer_key(peer, key)) {
		struct peer_slot *s = find_slot(g, key, false);

		if (s && s->count)
			s->count--;
	}
	if (g->held)
		g->held--;
	pthread_mutex_unlock(&g->mu);
}

void net_gate_stats_get(struct net_gate *g, struct net_gate_stats *out)
{
	pthread_mutex_lock(&g->mu);
	out->held = g->held;
	out->refused_full = g->refused_full;
	out->refused_peer = g->refused_peer;
	pthread_mutex_unlock(&g->mu);
}
