/*
 * api_test: libstrata's public API against a live cluster, as a C program
 * would use it. Run by tests/integration/test_api.py, one scenario per
 * pytest test.
 *
 *   api_test MGMT_ADDR SCENARIO   one scenario (names: api_test --list)
 *   api_test MGMT_ADDR all        every scenario except enospc
 *   api_test MGMT_ADDR writer     write until the cluster dies (see writer)
 *   api_test --version            the headers' and the library's versions
 *
 * Each scenario works under its own directory, /SCENARIO, and makes what
 * it needs there, so scenarios run in any order on one cluster. Prints one
 * line per scenario; exits 1 at the first failure with the scenario, the
 * call and the error, 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/rand.h"
#include "strata/strata.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=1";
}

static struct strata *S;
static const char *current = "";
static char root[64];		/* the running scenario's directory */
static const char *mgmt_addr;	/* for a second client */

/* root + path, in one of a few rotating buffers: a call may hold two. */
static const char *P(const char *path)
{
	static char bufs[4][256];
	static unsigned next;
	char *b = bufs[next++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s%s", root, path);
	return b;
}

#define CHECK(cond, ...) do { if (!(cond)) { \
	fprintf(stderr, "FAIL %s: %s:%d: ", current, __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)
#define OK(call) do { long long _rc = (long long)(call); \
	CHECK(_rc >= 0, "%s -> %s", #call, strata_strerror((int)_rc)); } while (0)
#define ERR(call, want) do { long long _rc = (long long)(call); \
	CHECK(_rc == (want), "%s -> %lld (%s), want %s", #call, _rc, \
	      strata_strerror((int)_rc), strata_strerror(want)); } while (0)

static void begin(const char *name)
{
	current = name;
	printf("%s ...\n", name);
	fflush(stdout);
}


static struct strata_file *openf(const char *path, int flags)
{
	struct strata_file *f = NULL;

	OK(strata_open(S, path, flags, 0644, &f));
	return f;
}

static void read_after_write(void)
{
	size_t n = 3 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	struct strata_file *f;
	struct strata_file *g;
	struct strata_stat st;

	begin("read-after-write");
	OK(strata_mkdir(S, P("/raw"), 0755));
	pattern_fill(a, n, 1);
	f = openf(P("/raw/f"), STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_pwrite(f, a, n, 0));
	/* Same handle sees its writes before close. */
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read");
	CHECK(memcmp(a, b, n) == 0, "content differs (same handle)");
	OK(strata_close(f));
	/* Close-to-open: a new open sees length and data. */
	OK(strata_stat(S, P("/raw/f"), &st));
	CHECK(st.size == n, "size %" PRIu64 " after close, want %zu", st.size, n);
	g = openf(P("/raw/f"), STRATA_O_RDONLY);
	memset(b, 0, n);
	CHECK(strata_pread(g, b, n + 100, 0) == (ssize_t)n, "read past end not clipped");
	CHECK(memcmp(a, b, n) == 0, "content differs (new open)");
	CHECK(strata_pread(g, b, 10, n) == 0, "read at EOF not 0");
	ERR(strata_pwrite(g, a, 10, 0), -EBADF);
	OK(strata_close(g));
	/* Overwrite in the middle, unaligned. */
	f = openf(P("/raw/f"), STRATA_O_RDWR);
	pattern_fill(a + 1000003, 77777, 9);
	OK(strata_pwrite(f, a + 1000003, 77777, 1000003));
	OK(strata_close(f));
	f = openf(P("/raw/f"), STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read");
	CHECK(memcmp(a, b, n) == 0, "content differs after overwrite");
	OK(strata_close(f));
	free(a);
	free(b);
}

/* root/raw with a regular file root/raw/f in it, for the scenarios that
 * work on an existing file. */
static void need_raw(void)
{
	struct strata_file *f;
	struct strata_stat st;
	uint8_t a[100];
	int rc = strata_mkdir(S, P("/raw"), 0755);

	CHECK(rc == 0 || rc == -EEXIST, "mkdir raw: %s", strata_strerror(rc));
	if (strata_stat(S, P("/raw/f"), &st) == 0)
		return;
	pattern_fill(a, sizeof(a), 2);
	f = openf(P("/raw/f"), STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_pwrite(f, a, sizeof(a), 0));
	OK(strata_close(f));
}

static void holes(void)
{
	uint8_t buf[8192], z[8192] = { 0 };
	struct strata_file *f;
	uint64_t far = 37ull << 20;

	begin("holes");
	need_raw();
	f = openf(P("/raw/sparse"), STRATA_O_CREAT | STRATA_O_RDWR | STRATA_O_EXCL);
	memset(buf, 0xab, sizeof(buf));
	OK(strata_pwrite(f, buf, 100, far));
	CHECK(strata_pread(f, buf, sizeof(buf), 5 << 20) == sizeof(buf), "hole read short");
	CHECK(memcmp(buf, z, sizeof(buf)) == 0, "hole not zeros");
	CHECK(strata_pread(f, buf, 200, far - 100) == 200, "straddling read");
	CHECK(memcmp(buf, z, 100) == 0 && buf[100] == 0xab && buf[199] == 0xab, "hole/data edge");
	OK(strata_close(f));
}

static void truncate_checks(void)
{
	size_t n = 9 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	struct strata_file *f;
	struct strata_stat st;
	struct strata_layout l = { 1 << 20, 0 };

	begin("truncate");
	OK(strata_mkdir(S, P("/tr"), 0755));
	OK(strata_set_layout(S, P("/tr"), &l));
	pattern_fill(a, n, 3);
	f = openf(P("/tr/f"), STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_pwrite(f, a, n, 0));
	OK(strata_close(f));
	/* Shrink into the middle of a chunk, then grow: the cut-off bytes
	 * must read as zeros, not the old data. */
	OK(strata_truncate(S, P("/tr/f"), 2500000));
	OK(strata_stat(S, P("/tr/f"), &st));
	CHECK(st.size == 2500000, "size after shrink %" PRIu64, st.size);
	OK(strata_truncate(S, P("/tr/f"), n));
	f = openf(P("/tr/f"), STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read after grow");
	CHECK(memcmp(a, b, 2500000) == 0, "kept part differs");
	for (size_t i = 2500000; i < n; i++)
		CHECK(b[i] == 0, "byte %zu not zero after shrink+grow", i);
	OK(strata_close(f));
	/* O_TRUNC then write again at once: the old chunks are gone first. */
	f = openf(P("/tr/f"), STRATA_O_RDWR | STRATA_O_TRUNC);
	OK(strata_pwrite(f, a + 100, 4096, 3 << 20));
	OK(strata_close(f));
	f = openf(P("/tr/f"), STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)((3 << 20) + 4096), "size after O_TRUNC+write");
	for (size_t i = 0; i < (3u << 20); i++)
		CHECK(b[i] == 0, "byte %zu survived O_TRUNC", i);
	CHECK(memcmp(b + (3 << 20), a + 100, 4096) == 0, "new data differs");
	OK(strata_close(f));
	/* ftruncate on a handle. */
	f = openf(P("/tr/f"), STRATA_O_RDWR);
	OK(strata_ftruncate(f, 10));
	OK(strata_fstat(f, &st));
	CHECK(st.size == 10, "fstat size %" PRIu64, st.size);
	OK(strata_close(f));
	free(a);
	free(b);
}

static void many_chains(void)
{
	size_t n = 16 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	struct strata_layout l = { 64 << 10, 0 }, got;
	struct strata_file *f;

	begin("file spanning many chains");
	OK(strata_mkdir(S, P("/wide"), 0755));
	OK(strata_set_layout(S, P("/wide"), &l));
	pattern_fill(a, n, 4);
	f = openf(P("/wide/f"), STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_get_layout(S, P("/wide/f"), &got));
	CHECK(got.chunk_size == (64u << 10), "chunk size %u", got.chunk_size);
	/* 256 chunks: every chain of the table gets some. */
	OK(strata_pwrite(f, a, n, 0));
	OK(strata_close(f));
	f = openf(P("/wide/f"), STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read");
	CHECK(memcmp(a, b, n) == 0, "content differs");
	OK(strata_close(f));
	free(a);
	free(b);
}

struct worker {
	pthread_t th;
	int id;
	const char *path;	/* shared file, or NULL: own file */
	int err;
};

#define W_SLICE (256 * 1024)
#define W_ROUNDS 8

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char path[64];
	uint8_t *a = malloc(W_SLICE), *b = malloc(W_SLICE);
	struct strata_file *f = NULL;
	uint64_t off = w->path ? (uint64_t)w->id * W_SLICE : 0;
	int rc;

	if (w->path)
		snprintf(path, sizeof(path), "%s", w->path);
	else
		snprintf(path, sizeof(path), "%s/conc/own-%d", root, w->id);
	rc = strata_open(S, path, STRATA_O_CREAT | STRATA_O_RDWR, 0644, &f);
	for (int r = 0; !rc && r < W_ROUNDS; r++) {
		pattern_fill(a, W_SLICE, (uint64_t)w->id * 100 + r);
		rc = (int)strata_pwrite(f, a, W_SLICE, off);
		if (rc >= 0)
			rc = strata_pread(f, b, W_SLICE, off) == W_SLICE ? 0 : -EIO;
		if (!rc && memcmp(a, b, W_SLICE))
			rc = -EILSEQ;
		if (rc > 0)
			rc = 0;
	}
	if (f) {
		int c = strata_close(f);

		if (!rc)
			rc = c;
	}
	w->err = rc;
	free(a);
	free(b);
	return NULL;
}

static void concurrency(void)
{
	struct worker w[8];
	uint8_t *b = malloc(8 * W_SLICE), *a = malloc(W_SLICE);
	struct strata_file *f;
	char shared[160];

	begin("concurrent writers and readers: one file, many files");
	OK(strata_mkdir(S, P("/conc"), 0755));
	f = openf(P("/conc/shared"), STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_close(f));
	snprintf(shared, sizeof(shared), "%s/conc/shared", root);
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){ .id = i, .path = i < 4 ? shared : NULL };
		pthread_create(&w[i].th, NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(w[i].th, NULL);
		CHECK(w[i].err == 0, "worker %d: %s", i, strata_strerror(w[i].err));
	}
	/* The shared file holds every writer's last round, and its length
	 * is the furthest end any writer published (sizes only grow). */
	f = openf(P("/conc/shared"), STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, 8 * W_SLICE, 0) == 4 * W_SLICE, "shared size");
	for (int i = 0; i < 4; i++) {
		pattern_fill(a, W_SLICE, (uint64_t)i * 100 + W_ROUNDS - 1);
		CHECK(memcmp(b + (size_t)i * W_SLICE, a, W_SLICE) == 0, "slice %d differs", i);
	}
	OK(strata_close(f));
	free(a);
	free(b);
}

