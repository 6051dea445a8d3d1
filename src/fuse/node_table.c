/* The node table of strata-fuse (see node_table.h). */
#include "fuse/node_table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nt_node {
	struct nt_node *next;
	uint64_t ino;
	uint64_t nlookup;
	char *path;		/* "" once removed */
	uint32_t nwriters;
	uint64_t wend;		/* largest end written by this mount's writers */
};

static size_t slot(const struct node_table *nt, uint64_t ino)
{
	ino *= 0x9E3779B97F4A7C15ull;
	return (size_t)(ino >> 17) & (nt->nbuckets - 1);
}

static struct nt_node *find(struct node_table *nt, uint64_t ino)
{
	struct nt_node *n = nt->buckets[slot(nt, ino)];

	while (n && n->ino != ino)
		n = n->next;
	return n;
}

static void grow(struct node_table *nt)
{
	size_t nb = nt->nbuckets * 2, old = nt->nbuckets;
	struct nt_node **b = calloc(nb, sizeof(*b)), **ob = nt->buckets;

	if (!b)
		return;		/* longer chains, still correct */
	nt->buckets = b;
	nt->nbuckets = nb;
	for (size_t i = 0; i < old; i++) {
		struct nt_node *n = ob[i], *next;

		for (; n; n = next) {
			size_t s = slot(nt, n->ino);

			next = n->next;
			n->next = b[s];
			b[s] = n;
		}
	}
	free(ob);
}

static void unlink_node(struct node_table *nt, struct nt_node *victim)
{
	struct nt_node **p = &nt->buckets[slot(nt, victim->ino)];

	while (*p && *p != victim)
		p = &(*p)->next;
	if (*p)
		*p = victim->next;
	nt->count--;
	free(victim->path);
	free(victim);
}

int nt_init(struct node_table *nt)
{
	memset(nt, 0, sizeof(*nt));
	pthread_mutex_init(&nt->lock, NULL);
	nt->nbuckets = 1024;
	nt->buckets = calloc(nt->nbuckets, sizeof(*nt->buckets));
	if (!nt->buckets)
		goto fail;
	if (nt_lookup(nt, 1, "/"))
		goto fail;
	return 0;
fail:
	nt_release(nt);
	return -ENOMEM;
}

void nt_release(struct node_table *nt)
{
	for (size_t i = 0; nt->buckets && i < nt->nbuckets; i++) {
		struct nt_node *n = nt->buckets[i], *next;

		for (; n; n = next) {
			next = n->next;
			free(n->path);
			free(n);
		}
	}
	free(nt->buckets);
	nt->buckets = NULL;
	pthread_mutex_destroy(&nt->lock);
}

int nt_path(struct node_table *nt, uint64_t ino, char *buf, size_t len)
{
	struct nt_node *n;
	int rc = 0;

	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (!n || !n->path[0])
		rc = -ESTALE;
	else if ((size_t)snprintf(buf, len, "%s", n->path) >= len)
		rc = -ENAMETOOLONG;
	pthread_mutex_unlock(&nt->lock);
	return rc;
}

int nt_child_path(struct node_table *nt, uint64_t parent, const char *name, char *buf,
		  size_t len)
{
	struct nt_node *n;
	int rc = 0;

	if (strlen(name) > 255)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&nt->lock);
	n = find(nt, parent);
	if (!n || !n->path[0])
		rc = -ESTALE;
	else if ((size_t)snprintf(buf, len, "%s%s%s", n->path, strcmp(n->path, "/") ? "/" : "",
				  name) >= len)
		rc = -ENAMETOOLONG;
	pthread_mutex_unlock(&nt->lock);
	return rc;
}

int nt_lookup(struct node_table *nt, uint64_t ino, const char *path)
{
	struct nt_node *n;
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (n) {
		n->nlookup++;
		if (strcmp(n->path, p)) {
			free(n->path);
			n->path = p;
			p = NULL;
		}
		goto out;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		rc = -ENOMEM;
		goto out;
	}
	n->ino = ino;
	n->nlookup = 1;
	n->path = p;
	p = NULL;
	n->next = nt->buckets[slot(nt, ino)];
	nt->buckets[slot(nt, ino)] = n;
	if (++nt->count > nt->nbuckets * 2)
		grow(nt);
out:
	pthread_mutex_unlock(&nt->lock);
	free(p);
	return rc;
}

