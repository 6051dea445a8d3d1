/*
 * strata-fuse's FUSE low-level operations (see sfuse.h).
 *
 * Node ids are Strata inode numbers; node_table.h maps them to paths.
 * File handles are struct sfile (a struct strata_file and its access
 * mode); directory handles are struct sdir (a listing stream with the
 * offset it has reached). Close-to-open: flush publishes the writer's
 * length (strata_fsync), open opens afresh in libstrata, drops the
 * kernel's page cache (keep_cache = 0) and marks its attributes stale,
 * so a read past the cached size asks for the published one.
 */
#include "fuse/sfuse.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define COMP "fuse"

struct sfile {
	struct sfuse_handle h;	/* first */
	struct strata_file *f;
	uint64_t ino;
	bool writable;
	struct wb_file wb;	/* its queued writes */
};

struct sdir {
	struct sfuse_handle h;	/* first */
	pthread_mutex_t lock;
	struct strata_dir *d;
	uint64_t ino;
	off_t pos;		/* index of the next entry: 0 ".", 1 "..", then the listing */
	bool pending;		/* ent was read but did not fit in the last reply */
	struct strata_dirent ent;
	char path[NT_PATH_MAX];
};

static struct sfuse *SF(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void handle_add(struct sfuse *sf, struct sfuse_handle *h, bool dir)
{
	h->dir = dir;
	h->prev = NULL;
	pthread_mutex_lock(&sf->hlock);
	h->next = sf->handles;
	if (h->next)
		h->next->prev = h;
	sf->handles = h;
	pthread_mutex_unlock(&sf->hlock);
}

static void handle_del(struct sfuse *sf, struct sfuse_handle *h)
{
	pthread_mutex_lock(&sf->hlock);
	if (h->prev)
		h->prev->next = h->next;
	else
		sf->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&sf->hlock);
}

int sfuse_errno(int rc, const char *op, const char *path)
{
	int e = -rc;

	if (rc >= 0)
		return 0;
	if (e > STRATA_ERR_BASE) {
		log_warn(COMP, "%s '%s': %s; returning EIO", op, path ? path : "", strata_strerror(rc));
		return EIO;
	}
	switch (e) {
	case ETIMEDOUT:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENOTCONN:
	case EPIPE:
	case ESHUTDOWN:
		log_warn(COMP, "%s '%s': cluster unreachable (%s); returning EIO", op,
			 path ? path : "", strerror(e));
		return EIO;
	default:
		return e;
	}
}

static void reply_rc(fuse_req_t req, int rc, const char *op, const char *path)
{
	fuse_reply_err(req, sfuse_errno(rc, op, path));
}

/* ---- per-thread read buffer ---- */

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void make_buf_key(void)
{
	(void)pthread_key_create(&buf_key, free);
}

static char *thread_buf(void)
{
	char *p;

	(void)pthread_once(&buf_once, make_buf_key);
	p = pthread_getspecific(buf_key);
	if (!p) {
		p = malloc(SFUSE_MAX_IO);
		if (p && pthread_setspecific(buf_key, p)) {
			free(p);
			p = NULL;
		}
	}
	return p;
}

/* ---- attributes ---- */

static void to_stat(struct sfuse *sf, const struct strata_stat *st, struct stat *out)
{
	memset(out, 0, sizeof(*out));
	out->st_ino = st->ino;
	out->st_mode = st->mode;
	out->st_nlink = st->nlink ? st->nlink : 1;
	out->st_uid = st->uid;
	out->st_gid = st->gid;
	out->st_size = (off_t)st->size;
	if (S_ISREG(st->mode))
		out->st_size = (off_t)nt_merge_size(&sf->nt, st->ino, st->size);
	out->st_blksize = SFUSE_MAX_IO;
	out->st_blocks = (out->st_size + 511) / 512;
	out->st_atim.tv_sec = st->atime_ns / 1000000000;
	out->st_atim.tv_nsec = st->atime_ns % 1000000000;
	out->st_mtim.tv_sec = st->mtime_ns / 1000000000;
	out->st_mtim.tv_nsec = st->mtime_ns % 1000000000;
	out->st_ctim.tv_sec = st->ctime_ns / 1000000000;
	out->st_ctim.tv_nsec = st->ctime_ns % 1000000000;
}

