/*
 * Unit tests for src/storage/chunk_store: round trips against a reference
 * model (seeded random), version rules, many ops in flight on the same and
 * on different chunks, corruption on disk, capacity limits, tmpfs and the
 * buffered fallback, reopen, and crash consistency under SIGKILL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#define _XOPEN_SOURCE_EXTENDED 1
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/crc32c.h"
#include "common/rand.h"
#include "common/log.h"
#include "storage/chunk_store.h"
#include "strata/errors.h"

#define HDR 16384u

/* ---- helpers ---- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	return rng_next(&rng_state);
}

static uint32_t rnd(uint32_t n) { return n ? (uint32_t)(rng() % n) : 0; }

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(path);
}

static void rm_rf(const char *dir)
{
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static char *mktmp(const char *base)
{
	char tmpl[PATH_MAX];
	char *d;

	snprintf(tmpl, sizeof(tmpl), "%s/strata-chunk-XXXXXX", base);
	d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

struct res {
	bool done;
	int status;
	bool has_info;
	struct chunk_info info;
	uint32_t nread, crc;
	int seq;          /* order in which callbacks ran */
	int *counter;
};

static void done_cb(void *arg, int status, const struct chunk_info *info)
{
	struct res *r = arg;

	r->done = true;
	r->status = status;
	r->has_info = info != NULL;
	if (info)
		r->info = *info;
	if (r->counter)
		r->seq = (*r->counter)++;
}

static void read_cb(void *arg, int status, const struct chunk_info *info, uint32_t nread,
		    uint32_t crc)
{
	struct res *r = arg;

	done_cb(arg, status, info);
	r->nread = nread;
	r->crc = crc;
}

static void wait_for(struct chunk_store *cs, struct res *r)
{
	while (!r->done)
		assert_true(chunk_store_wait(cs, 5000) >= 0);
}

static int do_write(struct chunk_store *cs, struct chunk_id id, uint32_t off, const void *data,
		    uint32_t len, uint64_t ver)
{
	struct res r = { 0 };
	int rc = chunk_write(cs, &id, off, data, len, crc32c(0, data, len), ver, done_cb, &r);

	if (rc)
		return rc;
	assert_false(r.done); /* never from inside the submit call */
	wait_for(cs, &r);
	return r.status;
}

static int do_read(struct chunk_store *cs, struct chunk_id id, uint32_t off, uint32_t len,
		   void *dst, uint32_t *nread)
{
	struct res r = { 0 };
	int rc = chunk_read(cs, &id, off, len, dst, read_cb, &r);

	if (rc)
		return rc;
	wait_for(cs, &r);
	if (r.status == 0)
		assert_int_equal(r.crc, crc32c(0, dst, r.nread));
	*nread = r.nread;
	return r.status;
}

static int do_trunc(struct chunk_store *cs, struct chunk_id id, uint32_t len, uint64_t ver)
{
	struct res r = { 0 };
	int rc = chunk_truncate(cs, &id, len, ver, done_cb, &r);

	if (rc)
		return rc;
	wait_for(cs, &r);
	return r.status;
}

static int do_remove(struct chunk_store *cs, struct chunk_id id)
{
	struct res r = { 0 };
	int rc = chunk_remove(cs, &id, 0, done_cb, &r);

	if (rc)
		return rc;
	wait_for(cs, &r);
	return r.status;
}

static struct chunk_store *open_store(const char *dir, uint32_t max_chunk, uint64_t cap,
				      uint32_t qd)
{
	struct chunk_store_opts o;
	struct chunk_store *cs = NULL;

	chunk_store_opts_init(&o, sizeof(o));
	if (max_chunk)
		o.max_chunk_size = max_chunk;
	o.capacity = cap;
	if (qd)
		o.queue_depth = qd;
	assert_int_equal(chunk_store_open(dir, &o, &cs), 0);
	return cs;
}

static void fill(uint8_t *p, uint32_t len, uint64_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)((seed * 2654435761u + i * 131u) >> 7 ^ i);
}

/* Reference model of one chunk. */
struct model {
	struct chunk_id id;
	bool exists;
	uint64_t version;
	uint32_t len;
	uint8_t *buf; /* max chunk bytes */
};

static void check_chunk(struct chunk_store *cs, const struct model *m, uint8_t *tmp)
{
	struct chunk_info info;
	uint32_t nread = 0;

	if (!m->exists) {
		assert_int_equal(chunk_stat(cs, &m->id, &info), -ENOENT);
		assert_int_equal(do_read(cs, m->id, 0, 10, tmp, &nread), -ENOENT);
		return;
	}
	assert_int_equal(chunk_stat(cs, &m->id, &info), 0);
	assert_int_equal(info.version, m->version);
	assert_int_equal(info.length, m->len);
	assert_int_equal(info.crc, crc32c(0, m->buf, m->len));
	assert_int_equal(do_read(cs, m->id, 0, m->len + 100, tmp, &nread), 0);
	assert_int_equal(nread, m->len);
	assert_memory_equal(tmp, m->buf, m->len);
}

/* ---- tests ---- */

#define RT_MAX (1u << 20)
#define RT_CHUNKS 6

static void run_model(const char *base, unsigned iters)
{
	char *dir = mktmp(base);
	struct chunk_store *cs = open_store(dir, RT_MAX, 0, 0);
	struct model m[RT_CHUNKS];
	uint8_t *data = malloc(RT_MAX + 64), *tmp = malloc(RT_MAX + 64);
	uint32_t nread;

	rng_state = 0x1234567887654321ull;
	for (int i = 0; i < RT_CHUNKS; i++) {
		m[i] = (struct model){ .id = { 1000 + (uint64_t)i, (uint64_t)i * 7 } };
		m[i].buf = calloc(1, RT_MAX);
	}
	for (unsigned it = 0; it < iters; it++) {
		struct model *c = &m[rnd(RT_CHUNKS)];
		uint32_t kind = rnd(100), off, len;
		/* Sizes around block and page boundaries, small and large. */
		static const uint32_t sizes[] = { 1, 7, 512, 4095, 4096, 4097, 65535, 65536,
						   65537, 100000, 131072, 300000 };

		len = rnd(3) ? sizes[rnd(12)] : rnd(RT_MAX / 2) + 1;
		if (kind < 45) { /* write: append, gap, overwrite, partial */
			uint32_t r = rnd(4);

			off = r == 0 ? c->len : r == 1 ? c->len + rnd(70000) : rnd(c->len + 1);
			if (rnd(5) == 0)
				off = (uint32_t)(off / 4096 * 4096);
			if ((uint64_t)off + len > RT_MAX)
				off = RT_MAX - len;
			fill(data + 3, len, rng());
			assert_int_equal(do_write(cs, c->id, off, data + 3, len, c->version + 1), 0);
			memcpy(c->buf + off, data + 3, len);
			if (off + len > c->len)
				c->len = off + len;
			c->exists = true;
			c->version++;
		} else if (kind < 55) { /* truncate */
			uint32_t nl = rnd(3) == 0 ? c->len + rnd(100000) : rnd(c->len + 1);

			if (nl > RT_MAX)
				nl = RT_MAX;
			int rc = do_trunc(cs, c->id, nl, c->version + 1);

			if (!c->exists) {
				assert_int_equal(rc, -ENOENT);
				continue;
			}
			assert_int_equal(rc, 0);
			if (nl > c->len)
				memset(c->buf + c->len, 0, nl - c->len);
			else
				memset(c->buf + nl, 0, c->len - nl);
			c->len = nl;
			c->version++;
		} else if (kind < 58) { /* remove */
			int rc = do_remove(cs, c->id);

			assert_int_equal(rc, c->exists ? 0 : -ENOENT);
			memset(c->buf, 0, c->len);
			c->exists = false;
			c->len = 0;
			/* versions keep growing across a remove */
		} else { /* read a random range */
			off = rnd(c->len + 10);
			int rc = do_read(cs, c->id, off, len, tmp + 1, &nread);

			if (!c->exists) {
				assert_int_equal(rc, -ENOENT);
				continue;
			}
			assert_int_equal(rc, 0);
			uint32_t want = off >= c->len ? 0 : (c->len - off < len ? c->len - off : len);

			assert_int_equal(nread, want);
			assert_memory_equal(tmp + 1, c->buf + off, want);
		}
		if (it % 50 == 0) {
			for (int i = 0; i < RT_CHUNKS; i++)
				check_chunk(cs, &m[i], tmp);
		}
	}
	for (int i = 0; i < RT_CHUNKS; i++)
		check_chunk(cs, &m[i], tmp);
	chunk_store_close(cs);
	cs = open_store(dir, RT_MAX, 0, 0);
	for (int i = 0; i < RT_CHUNKS; i++)
		check_chunk(cs, &m[i], tmp);
	chunk_store_close(cs);
	for (int i = 0; i < RT_CHUNKS; i++)
		free(m[i].buf);
	free(data);
	free(tmp);
	rm_rf(dir);
	free(dir);
}

