/*
 * strata-fuse's FUSE low-level operations (see sfuse.h).
 *
 * Node ids are Strata inode numbers; nodes.h keeps the generation of each
 * one the kernel holds, and every operation calls libstrata's handle API
 * with (ino, gen): no path is kept, so a rename anywhere, by any client,
 * leaves every node id valid, and a removed object answers ESTALE.
 * File handles are struct sfile (a struct strata_file, its access mode
 * and its write-behind state); directory handles are struct sdir (a
 * readdirplus cookie and the offset it has reached). Close-to-open: flush
 * publishes the writer's length (strata_fsync), open opens afresh in
 * libstrata, drops the kernel's page cache (keep_cache = 0) and marks its
 * attributes stale, so a read past the cached size asks for the published
 * one.
 */
#include "common/clock.h"
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
	struct sfuse *sf;
	uint64_t ino;
	bool writable;
	struct wb_file wb;	/* its queued writes */
};

struct sdir {
	struct sfuse_handle h;	/* first */
	pthread_mutex_t lock;
	struct strata_handle dir;
	struct strata_cookie cookie;	/* after the last entry handed out */
	off_t pos;		/* index of the next entry: 0 ".", 1 "..", then the listing */
};

static struct sfuse *SF(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* On a multi-user mount, makes this worker thread's namespace calls act
 * for the process that made req: its uid, gid and supplementary groups
 * (the first STRATA_CALLER_GIDS_MAX; the groups past them are not
 * counted, so a group whose bits deny more than others' cannot apply).
 * On others, the mount acts as its token. */
static void act_for(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[STRATA_CALLER_GIDS_MAX];
	uint32_t gids[STRATA_CALLER_GIDS_MAX];
	uint32_t n = 0;
	int got;

	if (!SF(req)->multiuser)
		return;
	gids[n++] = ctx->gid;
	got = fuse_req_getgroups(req, STRATA_CALLER_GIDS_MAX, groups);
	for (int i = 0; i < got && i < STRATA_CALLER_GIDS_MAX && n < STRATA_CALLER_GIDS_MAX; i++)
		if (groups[i] != ctx->gid)
			gids[n++] = groups[i];
	(void)strata_set_caller(ctx->uid, n, gids);
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

/* 1 if rc says the cluster could not be reached (not an answer of it). */
static bool unreachable(int rc)
{
	switch (-rc) {
	case ETIMEDOUT:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENOTCONN:
	case EPIPE:
	case ESHUTDOWN:
		return true;
	default:
		return false;
	}
}

int sfuse_errno(int rc, const char *op, uint64_t ino, const char *name)
{
	int e = -rc;

	if (rc >= 0)
		return 0;
	if (e > STRATA_ERR_BASE) {
		log_warn(COMP, "%s '%s' in inode %llu: %s; returning EIO", op, name ? name : "",
			 (unsigned long long)ino, strata_strerror(rc));
		return EIO;
	}
	if (unreachable(rc)) {
		log_warn(COMP, "%s '%s' in inode %llu: cluster unreachable (%s); returning EIO", op,
			 name ? name : "", (unsigned long long)ino, strerror(e));
		return EIO;
	}
	return e;
}

static void reply_rc(fuse_req_t req, int rc, const char *op, uint64_t ino, const char *name)
{
	fuse_reply_err(req, sfuse_errno(rc, op, ino, name));
}

/* A change through the mount starts or ends (see sfuse.h, changes). */
static void changing(struct sfuse *sf)
{
	__atomic_fetch_add(&sf->changes, 1, __ATOMIC_SEQ_CST);
}

static uint64_t changes_now(struct sfuse *sf)
{
	return __atomic_load_n(&sf->changes, __ATOMIC_SEQ_CST);
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
	/* Unlinked while open here: its hidden name is not a link. */
	if (!S_ISDIR(st->mode) && orphans_is_orphan(&sf->orphans, st->ino))
		out->st_nlink = st->nlink ? st->nlink - 1 : 0;
	out->st_uid = st->uid;
	out->st_gid = st->gid;
	out->st_size = (off_t)st->size;
	if (S_ISREG(st->mode))
		out->st_size = (off_t)nodes_merge_size(&sf->nodes, st->ino, st->size);
	out->st_blksize = SFUSE_MAX_IO;
	out->st_blocks = (out->st_size + 511) / 512;
	out->st_atim.tv_sec = st->atime_ns / 1000000000;
	out->st_atim.tv_nsec = st->atime_ns % 1000000000;
	out->st_mtim.tv_sec = st->mtime_ns / 1000000000;
	out->st_mtim.tv_nsec = st->mtime_ns % 1000000000;
	out->st_ctim.tv_sec = st->ctime_ns / 1000000000;
	out->st_ctim.tv_nsec = st->ctime_ns % 1000000000;
}

/* The kernel's entry for object h: node id ino, generation gen. */
static void fill_entry(struct sfuse *sf, struct strata_handle h, const struct strata_stat *st,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = h.ino;
	e->generation = h.gen;
	to_stat(sf, st, &e->attr);
	e->attr_timeout = sf->attr_timeout;
	e->entry_timeout = sf->entry_timeout;
}

/* Replies with the entry h (just created or looked up), recording the
 * lookup the reply hands to the kernel. */
static void reply_entry(fuse_req_t req, struct strata_handle h, const struct strata_stat *st,
			const char *op, const char *name)
{
	struct sfuse *sf = SF(req);
	struct fuse_entry_param e;
	int rc = nodes_lookup(&sf->nodes, h);

	if (rc) {
		reply_rc(req, rc, op, h.ino, name);
		return;
	}
	fill_entry(sf, h, st, &e);
	if (fuse_reply_entry(req, &e))
		nodes_forget(&sf->nodes, h.ino, 1);
}

/* Gives a new object the caller's owner when the daemon runs as another;
 * st is updated to match. A multi-user mount needs none: meta made it
 * the caller's. */
static void chown_to_caller(fuse_req_t req, struct strata_handle h, struct strata_stat *st)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct strata_stat want;
	int rc;

	if (SF(req)->multiuser || (ctx->uid == getuid() && ctx->gid == getgid()))
		return;
	memset(&want, 0, sizeof(want));
	want.uid = ctx->uid;
	want.gid = ctx->gid;
	rc = strata_setattrat(SF(req)->s, h, STRATA_SET_UID | STRATA_SET_GID, &want, st);
	if (rc)
		log_warn(COMP, "chown of inode %llu to %u:%u: %s", (unsigned long long)h.ino,
			 ctx->uid, ctx->gid, strata_strerror(rc));
}

/* The handle of node ino, or an error (replied) for a node the kernel
 * should not name. */
static int node(fuse_req_t req, fuse_ino_t ino, struct strata_handle *h, const char *op)
{
	int rc = nodes_get(&SF(req)->nodes, ino, h);

	if (rc)
		reply_rc(req, rc, op, ino, NULL);
	return rc;
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
	struct strata_handle dir, h;
	struct strata_stat st;
	int rc;

	act_for(req);
	if (node(req, parent, &dir, "lookup"))
		return;
	rc = strata_lookupat(SF(req)->s, dir, name, &h, &st);
	if (rc == -ENOENT && SF(req)->negative_timeout > 0) {
		/* A negative entry: node id 0, kept by the kernel that long
		 * (this mount's own create or rename replaces it at once). */
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.entry_timeout = SF(req)->negative_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc) {
		reply_rc(req, rc, "lookup", parent, name);
		return;
	}
	reply_entry(req, h, &st, "lookup", name);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	nodes_forget(&SF(req)->nodes, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		nodes_forget(&SF(req)->nodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/*
 * Attributes of h, through its open handle when there is one; *ttl
 * receives how long the kernel may keep them. Open attributes: the
 * attributes an open's reply carried (nodes_note_attr) answer a getattr
 * with no call while no change through this mount has started since the
 * open was sent, for what is left of the attribute timeout from then:
 * the kernel could have cached them that long (the fstat that follows
 * most opens, after the open marked the kernel's attributes stale).
 */
static int get_stat(struct sfuse *sf, struct strata_handle h, struct fuse_file_info *fi,
		    struct strata_stat *st, double *ttl)
{
	double age;

	*ttl = sf->attr_timeout;
	if (nodes_fresh_attr(&sf->nodes, h.ino, changes_now(sf), mono_sec(), sf->attr_timeout, st,
			     &age)) {
		*ttl = sf->attr_timeout - age;
		return 0;
	}
	if (fi && fi->fh) {
		struct sfile *f = (struct sfile *)(uintptr_t)fi->fh;

		if (f->writable)
			(void)wb_drain(&f->wb, false);
		return strata_fstat(f->f, st);
	}
	return strata_statat(sf->s, h, st);
}

static void reply_attr_of(fuse_req_t req, struct strata_handle h, struct fuse_file_info *fi,
			  const char *op)
{
	struct sfuse *sf = SF(req);
	struct strata_stat st;
	struct stat out;
	double ttl;
	int rc = get_stat(sf, h, fi, &st, &ttl);
	bool root = h.ino == FUSE_ROOT_ID;

	if (rc && root && unreachable(rc)) {
		pthread_mutex_lock(&sf->root_lock);
		out = sf->root_st;
		root = sf->root_known;
		pthread_mutex_unlock(&sf->root_lock);
		if (root) {
			(void)sfuse_errno(rc, op, h.ino, NULL);	/* logged */
			fuse_reply_attr(req, &out, 0);
			return;
		}
	}
	if (rc) {
		reply_rc(req, rc, op, h.ino, NULL);
		return;
	}
	to_stat(sf, &st, &out);
	if (root) {
		pthread_mutex_lock(&sf->root_lock);
		sf->root_st = out;
		sf->root_known = true;
		pthread_mutex_unlock(&sf->root_lock);
	}
	fuse_reply_attr(req, &out, ttl);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct strata_handle h;

	act_for(req);
	if (!node(req, ino, &h, "getattr"))
		reply_attr_of(req, h, fi, "getattr");
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct sfile *f = fi ? (struct sfile *)(uintptr_t)fi->fh : NULL;
	struct strata_handle h;
	struct strata_stat st;
	unsigned mask = 0;
	int rc = 0;

	act_for(req);
	if (node(req, ino, &h, "setattr"))
		return;
	memset(&st, 0, sizeof(st));
	changing(sf);
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (f && f->writable) {
			/* After this handle's queued writes, and its length
			 * published first, so the truncate is ordered after them. */
			rc = wb_drain(&f->wb, true);
			if (!rc)
				rc = strata_ftruncate(f->f, (uint64_t)attr->st_size);
		} else {
			mask |= STRATA_SET_SIZE;
			st.size = (uint64_t)attr->st_size;
		}
	}
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
	if (!rc && mask)
		rc = strata_setattrat(sf->s, h, mask, &st, NULL);
	changing(sf);
	/* A time set while this mount writes the file (tar x sets it with
	 * futimens before close) outlives the publish at close. */
	if (!rc && (mask & STRATA_SET_MTIME))
		nodes_set_mtime(&sf->nodes, ino, st.mtime_ns);
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE))
		nodes_truncated(&sf->nodes, ino, (uint64_t)attr->st_size);
	if (rc) {
		reply_rc(req, rc, "setattr", ino, NULL);
		return;
	}
	reply_attr_of(req, h, fi, "setattr");
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[4097];
	struct strata_handle h;
	ssize_t n;

	act_for(req);
	if (node(req, ino, &h, "readlink"))
		return;
	n = strata_readlinkat(SF(req)->s, h, target, sizeof(target));
	if (n < 0) {
		reply_rc(req, (int)n, "readlink", ino, NULL);
		return;
	}
	fuse_reply_readlink(req, target);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct strata_handle dir, h;
	struct strata_stat st;
	int rc;

	act_for(req);
	if (node(req, parent, &dir, "mkdir"))
		return;
	changing(SF(req));
	rc = strata_mkdirat(SF(req)->s, dir, name, mode & 07777, &h, &st);
	if (!rc)
		chown_to_caller(req, h, &st);
	changing(SF(req));
	if (rc) {
		reply_rc(req, rc, "mkdir", parent, name);
		return;
	}
	reply_entry(req, h, &st, "mkdir", name);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct strata_handle dir, h;
	struct strata_stat st;
	int rc;

	act_for(req);
	if (node(req, parent, &dir, "symlink"))
		return;
	changing(SF(req));
	rc = strata_symlinkat(SF(req)->s, link, dir, name, &h, &st);
	if (!rc)
		chown_to_caller(req, h, &st);
	changing(SF(req));
	if (rc) {
		reply_rc(req, rc, "symlink", parent, name);
		return;
	}
	reply_entry(req, h, &st, "symlink", name);
}

/* name in d is about to lose its entry (unlink, or a rename over it). If
 * that is the last name of a file open through this mount, it is renamed
 * to its hidden name instead (orphans.h): 1 when done so, 0 when the
 * caller goes on, or an error. */
static int keep_if_open(struct sfuse *sf, struct strata_handle d, const char *name)
{
	struct strata_handle h;
	struct strata_stat st;
	char hidden[ORPHAN_NAME_MAX];
	int rc = strata_lookupat(sf->s, d, name, &h, &st);

	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (S_ISDIR(st.mode) || st.nlink > 1 || !orphans_is_open(&sf->orphans, h.ino))
		return 0;
	orphans_name(h, hidden);
	rc = strata_renameat(sf->s, d, name, d, hidden, STRATA_RENAME_NOREPLACE);
	if (rc)
		return rc;
	orphans_orphaned(&sf->orphans, h, d);
	return 1;
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	const char *op = dir ? "rmdir" : "unlink";
	struct strata_handle d;
	int rc;

	if (node(req, parent, &d, op))
		return;
	changing(SF(req));
	/* Only a file open here can need keeping: with none open, the name
	 * need not be looked up first. */
	rc = dir || !orphans_any_open(&SF(req)->orphans) ? 0 : keep_if_open(SF(req), d, name);
	if (!rc)
		rc = strata_unlinkat(SF(req)->s, d, name, dir ? STRATA_AT_REMOVEDIR : 0);
	changing(SF(req));
	reply_rc(req, rc < 0 ? rc : 0, op, parent, name);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	act_for(req);
	remove_entry(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	act_for(req);
	remove_entry(req, parent, name, true);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct strata_handle from, to;
	unsigned sflags = 0;
	int rc;

	act_for(req);
	/* RENAME_NOREPLACE (1) and RENAME_EXCHANGE (2); no whiteouts. */
	if (flags & ~3u) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & 1)
		sflags |= STRATA_RENAME_NOREPLACE;
	if (flags & 2)
		sflags |= STRATA_RENAME_EXCHANGE;
	if (node(req, parent, &from, "rename") || node(req, newparent, &to, "rename"))
		return;
	changing(SF(req));
	/* A file it replaces that is open here stays reachable (orphans.h);
	 * the source is looked up first, so a rename onto another name of
	 * the same file is left to meta (a no-op). */
	if (!sflags) {
		struct strata_handle src, dst;

		rc = strata_lookupat(SF(req)->s, from, name, &src, NULL);

		if (!rc && strata_lookupat(SF(req)->s, to, newname, &dst, NULL) == 0 &&
		    dst.ino != src.ino)
			rc = keep_if_open(SF(req), to, newname);
		if (rc < 0) {
			changing(SF(req));
			reply_rc(req, rc, "rename", parent, name);
			return;
		}
	}
	/* Node ids name objects, not paths: nothing to fix up after it. */
	rc = strata_renameat(SF(req)->s, from, name, to, newname, sflags);
	changing(SF(req));
	reply_rc(req, rc, "rename", parent, name);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct strata_handle h, dir, out;
	struct strata_stat st;
	int rc;

	act_for(req);
	if (node(req, ino, &h, "link") || node(req, newparent, &dir, "link"))
		return;
	changing(SF(req));
	rc = strata_linkat(SF(req)->s, h, dir, newname, &out, &st);
	changing(SF(req));
	if (rc) {
		reply_rc(req, rc, "link", newparent, newname);
		return;
	}
	reply_entry(req, out, &st, "link", newname);
}

/* Fifos and sockets (a name with attributes); regular files as create
 * without an open; devices are refused (the mount is nodev). */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct strata_handle dir, h;
	struct strata_stat st;
	int rc;

	(void)rdev;
	act_for(req);
	if (node(req, parent, &dir, "mknod"))
		return;
	changing(SF(req));
	if (S_ISREG(mode)) {
		struct strata_file *f = NULL;

		rc = strata_openat(SF(req)->s, dir, name,
				   STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_EXCL, mode & 07777, &f);
		if (!rc)
			rc = strata_fhandle(f, &h);
		if (!rc)
			rc = strata_fstat_open(f, &st);
		if (f) {
			int crc = strata_close(f);

			rc = rc ? rc : crc;
		}
	} else {
		rc = strata_mknodat(SF(req)->s, dir, name, mode & (S_IFMT | 07777), &h, &st);
	}
	if (!rc)
		chown_to_caller(req, h, &st);
	changing(SF(req));
	if (rc) {
		reply_rc(req, rc, "mknod", parent, name);
		return;
	}
	reply_entry(req, h, &st, "mknod", name);
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
	if (orphans_open(&sf->orphans, ino, 1, NULL, NULL)) {
		free(h);
		return NULL;
	}
	h->f = f;
	h->sf = sf;
	h->ino = ino;
	h->writable = (sflags & 3) != STRATA_O_RDONLY;
	wb_file_init(&h->wb, f, ino);
	if (h->writable)
		nodes_writer(&sf->nodes, ino, 1);
	handle_add(sf, &h->h, false);
	return h;
}

static void free_sfile(struct sfuse *sf, struct sfile *h)
{
	struct strata_handle dir;
	char name[ORPHAN_NAME_MAX];

	/* The last close of a file unlinked while open here: its hidden
	 * name goes, and the inode with it. */
	if (orphans_open(&sf->orphans, h->ino, -1, &dir, name) == 1) {
		int rc = strata_unlinkat(sf->s, dir, name, 0);

		if (rc && rc != -ENOENT)
			log_warn(COMP, "cannot remove '%s' (inode %llu, unlinked while open): %s",
				 name, (unsigned long long)h->ino, strata_strerror(rc));
	}
	handle_del(sf, &h->h);
	if (h->writable)
		nodes_writer(&sf->nodes, h->ino, -1);
	wb_file_release(&h->wb);
	free(h);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct strata_file *f = NULL;
	struct strata_handle dir, h;
	struct strata_stat st;
	struct fuse_entry_param e;
	struct sfile *sh = NULL;
	int flags = strata_flags(sf, fi->flags) | STRATA_O_CREAT;
	int rc;

	act_for(req);
	if (fi->flags & O_EXCL)
		flags |= STRATA_O_EXCL;
	if (node(req, parent, &dir, "create"))
		return;
	changing(sf);
	rc = strata_openat(sf->s, dir, name, flags, mode & 07777, &f);
	/* The create's reply carries the attributes: no getattr. */
	if (!rc)
		rc = strata_fhandle(f, &h);
	if (!rc)
		rc = strata_fstat_open(f, &st);
	if (!rc)
		chown_to_caller(req, h, &st);
	changing(sf);
	if (rc)
		goto fail;
	rc = nodes_lookup(&sf->nodes, h);
	if (rc)
		goto fail;
	sh = new_sfile(sf, f, h.ino, flags);
	if (!sh) {
		nodes_forget(&sf->nodes, h.ino, 1);
		rc = -ENOMEM;
		goto fail;
	}
	fill_entry(sf, h, &st, &e);
	fi->fh = (uint64_t)(uintptr_t)sh;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi)) {
		/* Interrupted: the kernel holds neither the entry nor the handle. */
		strata_close(f);
		free_sfile(sf, sh);
		nodes_forget(&sf->nodes, h.ino, 1);
	}
	return;