static void fill_entry(struct sfuse *sf, const struct strata_stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->ino;
	e->generation = 1;
	to_stat(sf, st, &e->attr);
	e->attr_timeout = sf->attr_timeout;
	e->entry_timeout = sf->entry_timeout;
}

/* Replies with the entry at path (just created or looked up) and records
 * the lookup the reply hands to the kernel. */
static void reply_entry_at(fuse_req_t req, const char *path, const char *op)
{
	struct sfuse *sf = SF(req);
	struct strata_stat st;
	struct fuse_entry_param e;
	int rc = strata_lstat(sf->s, path, &st);

	if (!rc)
		rc = nt_lookup(&sf->nt, st.ino, path);
	if (rc) {
		reply_rc(req, rc, op, path);
		return;
	}
	fill_entry(sf, &st, &e);
	if (fuse_reply_entry(req, &e))
		nt_forget(&sf->nt, st.ino, 1);
}

/* Gives a new entry the caller's owner when the daemon runs as another. */
static void chown_to_caller(fuse_req_t req, const char *path)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct strata_stat st;
	int rc;

	if (ctx->uid == getuid() && ctx->gid == getgid())
		return;
	memset(&st, 0, sizeof(st));
	st.uid = ctx->uid;
	st.gid = ctx->gid;
	rc = strata_setattr(SF(req)->s, path, STRATA_SET_UID | STRATA_SET_GID, &st);
	if (rc)
		log_warn(COMP, "chown '%s' to %u:%u: %s", path, ctx->uid, ctx->gid,
			 strata_strerror(rc));
}

/* ---- operations ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfuse *sf = userdata;

	conn->max_write = SFUSE_MAX_IO;
	conn->max_readahead = SFUSE_MAX_IO;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (sf->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (sf->writeback && !(conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		log_warn(COMP, "the kernel offers no writeback cache; running without it");
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	log_info(COMP, "mounted: max_write %u, max_readahead %u, writeback cache %s",
		 conn->max_write, conn->max_readahead,
		 (conn->want & FUSE_CAP_WRITEBACK_CACHE) ? "on" : "off");
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	char path[NT_PATH_MAX];
	int rc = nt_child_path(&SF(req)->nt, parent, name, path, sizeof(path));

	if (rc) {
		reply_rc(req, rc, "lookup", name);
		return;
	}
	reply_entry_at(req, path, "lookup");
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	nt_forget(&SF(req)->nt, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		nt_forget(&SF(req)->nt, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* Attributes of ino, through its open handle when there is one. */
static int get_stat(struct sfuse *sf, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct strata_stat *st, char *path, size_t plen)
{
	int rc;

	path[0] = '\0';
	if (fi && fi->fh) {
		struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;

		if (h->writable)
			(void)wb_drain(&h->wb, false);
		rc = strata_fstat(h->f, st);
		if (rc != -ENOENT)
			return rc;
	}
	rc = nt_path(&sf->nt, ino, path, plen);
	if (!rc)
		rc = strata_lstat(sf->s, path, st);
	if (!rc && st->ino != ino)
		rc = -ESTALE;	/* the path now names another file */
	return rc;
}