static void test_model_roundtrip(void **state)
{
	(void)state;
	run_model("/tmp", 600);
}

static void test_version_rules(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store *cs = open_store(dir, 1 << 20, 0, 0);
	struct chunk_id id = { 1, 2 };
	uint8_t d[100], out[100];
	struct res r = { 0 };
	uint32_t nread;

	(void)state;
	fill(d, sizeof(d), 5);
	assert_int_equal(chunk_write(cs, &id, 0, d, 100, crc32c(0, d, 100) ^ 1, 1, done_cb, &r),
			 STRATA_EINTEGRITY);
	assert_int_equal(chunk_write(cs, &id, (1 << 20) - 50, d, 100, crc32c(0, d, 100), 1,
				     done_cb, &r), -EINVAL);
	assert_int_equal(chunk_write(cs, &id, 0, d, 100, crc32c(0, d, 100), 0, done_cb, &r),
			 -EINVAL);
	assert_int_equal(chunk_truncate(cs, &id, (1 << 20) + 1, 1, done_cb, &r), -EINVAL);
	assert_false(r.done);
	assert_int_equal(do_read(cs, id, 0, 10, out, &nread), -ENOENT);
	assert_int_equal(do_trunc(cs, id, 10, 1), -ENOENT);
	assert_int_equal(do_remove(cs, id), -ENOENT);

	assert_int_equal(do_write(cs, id, 0, d, 100, 5), 0);
	assert_int_equal(do_write(cs, id, 0, d, 50, 5), -EALREADY);
	assert_int_equal(do_write(cs, id, 0, d, 50, 4), -ESTALE);
	assert_int_equal(do_trunc(cs, id, 10, 3), -ESTALE);
	assert_int_equal(do_trunc(cs, id, 10, 5), -EALREADY);
	/* a zero-length write only bumps the version */
	assert_int_equal(do_write(cs, id, 20, d, 0, 6), 0);
	struct chunk_info info;

	assert_int_equal(chunk_stat(cs, &id, &info), 0);
	assert_int_equal(info.version, 6);
	assert_int_equal(info.length, 100);
	assert_int_equal(do_read(cs, id, 0, 100, out, &nread), 0);
	assert_memory_equal(out, d, 100);
	/* read at and past the end */
	assert_int_equal(do_read(cs, id, 100, 10, out, &nread), 0);
	assert_int_equal(nread, 0);
	assert_int_equal(do_read(cs, id, 5000, 10, out, &nread), 0);
	assert_int_equal(nread, 0);
	chunk_store_close(cs);
	rm_rf(dir);
	free(dir);
}

struct lctx {
	int n;
	uint64_t sum;
};

static int list_fn(void *arg, const struct chunk_info *info)
{
	struct lctx *l = arg;

	l->n++;
	l->sum += info->id.ino;
	return 0;
}

static int list_stop(void *arg, const struct chunk_info *info)
{
	(void)info;
	return ++*(int *)arg == 3 ? 42 : 0;
}

/* Many ops in flight: appends on the same chunk keep their order, reads
 * queued between them see the state at their place in the queue. */
static void test_concurrent(void **state)
{
	enum { NCH = 40, PER = 6, SZ = 5000 };
	char *dir = mktmp("/tmp");
	struct chunk_store *cs = open_store(dir, 1 << 20, 0, 8);
	static struct res wr[NCH][PER], rd[NCH][PER];
	static uint8_t data[NCH][PER][SZ], out[NCH][PER][PER * SZ];
	int counter[NCH] = { 0 }, issued = 0;
	uint8_t *tmp = malloc(PER * SZ);

	(void)state;
	memset(wr, 0, sizeof(wr));
	memset(rd, 0, sizeof(rd));
	for (int k = 0; k < PER; k++) {
		for (int c = 0; c < NCH; c++) {
			struct chunk_id id = { 77, (uint64_t)c };
			uint8_t *d = data[c][k];

			fill(d, SZ, (uint64_t)c * 100 + k);
			wr[c][k].counter = &counter[c];
			rd[c][k].counter = &counter[c];
			assert_int_equal(chunk_write(cs, &id, (uint32_t)k * SZ, d, SZ,
						     crc32c(0, d, SZ), (uint64_t)k + 1, done_cb,
						     &wr[c][k]), 0);
			assert_int_equal(chunk_read(cs, &id, 0, PER * SZ, out[c][k], read_cb,
						    &rd[c][k]), 0);
			issued += 2;
		}
	}
	assert_int_equal(chunk_store_pending(cs), issued);
	while (chunk_store_pending(cs))
		assert_true(chunk_store_wait(cs, 5000) >= 0);
	for (int c = 0; c < NCH; c++) {
		for (int k = 0; k < PER; k++) {
			assert_int_equal(wr[c][k].status, 0);
			assert_int_equal(rd[c][k].status, 0);
			assert_int_equal(wr[c][k].seq, 2 * k);
			assert_int_equal(rd[c][k].seq, 2 * k + 1);
			assert_int_equal(rd[c][k].nread, (k + 1) * SZ);
			for (int j = 0; j <= k; j++)
				assert_memory_equal(out[c][k] + j * SZ, data[c][j], SZ);
		}
	}
	struct lctx l = { 0 };
	int stop = 0;

	assert_int_equal(chunk_list(cs, list_fn, &l), 0);
	assert_int_equal(l.n, NCH);
	assert_int_equal(l.sum, 77u * NCH);
	assert_int_equal(chunk_list(cs, list_stop, &stop), 42);

	/* close completes what is in flight and runs the callbacks */
	memset(wr, 0, sizeof(wr));
	for (int c = 0; c < NCH; c++) {
		struct chunk_id id = { 77, (uint64_t)c };

		assert_int_equal(chunk_remove(cs, &id, 0, done_cb, &wr[c][0]), 0);
	}
	chunk_store_close(cs);
	for (int c = 0; c < NCH; c++)
		assert_true(wr[c][0].done && wr[c][0].status == 0);
	cs = open_store(dir, 1 << 20, 0, 0);
	l = (struct lctx){ 0 };
	assert_int_equal(chunk_list(cs, list_fn, &l), 0);
	assert_int_equal(l.n, 0);
	chunk_store_close(cs);
	free(tmp);
	rm_rf(dir);
	free(dir);
}

