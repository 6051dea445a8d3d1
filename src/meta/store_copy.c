/*
 * Copies a namespace from one metadata store to another through the
 * store interface only (meta_store.h), so any backend can be the source
 * or the target: 'strata meta migrate' moves SQLite to PostgreSQL with it.
 *
 * One walk serves both the copy and the check after it: with a target it
 * puts every record it reads there, without one it only counts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "meta/meta_store.h"

#define COMP "meta-copy"
#define BATCH 256u
#define LINK_MAX_LEN 8192

#define CALL(st, op, ...) ((st)->ops->op((st)->impl, __VA_ARGS__))

struct walk {
	struct meta_store *from, *to;	/* to: NULL to count only */
	struct meta_copy_stats n;
	uint64_t dir;			/* list_dentries callback: its directory, */
	char last[256];			/* the last name it saw, */
	int err;			/* and the error that stopped it */
	struct meta_inode inodes[BATCH];
	union {
		struct meta_quota quotas[BATCH];
		struct meta_counter counters[BATCH];
		struct meta_gc_item gc[BATCH];
	} u;
	char link[LINK_MAX_LEN];
	uint8_t inl[META_INLINE_MAX];	/* one file's inline data */
};

static int on_dentry(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct walk *w = arg;
	int err = w->to ? CALL(w->to, put_dentry, w->dir, name, ino, type) : 0;

	if (err) {
		w->err = err;
		return 1;
	}
	snprintf(w->last, sizeof(w->last), "%s", name);
	w->n.dentries++;
	return 0;
}

static int walk_dir(struct walk *w, uint64_t dir)
{
	w->dir = dir;
	w->last[0] = '\0';
	for (;;) {
		int rc = CALL(w->from, list_dentries, dir, w->last, BATCH, on_dentry, w);

		if (rc < 0)
			return rc;
		if (rc > 0 && w->err)
			return w->err;
		if ((uint32_t)rc < BATCH)
			return 0;
	}
}

static int walk_inode(struct walk *w, const struct meta_inode *in)
{
	int err = w->to ? CALL(w->to, put_inode, in) : 0;

	if (err)
		return err;
	w->n.inodes++;
	if (S_ISLNK(in->mode)) {
		int len = CALL(w->from, get_link, in->ino, w->link, sizeof(w->link));

		if (len >= (int)sizeof(w->link)) {
			log_error(COMP, "symlink %llu: target of %d bytes is too long",
				  (unsigned long long)in->ino, len);
			return -ENAMETOOLONG;
		}
		if (len >= 0) {
			err = w->to ? CALL(w->to, put_link, in->ino, w->link, (size_t)len) : 0;
			if (err)
				return err;
			w->n.links++;
		}
	}
	if (S_ISREG(in->mode) && in->size && in->size <= META_INLINE_MAX) {
		/* The bytes of an inline file travel with its inode. */
		int len = CALL(w->from, get_inline, in->ino, w->inl, sizeof(w->inl));

		if (len > (int)sizeof(w->inl)) {
			log_error(COMP, "file %llu: inline data of %d bytes is too long",
				  (unsigned long long)in->ino, len);
			return -EFBIG;
		}
		if (len >= 0) {
			err = w->to ? CALL(w->to, put_inline, in->ino, w->inl, (size_t)len) : 0;
			if (err)
				return err;
			w->n.inlines++;
		} else if (len != -ENOENT) {
			return len;
		}
	}
	return S_ISDIR(in->mode) ? walk_dir(w, in->ino) : 0;
}

static int walk_inodes(struct walk *w)
{
	uint64_t after = 0;

	for (;;) {
		int n = CALL(w->from, list_inodes, after, w->inodes, BATCH);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int err = walk_inode(w, &w->inodes[i]);

			if (err)
				return err;
			after = w->inodes[i].ino;
		}
		if ((uint32_t)n < BATCH)
			return 0;
	}
}

static int walk_quotas(struct walk *w)
{
	uint64_t after = 0;

	for (;;) {
		int n = CALL(w->from, list_quotas, after, w->u.quotas, BATCH);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int err = w->to ? CALL(w->to, put_quota, &w->u.quotas[i]) : 0;

			if (err)
				return err;
			after = w->u.quotas[i].ino;
			w->n.quotas++;
		}
		if ((uint32_t)n < BATCH)
			return 0;
	}
}

