/*
 * api_test: libstrata's public API against a live cluster, as a C program
 * would use it. Run by tests/integration/test_api.py.
 *
 *   api_test MGMT_ADDR all        every check below except ENOSPC
 *   api_test MGMT_ADDR enospc     fill a capacity-limited cluster
 *
 * Prints one line per check; exits 1 at the first failure with the check,
 * the call and the error.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/rand.h"
#include "strata/strata.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=1";
}

static struct strata *S;
static const char *current = "";

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
	OK(strata_mkdir(S, "/raw", 0755));
	pattern_fill(a, n, 1);
	f = openf("/raw/f", STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_pwrite(f, a, n, 0));
	/* Same handle sees its writes before close. */
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read");
	CHECK(memcmp(a, b, n) == 0, "content differs (same handle)");
	OK(strata_close(f));
	/* Close-to-open: a new open sees length and data. */
	OK(strata_stat(S, "/raw/f", &st));
	CHECK(st.size == n, "size %" PRIu64 " after close, want %zu", st.size, n);
	g = openf("/raw/f", STRATA_O_RDONLY);
	memset(b, 0, n);
	CHECK(strata_pread(g, b, n + 100, 0) == (ssize_t)n, "read past end not clipped");
	CHECK(memcmp(a, b, n) == 0, "content differs (new open)");
	CHECK(strata_pread(g, b, 10, n) == 0, "read at EOF not 0");
	ERR(strata_pwrite(g, a, 10, 0), -EBADF);
	OK(strata_close(g));
	/* Overwrite in the middle, unaligned. */
	f = openf("/raw/f", STRATA_O_RDWR);
	pattern_fill(a + 1000003, 77777, 9);
	OK(strata_pwrite(f, a + 1000003, 77777, 1000003));
	OK(strata_close(f));
	f = openf("/raw/f", STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read");
	CHECK(memcmp(a, b, n) == 0, "content differs after overwrite");
	OK(strata_close(f));
	free(a);
	free(b);
}

static void holes(void)
{
	uint8_t buf[8192], z[8192] = { 0 };
	struct strata_file *f;
	uint64_t far = 37ull << 20;

	begin("holes");
	f = openf("/raw/sparse", STRATA_O_CREAT | STRATA_O_RDWR | STRATA_O_EXCL);
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
	OK(strata_mkdir(S, "/tr", 0755));
	OK(strata_set_layout(S, "/tr", &l));
	pattern_fill(a, n, 3);
	f = openf("/tr/f", STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_pwrite(f, a, n, 0));
	OK(strata_close(f));
	/* Shrink into the middle of a chunk, then grow: the cut-off bytes
	 * must read as zeros, not the old data. */
	OK(strata_truncate(S, "/tr/f", 2500000));
	OK(strata_stat(S, "/tr/f", &st));
	CHECK(st.size == 2500000, "size after shrink %" PRIu64, st.size);
	OK(strata_truncate(S, "/tr/f", n));
	f = openf("/tr/f", STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)n, "short read after grow");
	CHECK(memcmp(a, b, 2500000) == 0, "kept part differs");
	for (size_t i = 2500000; i < n; i++)
		CHECK(b[i] == 0, "byte %zu not zero after shrink+grow", i);
	OK(strata_close(f));
	/* O_TRUNC then write again at once: the old chunks are gone first. */
	f = openf("/tr/f", STRATA_O_RDWR | STRATA_O_TRUNC);
	OK(strata_pwrite(f, a + 100, 4096, 3 << 20));
	OK(strata_close(f));
	f = openf("/tr/f", STRATA_O_RDONLY);
	CHECK(strata_pread(f, b, n, 0) == (ssize_t)((3 << 20) + 4096), "size after O_TRUNC+write");
	for (size_t i = 0; i < (3u << 20); i++)
		CHECK(b[i] == 0, "byte %zu survived O_TRUNC", i);
	CHECK(memcmp(b + (3 << 20), a + 100, 4096) == 0, "new data differs");
	OK(strata_close(f));
	/* ftruncate on a handle. */
	f = openf("/tr/f", STRATA_O_RDWR);
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
	OK(strata_mkdir(S, "/wide", 0755));
	OK(strata_set_layout(S, "/wide", &l));
	pattern_fill(a, n, 4);
	f = openf("/wide/f", STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_get_layout(S, "/wide/f", &got));
	CHECK(got.chunk_size == (64u << 10), "chunk size %u", got.chunk_size);
	/* 256 chunks: every chain of the table gets some. */
	OK(strata_pwrite(f, a, n, 0));
	OK(strata_close(f));
	f = openf("/wide/f", STRATA_O_RDONLY);
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
		snprintf(path, sizeof(path), "/conc/own-%d", w->id);
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

	begin("concurrent writers and readers: one file, many files");
	OK(strata_mkdir(S, "/conc", 0755));
	f = openf("/conc/shared", STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_close(f));
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){ .id = i, .path = i < 4 ? "/conc/shared" : NULL };
		pthread_create(&w[i].th, NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(w[i].th, NULL);
		CHECK(w[i].err == 0, "worker %d: %s", i, strata_strerror(w[i].err));
	}
	/* The shared file holds every writer's last round, and its length
	 * is the furthest end any writer published (sizes only grow). */
	f = openf("/conc/shared", STRATA_O_RDONLY);
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
	pattern_fill(a, n, 5);
	f = openf("/raw/ring", STRATA_O_CREAT | STRATA_O_RDWR);
	OK(strata_ring_new(S, 64, &r));
	OK(strata_ring_register_buffer(r, a, n));
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
	ERR(strata_open(S, "/nope/x", STRATA_O_RDONLY, 0, &f), -ENOENT);
	ERR(strata_open(S, "/raw/missing", STRATA_O_RDONLY, 0, &f), -ENOENT);
	ERR(strata_mkdir(S, "/raw", 0755), -EEXIST);
	ERR(strata_open(S, "/raw/f", STRATA_O_CREAT | STRATA_O_EXCL | STRATA_O_RDWR, 0644, &f), -EEXIST);
	ERR(strata_mkdir(S, "/raw/f/sub", 0755), -ENOTDIR);
	ERR(strata_open(S, "/raw/f/x", STRATA_O_RDONLY, 0, &f), -ENOTDIR);
	ERR(strata_rmdir(S, "/raw"), -ENOTEMPTY);
	ERR(strata_open(S, "/raw", STRATA_O_RDWR, 0, &f), -EISDIR);
	ERR(strata_unlink(S, "/raw"), -EISDIR);
	ERR(strata_rmdir(S, "/raw/f"), -ENOTDIR);
	memset(name, 'n', 256);
	name[256] = '\0';
	snprintf(path, sizeof(path), "/raw/%s", name);
	ERR(strata_open(S, path, STRATA_O_CREAT | STRATA_O_RDWR, 0644, &f), -ENAMETOOLONG);
	ERR(strata_mkdir(S, path, 0755), -ENAMETOOLONG);
	ERR(strata_rename(S, "/raw", "/raw/sub", 0), -EINVAL);
	ERR(strata_open(S, "relative", STRATA_O_RDONLY, 0, &f), -EINVAL);
	/* Nothing of the above left a trace. */
	OK(strata_stat(S, "/raw/f", &st));
	CHECK(S_ISREG(st.mode), "/raw/f changed type");
	ERR(strata_stat(S, path, &st), -ENAMETOOLONG);
	ERR(strata_stat(S, "/raw/sub", &st), -ENOENT);
}