static int chunk_file(const char *dir, struct chunk_id id, char *out, size_t size)
{
	char cmd[PATH_MAX + 64];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find %s/chunks -name '%016" PRIx64 ".%016" PRIx64 "'",
		 dir, id.ino, id.idx);
	f = popen(cmd, "r");
	assert_non_null(f);
	if (!fgets(out, (int)size, f))
		out[0] = 0;
	pclose(f);
	out[strcspn(out, "\n")] = 0;
	return out[0] ? 0 : -ENOENT;
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static void test_corruption(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store *cs = open_store(dir, 1 << 20, 0, 0);
	struct chunk_id a = { 5, 1 }, b = { 5, 2 }, c = { 5, 3 };
	uint32_t n = 200000, nread;
	uint8_t *d = malloc(n), *out = malloc(n);
	char path[PATH_MAX];
	struct chunk_info info;

	(void)state;
	fill(d, n, 9);
	assert_int_equal(do_write(cs, a, 0, d, n, 1), 0);
	assert_int_equal(do_write(cs, b, 0, d, 1000, 1), 0);   /* slot A, seq 1 */
	assert_int_equal(do_write(cs, b, 1000, d, 1000, 2), 0); /* append: slot B */
	assert_int_equal(do_write(cs, c, 0, d, 1000, 1), 0);
	chunk_store_close(cs);

	/* a: flip a data byte in block 1 */
	assert_int_equal(chunk_file(dir, a, path, sizeof(path)), 0);
	flip_byte(path, HDR + 70000);
	/* b: tear the newest slot (B): falls back to A */
	assert_int_equal(chunk_file(dir, b, path, sizeof(path)), 0);
	flip_byte(path, 8192 + 100);
	/* c: both slots bad: quarantined */
	assert_int_equal(chunk_file(dir, c, path, sizeof(path)), 0);
	flip_byte(path, 20);
	flip_byte(path, 8192 + 20);

	cs = open_store(dir, 1 << 20, 0, 0);
	assert_int_equal(do_read(cs, a, 0, 65536, out, &nread), 0);
	assert_memory_equal(out, d, 65536);
	assert_int_equal(do_read(cs, a, 131072, n - 131072, out, &nread), 0);
	assert_int_equal(do_read(cs, a, 60000, 10000, out, &nread), STRATA_EINTEGRITY);
	assert_int_equal(do_read(cs, a, 0, n, out, &nread), STRATA_EINTEGRITY);
	/* a partial overwrite of the corrupt block merges with it: refused */
	assert_int_equal(do_write(cs, a, 65536 + 10, d, 10, 2), STRATA_EINTEGRITY);
	/* one of a sound block leaves the corrupt one as it is */
	assert_int_equal(do_write(cs, a, 10, d + 10, 10, 2), 0);
	assert_int_equal(do_read(cs, a, 0, 65536, out, &nread), 0);
	assert_memory_equal(out, d, 65536);
	assert_int_equal(do_read(cs, a, 60000, 10000, out, &nread), STRATA_EINTEGRITY);
	/* a full overwrite repairs it */
	assert_int_equal(do_write(cs, a, 0, d, n, 3), 0);
	assert_int_equal(do_read(cs, a, 0, n, out, &nread), 0);
	assert_memory_equal(out, d, n);

	assert_int_equal(chunk_stat(cs, &b, &info), 0);
	assert_int_equal(info.version, 1);
	assert_int_equal(info.length, 1000);
	assert_int_equal(do_read(cs, b, 0, 2000, out, &nread), 0);
	assert_int_equal(nread, 1000);
	assert_memory_equal(out, d, 1000);
	/* updates continue from the surviving slot */
	assert_int_equal(do_write(cs, b, 1000, d + 1000, 500, 2), 0);
	assert_int_equal(do_read(cs, b, 0, 2000, out, &nread), 0);
	assert_int_equal(nread, 1500);
	assert_memory_equal(out, d, 1500);

	assert_int_equal(chunk_stat(cs, &c, &info), -ENOENT);
	chunk_store_close(cs);
	assert_int_equal(chunk_file(dir, c, path, sizeof(path)), -ENOENT);
	snprintf(path, sizeof(path), "find %s/quarantine -type f | grep -q %016" PRIx64, dir, c.ino);
	assert_int_equal(system(path), 0);
	free(d);
	free(out);
	rm_rf(dir);
	free(dir);
}

static void test_capacity(void **state)
{
	const uint32_t sz = 65536, fp = HDR + 65536;
	char *dir = mktmp("/tmp");
	struct chunk_store *cs = open_store(dir, 1 << 20, 3 * fp + 100, 0);
	uint8_t *d = malloc(2 * sz), *out = malloc(2 * sz);
	uint64_t total, used;
	uint32_t nread;
	int i;

	(void)state;
	fill(d, 2 * sz, 3);
	for (i = 0; i < 3; i++) {
		struct chunk_id id = { 9, (uint64_t)i };

		assert_int_equal(do_write(cs, id, 0, d, sz, 1), 0);
	}
	assert_int_equal(chunk_space(cs, &total, &used), 0);
	assert_int_equal(total, 3 * fp + 100);
	assert_int_equal(used, 3 * fp);
	struct chunk_id id3 = { 9, 3 }, id0 = { 9, 0 };

	assert_int_equal(do_write(cs, id3, 0, d, sz, 1), -ENOSPC);
	assert_int_equal(do_write(cs, id0, sz, d, sz, 2), -ENOSPC);   /* append */
	assert_int_equal(do_trunc(cs, id0, 2 * sz, 2), -ENOSPC);      /* extend */
	assert_int_equal(do_write(cs, id0, 100, d, sz, 2), -ENOSPC);  /* overwrite, grows */
	assert_int_equal(do_write(cs, id0, 100, d, 1000, 2), 0);      /* overwrite, fits */
	memcpy(out, d, sz);
	for (i = 0; i < 3; i++) {
		struct chunk_id id = { 9, (uint64_t)i };
		struct chunk_info info;

		assert_int_equal(chunk_stat(cs, &id, &info), 0);
		assert_int_equal(info.length, sz);
		assert_int_equal(do_read(cs, id, 0, 2 * sz, out, &nread), 0);
		assert_int_equal(nread, sz);
		if (i == 0) {
			assert_memory_equal(out, d, 100);
			assert_memory_equal(out + 100, d, 1000);
			assert_memory_equal(out + 1100, d + 1100, sz - 1100);
		} else {
			assert_memory_equal(out, d, sz);
		}
	}
	assert_int_equal(chunk_space(cs, &total, &used), 0);
	assert_int_equal(used, 3 * fp);
	assert_int_equal(do_trunc(cs, id0, 10, 3), 0);
	assert_int_equal(do_write(cs, id3, 0, d, 40000, 1), 0);
	struct chunk_id id1 = { 9, 1 };

	assert_int_equal(do_remove(cs, id1), 0);
	assert_int_equal(do_write(cs, id0, 10, d, sz, 4), 0);
	assert_int_equal(chunk_space(cs, &total, &used), 0);
	assert_true(used <= total);
	chunk_store_close(cs);
	cs = open_store(dir, 1 << 20, 3 * fp + 100, 0);
	assert_int_equal(chunk_space(cs, &total, &used), 0);
	assert_int_equal(used, (HDR + 69632) + fp + (HDR + 40960));
	chunk_store_close(cs);
	free(d);
	free(out);
	rm_rf(dir);
	free(dir);
}

