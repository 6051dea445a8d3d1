/* The mem service's object store: see mem_pool.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "mem_pool.h"

#define OBJ_ALIGN 4096u
#define NS_BUCKETS 64u

/* A namespace with something charged to it; freed when nothing is. */
struct mem_ns {
	struct mem_ns *next;
	uint64_t used, objects;
	uint32_t hash;
	uint8_t len;
	char name[MEM_NS_MAX + 1];
};

struct mem_pool {
	pthread_mutex_t lock;
	struct mem_pool_opts o;
	uint64_t high, low;
	struct mem_obj **buckets;
	uint32_t nbuckets;
	struct mem_obj *lru;	/* sentinel: lru->lnext is the most recent */
	struct mem_ns *ns[NS_BUCKETS];
	uint32_t nns;
	struct mem_pool_stats st;
};

void mem_pool_opts_init(struct mem_pool_opts *o, size_t size)
{
	memset(o, 0, size);
	o->opts_size = size;
	o->high_pct = 90;
	o->low_pct = 80;
	o->evict = true;
	o->max_value = MEM_VALUE_MAX;
}

static uint32_t key_hash(const void *key, size_t klen)
{
	const uint8_t *k = key;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < klen; i++)
		h = (h ^ k[i]) * 16777619u;
	return h;
}

