/*
 * strata put / get / cp: copy files and whole trees into, out of and inside
 * the cluster.
 *
 * One thread walks the sources first: it creates every destination
 * directory (mkdir -p semantics, parents before children), copies symlinks
 * and queues each regular file as a job. Then N workers (-j, default 4)
 * take jobs from the queue. Every worker has its own strata_ring on the one
 * shared struct strata and keeps up to FS_DEPTH pieces of FS_PIECE bytes of
 * a file in flight: a piece of a cluster file is read and written through
 * the ring, a piece of a local file with pread/pwrite. A piece moves
 * through its slot as READ -> WRITE -> free, so at most one I/O per slot is
 * in flight and the ring never runs out of room.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/fileio.h"
#include "strata/strata.h"

#define FS_PIECE (4u << 20)
#define FS_DEPTH 8u
#define FS_MAX_JOBS 64

enum { ST_READ = 0, ST_WRITE = 1 };

struct xjob {
	char *src, *dst;
	uint32_t mode;		/* permission bits of the new file */
};

struct xfer {
	const char *cmd;
	struct strata *s;
	bool src_remote, dst_remote;
	struct xjob *jobs;
	size_t njobs, cap;
	pthread_mutex_t lock;	/* next, files, bytes, bad */
	size_t next;
	uint64_t files, bytes;
	int bad;
};

struct xslot {
	void *buf;
	uint64_t off;
	size_t len;
	bool busy;
};

struct xworker {
	struct xfer *x;
	pthread_t thread;
	struct strata_ring *ring;
	bool broken;		/* the ring failed: its state is unknown */
	struct xslot slot[FS_DEPTH];
};

/* Where an error happened, for the message. */
enum side { SIDE_SRC, SIDE_DST };

/* ---- the two kinds of endpoint ---- */

enum ftype { FT_REG, FT_DIR, FT_LNK, FT_OTHER };

static enum ftype ftype_of(uint32_t mode)
{
	return S_ISREG(mode) ? FT_REG : S_ISDIR(mode) ? FT_DIR : S_ISLNK(mode) ? FT_LNK : FT_OTHER;
}

/* stat (follow = true) or lstat of a local or cluster path. */
static int ep_stat(struct xfer *x, bool remote, const char *path, bool follow, enum ftype *t,
		   uint32_t *mode)
{
	if (remote) {
		struct strata_stat st;
		int rc = follow ? strata_stat(x->s, path, &st) : strata_lstat(x->s, path, &st);

		if (rc)
			return rc;
		*t = ftype_of(st.mode);
		*mode = st.mode & 07777;
	} else {
		struct stat st;

		if ((follow ? stat(path, &st) : lstat(path, &st)) < 0)
			return -errno;
		*t = ftype_of(st.st_mode);
		*mode = st.st_mode & 07777;
	}
	return 0;
}

/* Creates directory path; one that exists already is fine. */
static int ep_mkdir(struct xfer *x, bool remote, const char *path)
{
	enum ftype t;
	uint32_t mode;
	int rc;

	if (remote)
		rc = strata_mkdir(x->s, path, 0755);
	else
		rc = mkdir(path, 0755) < 0 ? -errno : 0;
	if (rc != -EEXIST)
		return rc;
	if (ep_stat(x, remote, path, true, &t, &mode) == 0 && t == FT_DIR)
		return 0;
	return -EEXIST;
}