static void test_tmpfs(void **state)
{
	struct stat st;

	(void)state;
	if (stat("/dev/shm", &st) < 0 || !S_ISDIR(st.st_mode)) {
		skip();
		return;
	}
	run_model("/dev/shm", 150);
	/* The buffered fallback, as on a tmpfs that refuses O_DIRECT. */
	setenv("STRATA_TEST_NO_DIRECT", "1", 1);
	char *dir = mktmp("/dev/shm");
	struct chunk_store *cs = open_store(dir, 0, 0, 0);

	assert_false(chunk_store_is_direct(cs));
	chunk_store_close(cs);
	rm_rf(dir);
	free(dir);
	run_model("/dev/shm", 150);
	unsetenv("STRATA_TEST_NO_DIRECT");
}

static void test_reopen_cleanup(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store_opts o;
	struct chunk_store *cs;
	struct chunk_id id = { 3, 3 };
	char path[PATH_MAX], tmpf[PATH_MAX + 8];
	uint8_t d[5000], out[5000];
	uint32_t nread;
	int fd;

	(void)state;
	chunk_store_opts_init(&o, sizeof(o));
	o.sync_writes = true;
	assert_int_equal(chunk_store_open(dir, &o, &cs), 0);
	assert_true(chunk_store_fd(cs) >= 0);
	fill(d, sizeof(d), 1);
	assert_int_equal(do_write(cs, id, 0, d, 3000, 1), 0);
	assert_int_equal(do_write(cs, id, 3000, d + 3000, 2000, 2), 0);
	assert_int_equal(do_write(cs, id, 10, d + 10, 10, 3), 0);
	chunk_store_close(cs);
	/* a temp file left by a crash is removed at open */
	assert_int_equal(chunk_file(dir, id, path, sizeof(path)), 0);
	snprintf(tmpf, sizeof(tmpf), "%s.tmp", path);
	fd = open(tmpf, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "junk", 4), 4);
	close(fd);
	cs = open_store(dir, 0, 0, 0);
	assert_int_equal(access(tmpf, F_OK), -1);
	assert_int_equal(do_read(cs, id, 0, 5000, out, &nread), 0);
	assert_int_equal(nread, 5000);
	assert_memory_equal(out, d, 5000);
	chunk_store_close(cs);
	rm_rf(dir);
	free(dir);
}

/* ---- crash consistency ---- */

#define CR_CHUNKS 8
#define CR_MAX (512u << 10)
#define CR_KILLS 20     /* STRATA_CRASH_KILLS=n runs n */

struct shared_rec {
	volatile uint64_t acked[CR_CHUNKS];
	volatile uint64_t writing[CR_CHUNKS];
};

/* The update taking chunk ino from version v-1 (length cur) to v. */
struct cr_op {
	int kind; /* 0 write, 1 truncate */
	uint32_t off, len;
};

static struct cr_op cr_plan(uint64_t ino, uint64_t v, uint32_t cur)
{
	uint64_t h = splitmix64(ino * 1000003 + v);
	uint32_t len = (uint32_t)(h >> 40) % 150000 + 1, k = (uint32_t)(h % 6);
	struct cr_op o;

	if (cur == 0)
		k = 0;
	if (k >= 3) { /* small overwrite inside (block update), some across a block */
		k = 1;
		len = (h >> 60) ? (uint32_t)(h >> 40) % 9000 + 1 : (uint32_t)(h >> 40) % 70000 + 1;
	}
	if (k == 0) { /* append, sometimes with a gap */
		o.kind = 0;
		o.off = cur + ((h >> 8) & 1 ? (uint32_t)(h >> 12) % 9000 : 0);
		o.len = len;
		if ((uint64_t)o.off + o.len > CR_MAX)
			k = 1;
	}
	if (k == 1) { /* overwrite inside, maybe extending */
		o.kind = 0;
		o.off = (uint32_t)(h >> 16) % cur;
		o.len = len;
		if ((uint64_t)o.off + o.len > CR_MAX)
			o.len = CR_MAX - o.off;
	}
	if (k == 2) {
		o.kind = 1;
		o.off = (uint32_t)((h >> 16) % ((uint64_t)cur * 5 / 4 + 1));
		if (o.off > CR_MAX)
			o.off = CR_MAX;
		o.len = 0;
	}
	return o;
}

static void cr_fill(uint8_t *p, uint64_t ino, uint64_t v, uint32_t off, uint32_t len)
{
	uint64_t s = splitmix64(ino ^ (v << 20));

	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(s >> ((off + i) % 7 * 8)) ^ (uint8_t)(off + i);
}

static void cr_apply(uint8_t *buf, uint32_t *len, uint64_t ino, uint64_t v)
{
	struct cr_op o = cr_plan(ino, v, *len);

	if (o.kind == 0) {
		if (o.off > *len)
			memset(buf + *len, 0, o.off - *len);
		cr_fill(buf + o.off, ino, v, o.off, o.len);
		if (o.off + o.len > *len)
			*len = o.off + o.len;
	} else {
		if (o.off > *len)
			memset(buf + *len, 0, o.off - *len);
		*len = o.off;
	}
}

struct cr_child {
	struct chunk_store *cs;
	struct shared_rec *rec;
	uint64_t ver[CR_CHUNKS];
	uint32_t len[CR_CHUNKS];
	uint32_t next_len[CR_CHUNKS];
	uint64_t next_ver[CR_CHUNKS];
	bool started[CR_CHUNKS];
	uint8_t *buf[CR_CHUNKS];
	bool failed;
};

static struct cr_child *cr_ctx;
static void cr_submit(int i);

static void cr_done(void *arg, int status, const struct chunk_info *info)
{
	int i = (int)(intptr_t)arg;

	(void)info;
	if (status) {
		cr_ctx->failed = true;
		return;
	}
	cr_ctx->ver[i] = cr_ctx->next_ver[i];
	cr_ctx->len[i] = cr_ctx->next_len[i];
	cr_ctx->rec->acked[i] = cr_ctx->ver[i];
	cr_submit(i);
}

static void cr_submit(int i)
{
	struct cr_child *c = cr_ctx;
	/* Each run skips one version: the update retried after a kill then
	 * differs from the one the kill cut short, so leftovers of the
	 * interrupted one would show. */
	uint64_t ino = 500 + (uint64_t)i, v = c->ver[i] + (c->started[i] ? 1 : 2);
	struct chunk_id id = { ino, 0 };
	struct cr_op o = cr_plan(ino, v, c->len[i]);
	int rc;

	c->started[i] = true;
	c->next_ver[i] = v;
	c->rec->writing[i] = v;
	if (o.kind == 0) {
		cr_fill(c->buf[i], ino, v, o.off, o.len);
		c->next_len[i] = o.off + o.len > c->len[i] ? o.off + o.len : c->len[i];
		rc = chunk_write(c->cs, &id, o.off, c->buf[i], o.len,
				 crc32c(0, c->buf[i], o.len), v, cr_done, (void *)(intptr_t)i);
	} else {
		c->next_len[i] = o.off;
		rc = chunk_truncate(c->cs, &id, o.off, v, cr_done, (void *)(intptr_t)i);
	}
	if (rc)
		c->failed = true;
}