static void reply_attr_of(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
			  const char *op)
{
	struct sfuse *sf = SF(req);
	struct strata_stat st;
	struct stat out;
	char path[NT_PATH_MAX];
	int rc = get_stat(sf, ino, fi, &st, path, sizeof(path));

	if (rc) {
		reply_rc(req, rc, op, path);
		return;
	}
	to_stat(sf, &st, &out);
	fuse_reply_attr(req, &out, sf->attr_timeout);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	reply_attr_of(req, ino, fi, "getattr");
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts_ns(&ts);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct sfile *h = fi ? (struct sfile *)(uintptr_t)fi->fh : NULL;
	struct strata_stat st;
	char path[NT_PATH_MAX];
	unsigned mask = 0;
	int rc = nt_path(&sf->nt, ino, path, sizeof(path));

	if (rc && !(h && (to_set & FUSE_SET_ATTR_SIZE)))
		goto out;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (h && h->writable) {
			rc = wb_drain(&h->wb, true);
			if (!rc)
				rc = strata_ftruncate(h->f, (uint64_t)attr->st_size);
		} else {
			rc = strata_truncate(sf->s, path, (uint64_t)attr->st_size);
		}
		if (rc)
			goto out;
		nt_truncated(&sf->nt, ino, (uint64_t)attr->st_size);
	}
	memset(&st, 0, sizeof(st));
	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= STRATA_SET_MODE;
		st.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= STRATA_SET_UID;
		st.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= STRATA_SET_GID;
		st.gid = attr->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		mask |= STRATA_SET_ATIME;
		st.atime_ns = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? now_ns() : ts_ns(&attr->st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		mask |= STRATA_SET_MTIME;
		st.mtime_ns = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? now_ns() : ts_ns(&attr->st_mtim);
	}
	if (mask) {
		if (!path[0])
			rc = nt_path(&sf->nt, ino, path, sizeof(path));
		if (!rc)
			rc = strata_setattr(sf->s, path, mask, &st);
	}
out:
	if (rc) {
		reply_rc(req, rc, "setattr", path);
		return;
	}
	reply_attr_of(req, ino, fi, "setattr");
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char path[NT_PATH_MAX], target[NT_PATH_MAX + 1];
	ssize_t n;
	int rc = nt_path(&SF(req)->nt, ino, path, sizeof(path));

	if (rc) {
		reply_rc(req, rc, "readlink", path);
		return;
	}
	n = strata_readlink(SF(req)->s, path, target, sizeof(target));
	if (n < 0) {
		reply_rc(req, (int)n, "readlink", path);
		return;
	}
	fuse_reply_readlink(req, target);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	char path[NT_PATH_MAX];
	int rc = nt_child_path(&SF(req)->nt, parent, name, path, sizeof(path));

	if (!rc)
		rc = strata_mkdir(SF(req)->s, path, mode & 07777);
	if (rc) {
		reply_rc(req, rc, "mkdir", path);
		return;
	}
	chown_to_caller(req, path);
	reply_entry_at(req, path, "mkdir");
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	char path[NT_PATH_MAX];
	int rc = nt_child_path(&SF(req)->nt, parent, name, path, sizeof(path));

	if (!rc)
		rc = strata_symlink(SF(req)->s, link, path);
	if (rc) {
		reply_rc(req, rc, "symlink", path);
		return;
	}
	reply_entry_at(req, path, "symlink");
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct sfuse *sf = SF(req);
	char path[NT_PATH_MAX];
	int rc = nt_child_path(&sf->nt, parent, name, path, sizeof(path));

	if (!rc)
		rc = dir ? strata_rmdir(sf->s, path) : strata_unlink(sf->s, path);
	if (!rc)
		nt_removed(&sf->nt, path);
	reply_rc(req, rc, dir ? "rmdir" : "unlink", path);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, true);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct sfuse *sf = SF(req);
	char from[NT_PATH_MAX], to[NT_PATH_MAX];
	unsigned sflags = 0;
	int rc;

	/* RENAME_NOREPLACE (1) and RENAME_EXCHANGE (2); no whiteouts. */
	if (flags & ~3u) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & 1)
		sflags |= STRATA_RENAME_NOREPLACE;
	if (flags & 2)
		sflags |= STRATA_RENAME_EXCHANGE;
	rc = nt_child_path(&sf->nt, parent, name, from, sizeof(from));
	if (!rc)
		rc = nt_child_path(&sf->nt, newparent, newname, to, sizeof(to));
	if (!rc)
		rc = strata_rename(sf->s, from, to, sflags);
	if (!rc)
		nt_rename(&sf->nt, from, to, (flags & 2) != 0);
	reply_rc(req, rc, "rename", from);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	fuse_reply_err(req, EPERM);	/* Strata has no hard links */
}

