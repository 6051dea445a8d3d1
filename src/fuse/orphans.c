/* Unlinked-but-open files of a mount (orphans.h): a list of the inodes
 * open through it, with how many handles each has and, once orphaned,
 * where its hidden name lies. A mount has few files open at once; a list
 * is enough. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orphans.h"

struct orphan {
	struct orphan *next;
	uint64_t ino;
	uint32_t opens;
	bool orphaned;
	struct strata_handle h, dir;
};

void orphans_init(struct orphans *o)
{
	pthread_mutex_init(&o->lock, NULL);
	o->open = NULL;
	o->norphans = 0;
}

void orphans_release(struct orphans *o)
{
	while (o->open) {
		struct orphan *n = o->open;

		o->open = n->next;
		free(n);
	}
	pthread_mutex_destroy(&o->lock);
}

static struct orphan **find(struct orphans *o, uint64_t ino)
{
	struct orphan **p = &o->open;

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

int orphans_open(struct orphans *o, uint64_t ino, int delta, struct strata_handle *dir,
		 char *name)
{
	struct orphan **p, *n;
	int rc = 0;

	pthread_mutex_lock(&o->lock);
	p = find(o, ino);
	n = *p;
	if (delta > 0) {
		if (!n) {
			n = calloc(1, sizeof(*n));
			if (!n) {
				rc = -ENOMEM;
				goto out;
			}
			n->ino = ino;
			n->next = o->open;
			o->open = n;
		}
		n->opens++;
		goto out;
	}
	if (!n || --n->opens)
		goto out;
	*p = n->next;
	if (n->orphaned) {
		*dir = n->dir;
		orphans_name(n->h, name);
		__atomic_fetch_sub(&o->norphans, 1, __ATOMIC_RELAXED);
		rc = 1;
	}
	free(n);
out:
	pthread_mutex_unlock(&o->lock);
	return rc;
}

bool orphans_any_open(struct orphans *o)
{
	bool any;

	pthread_mutex_lock(&o->lock);
	any = o->open != NULL;
	pthread_mutex_unlock(&o->lock);
	return any;
}

bool orphans_is_open(struct orphans *o, uint64_t ino)
{
	bool open;

	pthread_mutex_lock(&o->lock);
	open = *find(o, ino) != NULL;
	pthread_mutex_unlock(&o->lock);
	return open;
}

void orphans_orphaned(struct orphans *o, struct strata_handle h, struct strata_handle dir)
{
	struct orphan *n;

	pthread_mutex_lock(&o->lock);
	n = *find(o, h.ino);
	if (n && !n->orphaned)
		__atomic_fetch_add(&o->norphans, 1, __ATOMIC_RELAXED);
	if (n) {
		n->orphaned = true;
		n->h = h;
		n->dir = dir;
	}
	pthread_mutex_unlock(&o->lock);
}

bool orphans_is_orphan(struct orphans *o, uint64_t ino)
{
	struct orphan *n;
	bool yes;

	if (!__atomic_load_n(&o->norphans, __ATOMIC_RELAXED))
		return false;	/* the common case: no lock on a stat */
	pthread_mutex_lock(&o->lock);
	n = *find(o, ino);
	yes = n && n->orphaned;
	pthread_mutex_unlock(&o->lock);
	return yes;
}

void orphans_name(struct strata_handle h, char *buf)
{
	snprintf(buf, ORPHAN_NAME_MAX, ORPHAN_PREFIX "%llx.%llx", (unsigned long long)h.ino,
		 (unsigned long long)h.gen);
}

bool orphans_hidden(const char *name)
{
	return strncmp(name, ORPHAN_PREFIX, sizeof(ORPHAN_PREFIX) - 1) == 0;
}