static void cr_child_main(const char *dir, struct shared_rec *rec, int ready_fd)
{
	static struct cr_child c;
	struct chunk_store_opts o;

	chunk_store_opts_init(&o, sizeof(o));
	o.max_chunk_size = CR_MAX;
	o.queue_depth = 4;
	if (chunk_store_open(dir, &o, &c.cs))
		_exit(3);
	c.rec = rec;
	cr_ctx = &c;
	for (int i = 0; i < CR_CHUNKS; i++) {
		struct chunk_id id = { 500 + (uint64_t)i, 0 };
		struct chunk_info info;

		c.buf[i] = malloc(CR_MAX);
		if (chunk_stat(c.cs, &id, &info) == 0) {
			c.ver[i] = info.version;
			c.len[i] = info.length;
		}
		rec->acked[i] = rec->writing[i] = c.ver[i];
	}
	if (write(ready_fd, "r", 1) != 1)
		_exit(4);
	for (int i = 0; i < CR_CHUNKS; i++)
		cr_submit(i);
	for (;;) {
		if (chunk_store_wait(c.cs, 1000) < 0 || c.failed)
			_exit(5);
	}
}

static void test_crash_consistency(void **state)
{
	char *dir = mktmp("/tmp");
	struct shared_rec *rec;
	uint8_t *model[CR_CHUNKS], *out = malloc(CR_MAX + 16);
	uint32_t mlen[CR_CHUNKS] = { 0 };
	uint64_t mver[CR_CHUNKS] = { 0 }, total_updates = 0;
	int at_writing = 0, kills = CR_KILLS;
	const char *env = getenv("STRATA_CRASH_KILLS");

	(void)state;
	if (env && *env) {
		char *endp;
		long v = strtol(env, &endp, 10);

		assert_true(*endp == 0 && v > 0 && v < 1000000);
		kills = (int)v;
	}
	rec = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(rec != MAP_FAILED);
	for (int i = 0; i < CR_CHUNKS; i++)
		model[i] = calloc(1, CR_MAX);
	srand(4242);
	for (int kill_no = 0; kill_no < kills; kill_no++) {
		int p[2], status;
		char ch;
		pid_t pid;

		assert_int_equal(pipe(p), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			log_set_level(LOG_WARN);
			cr_child_main(dir, rec, p[1]);
			_exit(6);
		}
		close(p[1]);
		assert_int_equal(read(p[0], &ch, 1), 1);
		close(p[0]);
		usleep(2000 + (useconds_t)(rand() % 60000));
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

		struct chunk_store *cs = open_store(dir, CR_MAX, 0, 0);

		for (int i = 0; i < CR_CHUNKS; i++) {
			struct chunk_id id = { 500 + (uint64_t)i, 0 };
			struct chunk_info info = { .version = 0 };
			uint32_t nread;

			if (chunk_stat(cs, &id, &info) != 0)
				info.version = 0;
			if (info.version != rec->acked[i])
				assert_int_equal(info.version, rec->writing[i]);
			at_writing += info.version != rec->acked[i];
			/* versions of a run: base + 2, base + 3, ... */
			assert_true(info.version == mver[i] || info.version >= mver[i] + 2);
			if (info.version > mver[i]) {
				total_updates += info.version - mver[i] - 1;
				mver[i]++;
				while (mver[i] < info.version)
					cr_apply(model[i], &mlen[i], id.ino, ++mver[i]);
			}
			if (info.version == 0)
				continue;
			assert_int_equal(info.length, mlen[i]);
			assert_int_equal(info.crc, crc32c(0, model[i], mlen[i]));
			assert_int_equal(do_read(cs, id, 0, CR_MAX, out, &nread), 0);
			assert_int_equal(nread, mlen[i]);
			assert_memory_equal(out, model[i], mlen[i]);
		}
		chunk_store_close(cs);
	}
	print_message("crash test: %d kills, %" PRIu64 " updates, %d chunks at the version in flight\n",
		      kills, total_updates, at_writing);
	assert_true(total_updates > 0);
	for (int i = 0; i < CR_CHUNKS; i++)
		free(model[i]);
	free(out);
	munmap(rec, sizeof(*rec));
	rm_rf(dir);
	free(dir);
}


/* Tags (the storage service's chain ids) persist and survive updates;
 * chunk_replace installs a whole copy whatever the stored version; reads
 * through the page cache and straight into an aligned caller buffer
 * return the same bytes as bounce-buffered O_DIRECT reads. */
static void test_tag_replace_buffered(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store_opts o;
	struct chunk_store *cs = NULL;
	struct chunk_id id = { 9, 1 };
	struct chunk_info ci;
	uint32_t n = 256 * 1024, got;
	uint8_t *a = abuf_alloc(n), *b = abuf_alloc(n), *dst = abuf_alloc(n);
	struct res r = { 0 };

	(void)state;
	fill(a, n, 1);
	fill(b, n, 2);
	cs = open_store(dir, 0, 0, 0);
	assert_int_equal(chunk_write_tagged(cs, &id, 0, a, n, crc32c(0, a, n), 5, 77, done_cb, &r), 0);
	wait_for(cs, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(do_write(cs, id, 100, b, 1000, 6), 0);	/* untagged: keeps 77 */
	assert_int_equal(do_trunc(cs, id, n - 10, 7), 0);
	assert_int_equal(chunk_stat(cs, &id, &ci), 0);
	assert_int_equal(ci.tag, 77);
	/* Replace with a lower version: allowed, whole content, new tag. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(chunk_replace(cs, &id, b, n / 2, crc32c(0, b, n / 2), 3, 88, done_cb, &r), 0);
	wait_for(cs, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(chunk_stat(cs, &id, &ci), 0);
	assert_int_equal(ci.version, 3);
	assert_int_equal(ci.length, n / 2);
	assert_int_equal(ci.tag, 88);
	/* replace_newer never moves a chunk back: equal and lower versions
	 * are refused, and the content stays. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(chunk_replace_newer(cs, &id, a, 4096, crc32c(0, a, 4096), 3, 88, done_cb,
					     &r), 0);
	wait_for(cs, &r);
	assert_int_equal(r.status, -EALREADY);
	memset(&r, 0, sizeof(r));
	assert_int_equal(chunk_replace_newer(cs, &id, a, 4096, crc32c(0, a, 4096), 2, 88, done_cb,
					     &r), 0);
	wait_for(cs, &r);
	assert_int_equal(r.status, -ESTALE);
	assert_int_equal(chunk_stat(cs, &id, &ci), 0);
	assert_int_equal(ci.version, 3);
	assert_int_equal(ci.length, n / 2);
	{
		struct chunk_id nid = { 9, 2 };

		/* Over no chunk, and over an older one: installed whole. */
		memset(&r, 0, sizeof(r));
		assert_int_equal(chunk_replace_newer(cs, &nid, a, 8192, crc32c(0, a, 8192), 9, 88,
						     done_cb, &r), 0);
		wait_for(cs, &r);
		assert_int_equal(r.status, 0);
		memset(&r, 0, sizeof(r));
		assert_int_equal(chunk_replace_newer(cs, &nid, b, 4096, crc32c(0, b, 4096), 10, 88,
						     done_cb, &r), 0);
		wait_for(cs, &r);
		assert_int_equal(r.status, 0);
		assert_int_equal(chunk_stat(cs, &nid, &ci), 0);
		assert_int_equal(ci.version, 10);
		assert_int_equal(ci.length, 4096);
		assert_int_equal(do_read(cs, nid, 0, 8192, dst, &got), 0);
		assert_int_equal(got, 4096);
		assert_memory_equal(dst, b, 4096);
		assert_int_equal(do_remove(cs, nid), 0);
	}
	chunk_store_close(cs);

	/* Reopen with buffered reads: tag kept; aligned and unaligned reads. */
	chunk_store_opts_init(&o, sizeof(o));
	o.buffered_reads = true;
	assert_int_equal(chunk_store_open(dir, &o, &cs), 0);
	assert_int_equal(chunk_stat(cs, &id, &ci), 0);
	assert_int_equal(ci.tag, 88);
	assert_int_equal(do_read(cs, id, 0, n / 2, dst, &got), 0);	/* straight into dst */
	assert_int_equal(got, n / 2);
	assert_memory_equal(dst, b, n / 2);
	assert_int_equal(do_read(cs, id, 65536, 65536, dst, &got), 0);
	assert_memory_equal(dst, b + 65536, 65536);
	assert_int_equal(do_read(cs, id, 1, 70000, dst + 1, &got), 0);	/* bounce buffer */
	assert_memory_equal(dst + 1, b + 1, 70000);
	/* A write after buffered reads goes O_DIRECT again; reads see it. */
	assert_int_equal(do_write(cs, id, n / 2, a, 4096, 4), 0);
	assert_int_equal(do_read(cs, id, n / 2, 4096, dst, &got), 0);
	assert_int_equal(got, 4096);
	assert_memory_equal(dst, a, 4096);
	chunk_store_close(cs);
	abuf_free(a);
	abuf_free(b);
	abuf_free(dst);
	rm_rf(dir);
	free(dir);
}