fail:
	if (f)
		strata_close(f);
	reply_rc(req, rc, "create", parent, name);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct strata_file *f = NULL;
	struct strata_handle h;
	struct sfile *sh;
	int flags = strata_flags(sf, fi->flags);
	int rc;

	uint64_t changes0;
	double at;

	act_for(req);
	if (node(req, ino, &h, "open"))
		return;
	if (flags & STRATA_O_TRUNC)
		changing(sf);
	changes0 = changes_now(sf);
	at = mono_sec();
	rc = strata_openat(sf->s, h, NULL, flags, 0, &f);
	if (flags & STRATA_O_TRUNC)
		changing(sf);
	if (rc) {
		reply_rc(req, rc, "open", ino, NULL);
		return;
	}
	sh = new_sfile(sf, f, ino, flags);
	if (!sh) {
		strata_close(f);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!sh->writable) {
		struct strata_stat st;

		if (!strata_fstat_open(f, &st))
			nodes_note_attr(&sf->nodes, ino, &st, changes0, at);
	}
	if (flags & STRATA_O_TRUNC)
		nodes_truncated(&sf->nodes, ino, 0);
	fi->fh = (uint64_t)(uintptr_t)sh;
	fi->keep_cache = 0;	/* close-to-open: drop what another client may have changed */
	/* The cached size may be older than the one this open saw: mark the
	 * attributes stale so a read past it asks again. */
	if (!sf->writeback && sf->se)
		(void)fuse_lowlevel_notify_inval_inode(sf->se, ino, -1, 0);
	if (fuse_reply_open(req, fi)) {
		strata_close(f);
		free_sfile(sf, sh);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;
	char *buf = thread_buf();
	ssize_t n;

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
		reply_rc(req, (int)n, "read", ino, NULL);
		return;
	}
	fuse_reply_buf(req, buf, (size_t)n);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;
	ssize_t n;

	changing(sf);
	n = wb_write(&sf->wb, &h->wb, buf, size, off);
	changing(sf);

	if (n < 0) {
		reply_rc(req, (int)n, "write", ino, NULL);
		return;
	}
	nodes_wrote(&sf->nodes, ino, (uint64_t)off + (uint64_t)n);
	fuse_reply_write(req, (size_t)n);
}