static void ring_checks(void)
{
	struct strata_ring *r;
	struct strata_file *f;
	struct strata_cqe cqe[64];
	size_t n = 64 * 4096;
	uint8_t *a = malloc(n), *b = calloc(1, n);
	int got = 0, i;

	begin("batch ring: mixed writes then reads, out of order completion");
	need_raw();
	pattern_fill(a, n, 5);
	f = openf(P("/raw/ring"), STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_ring_new(S, 64, &r));
	for (i = 0; i < 64; i++)
		OK(strata_ring_prep_write(r, f, a + i * 4096, 4096, (uint64_t)i * 4096, i));
	ERR(strata_ring_prep_write(r, f, a, 1, 0, 99), -EBUSY);
	CHECK(strata_ring_submit(r) == 64, "submit count");
	while (got < 64) {
		int k = strata_ring_wait(r, cqe, 64, 1, 10000);

		CHECK(k > 0, "wait returned %d", k);
		for (i = 0; i < k; i++)
			CHECK(cqe[i].res == 4096, "write %" PRIu64 ": %s", cqe[i].user_data,
			      strata_strerror((int)cqe[i].res));
		got += k;
	}
	for (i = 0; i < 64; i++)
		OK(strata_ring_prep_read(r, f, b + i * 4096, 4096, (uint64_t)i * 4096, 1000 + i));
	strata_ring_submit(r);
	for (got = 0; got < 64;) {
		int k = strata_ring_wait(r, cqe, 64, 64 - got, 10000);

		CHECK(k > 0, "wait returned %d", k);
		got += k;
	}
	CHECK(memcmp(a, b, n) == 0, "ring read content differs");
	CHECK(strata_ring_wait(r, cqe, 64, 1, 0) == 0, "spurious completion");
	strata_ring_free(r);
	OK(strata_close(f));
	free(a);
	free(b);
}