/* ---- reads answered from the page cache by reference ---- */

struct ref_res {
	bool done;
	int status;
	const uint8_t *data;
	uint32_t nread, crc;
	struct chunk_hold *hold;
};

static void ref_cb(void *arg, int status, const struct chunk_info *info, const uint8_t *data,
		   uint32_t nread, uint32_t crc, struct chunk_hold *hold)
{
	struct ref_res *r = arg;

	(void)info;
	r->done = true;
	r->status = status;
	r->data = data;
	r->nread = nread;
	r->crc = crc;
	r->hold = hold;
}

static struct ref_res do_read_ref(struct chunk_store *cs, struct chunk_id id, uint32_t off,
				  uint32_t len, void *dst)
{
	struct ref_res r = { 0 };

	assert_int_equal(chunk_read_ref(cs, &id, off, len, dst, ref_cb, &r), 0);
	while (!r.done)
		assert_true(chunk_store_wait(cs, 5000) >= 0);
	return r;
}

/*
 * With buffered reads, a cached range is answered by pointer into a
 * mapping of the chunk file: the bytes stay those of the read even after
 * an overwrite replaced the file. Whole blocks go out unverified with the
 * CRC the stored block CRCs give, so damage shows as a mismatch at the
 * reader (and chunk_read, the verify path, reports it); a partial block
 * takes the verifying read path. Held bytes survive an overwrite, an
 * append that remaps the file and a remove.
 */
static void test_read_ref(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store_opts o;
	struct chunk_store *cs = NULL;
	struct chunk_id id = { 11, 1 };
	uint32_t n = 4 * 65536 + 5000, got;
	uint8_t *a = abuf_alloc(n), *b = abuf_alloc(n), *dst = abuf_alloc(n);
	char path[PATH_MAX];
	struct ref_res r;
	int held = 0;

	(void)state;
	fill(a, n, 3);
	fill(b, n, 4);
	chunk_store_opts_init(&o, sizeof(o));
	o.buffered_reads = true;
	assert_int_equal(chunk_store_open(dir, &o, &cs), 0);
	assert_int_equal(do_write(cs, id, 0, a, n, 1), 0);
	/* A first read through the page cache brings the pages in. */
	assert_int_equal(do_read(cs, id, 0, n, dst, &got), 0);
	assert_memory_equal(dst, a, n);

	/* Whole blocks, and the tail block to the chunk's end. */
	r = do_read_ref(cs, id, 65536, 2 * 65536, dst);
	assert_int_equal(r.status, 0);
	if (r.hold) {	/* the pages may have been reclaimed already */
		held++;
		assert_ptr_not_equal(r.data, dst);
	}
	assert_int_equal(r.nread, 2 * 65536);
	assert_memory_equal(r.data, a + 65536, 2 * 65536);
	assert_int_equal(r.crc, crc32c(0, r.data, r.nread));
	/* Overwrite the whole chunk (copy-on-write): the held bytes stay. */
	assert_int_equal(do_write(cs, id, 0, b, n, 2), 0);
	assert_memory_equal(r.data, a + 65536, 2 * 65536);
	chunk_hold_put(r.hold);
	assert_int_equal(do_read(cs, id, 0, n, dst, &got), 0);
	assert_memory_equal(dst, b, n);
	r = do_read_ref(cs, id, 4 * 65536, 65536, dst);	/* clipped at the end */
	assert_int_equal(r.status, 0);
	assert_int_equal(r.nread, 5000);
	assert_memory_equal(r.data, b + 4 * 65536, 5000);
	held += r.hold != NULL;
	chunk_hold_put(r.hold);
	/* An append in place while a hold lives: the mapping is remade for
	 * the longer file, the held bytes stay; then a remove. */
	r = do_read_ref(cs, id, 0, 65536, dst);
	assert_int_equal(r.status, 0);
	assert_int_equal(do_write(cs, id, n, a, 70000, 3), 0);
	assert_int_equal(do_read(cs, id, n, 70000, dst, &got), 0);	/* caches the new pages */
	{
		struct ref_res t = do_read_ref(cs, id, 5 * 65536, 65536, dst);

		assert_int_equal(t.status, 0);
		assert_int_equal(t.nread, n + 70000 - 5 * 65536);	/* to the end */
		assert_memory_equal(t.data, a + 5 * 65536 - n, t.nread);
		assert_int_equal(t.crc, crc32c(0, t.data, t.nread));
		if (t.hold && r.hold)
			assert_ptr_not_equal(t.hold, r.hold);	/* a new mapping */
		held += t.hold != NULL;
		chunk_hold_put(t.hold);
	}
	assert_memory_equal(r.data, b, 65536);
	{
		struct res rm = { 0 };

		assert_int_equal(chunk_remove(cs, &id, 0, done_cb, &rm), 0);
		wait_for(cs, &rm);
		assert_int_equal(rm.status, 0);
	}
	assert_memory_equal(r.data, b, 65536);
	chunk_hold_put(r.hold);
	assert_int_equal(do_write(cs, id, 0, b, n, 4), 0);
	assert_int_equal(do_read(cs, id, 0, n, dst, &got), 0);

	/* Damage block 1 through the page cache. */
	assert_int_equal(chunk_file(dir, id, path, sizeof(path)), 0);
	flip_byte(path, HDR + 65536 + 10);
	r = do_read_ref(cs, id, 65536, 65536, dst);
	if (r.hold) {
		/* Sent unverified: the reader's check finds it. */
		held++;
		assert_int_equal(r.status, 0);
		assert_int_not_equal(r.crc, crc32c(0, r.data, r.nread));
		chunk_hold_put(r.hold);
	} else {
		assert_int_equal(r.status, STRATA_EINTEGRITY);
	}
	/* A partial block is verified here; so is every chunk_read. */
	r = do_read_ref(cs, id, 65536 + 100, 1000, dst);
	assert_int_equal(r.status, STRATA_EINTEGRITY);
	assert_null(r.hold);
	assert_int_equal(do_read(cs, id, 65536, 65536, dst, &got), STRATA_EINTEGRITY);
	/* Blocks around it are fine either way. */
	r = do_read_ref(cs, id, 0, 65536, dst);
	assert_int_equal(r.status, 0);
	assert_memory_equal(r.data, b, 65536);
	assert_int_equal(r.crc, crc32c(0, r.data, r.nread));
	held += r.hold != NULL;
	chunk_hold_put(r.hold);
	chunk_store_close(cs);
	/* Pages read a moment ago are normally still cached. */
	print_message("reads answered by reference: %d of 5\n", held);
	assert_true(held > 0);

	/* Without buffered reads there is no mapping. */
	cs = open_store(dir, 0, 0, 0);
	r = do_read_ref(cs, id, 0, 65536, dst);
	assert_int_equal(r.status, 0);
	assert_null(r.hold);
	assert_ptr_equal(r.data, dst);
	assert_memory_equal(dst, b, 65536);
	chunk_store_close(cs);
	abuf_free(a);
	abuf_free(b);
	abuf_free(dst);
	rm_rf(dir);
	free(dir);
}