/* libstrata open flags for the kernel's; O_APPEND is the kernel's job
 * (it passes the offsets), and writeback caching may read pages of a
 * write-only file. */
static int strata_flags(const struct sfuse *sf, int fl)
{
	int acc = fl & O_ACCMODE, out;

	if (sf->writeback && acc == O_WRONLY)
		acc = O_RDWR;
	out = acc == O_WRONLY ? STRATA_O_WRONLY : acc == O_RDWR ? STRATA_O_RDWR : STRATA_O_RDONLY;
	if (fl & O_TRUNC)
		out |= STRATA_O_TRUNC;
	return out;
}

static struct sfile *new_sfile(struct sfuse *sf, struct strata_file *f, uint64_t ino, int sflags)
{
	struct sfile *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->f = f;
	h->ino = ino;
	h->writable = (sflags & 3) != STRATA_O_RDONLY;
	wb_file_init(&h->wb, f, ino);
	if (h->writable)
		nt_writer(&sf->nt, ino, 1);
	handle_add(sf, &h->h, false);
	return h;
}

static void free_sfile(struct sfuse *sf, struct sfile *h)
{
	handle_del(sf, &h->h);
	if (h->writable)
		nt_writer(&sf->nt, h->ino, -1);
	wb_file_release(&h->wb);
	free(h);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct strata_file *f = NULL;
	struct strata_stat st;
	struct fuse_entry_param e;
	struct sfile *h = NULL;
	char path[NT_PATH_MAX];
	int flags = strata_flags(sf, fi->flags) | STRATA_O_CREAT;
	int rc;

	if (fi->flags & O_EXCL)
		flags |= STRATA_O_EXCL;
	rc = nt_child_path(&sf->nt, parent, name, path, sizeof(path));
	if (!rc)
		rc = strata_open(sf->s, path, flags, mode & 07777, &f);
	if (rc)
		goto fail;
	chown_to_caller(req, path);
	rc = strata_lstat(sf->s, path, &st);
	if (!rc)
		rc = nt_lookup(&sf->nt, st.ino, path);
	if (rc)
		goto fail;
	h = new_sfile(sf, f, st.ino, flags);
	if (!h) {
		nt_forget(&sf->nt, st.ino, 1);
		rc = -ENOMEM;
		goto fail;
	}
	fill_entry(sf, &st, &e);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi)) {
		/* Interrupted: the kernel holds neither the entry nor the handle. */
		strata_close(f);
		free_sfile(sf, h);
		nt_forget(&sf->nt, st.ino, 1);
	}
	return;