static void errors(void)
{
	char name[300], path[320];
	struct strata_file *f = NULL;
	struct strata_stat st;

	begin("errors a user can hit, namespace unchanged");
	need_raw();
	ERR(strata_open(S, P("/nope/x"), STRATA_O_RDONLY, 0, &f), -ENOENT);
	ERR(strata_open(S, P("/raw/missing"), STRATA_O_RDONLY, 0, &f), -ENOENT);
	ERR(strata_mkdir(S, P("/raw"), 0755), -EEXIST);
	ERR(strata_open(S, P("/raw/f"), STRATA_O_CREAT | STRATA_O_EXCL | STRATA_O_RDWR, 0644, &f), -EEXIST);
	ERR(strata_mkdir(S, P("/raw/f/sub"), 0755), -ENOTDIR);
	ERR(strata_open(S, P("/raw/f/x"), STRATA_O_RDONLY, 0, &f), -ENOTDIR);
	ERR(strata_rmdir(S, P("/raw")), -ENOTEMPTY);
	ERR(strata_open(S, P("/raw"), STRATA_O_RDWR, 0, &f), -EISDIR);
	ERR(strata_unlink(S, P("/raw")), -EISDIR);
	ERR(strata_rmdir(S, P("/raw/f")), -ENOTDIR);
	memset(name, 'n', 256);
	name[256] = '\0';
	snprintf(path, sizeof(path), "%s/raw/%s", root, name);
	ERR(strata_open(S, path, STRATA_O_CREAT | STRATA_O_RDWR, 0644, &f), -ENAMETOOLONG);
	ERR(strata_mkdir(S, path, 0755), -ENAMETOOLONG);
	ERR(strata_rename(S, P("/raw"), P("/raw/sub"), 0), -EINVAL);
	ERR(strata_open(S, "relative", STRATA_O_RDONLY, 0, &f), -EINVAL);
	/* Nothing of the above left a trace. */
	OK(strata_stat(S, P("/raw/f"), &st));
	CHECK(S_ISREG(st.mode), "/raw/f changed type");
	ERR(strata_stat(S, path, &st), -ENAMETOOLONG);
	ERR(strata_stat(S, P("/raw/sub"), &st), -ENOENT);
}