int mem_pool_new(const struct mem_pool_opts *o, struct mem_pool **out)
{
	struct mem_pool *p;

	if (!o || o->capacity == 0 || o->low_pct > o->high_pct || o->high_pct > 100 ||
	    o->high_pct == 0)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(&p->o, o, o->opts_size < sizeof(p->o) ? o->opts_size : sizeof(p->o));
	if (p->o.max_value == 0 || p->o.max_value > MEM_VALUE_MAX)
		p->o.max_value = MEM_VALUE_MAX;
	p->high = p->o.capacity / 100 * p->o.high_pct;
	p->low = p->o.capacity / 100 * p->o.low_pct;
	p->nbuckets = 1024;
	p->buckets = calloc(p->nbuckets, sizeof(*p->buckets));
	p->lru = calloc(1, sizeof(*p->lru));
	if (!p->buckets || !p->lru) {
		free(p->buckets);
		free(p->lru);
		free(p);
		return -ENOMEM;
	}
	p->lru->lnext = p->lru->lprev = p->lru;
	p->st.capacity = p->o.capacity;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

static void obj_destroy(struct mem_obj *o)
{
	abuf_free(o->data);
	free(o);
}

void mem_pool_free(struct mem_pool *p)
{
	if (!p)
		return;
	for (uint32_t b = 0; b < p->nbuckets; b++) {
		while (p->buckets[b]) {
			struct mem_obj *o = p->buckets[b];

			p->buckets[b] = o->hnext;
			obj_destroy(o);
		}
	}
	for (uint32_t b = 0; b < NS_BUCKETS; b++) {
		while (p->ns[b]) {
			struct mem_ns *n = p->ns[b];

			p->ns[b] = n->next;
			free(n);
		}
	}
	free(p->buckets);
	free(p->lru);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int mem_pool_check(const struct mem_pool *p, size_t klen, uint64_t len)
{
	if (klen == 0)
		return -EINVAL;
	if (klen > MEM_KEY_MAX)
		return -ENAMETOOLONG;
	if (len > p->o.max_value || len > p->o.capacity)
		return -E2BIG;
	return 0;
}

/* ---- under the lock ---- */

/* The namespace of key ("NS/..."), created when absent; NULL for a key
 * without one, or when memory is short (the key then goes uncounted, and
 * a put with a quota is refused). */
static struct mem_ns *ns_get(struct mem_pool *p, const char *key, size_t klen)
{
	const char *slash = memchr(key, '/', klen < MEM_NS_MAX + 1 ? klen : MEM_NS_MAX + 1);
	size_t len = slash ? (size_t)(slash - key) : 0;
	uint32_t h;
	struct mem_ns *n;

	if (len == 0)
		return NULL;
	h = key_hash(key, len);
	for (n = p->ns[h % NS_BUCKETS]; n; n = n->next)
		if (n->hash == h && n->len == len && memcmp(n->name, key, len) == 0)
			return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	memcpy(n->name, key, len);
	n->len = (uint8_t)len;
	n->hash = h;
	n->next = p->ns[h % NS_BUCKETS];
	p->ns[h % NS_BUCKETS] = n;
	p->nns++;
	return n;
}

static void ns_drop(struct mem_pool *p, struct mem_ns *n)
{
	struct mem_ns **s = &p->ns[n->hash % NS_BUCKETS];

	while (*s != n)
		s = &(*s)->next;
	*s = n->next;
	p->nns--;
	free(n);
}

/* Takes o's charge off the pool and its namespace. */
static void discharge(struct mem_pool *p, struct mem_obj *o)
{
	struct mem_ns *n = o->ns;

	p->st.used -= o->charge;
	if (n) {
		n->used -= o->charge;
		n->objects--;
		o->ns = NULL;
		if (n->objects == 0)
			ns_drop(p, n);
	}
	o->charge = 0;
}

static struct mem_obj **find_slot(struct mem_pool *p, const void *key, size_t klen, uint32_t h)
{
	struct mem_obj **s = &p->buckets[h & (p->nbuckets - 1)];

	for (; *s; s = &(*s)->hnext) {
		if ((*s)->hash == h && (*s)->klen == klen && memcmp((*s)->key, key, klen) == 0)
			break;
	}
	return s;
}

static void lru_del(struct mem_obj *o)
{
	o->lprev->lnext = o->lnext;
	o->lnext->lprev = o->lprev;
	o->lprev = o->lnext = o;
}

static void lru_add_head(struct mem_pool *p, struct mem_obj *o)
{
	o->lnext = p->lru->lnext;
	o->lprev = p->lru;
	p->lru->lnext->lprev = o;
	p->lru->lnext = o;
}

static void grow(struct mem_pool *p)
{
	uint32_t n = p->nbuckets * 2;
	struct mem_obj **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return;		/* longer chains, still correct */
	for (uint32_t b = 0; b < p->nbuckets; b++) {
		while (p->buckets[b]) {
			struct mem_obj *o = p->buckets[b];

			p->buckets[b] = o->hnext;
			o->hnext = nb[o->hash & (n - 1)];
			nb[o->hash & (n - 1)] = o;
		}
	}
	free(p->buckets);
	p->buckets = nb;
	p->nbuckets = n;
}

/* Takes o out of the table and the LRU list; the table's reference moves to
 * the caller. */
static void unlink_obj(struct mem_pool *p, struct mem_obj *o)
{
	struct mem_obj **s = find_slot(p, o->key, o->klen, o->hash);

	if (*s == o)
		*s = o->hnext;
	o->hnext = NULL;
	lru_del(o);
	o->linked = false;
	p->st.objects--;
	if (o->pinned)
		p->st.pinned--;
}

/* Drops one reference; returns o when it must be destroyed (outside the
 * lock), NULL otherwise. */
static struct mem_obj *unref(struct mem_pool *p, struct mem_obj *o)
{
	if (--o->refs)
		return NULL;
	discharge(p, o);
	return o;
}

static bool evictable(const struct mem_obj *o, const struct mem_obj *skip)
{
	return o != skip && !o->pinned && o->refs == 1;
}

/* Evicts LRU objects until use + extra <= target; appends them to *list
 * (through hnext). Returns the number evicted. */
static uint32_t evict_until(struct mem_pool *p, uint64_t extra, uint64_t target,
			    const struct mem_obj *skip, struct mem_obj **list)
{
	struct mem_obj *o = p->lru->lprev, *prev;
	uint32_t n = 0;

	for (; o != p->lru && p->st.used + extra > target; o = prev) {
		prev = o->lprev;
		if (!evictable(o, skip))
			continue;
		unlink_obj(p, o);
		/* The evicted object no longer counts: a spill holds it only
		 * briefly. */
		p->st.evictions++;
		p->st.evicted_bytes += o->len;
		discharge(p, o);
		o->hnext = *list;
		*list = o;
		n++;
	}
	return n;
}

/* Bytes the LRU could free, skipping skip, stopping once want is reached. */
static uint64_t evictable_bytes(struct mem_pool *p, uint64_t want, const struct mem_obj *skip)
{
	uint64_t sum = 0;

	for (struct mem_obj *o = p->lru->lprev; o != p->lru && sum < want; o = o->lprev) {
		if (evictable(o, skip))
			sum += o->charge;
	}
	return sum;
}

/* ---- outside the lock ---- */

static void finish_evicted(struct mem_pool *p, struct mem_obj *list)
{
	while (list) {
		struct mem_obj *o = list;

		list = o->hnext;
		o->hnext = NULL;
		if (p->o.on_evict)
			p->o.on_evict(p->o.evict_arg, o);
		else
			mem_obj_release(o);
	}
}

int mem_pool_put(struct mem_pool *p, const void *key, size_t klen, void *data, uint64_t len,
		 unsigned flags, uint64_t quota)
{
	struct mem_obj *o, *old, *evicted = NULL, *dead = NULL, **slot;
	struct mem_ns *ns = NULL;
	uint64_t freed, need;
	uint32_t h;
	int rc = mem_pool_check(p, klen, len);

	if (rc)
		return rc;
	o = malloc(sizeof(*o) + klen + 1);
	if (!o)
		return -ENOMEM;
	memset(o, 0, sizeof(*o));
	memcpy(o->key, key, klen);
	o->key[klen] = '\0';
	o->klen = (uint16_t)klen;
	o->hash = h = key_hash(key, klen);
	o->pool = p;
	o->data = data;
	o->len = len;
	o->charge = align_up(len ? len : 1, OBJ_ALIGN) + sizeof(*o) + klen;
	o->refs = 1;
	o->pinned = flags & MEM_PUT_PIN;
	o->lprev = o->lnext = o;

	pthread_mutex_lock(&p->lock);
	p->st.puts++;
	slot = find_slot(p, key, klen, h);
	old = *slot;
	if (old && (flags & MEM_PUT_NX)) {
		rc = -EEXIST;
		goto refuse;
	}
	freed = old && old->refs == 1 ? old->charge : 0;
	ns = ns_get(p, key, klen);
	if (quota != MEM_NO_QUOTA) {
		uint64_t had = ns ? ns->used - (old && old->ns == ns ? freed : 0) : 0;

		if (!ns || had + o->charge > quota) {
			rc = ns ? -EDQUOT : -ENOMEM;
			p->st.over_quota += ns != NULL;
			goto refuse;
		}
	}
	need = p->st.used + o->charge - freed;
	if (need > p->o.capacity) {
		if (!p->o.evict ||
		    evictable_bytes(p, need - p->o.capacity, old) < need - p->o.capacity) {
			rc = -ENOSPC;
			goto refuse;
		}
	}
	/* Charged to its namespace now: the evictions and the old object's
	 * discharge below cannot then drop the namespace under us. */
	o->ns = ns;
	if (ns) {
		ns->used += o->charge;
		ns->objects++;
	}
	if (need > p->o.capacity)
		evict_until(p, o->charge - freed, p->o.capacity, old, &evicted);
	if (old) {
		o->pinned = o->pinned || old->pinned;
		if (old->refs > 1)
			p->st.leased--;
		unlink_obj(p, old);
		dead = unref(p, old);
	}
	slot = find_slot(p, key, klen, h);
	o->hnext = *slot;
	*slot = o;
	o->linked = true;
	lru_add_head(p, o);
	p->st.used += o->charge;
	p->st.objects++;
	if (o->pinned)
		p->st.pinned++;
	if (p->o.evict && p->st.used > p->high)
		evict_until(p, 0, p->low, o, &evicted);
	if (p->st.objects > p->nbuckets)
		grow(p);
	pthread_mutex_unlock(&p->lock);
	if (dead)
		obj_destroy(dead);
	finish_evicted(p, evicted);
	return 0;
refuse:
	if (ns && ns->objects == 0)	/* made for this put only */
		ns_drop(p, ns);
	p->st.refused++;
	pthread_mutex_unlock(&p->lock);
	free(o);
	return rc;
}

int mem_pool_put_copy(struct mem_pool *p, const void *key, size_t klen, const void *src,
		      uint64_t len, unsigned flags, uint64_t quota)
{
	void *data;
	int rc = mem_pool_check(p, klen, len);

	if (rc)
		return rc;
	data = abuf_alloc(len);
	if (!data)
		return -ENOMEM;
	if (len)
		memcpy(data, src, len);
	rc = mem_pool_put(p, key, klen, data, len, flags, quota);
	if (rc)
		abuf_free(data);
	return rc;
}

int mem_pool_get(struct mem_pool *p, const void *key, size_t klen, struct mem_obj **out)
{
	struct mem_obj *o;

	pthread_mutex_lock(&p->lock);
	p->st.gets++;
	o = *find_slot(p, key, klen, key_hash(key, klen));
	if (o) {
		o->refs++;
		if (o->refs == 2)
			p->st.leased++;
		lru_del(o);
		lru_add_head(p, o);
		p->st.hits++;
	} else {
		p->st.misses++;
	}
	pthread_mutex_unlock(&p->lock);
	*out = o;
	return o ? 0 : -ENOENT;
}

void mem_obj_release(struct mem_obj *o)
{
	struct mem_pool *p = o->pool;
	struct mem_obj *dead;

	pthread_mutex_lock(&p->lock);
	if (o->linked && o->refs == 2)
		p->st.leased--;
	dead = unref(p, o);
	pthread_mutex_unlock(&p->lock);
	if (dead)
		obj_destroy(dead);
}

int mem_pool_exists(struct mem_pool *p, const void *key, size_t klen, uint64_t *len)
{
	struct mem_obj *o;

	pthread_mutex_lock(&p->lock);
	o = *find_slot(p, key, klen, key_hash(key, klen));
	if (o && len)
		*len = o->len;
	pthread_mutex_unlock(&p->lock);
	return o ? 0 : -ENOENT;
}

int mem_pool_remove(struct mem_pool *p, const void *key, size_t klen)
{
	struct mem_obj *o, *dead = NULL;

	pthread_mutex_lock(&p->lock);
	o = *find_slot(p, key, klen, key_hash(key, klen));
	if (o) {
		if (o->refs > 1)
			p->st.leased--;
		unlink_obj(p, o);
		dead = unref(p, o);
	}
	pthread_mutex_unlock(&p->lock);
	if (dead)
		obj_destroy(dead);
	return o ? 0 : -ENOENT;
}

int mem_pool_pin(struct mem_pool *p, const void *key, size_t klen, bool pin)
{
	struct mem_obj *o;

	pthread_mutex_lock(&p->lock);
	o = *find_slot(p, key, klen, key_hash(key, klen));
	if (o && o->pinned != pin) {
		o->pinned = pin;
		if (pin)
			p->st.pinned++;
		else
			p->st.pinned--;
	}
	pthread_mutex_unlock(&p->lock);
	return o ? 0 : -ENOENT;
}

uint32_t mem_pool_list(struct mem_pool *p, const void *prefix, size_t plen, uint32_t max,
		       int (*fn)(void *arg, const char *key, size_t klen, uint64_t len),
		       void *arg)
{
	uint32_t n = 0;

	pthread_mutex_lock(&p->lock);
	for (uint32_t b = 0; b < p->nbuckets && n < max; b++) {
		for (struct mem_obj *o = p->buckets[b]; o && n < max; o = o->hnext) {
			if (o->klen < plen || memcmp(o->key, prefix, plen) != 0)
				continue;
			n++;
			if (fn(arg, o->key, o->klen, o->len))
				goto out;
		}
	}
out:
	pthread_mutex_unlock(&p->lock);
	return n;
}

uint32_t mem_pool_evict(struct mem_pool *p)
{
	struct mem_obj *evicted = NULL;
	uint32_t n;

	pthread_mutex_lock(&p->lock);
	n = p->st.used > p->low ? evict_until(p, 0, p->low, NULL, &evicted) : 0;
	pthread_mutex_unlock(&p->lock);
	finish_evicted(p, evicted);
	return n;
}

void mem_pool_stats(struct mem_pool *p, struct mem_pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	pthread_mutex_unlock(&p->lock);
}

static int ns_cmp(const void *a, const void *b)
{
	const struct mem_ns_stat *x = a, *y = b;

	return x->used < y->used ? 1 : x->used > y->used ? -1 : strcmp(x->ns, y->ns);
}

uint32_t mem_pool_ns_stats(struct mem_pool *p, struct mem_ns_stat *out, uint32_t max)
{
	struct mem_ns_stat *all;
	uint32_t n = 0, total;

	pthread_mutex_lock(&p->lock);
	total = p->nns;
	all = calloc(total ? total : 1, sizeof(*all));
	for (uint32_t b = 0; all && b < NS_BUCKETS; b++) {
		for (struct mem_ns *ns = p->ns[b]; ns; ns = ns->next, n++) {
			memcpy(all[n].ns, ns->name, ns->len);
			all[n].used = ns->used;
			all[n].objects = ns->objects;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (!all)
		return 0;
	qsort(all, n, sizeof(*all), ns_cmp);
	memcpy(out, all, (n < max ? n : max) * sizeof(*out));
	free(all);
	return total;
}
