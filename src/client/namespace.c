/*
 * libstrata's namespace by handle: the *at calls of strata.h, and the at_*
 * calls (client_int.h) that the path calls of strata.c resolve onto, so
 * each operation is written once.
 *
 * A public handle always carries its generation, and the meta service
 * refuses one whose inode is gone with -ESTALE. The path calls pass the
 * handles they just resolved by number alone (gen 0): a path is looked up
 * afresh by each call, and its errors stay those of a path (-ENOENT).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_int.h"
#include "common/log.h"

/* The page a readdirplus call asks for when the caller names no size. */
#define DIRPLUS_PAGE 256

/* ---- the metadata cache (meta_cache.h) ---- */

/* *v from $name when it is unset (*set false) and the variable is set:
 * a whole number from lo to hi. */
static int env_u32(const char *name, uint32_t lo, uint32_t hi, bool *set, uint32_t *v)
{
	const char *e = getenv(name);
	unsigned long long n;
	char *end;

	if (*set || !e || !*e)
		return 0;
	errno = 0;
	n = strtoull(e, &end, 10);
	if (errno || end == e || *end || *e == '-' || n < lo || n > hi) {
		log_error("client", "$%s '%s' is not a whole number from %" PRIu32 " to %" PRIu32,
			  name, e, lo, hi);
		return -EINVAL;
	}
	*v = (uint32_t)n;
	*set = true;
	return 0;
}

int cl_meta_cache_setup(struct strata *s, const struct strata_opts *given)
{
	int32_t ms = -1;
	uint32_t ttl = 0, entries = 0;
	bool ttl_set = false, entries_set = false;
	int rc;

	if (given && given->opts_size >= offsetof(struct strata_opts, meta_cache_entries) +
					   sizeof(given->meta_cache_entries)) {
		ms = given->meta_cache_ms;
		entries = given->meta_cache_entries;
	}
	if (ms < -1 || ms > (int32_t)MCACHE_TTL_MAX_MS) {
		log_error("client", "meta_cache_ms %" PRId32 " is out of range: -1 (the "
			  "environment's), 0 (off) or 1 to %u ms", ms, MCACHE_TTL_MAX_MS);
		return -EINVAL;
	}
	if (entries && (entries < MCACHE_ENTRIES_MIN || entries > MCACHE_ENTRIES_MAX)) {
		log_error("client", "meta_cache_entries %" PRIu32 " is out of range: 0 (the "
			  "default) or %u to %u", entries, MCACHE_ENTRIES_MIN, MCACHE_ENTRIES_MAX);
		return -EINVAL;
	}
	ttl_set = ms >= 0;
	ttl = ms > 0 ? (uint32_t)ms : 0;
	entries_set = entries != 0;
	rc = env_u32("STRATA_META_CACHE_MS", 0, MCACHE_TTL_MAX_MS, &ttl_set, &ttl);
	if (!rc)
		rc = env_u32("STRATA_META_CACHE_ENTRIES", MCACHE_ENTRIES_MIN, MCACHE_ENTRIES_MAX,
			     &entries_set, &entries);
	if (rc || !ttl)
		return rc;	/* off: the default */
	rc = mcache_new(ttl, entries ? entries : MCACHE_ENTRIES_DEFAULT, &s->mcache);
	if (rc)
		log_error("client", "cannot make the metadata cache: %s", strerror(-rc));
	return rc;
}

void cl_meta_changed(struct strata *s)
{
	if (s->mcache)
		mcache_drop_all(s->mcache);
}

bool cl_meta_cached(const struct strata *s)
{
	return s->mcache && !net_caller_current();
}

/* The key of name in dir (MCACHE_NAME) in buf; returns its length. */
static size_t name_key(struct mt_handle dir, const char *name, char *buf)
{
	size_t n = strnlen(name, MD_NAME_MAX + 1);

	memcpy(buf, &dir.ino, sizeof(dir.ino));
	memcpy(buf + 8, &dir.gen, sizeof(dir.gen));
	memcpy(buf + 16, name, n);
	return 16 + n;
}

/* Keeps an answer about name in dir (rc 0: in; -ENOENT: none), asked at
 * epoch, for lookupat, and a found object's attributes for statat. */
static void fill_entry(struct strata *s, struct mt_handle dir, const char *name, uint64_t epoch,
		       const struct mt_inode *in)
{
	char key[16 + MD_NAME_MAX + 1];
	struct mt_handle h = { in->ino, in->gen };

	mcache_put(s->mcache, MCACHE_NAME, key, name_key(dir, name, key), epoch, 0, in);
	mcache_put(s->mcache, MCACHE_HANDLE, &h, sizeof(h), epoch, 0, in);
}