/* mkdir -p of path (already normalized when remote). */
static int ep_mkdir_p(struct xfer *x, bool remote, const char *path)
{
	return remote ? fs_mkdir_p(x->s, path) : mkdir_p(path, 0755);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The entry names of a directory, sorted. Returns the count and *out (free
 * with free_names) or a negative error. */
static ssize_t ep_list(struct xfer *x, bool remote, const char *path, char ***out)
{
	char **names = NULL, **nn;
	size_t n = 0, cap = 0;
	int rc = 0;

	*out = NULL;
	if (remote) {
		struct strata_dirent *ents;
		ssize_t m = fs_list(x->s, path, &ents);

		if (m < 0)
			return m;
		names = calloc(m ? (size_t)m : 1, sizeof(*names));
		if (!names) {
			free(ents);
			return -ENOMEM;
		}
		for (n = 0; n < (size_t)m; n++) {
			names[n] = strdup(ents[n].name);
			if (!names[n]) {
				rc = -ENOMEM;
				break;
			}
		}
		free(ents);
	} else {
		DIR *d = opendir(path);
		struct dirent *e;

		if (!d)
			return -errno;
		while ((e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				nn = realloc(names, cap * sizeof(*names));
				if (!nn) {
					rc = -ENOMEM;
					break;
				}
				names = nn;
			}
			names[n] = strdup(e->d_name);
			if (!names[n]) {
				rc = -ENOMEM;
				break;
			}
			n++;
		}
		closedir(d);
	}
	if (rc) {
		free_names(names, n);
		return rc;
	}
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	*out = names;
	return (ssize_t)n;
}

/* Recreates the symlink src at dst (replacing a file there). */
static int ep_copy_link(struct xfer *x, const char *src, const char *dst)
{
	char target[4097];
	ssize_t n;
	int rc;

	if (x->src_remote) {
		n = strata_readlink(x->s, src, target, sizeof(target));
		if (n < 0)
			return (int)n;
	} else {
		n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
	}
	for (int tries = 0; tries < 2; tries++) {
		if (x->dst_remote)
			rc = strata_symlink(x->s, target, dst);
		else
			rc = symlink(target, dst) < 0 ? -errno : 0;
		if (rc != -EEXIST || tries)
			break;
		/* Replace what is there, as cp does (a directory stays). */
		if (x->dst_remote)
			rc = strata_unlink(x->s, dst);
		else
			rc = unlink(dst) < 0 ? -errno : 0;
		if (rc)
			return -EEXIST;
	}
	return rc;
}

/* ---- the walk ---- */

static void xfer_fail(struct xfer *x, const char *verb, const char *path, int err)
{
	fs_fail(verb, path, err);
	pthread_mutex_lock(&x->lock);
	x->bad = 1;
	pthread_mutex_unlock(&x->lock);
}

static int add_job(struct xfer *x, const char *src, const char *dst, uint32_t mode)
{
	struct xjob *nj;

	if (x->njobs == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 256;

		nj = realloc(x->jobs, cap * sizeof(*nj));
		if (!nj)
			return -ENOMEM;
		x->jobs = nj;
		x->cap = cap;
	}
	nj = &x->jobs[x->njobs];
	nj->src = strdup(src);
	nj->dst = strdup(dst);
	nj->mode = mode & 0777;
	if (!nj->src || !nj->dst) {
		free(nj->src);
		free(nj->dst);
		return -ENOMEM;
	}
	x->njobs++;
	return 0;
}

/* Queues src (of any type) to be copied to dst; creates directories now.
 * Reports every failure (x->bad). */
static void walk(struct xfer *x, const char *src, const char *dst, bool recursive)
{
	enum ftype t;
	uint32_t mode;
	char **names;
	ssize_t n;
	int rc;

	rc = ep_stat(x, x->src_remote, src, false, &t, &mode);
	if (rc) {
		xfer_fail(x, "access", src, rc);
		return;
	}
	switch (t) {
	case FT_REG:
		rc = add_job(x, src, dst, mode);
		if (rc)
			xfer_fail(x, "copy", src, rc);
		return;
	case FT_LNK:
		rc = ep_copy_link(x, src, dst);
		if (rc)
			xfer_fail(x, "create symlink", dst, rc);
		return;
	case FT_OTHER:
		flockfile(stderr);
		cli_err("skipping '%s': not a regular file, directory or symlink", src);
		funlockfile(stderr);
		x->bad = 1;
		return;
	case FT_DIR:
		break;
	}
	if (!recursive) {
		flockfile(stderr);
		cli_err("cannot copy '%s': Is a directory (use -r)", src);
		funlockfile(stderr);
		x->bad = 1;
		return;
	}
	rc = ep_mkdir(x, x->dst_remote, dst);
	if (rc) {
		xfer_fail(x, "create directory", dst, rc);
		return;
	}
	n = ep_list(x, x->src_remote, src, &names);
	if (n < 0) {
		xfer_fail(x, "read directory", src, (int)n);
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		char *cs = fs_join(src, names[i]);
		char *cd = fs_join(dst, names[i]);

		if (cs && cd)
			walk(x, cs, cd, recursive);
		else
			xfer_fail(x, "copy", names[i], -ENOMEM);
		free(cs);
		free(cd);
	}
	free_names(names, (size_t)n);
}

/* ---- one file ---- */

struct xfile {
	int sfd, dfd;
	struct strata_file *sf, *df;
	uint64_t size;
};

static uint64_t ud(int slot, int stage)
{
	return ((uint64_t)slot << 1) | (uint64_t)stage;
}

/* Starts the write of a slot whose data is in its buffer. Returns 1 when a
 * ring write is now in flight, 0 when the slot is done (local write), or a
 * negative error (the slot is free). */
static int start_write(struct xworker *w, struct xfile *f, int i)
{
	struct xslot *sl = &w->slot[i];
	int rc;

	if (f->df) {
		rc = strata_ring_prep_write(w->ring, f->df, sl->buf, sl->len, sl->off, ud(i, ST_WRITE));
		if (rc == 0)
			return 1;
	} else {
		rc = pwrite_full(f->dfd, sl->buf, sl->len, sl->off);
	}
	sl->busy = false;
	return rc;
}

static int free_slot(struct xworker *w)
{
	for (unsigned i = 0; i < FS_DEPTH; i++) {
		if (w->slot[i].busy)
			continue;
		if (!w->slot[i].buf) {
			if (posix_memalign(&w->slot[i].buf, 4096, FS_PIECE))
				return -ENOMEM;
		}
		return (int)i;
	}
	return -EBUSY;
}

/* Moves f->size bytes from source to destination through the slots.
 * Returns 0 or the first error, with *side saying where it happened. */
static int pump(struct xworker *w, struct xfile *f, enum side *side)
{
	struct strata_cqe cqes[FS_DEPTH];
	unsigned inflight = 0;
	uint64_t off = 0;
	int err = 0, rc, n;

	for (;;) {
		while (!err && off < f->size) {
			int i = free_slot(w);
			struct xslot *sl;

			if (i == -EBUSY)
				break;
			if (i < 0) {
				err = i;
				*side = SIDE_SRC;
				break;
			}
			sl = &w->slot[i];
			sl->off = off;
			sl->len = f->size - off < FS_PIECE ? (size_t)(f->size - off) : FS_PIECE;
			sl->busy = true;
			off += sl->len;
			if (f->sf) {
				rc = strata_ring_prep_read(w->ring, f->sf, sl->buf, sl->len, sl->off,
							   ud(i, ST_READ));
				if (rc == 0) {
					inflight++;
					continue;
				}
				sl->busy = false;
				err = rc;
				*side = SIDE_SRC;
				break;
			}
			rc = pread_full(f->sfd, sl->buf, sl->len, sl->off);
			if (rc) {
				sl->busy = false;
				err = rc;
				*side = SIDE_SRC;
				break;
			}
			rc = start_write(w, f, i);
			if (rc < 0) {
				err = rc;
				*side = SIDE_DST;
				break;
			}
			inflight += (unsigned)rc;
		}
		if (inflight == 0)
			break;
		rc = strata_ring_submit(w->ring);
		if (rc < 0)
			goto broken;
		n = strata_ring_wait(w->ring, cqes, FS_DEPTH, 1, -1);
		if (n < 0) {
			rc = n;
			goto broken;
		}
		for (int k = 0; k < n; k++) {
			int i = (int)(cqes[k].user_data >> 1);
			int stage = (int)(cqes[k].user_data & 1);
			struct xslot *sl = &w->slot[i];

			inflight--;
			if (cqes[k].res < 0 || (size_t)cqes[k].res != sl->len) {
				if (!err) {
					err = cqes[k].res < 0 ? (int)cqes[k].res : -EIO;
					*side = stage == ST_READ ? SIDE_SRC : SIDE_DST;
				}
				sl->busy = false;
				continue;
			}
			if (stage == ST_WRITE || err) {
				sl->busy = false;
				continue;
			}
			rc = start_write(w, f, i);
			if (rc < 0) {
				err = rc;
				*side = SIDE_DST;
			}
			inflight += rc > 0 ? 1u : 0u;
		}
	}
	return err;
broken:
	/* Submitted I/Os may still point into our buffers: this worker's ring
	 * and buffers are not reused (freed at the end, after the ring). */
	w->broken = true;
	*side = SIDE_DST;
	return rc;
}

/* Copies one file. Returns 0, or 1 after reporting the failure. */
static int copy_file(struct xworker *w, const struct xjob *j, uint64_t *bytes)
{
	struct xfer *x = w->x;
	struct xfile f = { -1, -1, NULL, NULL, 0 };
	enum side side = SIDE_SRC;
	int rc, rc2;

	if (x->src_remote) {
		struct strata_stat st;

		rc = strata_open(x->s, j->src, STRATA_O_RDONLY, 0, &f.sf);
		if (rc == 0 && (rc = strata_fstat(f.sf, &st)) == 0)
			f.size = st.size;
	} else {
		struct stat st;

		f.sfd = open(j->src, O_RDONLY | O_CLOEXEC);
		rc = f.sfd < 0 ? -errno : 0;
		if (rc == 0 && fstat(f.sfd, &st) < 0)
			rc = -errno;
		else if (rc == 0)
			f.size = (uint64_t)st.st_size;
	}
	if (rc) {
		fs_fail("open", j->src, rc);
		goto out;
	}
	if (x->dst_remote) {
		rc = strata_open(x->s, j->dst, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC,
				 j->mode, &f.df);
	} else {
		f.dfd = open(j->dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, j->mode | 0600);
		rc = f.dfd < 0 ? -errno : 0;
	}
	if (rc) {
		fs_fail("create", j->dst, rc);
		goto out;
	}
	rc = pump(w, &f, &side);
	if (rc)
		fs_fail(side == SIDE_SRC ? "read" : "write", side == SIDE_SRC ? j->src : j->dst, rc);
	else
		*bytes = f.size;
out:
	if (f.sf)
		strata_close(f.sf);
	if (f.sfd >= 0)
		close(f.sfd);
	rc2 = 0;
	if (f.df)
		rc2 = strata_close(f.df);
	if (f.dfd >= 0 && close(f.dfd) < 0)
		rc2 = -errno;
	if (rc2 && !rc) {
		fs_fail("write", j->dst, rc2);
		rc = rc2;
	}
	return rc ? 1 : 0;
}

static void *worker_main(void *arg)
{
	struct xworker *w = arg;
	struct xfer *x = w->x;

	for (;;) {
		const struct xjob *j;
		uint64_t bytes = 0;
		int bad;

		pthread_mutex_lock(&x->lock);
		j = x->next < x->njobs ? &x->jobs[x->next++] : NULL;
		pthread_mutex_unlock(&x->lock);
		if (!j)
			break;
		if (w->broken) {
			fs_fail("copy", j->src, -EIO);
			bad = 1;
		} else {
			bad = copy_file(w, j, &bytes);
		}
		pthread_mutex_lock(&x->lock);
		if (bad)
			x->bad = 1;
		else
			x->files++;
		x->bytes += bytes;
		pthread_mutex_unlock(&x->lock);
	}
	return NULL;
}

/* Runs the queued jobs on up to nworkers threads. */
static void run_jobs(struct xfer *x, int nworkers)
{
	struct xworker *w;
	int n = (int)(x->njobs < (size_t)nworkers ? x->njobs : (size_t)nworkers), started = 0;

	if (n == 0)
		return;
	w = calloc((size_t)n, sizeof(*w));
	if (!w) {
		xfer_fail(x, "copy", x->jobs[0].src, -ENOMEM);
		return;
	}
	for (int i = 0; i < n; i++) {
		int rc;

		w[i].x = x;
		rc = strata_ring_new(x->s, FS_DEPTH, &w[i].ring);
		if (rc) {
			flockfile(stderr);
			cli_err("cannot create an I/O ring: %s", strata_strerror(rc));
			funlockfile(stderr);
			x->bad = 1;
			break;
		}
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i])) {
			strata_ring_free(w[i].ring);
			w[i].ring = NULL;
			break;
		}
		started++;
	}
	if (started == 0 && !x->bad) {
		flockfile(stderr);
		cli_err("cannot start a copy thread");
		funlockfile(stderr);
		x->bad = 1;
	}
	for (int i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	for (int i = 0; i < n; i++) {
		if (w[i].ring)
			strata_ring_free(w[i].ring);
		for (unsigned k = 0; k < FS_DEPTH; k++)
			free(w[i].slot[k].buf);
	}
	free(w);
}