static void rename_and_dirs(void)
{
	struct strata_dir *d;
	struct strata_dirent e;
	int n = 0, rc;
	char p[64];

	begin("rename over a file, readdir paging");
	need_raw();
	OK(strata_close(openf(P("/raw/sparse"), STRATA_O_CREAT | STRATA_O_RDWR)));
	OK(strata_rename(S, P("/raw/sparse"), P("/raw/f"), 0));
	ERR(strata_stat(S, P("/raw/sparse"), &(struct strata_stat){ 0 }), -ENOENT);
	OK(strata_mkdir(S, P("/many"), 0755));
	for (int i = 0; i < 600; i++) {
		struct strata_file *f;

		snprintf(p, sizeof(p), "%s/many/e%04d", root, i);
		OK(strata_open(S, p, STRATA_O_CREAT | STRATA_O_WRONLY, 0644, &f));
		OK(strata_close(f));
	}
	OK(strata_opendir(S, P("/many"), &d));
	while ((rc = strata_readdir(d, &e)) == 1) {
		snprintf(p, sizeof(p), "e%04d", n);
		CHECK(strcmp(e.name, p) == 0, "entry %d is '%s'", n, e.name);
		n++;
	}
	OK(rc);
	strata_closedir(d);
	CHECK(n == 600, "readdir gave %d entries", n);
	ERR(strata_opendir(S, P("/raw/f"), &d), -ENOTDIR);
}

static void enospc(void)
{
	size_t n = 1 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	struct strata_file *f;
	ssize_t rc = 0;
	uint64_t off = 0;

	begin("ENOSPC when the targets are full; what was written stays");
	pattern_fill(a, n, 6);
	f = openf(P("/fill"), STRATA_O_CREAT | STRATA_O_RDWR);
	while (off < (1ull << 30) && (rc = strata_pwrite(f, a, n, off)) == (ssize_t)n)
		off += n;
	ERR(rc, -ENOSPC);
	CHECK(off > 0, "nothing fit");
	OK(strata_close(f));
	/* Everything acknowledged before is intact. */
	f = openf(P("/fill"), STRATA_O_RDONLY);
	for (uint64_t o = 0; o < off; o += n) {
		CHECK(strata_pread(f, b, n, o) == (ssize_t)n, "short read at %" PRIu64, o);
		CHECK(memcmp(a, b, n) == 0, "data at %" PRIu64 " differs", o);
	}
	OK(strata_close(f));
	/* Freeing space makes room again. */
	OK(strata_unlink(S, P("/fill")));
	printf("wrote %" PRIu64 " MiB before ENOSPC\n", off >> 20);
	free(a);
	free(b);
}

static int same(struct strata_handle a, struct strata_handle b)
{
	return a.ino == b.ino && a.gen == b.gen;
}

struct plus_list {
	int n, stop_after;	/* stop_after < 0: take everything */
	char names[700][16];
	struct strata_handle h[700];
	uint64_t size[700];
};

static int plus_cb(void *arg, const struct strata_direntplus *e)
{
	struct plus_list *l = arg;

	if (l->stop_after >= 0 && l->n >= l->stop_after)
		return 1;
	CHECK(l->n < 700, "too many entries");
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", e->name);
	l->h[l->n] = e->h;
	l->size[l->n] = e->st.size;
	l->n++;
	return 0;
}

/*
 * The handle calls. A second connection (T, "another client") renames and
 * removes by path under the first one's handles: a handle follows its
 * object through renames and turns stale (-ESTALE) when the object goes,
 * a new object with the old name never answers to the old handle.
 */