void at_fill_stat(const struct mt_inode *in, struct strata_stat *st)
{
	memset(st, 0, sizeof(*st));
	st->ino = in->ino;
	st->mode = in->mode;
	st->nlink = in->nlink;
	st->uid = in->uid;
	st->gid = in->gid;
	st->size = in->size;
	st->atime_ns = in->atime_ns;
	st->mtime_ns = in->mtime_ns;
	st->ctime_ns = in->ctime_ns;
	st->chunk_size = in->layout.chunk_size;
	st->stripe = in->layout.stripe;
}

int at_lookup(struct strata *s, struct mt_handle dir, const char *name, struct mt_inode *out)
{
	struct mt_name rq = { .dir = dir, .name = pstr_c(name) };

	return name ? MC_CALL(&s->mc, md_lookup, &rq, out) : -EINVAL;
}

int at_mkdir(struct strata *s, struct mt_handle dir, const char *name, uint32_t mode,
	     struct mt_inode *out)
{
	struct mt_create rq = {
		.dir = dir, .name = pstr_c(name), .mode = (mode & 07777) | S_IFDIR,
		.uid = getuid(), .gid = getgid(),
	};

	int rc = name ? MC_CALL(&s->mc, md_mkdir, &rq, out) : -EINVAL;

	cl_meta_changed(s);
	return rc;
}

int at_symlink(struct strata *s, struct mt_handle dir, const char *name, const char *target,
	       struct mt_inode *out)
{
	struct mt_symlink rq = {
		.dir = dir, .name = pstr_c(name), .target = pstr_c(target), .uid = getuid(),
		.gid = getgid(),
	};

	int rc = name && target ? MC_CALL(&s->mc, md_symlink, &rq, out) : -EINVAL;

	cl_meta_changed(s);
	return rc;
}

int at_mknod(struct strata *s, struct mt_handle dir, const char *name, uint32_t mode,
	     struct mt_inode *out)
{
	struct mt_create rq = {
		.dir = dir, .name = pstr_c(name), .mode = mode & (S_IFMT | 07777),
		.uid = getuid(), .gid = getgid(),
	};

	int rc = name ? MC_CALL(&s->mc, md_mknod, &rq, out) : -EINVAL;

	cl_meta_changed(s);
	return rc;
}

int at_link(struct strata *s, struct mt_handle h, struct mt_handle dir, const char *name,
	    struct mt_inode *out)
{
	struct mt_link rq = { .h = h, .dir = dir, .name = pstr_c(name) };

	int rc = name ? MC_CALL(&s->mc, md_link, &rq, out) : -EINVAL;

	cl_meta_changed(s);
	return rc;
}

int at_remove(struct strata *s, struct mt_handle dir, const char *name, bool rmdir)
{
	struct mt_unlink rq = { .dir = dir, .name = pstr_c(name) };
	struct proto_void none;
	int rc;

	if (!name)
		return -EINVAL;
	rc = rmdir ? MC_CALL(&s->mc, md_rmdir, &rq, &none) :
		     MC_CALL(&s->mc, md_unlink, &rq, &none);
	cl_meta_changed(s);
	return rc;
}

int at_rename(struct strata *s, struct mt_handle from_dir, const char *from,
	      struct mt_handle to_dir, const char *to, unsigned flags)
{
	struct mt_rename rq = {
		.src_dir = from_dir, .src_name = pstr_c(from), .dst_dir = to_dir,
		.dst_name = pstr_c(to),
		.flags = ((flags & STRATA_RENAME_NOREPLACE) ? MD_RENAME_NOREPLACE : 0) |
			 ((flags & STRATA_RENAME_EXCHANGE) ? MD_RENAME_EXCHANGE : 0),
	};
	struct proto_void none;
	int rc;

	if (!from || !to || (flags & ~(STRATA_RENAME_NOREPLACE | STRATA_RENAME_EXCHANGE)))
		return -EINVAL;
	rc = MC_CALL(&s->mc, md_rename, &rq, &none);
	cl_meta_changed(s);
	return rc;
}

int at_setattr(struct strata *s, struct mt_handle h, unsigned mask, const struct strata_stat *st,
	       struct mt_inode *out)
{
	struct mt_setattr rq = {
		.h = h, .mode = st->mode, .uid = st->uid, .gid = st->gid,
		.atime_ns = st->atime_ns, .mtime_ns = st->mtime_ns, .size = st->size,
	};
	struct mt_attr_rep rep;
	int rc;