/* ---- the commands ---- */

/* A local source's name in the destination: its last component, or that of
 * its real path for ".", ".." and "/" forms. Returns a malloc'd string; ""
 * means "the contents go into the destination itself". */
static char *src_name(bool remote, const char *src)
{
	char *p, *base;
	size_t n;

	if (remote) {
		p = fs_norm(src);
		if (!p)
			return NULL;
		base = strdup(fs_base(p));
		free(p);
		return base;
	}
	p = strdup(src);
	if (!p)
		return NULL;
	n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	base = (char *)fs_base(p);
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strcmp(p, "/") == 0) {
		char *real = realpath(src, NULL);

		free(p);
		if (!real)
			return strdup(src);	/* let the walk report the error */
		p = real;
		base = (char *)fs_base(p);
	}
	base = strdup(base);
	free(p);
	return base;
}

static int xfer_main(int argc, char **argv, bool src_remote, bool dst_remote)
{
	const char *cmd = argv[0];
	struct xfer x;
	struct fs_args a;
	int64_t jobs = 4;
	bool dest_dir = false, recursive;
	char *dest = NULL;
	double t0, dt;
	enum ftype t;
	uint32_t mode;
	int rc;

	rc = fs_parse(argc, argv, src_remote && dst_remote ? "rj:q" : "j:q", false, &a);
	if (rc)
		return rc;
	if (a.npos < 2) {
		if (!src_remote)
			cli_err("usage: strata put [-j N] [-q] [--mgmt ADDR | --dir DIR] LOCAL... DEST");
		else if (!dst_remote)
			cli_err("usage: strata get [-j N] [-q] [--mgmt ADDR | --dir DIR] SRC... LOCALDIR");
		else
			cli_err("usage: strata cp [-r] [-j N] [--mgmt ADDR | --dir DIR] SRC... DST");
		return 2;
	}
	if (a.flag['j'] && (parse_i64(a.val['j'], &jobs) || jobs < 1 || jobs > FS_MAX_JOBS)) {
		cli_err("%s: -j: '%s' is not a number of workers in 1..%d", cmd, a.val['j'], FS_MAX_JOBS);
		return 2;
	}
	/* put and get copy trees as given; cp asks for -r, as cp does. */
	recursive = !(src_remote && dst_remote) || a.flag['r'];
	memset(&x, 0, sizeof(x));
	x.cmd = cmd;
	x.src_remote = src_remote;
	x.dst_remote = dst_remote;
	pthread_mutex_init(&x.lock, NULL);
	rc = fs_connect(&a, &x.s);
	if (rc)
		goto out;
	t0 = mono_sec();

	/* The destination: a directory to copy into, or the new name. */
	{
		const char *d = a.pos[a.npos - 1];
		size_t dl = strlen(d);
		bool slash = dl > 0 && d[dl - 1] == '/';

		dest = dst_remote ? fs_norm(d) : strdup(d);
		if (!dest) {
			xfer_fail(&x, "copy to", d, -ENOMEM);
			goto done;
		}
		rc = ep_stat(&x, dst_remote, dest, true, &t, &mode);
		if (rc == 0 && t == FT_DIR) {
			dest_dir = true;
		} else if (a.npos > 2 || slash) {
			if (rc == -ENOENT)
				rc = ep_mkdir_p(&x, dst_remote, dest);
			else if (rc == 0)
				rc = -ENOTDIR;
			if (rc) {
				xfer_fail(&x, "copy into", dest, rc);
				goto done;
			}
			dest_dir = true;
		}
	}
	for (int i = 0; i < a.npos - 1; i++) {
		char *src = src_remote ? fs_norm(a.pos[i]) : strdup(a.pos[i]);
		char *name = src_name(src_remote, a.pos[i]);
		char *to = NULL;

		if (src && name)
			to = dest_dir && *name ? fs_join(dest, name) : strdup(dest);
		if (!to) {
			xfer_fail(&x, "copy", a.pos[i], -ENOMEM);
		} else if (src_remote && dst_remote && strncmp(to, src, strlen(src)) == 0 &&
			   (to[strlen(src)] == '/' || to[strlen(src)] == '\0' || strcmp(src, "/") == 0)) {
			flockfile(stderr);
			cli_err("cannot copy '%s' into itself ('%s')", src, to);
			funlockfile(stderr);
			x.bad = 1;
		} else {
			walk(&x, src, to, recursive);
		}
		free(src);
		free(name);
		free(to);
	}
	run_jobs(&x, (int)jobs);
done:
	dt = mono_sec() - t0;
	if (!a.flag['q'] && !(src_remote && dst_remote)) {
		char human[32];

		printf("%s: %llu file(s), %llu bytes (%s) in %.2f s, %.1f MB/s\n", cmd,
		       (unsigned long long)x.files, (unsigned long long)x.bytes,
		       fs_human(x.bytes, human, sizeof(human)), dt,
		       dt > 0 ? (double)x.bytes / dt / 1e6 : 0.0);
	}
	rc = x.bad ? 1 : 0;
	strata_disconnect(x.s);
out:
	for (size_t i = 0; i < x.njobs; i++) {
		free(x.jobs[i].src);
		free(x.jobs[i].dst);
	}
	free(x.jobs);
	free(dest);
	pthread_mutex_destroy(&x.lock);
	return rc;
}

int fs_cmd_put(int argc, char **argv)
{
	return xfer_main(argc, argv, false, true);
}

int fs_cmd_get(int argc, char **argv)
{
	return xfer_main(argc, argv, true, false);
}

int fs_cmd_cp(int argc, char **argv)
{
	return xfer_main(argc, argv, true, true);
}