/* ---- block updates (slot format 2) ---- */

#define BLK 65536u

static uint64_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

/* Format of the winning slot of a chunk file (valid magic, highest seq). */
static unsigned winner_format(const char *path)
{
	uint8_t hdr[HDR];
	uint64_t best = 0;
	unsigned fmt = 0;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, hdr, HDR, 0), (ssize_t)HDR);
	close(fd);
	for (int s = 0; s < 2; s++) {
		const uint8_t *p = hdr + s * 8192;
		uint32_t magic, crc;
		uint64_t seq;
		uint16_t f;

		memcpy(&magic, p, 4);
		memcpy(&crc, p + 8188, 4);
		memcpy(&seq, p + 8, 8);
		memcpy(&f, p + 4, 2);
		if (magic == 0x4b434853u && crc == crc32c(0, p, 8188) && seq >= best) {
			best = seq;
			fmt = f;
		}
	}
	return fmt;
}

/* Writes [off, off + len) of model m (data from seed) and checks the whole
 * chunk against it. */
static void blk_write_check(struct chunk_store *cs, struct model *m, uint32_t off, uint32_t len,
			    uint64_t seed, uint8_t *tmp)
{
	fill(tmp, len, seed);
	assert_int_equal(do_write(cs, m->id, off, tmp, len, ++m->version), 0);
	if (off > m->len)
		memset(m->buf + m->len, 0, off - m->len);
	memcpy(m->buf + off, tmp, len);
	if (off + len > m->len)
		m->len = off + len;
	check_chunk(cs, m, tmp);
}

/*
 * Overwrites rewrite only the blocks they touch, into blocks the committed
 * map does not use: partial and whole blocks, across a block boundary,
 * past the end; freed blocks are reused so the file stops growing; the
 * map survives a reopen; a corrupt block is found where the map moved it.
 */
static void test_block_update(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store *cs = open_store(dir, 1 << 20, 0, 0);
	struct model m = { .id = { 21, 4 }, .buf = calloc(1, 1 << 20) };
	uint8_t *tmp = malloc((1 << 20) + 64);
	uint64_t total, used, fsz;
	char path[PATH_MAX];
	uint32_t nread;

	(void)state;
	m.exists = true;
	blk_write_check(cs, &m, 0, 5 * BLK + 3000, 1, tmp);        /* copy-on-write */
	assert_int_equal(chunk_file(dir, m.id, path, sizeof(path)), 0);
	assert_int_equal(winner_format(path), 1);
	fsz = file_size(path);
	assert_int_equal(fsz, HDR + 5 * BLK + 4096);
	/* 4 KiB inside block 2: block 2 moves past the end (phys 6). */
	blk_write_check(cs, &m, 2 * BLK + 100, 4096, 2, tmp);
	assert_int_equal(winner_format(path), 2);
	assert_int_equal(file_size(path), HDR + 7 * BLK);
	assert_int_equal(chunk_space(cs, &total, &used), 0);
	assert_int_equal(used, HDR + 7 * BLK);
	/* Block 4 reuses the block 2 left: the file does not grow. */
	blk_write_check(cs, &m, 4 * BLK + 7, 10, 3, tmp);
	assert_int_equal(file_size(path), HDR + 7 * BLK);
	/* A whole block, a range across a boundary, one past the end. */
	blk_write_check(cs, &m, 1 * BLK, BLK, 4, tmp);
	blk_write_check(cs, &m, 3 * BLK - 100, BLK + 200, 5, tmp);
	blk_write_check(cs, &m, 5 * BLK + 1000, 100000, 6, tmp);
	/* Appends (with a gap) and a truncate that extends, on a remapped
	 * chunk; then a shrink (copy-on-write, back to format 1). */
	blk_write_check(cs, &m, m.len, 5000, 7, tmp);
	blk_write_check(cs, &m, m.len + 70000, 3000, 8, tmp);
	blk_write_check(cs, &m, 0, 10, 9, tmp);
	assert_int_equal(do_trunc(cs, m.id, m.len + 90000, ++m.version), 0);
	m.len += 90000;
	check_chunk(cs, &m, tmp);
	blk_write_check(cs, &m, 100, 5, 10, tmp);
	assert_int_equal(winner_format(path), 2);
	chunk_store_close(cs);
	cs = open_store(dir, 1 << 20, 0, 0);
	check_chunk(cs, &m, tmp);
	assert_int_equal(do_trunc(cs, m.id, 6 * BLK, ++m.version), 0);
	m.len = 6 * BLK;
	check_chunk(cs, &m, tmp);
	assert_int_equal(winner_format(path), 1);
	assert_int_equal(file_size(path), HDR + 6 * BLK);
	assert_int_equal(chunk_space(cs, &total, &used), 0);
	assert_int_equal(used, HDR + 6 * BLK);

	/* Block 2 moves to phys 6; damage it there, and damage the free
	 * block it left (phys 2), which no read looks at. */
	blk_write_check(cs, &m, 2 * BLK + 5, 5, 11, tmp);
	chunk_store_close(cs);
	flip_byte(path, HDR + 6 * BLK + 40);
	flip_byte(path, HDR + 2 * BLK + 40);
	cs = open_store(dir, 1 << 20, 0, 0);
	assert_int_equal(do_read(cs, m.id, 2 * BLK, 100, tmp, &nread), STRATA_EINTEGRITY);
	assert_int_equal(do_read(cs, m.id, 0, 2 * BLK, tmp, &nread), 0);
	assert_memory_equal(tmp, m.buf, 2 * BLK);
	assert_int_equal(do_read(cs, m.id, 3 * BLK, 3 * BLK, tmp, &nread), 0);
	assert_memory_equal(tmp, m.buf + 3 * BLK, 3 * BLK);
	assert_int_equal(do_write(cs, m.id, 2 * BLK + 1, tmp, 1, m.version + 1), STRATA_EINTEGRITY);
	blk_write_check(cs, &m, 2 * BLK, BLK, 12, tmp);       /* a whole block repairs it */
	chunk_store_close(cs);
	free(m.buf);
	free(tmp);
	rm_rf(dir);
	free(dir);
}

/*
 * Block maps: moving blocks back where they were gives the identity again
 * (format 1); a chunk file written by hand in format 1 (as earlier
 * versions wrote it) opens, reads and takes block updates.
 */