static void handles(void)
{
	struct strata_handle rt = strata_root(), base, top, a, b, f, g, got, forged;
	struct strata_stat st, st2;
	struct strata_cookie ck;
	struct plus_list *l = calloc(1, sizeof(*l));
	struct strata_file *fh = NULL;
	struct strata *T = NULL;
	char buf[64], name[16];
	int rc, calls;

	begin("handles: root, mkdirat, openat, lookupat, statat agree with paths");
	OK(strata_connect(mgmt_addr, NULL, &T));
	OK(strata_statat(S, rt, &st));
	CHECK(S_ISDIR(st.mode) && st.ino == rt.ino, "root: mode %o ino %" PRIu64, st.mode,
	      st.ino);
	OK(strata_lookupat(S, rt, root + 1, &base, NULL));	/* this scenario's directory */
	OK(strata_mkdirat(S, base, "hnd", 0755, &top, &st));
	CHECK(S_ISDIR(st.mode) && st.ino == top.ino && top.gen != 0, "mkdirat stat");
	OK(strata_mkdirat(S, top, "a", 0755, &a, NULL));
	OK(strata_mkdirat(S, a, "b", 0700, &b, NULL));
	OK(strata_openat(S, b, "f", STRATA_O_CREAT | STRATA_O_EXCL | STRATA_O_RDWR, 0640, &fh));
	OK(strata_fhandle(fh, &f));
	OK(strata_pwrite(fh, "hello", 5, 0));
	OK(strata_close(fh));
	OK(strata_lookupat(S, b, "f", &got, &st));
	CHECK(same(got, f) && st.size == 5 && (st.mode & 07777) == 0640, "lookupat f");
	OK(strata_lookupat(S, b, "..", &got, NULL));
	CHECK(same(got, a), "lookupat ..");
	OK(strata_stat(S, "/handles/hnd/a/b/f", &st2));
	CHECK(st2.ino == f.ino, "path and handle name other files");
	OK(strata_statat(S, f, &st));
	CHECK(st.size == 5 && S_ISREG(st.mode), "statat f");
	ERR(strata_lookupat(S, b, "nope", &got, NULL), -ENOENT);
	ERR(strata_lookupat(S, f, "x", &got, NULL), -ENOTDIR);
	ERR(strata_lookupat(S, b, "a/b", &got, NULL), -EINVAL);
	ERR(strata_mkdirat(S, a, "b", 0755, NULL, NULL), -EEXIST);
	ERR(strata_openat(S, b, NULL, STRATA_O_RDONLY, 0, &fh), -EISDIR);
	ERR(strata_openat(S, f, NULL, STRATA_O_CREAT | STRATA_O_RDWR, 0644, &fh), -EINVAL);
	ERR(strata_openat(S, (struct strata_handle){ f.ino, 0 }, NULL, 0, 0, &fh), -EINVAL);

	begin("handles: another client renames a directory above them");
	OK(strata_rename(T, "/handles/hnd/a", "/handles/hnd/z", 0));
	ERR(strata_stat(S, "/handles/hnd/a/b/f", &st2), -ENOENT);
	OK(strata_statat(S, b, &st));
	CHECK(S_ISDIR(st.mode), "b after the rename");
	OK(strata_openat(S, b, "f", STRATA_O_RDWR, 0, &fh));
	memset(buf, 0, sizeof(buf));
	CHECK(strata_pread(fh, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "hello", 5), "read f");
	/* Written through a handle opened before the next rename, published
	 * after it. */
	OK(strata_rename(T, "/handles/hnd/z", "/handles/hnd/y", 0));
	OK(strata_pwrite(fh, " world", 6, 5));
	OK(strata_close(fh));
	OK(strata_stat(T, "/handles/hnd/y/b/f", &st2));
	CHECK(st2.size == 11 && st2.ino == f.ino, "size by the new path %" PRIu64, st2.size);
	OK(strata_symlinkat(S, "f", b, "ln", &g, &st));
	CHECK(S_ISLNK(st.mode), "symlinkat mode");
	CHECK(strata_readlinkat(S, g, buf, sizeof(buf)) == 1 && !strcmp(buf, "f"), "readlinkat");
	ERR(strata_readlinkat(S, f, buf, sizeof(buf)), -EINVAL);
	ERR(strata_openat(S, b, "ln", STRATA_O_RDONLY, 0, &fh), -ELOOP);
	st.mode = 0600;
	st.size = 2;
	OK(strata_setattrat(S, f, STRATA_SET_MODE | STRATA_SET_SIZE, &st, &st2));
	CHECK((st2.mode & 07777) == 0600 && st2.size == 2, "setattrat");
	OK(strata_renameat(S, b, "f", top, "moved", 0));
	OK(strata_lookupat(S, top, "moved", &got, &st));
	CHECK(same(got, f) && st.size == 2, "renameat keeps the handle");
	OK(strata_renameat(S, top, "moved", b, "f", STRATA_RENAME_NOREPLACE));
	ERR(strata_unlinkat(S, a, "b", 0), -EISDIR);
	ERR(strata_unlinkat(S, a, "b", STRATA_AT_REMOVEDIR), -ENOTEMPTY);

	begin("handles: readdirplus pages, with handles and attributes");
	memset(&ck, 0, sizeof(ck));
	l->stop_after = -1;
	calls = 0;
	while ((rc = strata_readdirplus(S, b, &ck, 1, plus_cb, l)) == 1)
		calls++;
	OK(rc);
	CHECK(l->n == 2 && !strcmp(l->names[0], "f") && !strcmp(l->names[1], "ln"),
	      "listing of b: %d entries", l->n);
	CHECK(same(l->h[0], f) && same(l->h[1], g) && l->size[0] == 2, "entries' handles");
	CHECK(calls >= 2, "one entry a call took %d calls", calls);
	/* 600 entries, pages of 100, the callback stopping every 37 entries:
	 * each name exactly once, in order. */
	OK(strata_mkdirat(S, top, "many", 0755, &got, NULL));
	for (int i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "e%04d", i);
		OK(strata_openat(S, got, name, STRATA_O_CREAT | STRATA_O_WRONLY, 0644, &fh));
		OK(strata_close(fh));
	}
	memset(&ck, 0, sizeof(ck));
	memset(l, 0, sizeof(*l));
	for (;;) {
		l->stop_after = l->n + 37;
		rc = strata_readdirplus(S, got, &ck, 100, plus_cb, l);
		if (rc <= 0)
			break;
	}
	OK(rc);
	CHECK(l->n == 600, "readdirplus gave %d entries", l->n);
	for (int i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "e%04d", i);
		CHECK(!strcmp(l->names[i], name), "entry %d is '%s'", i, l->names[i]);
	}
	OK(strata_lookupat(S, got, "e0123", &g, NULL));
	CHECK(same(g, l->h[123]), "a listed handle is the looked-up one");
	ERR(strata_readdirplus(S, f, &ck, 0, plus_cb, l), -ENOTDIR);

	begin("handles: removed objects are stale, new ones at the old names are others");
	OK(strata_openat(S, b, "f", STRATA_O_RDWR, 0, &fh));
	OK(strata_unlink(T, "/handles/hnd/y/b/f"));
	ERR(strata_statat(S, f, &st), -ESTALE);
	ERR(strata_openat(S, f, NULL, STRATA_O_RDONLY, 0, &fh), -ESTALE);
	ERR(strata_setattrat(S, f, STRATA_SET_MODE, &st, NULL), -ESTALE);
	/* An open file whose object went: its length cannot be published. */
	OK(strata_pwrite(fh, "x", 1, 0));
	ERR(strata_fsync(fh), -ESTALE);
	ERR(strata_close(fh), -ESTALE);
	OK(strata_openat(S, b, "f", STRATA_O_CREAT | STRATA_O_EXCL | STRATA_O_WRONLY, 0644, &fh));
	OK(strata_fhandle(fh, &got));
	OK(strata_close(fh));
	CHECK(!same(got, f) && got.gen != f.gen, "a new file got the old handle");
	ERR(strata_statat(S, f, &st), -ESTALE);
	forged = got;
	forged.gen++;
	ERR(strata_statat(S, forged, &st), -ESTALE);
	OK(strata_unlink(T, "/handles/hnd/y/b/f"));
	OK(strata_unlink(T, "/handles/hnd/y/b/ln"));
	OK(strata_rmdir(T, "/handles/hnd/y/b"));
	ERR(strata_lookupat(S, b, "f", &got, NULL), -ESTALE);
	ERR(strata_mkdirat(S, b, "c", 0755, NULL, NULL), -ESTALE);
	ERR(strata_readdirplus(S, b, &ck, 0, plus_cb, l), -ESTALE);
	ERR(strata_renameat(S, a, "b", b, "x", 0), -ESTALE);
	OK(strata_statat(S, a, &st));
	ERR(strata_unlinkat(S, a, "b", STRATA_AT_REMOVEDIR), -ENOENT);
	strata_disconnect(T);
	free(l);
}