	if (mask & ~(STRATA_SET_MODE | STRATA_SET_UID | STRATA_SET_GID | STRATA_SET_ATIME |
		     STRATA_SET_MTIME | STRATA_SET_SIZE))
		return -EINVAL;
	rq.mask |= mask & STRATA_SET_MODE ? MD_ATTR_MODE : 0;
	rq.mask |= mask & STRATA_SET_UID ? MD_ATTR_UID : 0;
	rq.mask |= mask & STRATA_SET_GID ? MD_ATTR_GID : 0;
	rq.mask |= mask & STRATA_SET_ATIME ? MD_ATTR_ATIME : 0;
	rq.mask |= mask & STRATA_SET_MTIME ? MD_ATTR_MTIME : 0;
	rq.mask |= mask & STRATA_SET_SIZE ? MD_ATTR_SIZE : 0;
	rc = MC_CALL(&s->mc, md_setattr, &rq, &rep);
	cl_meta_changed(s);
	if (rc == -EMEDIUMTYPE && (mask & STRATA_SET_SIZE)) {
		/* An inline file grown past the inline bound: chunks first
		 * (a request of its own: a fresh request id). */
		struct mt_setattr again = rq;

		memset(&again.rid, 0, sizeof(again.rid));
		rc = cl_inline_convert(s, h);
		if (!rc)
			rc = MC_CALL(&s->mc, md_setattr, &again, &rep);
		cl_meta_changed(s);
	}
	/* The service removed the whole chunks past a new size; the one
	 * that straddles it is ours to cut. */
	if (!rc)
		rc = cl_cut(s, h.ino, &rep.trunc, &rep.cap);
	if (!rc && out)
		*out = rep.inode;
	return rc;
}

/* ---- the public calls ---- */

struct strata_handle strata_root(void)
{
	struct strata_handle h = { MD_ROOT_INO, MD_ROOT_GEN };

	return h;
}

/* The wire form of a handle the caller gave; false for one the library
 * never hands out. */
static bool wire(struct strata_handle h, struct mt_handle *out)
{
	out->ino = h.ino;
	out->gen = h.gen;
	return h.gen != 0;
}

static void give(const struct mt_inode *in, struct strata_handle *h, struct strata_stat *st)
{
	if (h) {
		h->ino = in->ino;
		h->gen = in->gen;
	}
	if (st)
		at_fill_stat(in, st);
}

/* Returns rc, having given the caller what in holds when it is 0. */
static int gave(int rc, const struct mt_inode *in, struct strata_handle *h,
		struct strata_stat *st)
{
	if (!rc)
		give(in, h, st);
	return rc;
}

int strata_lookupat(struct strata *s, struct strata_handle dir, const char *name,
		    struct strata_handle *out, struct strata_stat *st)
{
	char key[16 + MD_NAME_MAX + 1];
	struct mt_handle d;
	struct mt_inode in;
	uint64_t epoch;
	size_t len;
	int rc;

	if (!s || !wire(dir, &d))
		return -EINVAL;
	if (!name || !cl_meta_cached(s))
		return gave(at_lookup(s, d, name, &in), &in, out, st);
	len = name_key(d, name, key);
	rc = mcache_get(s->mcache, MCACHE_NAME, key, len, &in);
	if (rc == 1) {
		epoch = mcache_epoch(s->mcache);
		rc = at_lookup(s, d, name, &in);
		if (rc)
			mcache_put(s->mcache, MCACHE_NAME, key, len, epoch, rc, &in);
		else
			fill_entry(s, d, name, epoch, &in);
	}
	return gave(rc, &in, out, st);
}

int strata_statat(struct strata *s, struct strata_handle h, struct strata_stat *st)
{
	struct mt_ino rq;
	struct mt_inode in;
	uint64_t epoch;
	int rc;

	if (!s || !st || !wire(h, &rq.h))
		return -EINVAL;
	if (!cl_meta_cached(s))
		return gave(MC_CALL(&s->mc, md_getattr, &rq, &in), &in, NULL, st);
	rc = mcache_get(s->mcache, MCACHE_HANDLE, &rq.h, sizeof(rq.h), &in);
	if (rc == 1) {
		epoch = mcache_epoch(s->mcache);
		rc = MC_CALL(&s->mc, md_getattr, &rq, &in);
		mcache_put(s->mcache, MCACHE_HANDLE, &rq.h, sizeof(rq.h), epoch, rc, &in);
	}
	return gave(rc, &in, NULL, st);
}