/* After h published its length (which stamps the publish time as the
 * mtime), puts back a time set explicitly since its last write. */
static int keep_mtime(struct sfile *h)
{
	struct strata_handle fh;
	struct strata_stat st;
	int rc;

	memset(&st, 0, sizeof(st));
	if (!nodes_kept_mtime(&h->sf->nodes, h->ino, &st.mtime_ns))
		return 0;
	rc = strata_fhandle(h->f, &fh);
	return rc ? rc : strata_setattrat(h->sf->s, fh, STRATA_SET_MTIME, &st, NULL);
}

/* Waits for the queued writes, then publishes the length. */
static int sync_file(struct sfile *h)
{
	int err, rc;

	if (!h->writable)
		return 0;
	changing(h->sf);
	err = wb_drain(&h->wb, true);
	rc = strata_fsync(h->f);
	if (!rc && !err)
		rc = keep_mtime(h);
	changing(h->sf);
	return err ? err : rc;
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* Every close(2) publishes the length: close-to-open. */
	reply_rc(req, sync_file((struct sfile *)(uintptr_t)fi->fh), "flush", ino, NULL);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	reply_rc(req, sync_file((struct sfile *)(uintptr_t)fi->fh), "fsync", ino, NULL);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfile *h = (struct sfile *)(uintptr_t)fi->fh;
	int err, rc;

	/* A writer's close publishes; the last close of an orphan removes it. */
	changing(h->sf);
	err = h->writable ? wb_drain(&h->wb, true) : 0;
	rc = strata_close(h->f);
	if (!rc)
		rc = err;
	if (rc)
		log_warn(COMP, "close of inode %llu: %s (its length may not be published)",
			 (unsigned long long)ino, strata_strerror(rc));
	free_sfile(SF(req), h);
	changing(SF(req));
	reply_rc(req, rc, "release", ino, NULL);
}