/* ---- the metadata cache (docs/namespace.md, "Client metadata cache") ---- */

#define MC_TTL_MS 1500

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct strata *connect_cached(int32_t ms, uint32_t entries, int *rc)
{
	struct strata_opts o;
	struct strata *c = NULL;

	strata_opts_init(&o, sizeof(o));
	o.retry_ms = 20000;
	o.meta_cache_ms = ms;
	o.meta_cache_entries = entries;
	*rc = strata_connect(mgmt_addr, &o, &c);
	return c;
}

static void put_file(struct strata *c, const char *path, const char *text)
{
	struct strata_file *f = NULL;

	OK(strata_open(c, path, STRATA_O_CREAT | STRATA_O_TRUNC | STRATA_O_WRONLY, 0644, &f));
	OK(strata_pwrite(f, text, strlen(text), 0));
	OK(strata_close(f));
}

static uint64_t size_of(struct strata *c, const char *path)
{
	struct strata_stat st;

	OK(strata_stat(c, path, &st));
	return st.size;
}

/* Waits out the timeout of an answer C took at t0 or before. */
static void past_ttl(uint64_t t0)
{
	while (ms_now() < t0 + MC_TTL_MS + 50) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
}

static int take_all(void *arg, const struct strata_direntplus *e)
{
	(void)e;
	(*(int *)arg)++;
	return 0;
}