static void rename_and_dirs(void)
{
	struct strata_dir *d;
	struct strata_dirent e;
	int n = 0, rc;
	char p[64];

	begin("rename over a file, readdir paging");
	OK(strata_rename(S, "/raw/sparse", "/raw/f", 0));
	ERR(strata_stat(S, "/raw/sparse", &(struct strata_stat){ 0 }), -ENOENT);
	OK(strata_mkdir(S, "/many", 0755));
	for (int i = 0; i < 600; i++) {
		struct strata_file *f;

		snprintf(p, sizeof(p), "/many/e%04d", i);
		OK(strata_open(S, p, STRATA_O_CREAT | STRATA_O_WRONLY, 0644, &f));
		OK(strata_close(f));
	}
	OK(strata_opendir(S, "/many", &d));
	while ((rc = strata_readdir(d, &e)) == 1) {
		snprintf(p, sizeof(p), "e%04d", n);
		CHECK(strcmp(e.name, p) == 0, "entry %d is '%s'", n, e.name);
		n++;
	}
	OK(rc);
	strata_closedir(d);
	CHECK(n == 600, "readdir gave %d entries", n);
	ERR(strata_opendir(S, "/raw/f", &d), -ENOTDIR);
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
	f = openf("/fill", STRATA_O_CREAT | STRATA_O_RDWR);
	while (off < (1ull << 30) && (rc = strata_pwrite(f, a, n, off)) == (ssize_t)n)
		off += n;
	ERR(rc, -ENOSPC);
	CHECK(off > 0, "nothing fit");
	OK(strata_close(f));
	/* Everything acknowledged before is intact. */
	f = openf("/fill", STRATA_O_RDONLY);
	for (uint64_t o = 0; o < off; o += n) {
		CHECK(strata_pread(f, b, n, o) == (ssize_t)n, "short read at %" PRIu64, o);
		CHECK(memcmp(a, b, n) == 0, "data at %" PRIu64 " differs", o);
	}
	OK(strata_close(f));
	/* Freeing space makes room again. */
	OK(strata_unlink(S, "/fill"));
	printf("wrote %" PRIu64 " MiB before ENOSPC\n", off >> 20);
	free(a);
	free(b);
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

int main(int argc, char **argv)
{
	struct strata_opts o;

	if (argc != 3) {
		fprintf(stderr, "usage: api_test MGMT_ADDR all|enospc|writer\n");
		return 2;
	}
	strata_opts_init(&o, sizeof(o));
	o.retry_ms = strcmp(argv[2], "writer") == 0 ? 2000 : 20000;
	if (strata_connect(argv[1], &o, &S)) {
		fprintf(stderr, "cannot connect to %s\n", argv[1]);
		return 1;
	}
	signal(SIGPIPE, SIG_DFL);
	if (strcmp(argv[2], "writer") == 0) {
		int rc = writer();

		strata_disconnect(S);
		return rc;
	}
	if (strcmp(argv[2], "enospc") == 0) {
		enospc();
	} else {
		read_after_write();
		holes();
		truncate_checks();
		many_chains();
		concurrency();
		ring_checks();
		errors();
		rename_and_dirs();
	}
	strata_disconnect(S);
	printf("api_test %s: ok\n", argv[2]);
	return 0;
}