/* ---- directories ---- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfuse *sf = SF(req);
	struct strata_stat st;
	struct strata_handle h;
	struct sdir *d;
	int rc;

	act_for(req);
	if (node(req, ino, &h, "opendir"))
		return;
	rc = strata_statat(sf->s, h, &st);
	if (!rc && !S_ISDIR(st.mode))
		rc = -ENOTDIR;
	if (rc) {
		reply_rc(req, rc, "opendir", ino, NULL);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->dir = h;
	handle_add(sf, &d->h, true);
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi)) {
		handle_del(sf, &d->h);
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
}

/* A reply being filled from the listing. */
struct dir_fill {
	fuse_req_t req;
	struct sfuse *sf;
	struct sdir *d;
	bool plus;
	char *buf;
	size_t size, used;
	bool seeking;		/* dir_seek: pass over skip entries, then stop */
	off_t skip;
	bool full;		/* an entry did not fit */
	int err;
};

/* Takes one listed entry into the reply; non-zero when it does not fit
 * (the cookie then stays before it, and the next reply starts with it). */
static int fill_cb(void *arg, const struct strata_direntplus *e)
{
	struct dir_fill *df = arg;
	struct fuse_entry_param fe;
	size_t n, rem = df->size - df->used;

	if (df->seeking) {
		if (!df->skip)
			return 1;
		df->skip--;
		df->d->pos++;
		return 0;
	}
	/* A hidden name (orphans.h) keeps its place in the numbering,
	 * which seeks count, but is not shown. */
	if (orphans_hidden(e->name)) {
		df->d->pos++;
		return 0;
	}
	fill_entry(df->sf, e->h, &e->st, &fe);
	if (df->plus)
		n = fuse_add_direntry_plus(df->req, df->buf + df->used, rem, e->name, &fe,
					   df->d->pos + 1);
	else
		n = fuse_add_direntry(df->req, df->buf + df->used, rem, e->name, &fe.attr,
				      df->d->pos + 1);
	if (n > rem) {
		df->full = true;
		return 1;
	}
	/* A readdirplus entry hands the kernel a lookup of it. */
	if (df->plus && nodes_lookup(&df->sf->nodes, e->h)) {
		df->err = -ENOMEM;
		return 1;
	}
	df->used += n;
	df->d->pos++;
	return 0;
}