static int walk_counters(struct walk *w)
{
	char after[META_COUNTER_NAME_MAX] = "";

	for (;;) {
		int n = CALL(w->from, list_counters, after, w->u.counters, BATCH);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			const struct meta_counter *c = &w->u.counters[i];
			int err = w->to ? CALL(w->to, counter_set, c->name, c->value) : 0;

			if (err)
				return err;
			memcpy(after, c->name, sizeof(after));
			w->n.counters++;
		}
		if ((uint32_t)n < BATCH)
			return 0;
	}
}

/* The queue keeps its order; the target numbers its entries anew. */
static int walk_gc(struct walk *w)
{
	uint64_t after = 0;

	for (;;) {
		int n = CALL(w->from, gc_list, after, w->u.gc, BATCH);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			const struct meta_gc_item *it = &w->u.gc[i];
			int err = w->to ? CALL(w->to, gc_push, it->ino, it->from, it->to,
					       &it->layout) : 0;

			if (err)
				return err;
			after = it->id;
			w->n.gc_items++;
		}
		if ((uint32_t)n < BATCH)
			return 0;
	}
}

static int walk_all(struct walk *w)
{
	int err = walk_inodes(w);

	if (!err)
		err = walk_quotas(w);
	if (!err)
		err = walk_counters(w);
	if (!err)
		err = walk_gc(w);
	if (!err)
		err = CALL(w->from, alloc_peek, &w->n.next_ino, &w->n.next_gen);
	if (!err && w->to)
		err = CALL(w->to, alloc_reserve, w->n.next_ino, w->n.next_gen);
	return err;
}

/* Counts store in a read transaction of its own. */
static int count_store(struct meta_store *st, struct walk *w)
{
	int err;

	memset(&w->n, 0, sizeof(w->n));
	w->from = st;
	w->to = NULL;
	err = st->ops->begin(st->impl, false);
	if (err)
		return err;
	err = walk_all(w);
	st->ops->rollback(st->impl);
	return err;
}

static int check_empty(struct walk *w, struct meta_store *to)
{
	int n = CALL(to, list_inodes, 0, w->inodes, 1);

	if (n == 0)
		n = CALL(to, list_counters, "", w->u.counters, 1);
	if (n == 0)
		n = CALL(to, list_quotas, 0, w->u.quotas, 1);
	if (n == 0)
		n = CALL(to, gc_list, 0, w->u.gc, 1);
	if (n > 0) {
		log_error(COMP, "the target store is not empty: it holds a namespace already;"
			  " give an empty database");
		return -ENOTEMPTY;
	}
	return n;
}

#define SAME(f) (a->f == b->f)
static bool same_counts(const struct meta_copy_stats *a, const struct meta_copy_stats *b)
{
	return SAME(inodes) && SAME(dentries) && SAME(links) && SAME(inlines) && SAME(quotas) &&
	       SAME(counters) && SAME(gc_items);
}
#undef SAME

int meta_store_copy(struct meta_store *from, struct meta_store *to,
		    struct meta_copy_stats *stats)
{
	struct walk *w = calloc(1, sizeof(*w));
	struct meta_copy_stats copied;
	int err;

	if (!w)
		return -ENOMEM;
	w->from = from;
	w->to = to;
	err = from->ops->begin(from->impl, false);
	if (err)
		goto out;
	err = to->ops->begin(to->impl, true);
	if (err) {
		from->ops->rollback(from->impl);
		goto out;
	}
	err = check_empty(w, to);
	if (!err)
		err = walk_all(w);
	from->ops->rollback(from->impl);
	if (!err)
		err = to->ops->commit(to->impl);
	if (err) {
		to->ops->rollback(to->impl);
		goto out;
	}
	copied = w->n;
	err = count_store(to, w);
	if (!err && !same_counts(&copied, &w->n)) {
		log_error(COMP, "the copy differs from its source: %llu/%llu inodes, %llu/%llu"
			  " entries, %llu/%llu links, %llu/%llu inline, %llu/%llu quotas,"
			  " %llu/%llu counters,"
			  " %llu/%llu gc items",
			  (unsigned long long)w->n.inodes, (unsigned long long)copied.inodes,
			  (unsigned long long)w->n.dentries, (unsigned long long)copied.dentries,
			  (unsigned long long)w->n.links, (unsigned long long)copied.links,
			  (unsigned long long)w->n.inlines, (unsigned long long)copied.inlines,
			  (unsigned long long)w->n.quotas, (unsigned long long)copied.quotas,
			  (unsigned long long)w->n.counters, (unsigned long long)copied.counters,
			  (unsigned long long)w->n.gc_items, (unsigned long long)copied.gc_items);
		err = -EIO;
	}
	if (!err && stats)
		*stats = copied;
out:
	free(w);
	return err;
}