/* Opens file h itself (flags: STRATA_O_*, no CREAT). OPEN checks the
 * generation, truncates with O_TRUNC, and for a writer first waits for
 * the file's leftover chunk removals; it refuses a symlink (-ELOOP). */
int cl_open_handle(struct strata *s, struct mt_handle h, int flags, struct strata_file **out)
{
	int acc = flags & 3;
	struct mt_open rq = {
		.h = h,
		.flags = (acc == STRATA_O_WRONLY ? MD_O_WRONLY : acc == STRATA_O_RDWR ? MD_O_RDWR :
			  MD_O_RDONLY) |
			 ((flags & STRATA_O_TRUNC) && acc != STRATA_O_RDONLY ? MD_O_TRUNC : 0),
	};
	struct mt_attr_rep rep;
	struct cl_inl inl;
	int rc = cl_open_h(s, &rq, &rep, &inl);

	if (rq.flags & MD_O_TRUNC)
		cl_meta_changed(s);
	if (!rc && S_ISDIR(rep.inode.mode))
		rc = -EISDIR;	/* files only, as strata_open */
	if (rc) {
		cl_inl_release(&inl);
		return rc;
	}
	return cl_file_new(s, &rep.inode, flags, &rep.trunc, &rep.cap, &inl,
			   (rq.flags & MD_O_TRUNC) != 0, out);
}

/* Opens name in dir, creating it with STRATA_O_CREAT. The name is not
 * followed: an existing symlink is -ELOOP, a directory -EISDIR. */
static int open_name(struct strata *s, struct mt_handle dir, const char *name, int flags,
		     uint32_t mode, struct strata_file **out)
{
	struct mt_create rq = {
		.dir = dir, .name = pstr_c(name), .mode = (mode & 07777) | S_IFREG,
		.uid = getuid(), .gid = getgid(),
		.flags = ((flags & STRATA_O_EXCL) ? MD_CREATE_EXCL : 0) |
			 ((flags & STRATA_O_TRUNC) ? MD_CREATE_TRUNC : 0),
	};
	struct mt_attr_rep rep;
	struct mt_handle h;
	struct mt_inode in;
	int rc;

	if (flags & STRATA_O_CREAT) {
		struct cl_inl inl;

		rc = cl_create_h(s, &rq, &rep, &inl);
		cl_meta_changed(s);
		if (!rc)
			return cl_file_new(s, &rep.inode, flags, &rep.trunc, &rep.cap, &inl,
					   rep.created || (flags & STRATA_O_TRUNC), out);
		cl_inl_release(&inl);
		if (rc != -EEXIST || (flags & STRATA_O_EXCL))
			return rc;
	}
	/* Not a plain file, or no CREAT: what is there? Asked of meta, never
	 * of the cache: an open sees the name as it is now (close-to-open). */
	rc = at_lookup(s, dir, name, &in);
	if (!rc && S_ISLNK(in.mode))
		rc = -ELOOP;
	if (!rc && S_ISDIR(in.mode))
		rc = -EISDIR;
	if (rc)
		return rc;
	h.ino = in.ino;
	h.gen = in.gen;
	return cl_open_handle(s, h, flags & ~(STRATA_O_CREAT | STRATA_O_EXCL), out);
}

int strata_openat(struct strata *s, struct strata_handle dir, const char *name, int flags,
		  uint32_t mode, struct strata_file **out)
{
	struct mt_handle d;

	if (!s || !out || (flags & 3) == 3 || !wire(dir, &d))
		return -EINVAL;
	if (!name)
		return (flags & STRATA_O_CREAT) ? -EINVAL : cl_open_handle(s, d, flags, out);
	return open_name(s, d, name, flags, mode, out);
}

int strata_fhandle(struct strata_file *f, struct strata_handle *out)
{
	if (!f || !out)
		return -EINVAL;
	out->ino = f->ino;
	out->gen = f->gen;
	return 0;
}

int strata_mkdirat(struct strata *s, struct strata_handle dir, const char *name, uint32_t mode,
		   struct strata_handle *out, struct strata_stat *st)
{
	struct mt_handle d;
	struct mt_inode in;

	if (!s || !wire(dir, &d))
		return -EINVAL;
	return gave(at_mkdir(s, d, name, mode, &in), &in, out, st);
}

