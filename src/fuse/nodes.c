/* strata-fuse's nodes (see nodes.h). */
#include "fuse/nodes.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	uint64_t ino;
	uint64_t gen;
	uint64_t nlookup;
	uint32_t nwriters;
	uint64_t wend;		/* largest end written by this mount's writers */
	bool keep_mtime;	/* set explicitly after the last write */
	int64_t mtime_ns;
	/* Attributes an open read (nodes_note_attr). */
	bool has_attr;
	uint64_t attr_changes;
	double attr_at;
	struct strata_stat attr;
};

static size_t slot(const struct nodes *nm, uint64_t ino)
{
	ino *= 0x9E3779B97F4A7C15ull;
	return (size_t)(ino >> 17) & (nm->nbuckets - 1);
}

static struct node *find(struct nodes *nm, uint64_t ino)
{
	struct node *n = nm->buckets[slot(nm, ino)];

	while (n && n->ino != ino)
		n = n->next;
	return n;
}

/* Locks nm and returns node ino, or NULL; the caller unlocks. */
static struct node *locked(struct nodes *nm, uint64_t ino)
{
	pthread_mutex_lock(&nm->lock);
	return find(nm, ino);
}

static void grow(struct nodes *nm)
{
	size_t nb = nm->nbuckets * 2, old = nm->nbuckets;
	struct node **b = calloc(nb, sizeof(*b)), **ob = nm->buckets;

	if (!b)
		return;		/* longer chains, still correct */
	nm->buckets = b;
	nm->nbuckets = nb;
	for (size_t i = 0; i < old; i++) {
		struct node *n = ob[i], *next;

		for (; n; n = next) {
			size_t s = slot(nm, n->ino);

			next = n->next;
			n->next = b[s];
			b[s] = n;
		}
	}
	free(ob);
}

/* Frees n once the kernel holds no lookup of it and no writer is open. */
static void drop_if_unused(struct nodes *nm, struct node *n)
{
	struct node **p;

	if (n->nlookup || n->nwriters || n->ino == 1)
		return;
	for (p = &nm->buckets[slot(nm, n->ino)]; *p && *p != n; p = &(*p)->next)
		;
	if (*p)
		*p = n->next;
	nm->count--;
	free(n);
}

int nodes_init(struct nodes *nm)
{
	memset(nm, 0, sizeof(*nm));
	pthread_mutex_init(&nm->lock, NULL);
	nm->nbuckets = 1024;
	nm->buckets = calloc(nm->nbuckets, sizeof(*nm->buckets));
	if (!nm->buckets || nodes_lookup(nm, strata_root())) {
		nodes_release(nm);
		return -ENOMEM;
	}
	return 0;
}

void nodes_release(struct nodes *nm)
{
	for (size_t i = 0; nm->buckets && i < nm->nbuckets; i++) {
		struct node *n = nm->buckets[i], *next;

		for (; n; n = next) {
			next = n->next;
			free(n);
		}
	}
	free(nm->buckets);
	nm->buckets = NULL;
	pthread_mutex_destroy(&nm->lock);
}

int nodes_get(struct nodes *nm, uint64_t ino, struct strata_handle *out)
{
	struct node *n = locked(nm, ino);
	int rc = 0;

	if (n) {
		out->ino = n->ino;
		out->gen = n->gen;
	} else {
		rc = -ESTALE;
	}
	pthread_mutex_unlock(&nm->lock);
	return rc;
}

int nodes_lookup(struct nodes *nm, struct strata_handle h)
{
	struct node *n = locked(nm, h.ino);
	int rc = 0;

	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n) {
			rc = -ENOMEM;
			goto out;
		}
		n->ino = h.ino;
		n->next = nm->buckets[slot(nm, h.ino)];
		nm->buckets[slot(nm, h.ino)] = n;
		if (++nm->count > nm->nbuckets * 2)
			grow(nm);
	}
	if (n->gen != h.gen)
		n->has_attr = false;	/* another object now */
	n->gen = h.gen;
	n->nlookup++;
out:
	pthread_mutex_unlock(&nm->lock);
	return rc;
}

void nodes_forget(struct nodes *nm, uint64_t ino, uint64_t count)
{
	struct node *n = locked(nm, ino);

	if (n) {
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		drop_if_unused(nm, n);
	}
	pthread_mutex_unlock(&nm->lock);
}

void nodes_writer(struct nodes *nm, uint64_t ino, int delta)
{
	struct node *n = locked(nm, ino);

	if (n) {
		if (delta > 0)
			n->nwriters++;
		else if (n->nwriters)
			n->nwriters--;
		if (!n->nwriters) {
			n->wend = 0;
			n->keep_mtime = false;
		}
		drop_if_unused(nm, n);
	}
	pthread_mutex_unlock(&nm->lock);
}

void nodes_wrote(struct nodes *nm, uint64_t ino, uint64_t end)
{
	struct node *n = locked(nm, ino);

	if (n && n->nwriters && end > n->wend)
		n->wend = end;
	if (n)
		n->keep_mtime = false;	/* this write is newer */
	pthread_mutex_unlock(&nm->lock);
}

void nodes_set_mtime(struct nodes *nm, uint64_t ino, int64_t mtime_ns)
{
	struct node *n = locked(nm, ino);

	if (n && n->nwriters) {
		n->keep_mtime = true;
		n->mtime_ns = mtime_ns;
	}
	pthread_mutex_unlock(&nm->lock);
}

bool nodes_kept_mtime(struct nodes *nm, uint64_t ino, int64_t *mtime_ns)
{
	struct node *n = locked(nm, ino);
	bool keep = n && n->keep_mtime;

	if (keep)
		*mtime_ns = n->mtime_ns;
	pthread_mutex_unlock(&nm->lock);
	return keep;
}

void nodes_truncated(struct nodes *nm, uint64_t ino, uint64_t size)
{
	struct node *n = locked(nm, ino);

	if (n && n->nwriters)
		n->wend = size;
	pthread_mutex_unlock(&nm->lock);
}

uint64_t nodes_merge_size(struct nodes *nm, uint64_t ino, uint64_t size)
{
	struct node *n = locked(nm, ino);

	if (n && n->nwriters && n->wend > size)
		size = n->wend;
	pthread_mutex_unlock(&nm->lock);
	return size;
}

void nodes_note_attr(struct nodes *nm, uint64_t ino, const struct strata_stat *st,
		     uint64_t changes, double at)
{
	struct node *n = locked(nm, ino);

	if (n && (!n->has_attr || at >= n->attr_at)) {
		n->has_attr = true;
		n->attr = *st;
		n->attr_changes = changes;
		n->attr_at = at;
	}
	pthread_mutex_unlock(&nm->lock);
}

bool nodes_fresh_attr(struct nodes *nm, uint64_t ino, uint64_t changes, double now,
		      double max_age, struct strata_stat *st, double *age)
{
	struct node *n = locked(nm, ino);
	bool fresh = n && n->has_attr && n->attr_changes == changes && now >= n->attr_at &&
		     now - n->attr_at < max_age;

	if (fresh) {
		*st = n->attr;
		*age = now - n->attr_at;
	}
	pthread_mutex_unlock(&nm->lock);
	return fresh;
}