fail:
	if (f)
		strata_close(f);
	reply_rc(req, rc, "create", path);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct strata_file *f = NULL;
	struct sfile *h;
	char path[NT_PATH_MAX];
	int flags = strata_flags(sf, fi->flags);
	int rc = nt_path(&sf->nt, ino, path, sizeof(path));

	if (!rc)
		rc = strata_open(sf->s, path, flags, 0, &f);
	if (rc) {
		reply_rc(req, rc, "open", path);
		return;
	}
	h = new_sfile(sf, f, ino, flags);
	if (!h) {
		strata_close(f);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (flags & STRATA_O_TRUNC)
		nt_truncated(&sf->nt, ino, 0);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->keep_cache = 0;	/* close-to-open: drop what another client may have changed */
	/* The cached size may be older than the one this open saw: mark the
	 * attributes stale so a read past it asks again. */
	if (!sf->writeback && sf->se)
		(void)fuse_lowlevel_notify_inval_inode(sf->se, ino, -1, 0);
	if (fuse_reply_open(req, fi)) {
		strata_close(f);
		free_sfile(sf, h);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;
	char *buf = thread_buf();
	ssize_t n;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (size > SFUSE_MAX_IO)
		size = SFUSE_MAX_IO;
	if (h->writable)
		(void)wb_drain(&h->wb, false);	/* read our own queued writes */
	n = strata_pread(h->f, buf, size, (uint64_t)off);
	if (n < 0) {
		reply_rc(req, (int)n, "read", NULL);
		return;
	}
	fuse_reply_buf(req, buf, (size_t)n);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;
	ssize_t n = wb_write(&sf->wb, &h->wb, buf, size, off);

	if (n < 0) {
		reply_rc(req, (int)n, "write", NULL);
		return;
	}
	nt_wrote(&sf->nt, ino, (uint64_t)off + (uint64_t)n);
	fuse_reply_write(req, (size_t)n);
}

/* Waits for the queued writes, then publishes the length. */
static int sync_file(struct sfile *h)
{
	int err, rc;

	if (!h->writable)
		return 0;
	err = wb_drain(&h->wb, true);
	rc = strata_fsync(h->f);
	return err ? err : rc;
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	/* Every close(2) publishes the length: close-to-open. */
	reply_rc(req, sync_file((struct sfile *)(uintptr_t)fi->fh), "flush", NULL);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	reply_rc(req, sync_file((struct sfile *)(uintptr_t)fi->fh), "fsync", NULL);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;
	int err = h->writable ? wb_drain(&h->wb, true) : 0;
	int rc = strata_close(h->f);

	if (!rc)
		rc = err;
	if (rc)
		log_warn(COMP, "close of inode %llu: %s (its length may not be published)",
			 (unsigned long long)ino, strata_strerror(rc));
	free_sfile(SF(req), h);
	reply_rc(req, rc, "release", NULL);
}

/* ---- directories ---- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct sdir *d = calloc(1, sizeof(*d));
	int rc;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = nt_path(&sf->nt, ino, d->path, sizeof(d->path));
	if (!rc)
		rc = strata_opendir(sf->s, d->path, &d->d);
	if (rc) {
		reply_rc(req, rc, "opendir", d->path);
		free(d);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->ino = ino;
	handle_add(sf, &d->h, true);
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi)) {
		handle_del(sf, &d->h);
		strata_closedir(d->d);
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
}

/* Moves the stream to entry index off (a seekdir or a restart). */
static int dir_seek(struct sfuse *sf, struct sdir *d, off_t off)
{
	struct strata_dir *nd;
	int rc;

	if (off == d->pos)
		return 0;
	rc = strata_opendir(sf->s, d->path, &nd);
	if (rc)
		return rc;
	strata_closedir(d->d);
	d->d = nd;
	d->pos = 0;
	d->pending = false;
	while (d->pos < off) {
		if (d->pos >= 2) {
			rc = strata_readdir(d->d, &d->ent);
			if (rc <= 0)
				return rc;
		}
		d->pos++;
	}
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct sfuse *sf = SF(req);
	struct sdir *d = (struct sdir *)(uintptr_t)fi->fh;
	char *buf = calloc(1, size), path[NT_PATH_MAX];
	size_t rem = size, used = 0;
	int rc = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	rc = dir_seek(sf, d, off);
	while (!rc) {
		struct fuse_entry_param e;
		const char *name;
		size_t n;
		bool dot = d->pos < 2;

		memset(&e, 0, sizeof(e));
		if (dot) {
			name = d->pos == 0 ? "." : "..";
			e.attr.st_ino = d->pos == 0 ? ino : 1;
			e.attr.st_mode = S_IFDIR;
		} else {
			if (!d->pending) {
				rc = strata_readdir(d->d, &d->ent);
				if (rc <= 0)
					break;
				rc = 0;
				d->pending = true;
			}
			name = d->ent.name;
			e.attr.st_ino = d->ent.ino;
			e.attr.st_mode = d->ent.mode & S_IFMT;
		}
		if (plus && !dot) {
			struct strata_stat st;

			rc = nt_child_path(&sf->nt, ino, name, path, sizeof(path));
			if (!rc)
				rc = strata_lstat(sf->s, path, &st);
			if (rc == -ENOENT) {	/* removed since it was listed */
				d->pending = false;
				d->pos++;
				rc = 0;
				continue;
			}
			if (rc)
				break;
			fill_entry(sf, &st, &e);
			n = fuse_add_direntry_plus(req, buf + used, rem, name, &e, d->pos + 1);
		} else if (plus) {
			n = fuse_add_direntry_plus(req, buf + used, rem, name, &e, d->pos + 1);
		} else {
			n = fuse_add_direntry(req, buf + used, rem, name, &e.attr, d->pos + 1);
		}
		if (n > rem)
			break;	/* full: the entry stays pending */
		if (plus && !dot && nt_lookup(&sf->nt, e.ino, path)) {
			rc = -ENOMEM;
			break;
		}
		used += n;
		rem -= n;
		d->pending = false;
		d->pos++;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc && !used)
		reply_rc(req, rc, "readdir", d->path);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sdir *d = (struct sdir *)(uintptr_t)fi->fh;

	(void)ino;
	handle_del(SF(req), &d->h);
	strata_closedir(d->d);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);	/* namespace changes are durable when acknowledged */
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct strata_statfs sst;
	struct statvfs v;
	uint64_t r, cap, used;
	int rc = strata_statfs(SF(req)->s, &sst);

	(void)ino;
	if (rc) {
		reply_rc(req, rc, "statfs", "/");
		return;
	}
	/* Usable space: raw capacity over the replication factor. */
	r = sst.replication ? sst.replication : 1;
	cap = sst.capacity / r;
	used = sst.used / r;
	memset(&v, 0, sizeof(v));
	v.f_bsize = SFUSE_MAX_IO;
	v.f_frsize = 4096;
	v.f_blocks = cap / v.f_frsize;
	v.f_bfree = used < cap ? (cap - used) / v.f_frsize : 0;
	v.f_bavail = v.f_bfree;
	v.f_ffree = 1ull << 32;
	v.f_files = sst.files + sst.dirs + v.f_ffree;
	v.f_favail = v.f_ffree;
	v.f_namemax = 255;
	fuse_reply_statfs(req, &v);
}

const struct fuse_lowlevel_ops sfuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.create = op_create,
};

int sfuse_init(struct sfuse *sf, struct strata *s)
{
	memset(sf, 0, sizeof(*sf));
	sf->s = s;
	sf->attr_timeout = 1.0;
	sf->entry_timeout = 1.0;
	pthread_mutex_init(&sf->hlock, NULL);
	wb_init(&sf->wb, 8u << 20);
	return nt_init(&sf->nt);
}

int sfuse_start(struct sfuse *sf)
{
	return wb_start(&sf->wb, 4);
}

void sfuse_release(struct sfuse *sf)
{
	/* The queue is sent first: its jobs use the handles closed below. */
	wb_release(&sf->wb);
	while (sf->handles) {
		struct sfuse_handle *h = sf->handles;

		sf->handles = h->next;
		if (h->dir) {
			struct sdir *d = (struct sdir *)h;

			strata_closedir(d->d);
			pthread_mutex_destroy(&d->lock);
			free(d);
		} else {
			struct sfile *f = (struct sfile *)h;

			(void)strata_close(f->f);
			wb_file_release(&f->wb);
			free(f);
		}
	}
	nt_release(&sf->nt);
	pthread_mutex_destroy(&sf->hlock);
}