/* Moves the listing to entry index off (a seekdir, or a restart): from the
 * start, passing over off - 2 entries. */
static int dir_seek(struct dir_fill *df, off_t off)
{
	struct sdir *d = df->d;
	int rc = 1;

	if (off == d->pos)
		return 0;
	memset(&d->cookie, 0, sizeof(d->cookie));
	d->pos = off < 2 ? off : 2;
	df->skip = off - d->pos;
	df->seeking = true;
	while (df->skip && rc == 1)
		rc = strata_readdirplus(df->sf->s, d->dir, &d->cookie, 0, fill_cb, df);
	df->seeking = false;
	return rc < 0 ? rc : 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct sdir *d = (struct sdir *)(uintptr_t)fi->fh;
	struct dir_fill df = { .req = req, .sf = SF(req), .d = d, .plus = plus, .size = size };
	int rc;

	df.buf = calloc(1, size);
	if (!df.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	rc = dir_seek(&df, off);
	/* "." and ".." are the kernel's to resolve: no lookup is handed out. */
	while (!rc && d->pos < 2) {
		struct stat st = { .st_ino = d->pos == 0 ? ino : FUSE_ROOT_ID, .st_mode = S_IFDIR };
		struct fuse_entry_param fe = { .attr = st };
		const char *name = d->pos == 0 ? "." : "..";
		size_t n = plus ? fuse_add_direntry_plus(req, df.buf + df.used, size - df.used, name,
							 &fe, d->pos + 1) :
			   fuse_add_direntry(req, df.buf + df.used, size - df.used, name, &st,
					     d->pos + 1);

		if (n > size - df.used)
			break;
		df.used += n;
		d->pos++;
	}
	/* Pages as large as the reply can take (an entry is about 150 bytes
	 * with attributes, 40 without), until an entry does not fit. */
	while (!rc && d->pos >= 2 && !df.full && !df.err) {
		rc = strata_readdirplus(df.sf->s, d->dir, &d->cookie,
					(uint32_t)((size - df.used) / (plus ? 150 : 40) + 1), fill_cb,
					&df);
		if (rc == 0)
			break;		/* the end of the directory */
		rc = rc < 0 ? rc : 0;
	}
	pthread_mutex_unlock(&d->lock);
	if (!rc)
		rc = df.err;
	if (rc && !df.used)
		reply_rc(req, rc, "readdir", ino, NULL);
	else
		fuse_reply_buf(req, df.buf, df.used);
	free(df.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	act_for(req);
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	act_for(req);
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sdir *d = (struct sdir *)(uintptr_t)fi->fh;

	(void)ino;
	handle_del(SF(req), &d->h);
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
		reply_rc(req, rc, "statfs", FUSE_ROOT_ID, NULL);
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
	.mknod = op_mknod,
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
	pthread_mutex_init(&sf->root_lock, NULL);
	orphans_init(&sf->orphans);
	wb_init(&sf->wb, 8u << 20);
	return nodes_init(&sf->nodes);
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

			pthread_mutex_destroy(&d->lock);
			free(d);
		} else {
			struct sfile *f = (struct sfile *)h;

			(void)strata_close(f->f);
			wb_file_release(&f->wb);
			free(f);
		}
	}
	nodes_release(&sf->nodes);
	orphans_release(&sf->orphans);
	pthread_mutex_destroy(&sf->root_lock);
	pthread_mutex_destroy(&sf->hlock);
}