static void meta_cache(void)
{
	struct strata *C, *T, *D;
	struct strata_stat st;
	struct strata_handle dir, h, got;
	struct strata_cookie ck;
	struct strata_file *f;
	char buf[64];
	uint64_t t0, t1;
	int rc, n;

	begin("meta cache: bad settings are refused");
	C = connect_cached(-2, 0, &rc);
	CHECK(!C && rc == -EINVAL, "meta_cache_ms -2 -> %d", rc);
	C = connect_cached(600001, 0, &rc);
	CHECK(!C && rc == -EINVAL, "meta_cache_ms 600001 -> %d", rc);
	C = connect_cached(1000, 10, &rc);
	CHECK(!C && rc == -EINVAL, "meta_cache_entries 10 -> %d", rc);
	setenv("STRATA_META_CACHE_MS", "soon", 1);
	C = connect_cached(-1, 0, &rc);
	CHECK(!C && rc == -EINVAL, "$STRATA_META_CACHE_MS 'soon' -> %d", rc);
	unsetenv("STRATA_META_CACHE_MS");

	C = connect_cached(MC_TTL_MS, 64, &rc);
	OK(rc);
	T = connect_cached(0, 0, &rc);
	OK(rc);

	begin("meta cache: this client's own changes are seen at once");
	ERR(strata_stat(C, P("/a"), &st), -ENOENT);	/* a negative entry */
	put_file(C, P("/a"), "hello");
	OK(strata_stat(C, P("/a"), &st));
	CHECK(st.size == 5, "size %" PRIu64 " after a create and a write", st.size);
	OK(strata_truncate(C, P("/a"), 2));
	CHECK(size_of(C, P("/a")) == 2, "size after truncate");
	st.mode = 0600;
	OK(strata_setattr(C, P("/a"), STRATA_SET_MODE, &st));
	OK(strata_stat(C, P("/a"), &st));
	CHECK((st.mode & 07777) == 0600, "mode %o after setattr", st.mode & 07777);
	OK(strata_symlink(C, P("/a"), P("/s")));
	CHECK(size_of(C, P("/s")) == 2, "through a symlink");
	OK(strata_open(C, P("/a"), STRATA_O_WRONLY, 0, &f));
	OK(strata_pwrite(f, "0123456789", 10, 0));
	OK(strata_close(f));
	CHECK(size_of(C, P("/s")) == 10, "through a symlink after a write and close");
	OK(strata_link(C, P("/a"), P("/hard")));
	OK(strata_stat(C, P("/a"), &st));
	CHECK(st.nlink == 2, "nlink %u after link", st.nlink);
	OK(strata_rename(C, P("/a"), P("/b"), 0));
	ERR(strata_stat(C, P("/a"), &st), -ENOENT);
	CHECK(size_of(C, P("/b")) == 10, "renamed");
	OK(strata_unlink(C, P("/hard")));
	ERR(strata_lstat(C, P("/hard"), &st), -ENOENT);
	OK(strata_mkdir(C, P("/d"), 0755));
	OK(strata_stat(C, P("/d"), &st));
	OK(strata_rmdir(C, P("/d")));
	ERR(strata_stat(C, P("/d"), &st), -ENOENT);
	/* By handle. */
	OK(strata_lookupat(C, strata_root(), root + 1, &dir, NULL));
	ERR(strata_lookupat(C, dir, "h", &h, NULL), -ENOENT);
	OK(strata_mkdirat(C, dir, "h", 0700, &h, NULL));
	OK(strata_lookupat(C, dir, "h", &got, &st));
	CHECK(got.ino == h.ino && got.gen == h.gen, "lookupat after mkdirat");
	st.mode = 0750;
	OK(strata_setattrat(C, h, STRATA_SET_MODE, &st, NULL));
	OK(strata_statat(C, h, &st));
	CHECK((st.mode & 07777) == 0750, "statat after setattrat: %o", st.mode & 07777);
	OK(strata_unlinkat(C, dir, "h", STRATA_AT_REMOVEDIR));
	ERR(strata_statat(C, h, &st), -ESTALE);
	ERR(strata_lookupat(C, dir, "h", &got, NULL), -ENOENT);
	/* A listing fills the cache; this client's change still drops it. */
	put_file(C, P("/l"), "1");
	memset(&ck, 0, sizeof(ck));
	n = 0;
	while ((rc = strata_readdirplus(C, dir, &ck, 0, take_all, &n)) == 1)
		;
	OK(rc);
	CHECK(n >= 3, "listed %d entries", n);
	OK(strata_lookupat(C, dir, "l", &got, &st));
	CHECK(st.size == 1, "lookupat after a listing: size %" PRIu64, st.size);
	OK(strata_statat(C, got, &st));
	OK(strata_unlink(C, P("/l")));
	ERR(strata_lookupat(C, dir, "l", &got, NULL), -ENOENT);
	ERR(strata_statat(C, got, &st), -ESTALE);

	begin("meta cache: another client's change is seen after the timeout");
	t0 = ms_now();
	ERR(strata_stat(C, P("/other"), &st), -ENOENT);
	CHECK(size_of(C, P("/b")) == 10, "before the other client's write");
	t1 = ms_now();	/* both answers expire by t1 + the timeout */
	put_file(T, P("/other"), "x");
	put_file(T, P("/b"), "abc");
	/* Within the timeout the cached answers stand (the documented
	 * staleness): checked only when the calls above took less of it
	 * than half, so a slow machine does not fail here. */
	if (ms_now() - t0 < MC_TTL_MS / 2) {
		ERR(strata_stat(C, P("/other"), &st), -ENOENT);
		CHECK(size_of(C, P("/b")) == 10, "a cached answer within the timeout");
	}
	past_ttl(t1);
	OK(strata_stat(C, P("/other"), &st));
	CHECK(size_of(C, P("/b")) == 3, "the other client's write after the timeout");

	begin("meta cache: an open reads another client's rewrite at once");
	CHECK(size_of(C, P("/b")) == 3, "cached");
	put_file(T, P("/b"), "rewritten");
	OK(strata_open(C, P("/b"), STRATA_O_RDONLY, 0, &f));
	rc = (int)strata_pread(f, buf, sizeof(buf), 0);
	CHECK(rc == 9 && !memcmp(buf, "rewritten", 9), "read %d bytes after a rewrite", rc);
	OK(strata_fstat(f, &st));
	CHECK(st.size == 9, "fstat size %" PRIu64, st.size);
	OK(strata_close(f));

	begin("meta cache: a timeout of 0 is no cache");
	setenv("STRATA_META_CACHE_MS", "60000", 1);	/* the option wins */
	D = connect_cached(0, 0, &rc);
	unsetenv("STRATA_META_CACHE_MS");
	OK(rc);
	ERR(strata_stat(D, P("/late"), &st), -ENOENT);
	put_file(T, P("/late"), "now");
	CHECK(size_of(D, P("/late")) == 3, "seen at once without a cache");
	strata_disconnect(D);

	begin("meta cache: from the environment, and bounded");
	setenv("STRATA_META_CACHE_MS", "60000", 1);
	setenv("STRATA_META_CACHE_ENTRIES", "64", 1);
	D = connect_cached(-1, 0, &rc);
	unsetenv("STRATA_META_CACHE_MS");
	unsetenv("STRATA_META_CACHE_ENTRIES");
	OK(rc);
	CHECK(size_of(D, P("/late")) == 3, "first stat");
	put_file(T, P("/late"), "later");
	CHECK(size_of(D, P("/late")) == 3, "a 60 s cache answers from memory");
	/* More names than the cache holds: each still answers right. */
	for (int i = 0; i < 300; i++) {
		snprintf(buf, sizeof(buf), "/miss%03d", i);
		ERR(strata_stat(D, P(buf), &st), -ENOENT);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(buf, sizeof(buf), "/miss%03d", i);
		ERR(strata_stat(D, P(buf), &st), -ENOENT);
	}
	strata_disconnect(D);
	strata_disconnect(T);
	strata_disconnect(C);
}