static void test_block_format1(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store *cs = open_store(dir, 1 << 20, 0, 0);
	struct model m = { .id = { 22, 1 }, .buf = calloc(1, 1 << 20) };
	uint32_t n = 2 * BLK + 700, nb = 3;
	uint8_t *tmp = malloc((1 << 20) + 64), *file = calloc(1, HDR + 3 * BLK);
	char path[PATH_MAX];
	uint32_t v32;
	uint64_t v64;
	int fd;

	(void)state;
	m.exists = true;
	/* Two blocks wholly rewritten (not from 0) go to phys 2 and 3, then
	 * back to 0 and 1: the identity, stored as format 1. */
	blk_write_check(cs, &m, 0, 2 * BLK, 1, tmp);
	assert_int_equal(chunk_file(dir, m.id, path, sizeof(path)), 0);
	blk_write_check(cs, &m, 10, 2 * BLK - 20, 2, tmp);
	assert_int_equal(winner_format(path), 2);
	blk_write_check(cs, &m, 10, 2 * BLK - 20, 3, tmp);
	assert_int_equal(winner_format(path), 1);
	check_chunk(cs, &m, tmp);
	chunk_store_close(cs);

	/* By hand: slot B (seq 7) valid, slot A zero. */
	fill(m.buf, n, 77);
	memset(m.buf + n, 0, 64);
	m.len = n;
	m.version = 9;
	uint8_t *s = file + 8192;

	v32 = 0x4b434853u; memcpy(s, &v32, 4);
	s[4] = 1;                                       /* format 1, flags 0 */
	v64 = 7; memcpy(s + 8, &v64, 8);
	memcpy(s + 16, &m.id.ino, 8);
	memcpy(s + 24, &m.id.idx, 8);
	memcpy(s + 32, &m.version, 8);
	memcpy(s + 40, &n, 4);
	v32 = crc32c(0, m.buf, n); memcpy(s + 44, &v32, 4);
	v32 = BLK; memcpy(s + 48, &v32, 4);
	memcpy(s + 52, &nb, 4);
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t bl = n - b * BLK < BLK ? n - b * BLK : BLK;

		v32 = crc32c(0, m.buf + b * BLK, bl);
		memcpy(s + 56 + 4 * b, &v32, 4);
	}
	v32 = crc32c(0, s, 8188); memcpy(s + 8188, &v32, 4);
	memcpy(file + HDR, m.buf, n);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, file, HDR + n), (ssize_t)(HDR + n));
	close(fd);

	cs = open_store(dir, 1 << 20, 0, 0);
	check_chunk(cs, &m, tmp);
	blk_write_check(cs, &m, BLK + 3, 4096, 4, tmp);
	assert_int_equal(winner_format(path), 2);
	blk_write_check(cs, &m, m.len, 100, 5, tmp);
	chunk_store_close(cs);
	cs = open_store(dir, 1 << 20, 0, 0);
	check_chunk(cs, &m, tmp);
	chunk_store_close(cs);
	free(file);
	free(m.buf);
	free(tmp);
	rm_rf(dir);
	free(dir);
}

/*
 * While a reply holds a mapping of a chunk file, the blocks it may send
 * are not reused: overwrites go past the end, and once the file would
 * span more than twice its blocks, copy-on-write compacts it. The held
 * bytes never change.
 */
static void test_block_hold_compact(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store_opts o;
	struct chunk_store *cs = NULL;
	struct model m = { .id = { 23, 1 }, .buf = calloc(1, 1 << 20) };
	uint8_t *tmp = abuf_alloc(1 << 20), *keep = malloc(BLK);
	char path[PATH_MAX];
	struct ref_res r;
	uint32_t nread;

	(void)state;
	chunk_store_opts_init(&o, sizeof(o));
	o.buffered_reads = true;
	assert_int_equal(chunk_store_open(dir, &o, &cs), 0);
	m.exists = true;
	blk_write_check(cs, &m, 0, 2 * BLK, 1, tmp);
	assert_int_equal(chunk_file(dir, m.id, path, sizeof(path)), 0);
	assert_int_equal(do_read(cs, m.id, 0, 2 * BLK, tmp, &nread), 0);
	r = do_read_ref(cs, m.id, BLK, BLK, tmp);
	assert_int_equal(r.status, 0);
	if (!r.hold) {
		skip();	/* the pages were reclaimed at once */
	}
	memcpy(keep, r.data, BLK);
	/* Block 1 at phys 2, then 3 (phys 1, held, is not reused); the next
	 * would make the file span 5 > 2 x 2 blocks: copy-on-write. */
	blk_write_check(cs, &m, BLK + 5, 10, 2, tmp);
	assert_int_equal(file_size(path), HDR + 3 * BLK);
	blk_write_check(cs, &m, BLK + 50, 10, 3, tmp);
	assert_int_equal(file_size(path), HDR + 4 * BLK);
	assert_memory_equal(r.data, keep, BLK);
	blk_write_check(cs, &m, BLK + 500, 10, 4, tmp);
	assert_int_equal(winner_format(path), 1);
	assert_int_equal(file_size(path), HDR + 2 * BLK);
	assert_memory_equal(r.data, keep, BLK);
	chunk_hold_put(r.hold);
	/* No hold now: the next overwrite goes to phys 2, the one after
	 * reuses phys 1. */
	blk_write_check(cs, &m, BLK + 5, 10, 5, tmp);
	blk_write_check(cs, &m, BLK + 6, 10, 6, tmp);
	assert_int_equal(file_size(path), HDR + 3 * BLK);
	chunk_store_close(cs);
	free(keep);
	free(m.buf);
	abuf_free(tmp);
	rm_rf(dir);
	free(dir);
}

static uint32_t min_len(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* Block updates with sync_writes (the fdatasync states between blocks and
 * slot): random small and large overwrites, appends and truncates of two
 * chunks, each checked, then again after a reopen. */
static void test_block_sync(void **state)
{
	char *dir = mktmp("/tmp");
	struct chunk_store_opts o;
	struct chunk_store *cs = NULL;
	struct model m[2] = { { .id = { 24, 1 } }, { .id = { 24, 2 } } };
	uint8_t *tmp = malloc((1 << 20) + 64);

	(void)state;
	rng_state = 0xb10c;
	chunk_store_opts_init(&o, sizeof(o));
	o.sync_writes = true;
	o.max_chunk_size = 1 << 20;
	assert_int_equal(chunk_store_open(dir, &o, &cs), 0);
	for (int i = 0; i < 2; i++) {
		m[i].buf = calloc(1, 1 << 20);
		m[i].exists = true;
		blk_write_check(cs, &m[i], 0, 4 * BLK + 100, 30 + (uint64_t)i, tmp);
	}
	for (int it = 0; it < 60; it++) {
		struct model *c = &m[rnd(2)];
		uint32_t k = rnd(10), len = rnd(2) ? rnd(9000) + 1 : rnd(200000) + 1, off;

		if (k < 7) {
			off = rnd(c->len);
		} else if (k < 9) {
			off = c->len + (rnd(2) ? rnd(70000) : 0);
		} else {
			uint32_t nl = min_len(rnd(c->len + 100000), 1 << 20);

			assert_int_equal(do_trunc(cs, c->id, nl, ++c->version), 0);
			if (nl > c->len)
				memset(c->buf + c->len, 0, nl - c->len);
			else
				memset(c->buf + nl, 0, c->len - nl);
			c->len = nl;
			check_chunk(cs, c, tmp);
			continue;
		}
		if (off >= (1 << 20))
			continue;
		len = min_len(len, (1 << 20) - off);
		blk_write_check(cs, c, off, len, rng(), tmp);
	}
	chunk_store_close(cs);
	cs = open_store(dir, 1 << 20, 0, 0);
	for (int i = 0; i < 2; i++) {
		check_chunk(cs, &m[i], tmp);
		free(m[i].buf);
	}
	chunk_store_close(cs);
	free(tmp);
	rm_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_rules),
		cmocka_unit_test(test_model_roundtrip),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_corruption),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_tmpfs),
		cmocka_unit_test(test_reopen_cleanup),
		cmocka_unit_test(test_crash_consistency),
		cmocka_unit_test(test_tag_replace_buffered),
		cmocka_unit_test(test_read_ref),
		cmocka_unit_test(test_block_update),
		cmocka_unit_test(test_block_format1),
		cmocka_unit_test(test_block_hold_compact),
		cmocka_unit_test(test_block_sync),
	};

	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