int strata_symlinkat(struct strata *s, const char *target, struct strata_handle dir,
		     const char *name, struct strata_handle *out, struct strata_stat *st)
{
	struct mt_handle d;
	struct mt_inode in;

	if (!s || !wire(dir, &d))
		return -EINVAL;
	return gave(at_symlink(s, d, name, target, &in), &in, out, st);
}

int strata_mknodat(struct strata *s, struct strata_handle dir, const char *name, uint32_t mode,
		   struct strata_handle *out, struct strata_stat *st)
{
	struct mt_handle d;
	struct mt_inode in;

	if (!s || !wire(dir, &d))
		return -EINVAL;
	return gave(at_mknod(s, d, name, mode, &in), &in, out, st);
}

int strata_linkat(struct strata *s, struct strata_handle h, struct strata_handle dir,
		  const char *name, struct strata_handle *out, struct strata_stat *st)
{
	struct mt_handle w, d;
	struct mt_inode in;

	if (!s || !wire(h, &w) || !wire(dir, &d))
		return -EINVAL;
	return gave(at_link(s, w, d, name, &in), &in, out, st);
}

ssize_t strata_readlinkat(struct strata *s, struct strata_handle h, char *buf, size_t len)
{
	struct mt_handle w;

	if (!s || !buf || !len || !wire(h, &w))
		return -EINVAL;
	return mc_readlink(&s->mc, w, buf, len);
}

int strata_unlinkat(struct strata *s, struct strata_handle dir, const char *name, int flags)
{
	struct mt_handle d;

	if (!s || (flags & ~STRATA_AT_REMOVEDIR) || !wire(dir, &d))
		return -EINVAL;
	return at_remove(s, d, name, flags & STRATA_AT_REMOVEDIR);
}

int strata_renameat(struct strata *s, struct strata_handle from_dir, const char *from,
		    struct strata_handle to_dir, const char *to, unsigned flags)
{
	struct mt_handle fd, td;

	if (!s || !wire(from_dir, &fd) || !wire(to_dir, &td))
		return -EINVAL;
	return at_rename(s, fd, from, td, to, flags);
}

int strata_setattrat(struct strata *s, struct strata_handle h, unsigned mask,
		     const struct strata_stat *attrs, struct strata_stat *out)
{
	struct mt_handle w;
	struct mt_inode in;

	if (!s || !attrs || !wire(h, &w))
		return -EINVAL;
	return gave(at_setattr(s, w, mask, attrs, &in), &in, NULL, out);
}

/* ---- readdirplus ---- */

struct dirplus {
	strata_direntplus_fn cb;
	void *arg;
	struct strata *s;
	struct mt_handle dir;
	bool fill;		/* the metadata cache takes what is listed */
	uint64_t epoch;		/* the cache's epoch before the call */
};

static int dirplus_cb(void *arg, const char *name, const struct mt_inode *in)
{
	struct dirplus *dp = arg;
	struct strata_direntplus e;

	if (dp->fill)
		fill_entry(dp->s, dp->dir, name, dp->epoch, in);
	e.name = name;
	give(in, &e.h, &e.st);
	return dp->cb(dp->arg, &e) != 0;
}

int strata_readdirplus(struct strata *s, struct strata_handle dir, struct strata_cookie *cookie,
		       uint32_t max, strata_direntplus_fn cb, void *arg)
{
	struct dirplus dp = { cb, arg, s, { 0, 0 }, false, 0 };
	char next[MD_NAME_MAX + 1];
	struct mt_handle d;
	bool eof = false;
	int rc;

	if (!s || !cookie || !cb || !wire(dir, &d) ||
	    strnlen(cookie->pos, sizeof(cookie->pos)) == sizeof(cookie->pos))
		return -EINVAL;
	if (!max)
		max = DIRPLUS_PAGE;
	if (max > MD_READDIR_MAX)
		max = MD_READDIR_MAX;
	dp.dir = d;
	dp.fill = cl_meta_cached(s);
	if (dp.fill)
		dp.epoch = mcache_epoch(s->mcache);
	rc = mc_readdirplus(&s->mc, d, cookie->pos, max, dirplus_cb, &dp, next, sizeof(next),
			    &eof);
	if (rc < 0)
		return rc;
	/* The cookie names the last entry taken: the next call starts after
	 * it, whatever was created or removed in between. */
	memcpy(cookie->pos, next, strlen(next) + 1);
	return eof ? 0 : 1;
}