void nt_forget(struct node_table *nt, uint64_t ino, uint64_t count)
{
	struct nt_node *n;

	if (ino == 1)
		return;		/* the root is pinned */
	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (n) {
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		if (!n->nlookup && !n->nwriters)
			unlink_node(nt, n);
	}
	pthread_mutex_unlock(&nt->lock);
}

/* If path is at or under prefix (of length plen), returns the rest ("" or
 * "/..."), else NULL. */
static const char *under(const char *path, const char *prefix, size_t plen)
{
	if (strncmp(path, prefix, plen))
		return NULL;
	if (path[plen] == '\0' || path[plen] == '/')
		return path + plen;
	return NULL;
}

static void repath(struct nt_node *n, const char *base, const char *rest)
{
	size_t len = strlen(base) + strlen(rest) + 1;
	char *p = malloc(len);

	if (!p) {
		n->path[0] = '\0';	/* cannot follow: stale rather than wrong */
		return;
	}
	snprintf(p, len, "%s%s", base, rest);
	free(n->path);
	n->path = p;
}

void nt_rename(struct node_table *nt, const char *from, const char *to, int exchange)
{
	size_t fl = strlen(from), tl = strlen(to);

	pthread_mutex_lock(&nt->lock);
	for (size_t i = 0; i < nt->nbuckets; i++) {
		for (struct nt_node *n = nt->buckets[i]; n; n = n->next) {
			const char *rest;

			if (!n->path[0] || n->ino == 1)
				continue;
			if ((rest = under(n->path, from, fl)) != NULL)
				repath(n, to, rest);
			else if ((rest = under(n->path, to, tl)) != NULL) {
				if (exchange)
					repath(n, from, rest);
				else
					n->path[0] = '\0';
			}
		}
	}
	pthread_mutex_unlock(&nt->lock);
}

void nt_removed(struct node_table *nt, const char *path)
{
	pthread_mutex_lock(&nt->lock);
	for (size_t i = 0; i < nt->nbuckets; i++)
		for (struct nt_node *n = nt->buckets[i]; n; n = n->next)
			if (n->ino != 1 && !strcmp(n->path, path))
				n->path[0] = '\0';
	pthread_mutex_unlock(&nt->lock);
}

size_t nt_count(struct node_table *nt)
{
	size_t c;

	pthread_mutex_lock(&nt->lock);
	c = nt->count;
	pthread_mutex_unlock(&nt->lock);
	return c;
}

void nt_writer(struct node_table *nt, uint64_t ino, int delta)
{
	struct nt_node *n;

	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (n) {
		if (delta > 0)
			n->nwriters++;
		else if (n->nwriters)
			n->nwriters--;
		if (!n->nwriters)
			n->wend = 0;
		if (!n->nwriters && !n->nlookup)
			unlink_node(nt, n);
	}
	pthread_mutex_unlock(&nt->lock);
}

void nt_wrote(struct node_table *nt, uint64_t ino, uint64_t end)
{
	struct nt_node *n;

	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (n && n->nwriters && end > n->wend)
		n->wend = end;
	pthread_mutex_unlock(&nt->lock);
}

void nt_truncated(struct node_table *nt, uint64_t ino, uint64_t size)
{
	struct nt_node *n;

	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (n && n->nwriters)
		n->wend = size;
	pthread_mutex_unlock(&nt->lock);
}

uint64_t nt_merge_size(struct node_table *nt, uint64_t ino, uint64_t size)
{
	struct nt_node *n;

	pthread_mutex_lock(&nt->lock);
	n = find(nt, ino);
	if (n && n->nwriters && n->wend > size)
		size = n->wend;
	pthread_mutex_unlock(&nt->lock);
	return size;
}