/* Writes 4 MiB blocks until the cluster stops answering (the test kills
 * its daemons), then reports how it ended. The process keeps SIGPIPE's
 * default action, as a program that links libstrata would: a socket write
 * to a dead peer must come back as an error, not kill it. */
static int writer(void)
{
	size_t n = 4u << 20;
	uint8_t *a = malloc(n);
	struct strata_file *f;
	ssize_t rc = 0;
	uint64_t off = 0;

	if (!a)
		return 1;
	pattern_fill(a, n, 8);
	f = openf("/writer", STRATA_O_CREAT | STRATA_O_RDWR);
	printf("writer: started\n");
	fflush(stdout);
	while ((rc = strata_pwrite(f, a, n, off)) == (ssize_t)n)
		off = (off + n) % (256u << 20);
	printf("writer: stopped by %s\n", strata_strerror((int)rc));
	strata_close(f);
	free(a);
	return 0;
}

static const struct {
	const char *name;
	void (*fn)(void);
	bool in_all;
} scenarios[] = {
	{ "read-after-write", read_after_write, true },
	{ "holes", holes, true },
	{ "truncate", truncate_checks, true },
	{ "many-chains", many_chains, true },
	{ "concurrency", concurrency, true },
	{ "ring", ring_checks, true },
	{ "errors", errors, true },
	{ "rename-readdir", rename_and_dirs, true },
	{ "handles", handles, true },
	{ "meta-cache", meta_cache, true },
	{ "enospc", enospc, false },	/* needs a capacity-limited cluster */
};
#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

static void run_scenario(size_t i)
{
	snprintf(root, sizeof(root), "/%s", scenarios[i].name);
	OK(strata_mkdir(S, root, 0755));
	scenarios[i].fn();
	printf("api_test %s: ok\n", scenarios[i].name);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct strata_opts o;
	size_t pick = NSCENARIOS;
	bool all, writer_mode;

	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < NSCENARIOS; i++)
			printf("%s\n", scenarios[i].name);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		/* The headers' version, then the running library's. */
		printf("%s %s %d\n", STRATA_VERSION_STRING, strata_version(),
		       STRATA_VERSION == STRATA_VERSION_OF(STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
							   STRATA_VERSION_PATCH));
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: api_test MGMT_ADDR SCENARIO|all|writer, or api_test --list|--version\n");
		return 2;
	}
	all = strcmp(argv[2], "all") == 0;
	writer_mode = strcmp(argv[2], "writer") == 0;
	for (size_t i = 0; i < NSCENARIOS; i++)
		if (strcmp(argv[2], scenarios[i].name) == 0)
			pick = i;
	if (!all && !writer_mode && pick == NSCENARIOS) {
		fprintf(stderr, "api_test: unknown scenario '%s' (see api_test --list)\n", argv[2]);
		return 2;
	}
	mgmt_addr = argv[1];
	strata_opts_init(&o, sizeof(o));
	o.retry_ms = writer_mode ? 2000 : 20000;
	if (strata_connect(argv[1], &o, &S)) {
		fprintf(stderr, "cannot connect to %s\n", argv[1]);
		return 1;
	}
	signal(SIGPIPE, SIG_DFL);
	if (writer_mode) {
		int rc = writer();

		strata_disconnect(S);
		return rc;
	}
	for (size_t i = 0; i < NSCENARIOS; i++)
		if (all ? scenarios[i].in_all : i == pick)
			run_scenario(i);
	strata_disconnect(S);
	printf("api_test %s: ok\n", argv[2]);
	return 0;
}
