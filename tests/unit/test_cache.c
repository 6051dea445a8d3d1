/*
 * Unit tests for src/client/cache.c: versioned keys, the DRAM bound, the
 * SLRU's scan resistance (against one shard, through the statics), the
 * disk tier (shared by a second cache object and by a forked process,
 * its bound, and files that fail their checks read as misses, never as
 * data) and the node-wide counters of DIR/stats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/client/cache.c"

#define BS 4096u

static char tmpdir[256];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/strata-test-cache-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct cache *mk(uint64_t mem, const char *dir, uint64_t disk)
{
	struct cache_opts o;
	struct cache *c = NULL;

	cache_opts_init(&o, sizeof(o));
	o.mem_bytes = mem;
	o.dir = dir;
	o.disk_bytes = disk;
	o.block = BS;
	assert_int_equal(cache_new(&o, &c), 0);
	return c;
}

static struct cache_key key(uint64_t ino, uint64_t ver, uint32_t blk)
{
	return (struct cache_key){ .ino = ino, .ver = ver, .idx = 0, .blk = blk, .bsize = BS };
}

/* Puts a block whose bytes are all b. */
static void put(struct cache *c, struct cache_key k, uint8_t b)
{
	void *d = cache_buf_new(&k);

	assert_non_null(d);
	memset(d, b, BS);
	cache_put(c, &k, d);
}

static void stats(struct cache *c, struct strata_cache_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->stats_size = sizeof(*st);
	cache_stats(c, st);
}

static void test_opts_checked(void **state)
{
	struct cache_opts o;
	struct cache *c = NULL;

	(void)state;
	cache_opts_init(&o, sizeof(o));
	assert_int_equal(cache_new(&o, &c), -EINVAL);	/* neither tier */
	o.mem_bytes = 1 << 20;
	o.block = 3000;
	assert_int_equal(cache_new(&o, &c), -EINVAL);
	o.block = 1024;
	assert_int_equal(cache_new(&o, &c), -EINVAL);
	o.block = 32u << 20;
	assert_int_equal(cache_new(&o, &c), -EINVAL);
	assert_null(c);
}

static void test_versioned_keys(void **state)
{
	struct cache *c = mk(1 << 20, NULL, 0);
	struct strata_cache_stats st;
	uint8_t buf[BS];

	(void)state;
	put(c, key(7, 1, 0), 0xaa);
	memset(buf, 0, sizeof(buf));
	assert_true(cache_get(c, &(struct cache_key){ 7, 1, 0, 0, BS }, 100, 200, buf));
	for (int i = 0; i < 200; i++)
		assert_int_equal(buf[i], 0xaa);
	assert_int_equal(buf[200], 0);
	/* Another version, chunk, block, block size or file: not this block. */
	assert_false(cache_get(c, &(struct cache_key){ 7, 2, 0, 0, BS }, 0, 10, buf));
	assert_false(cache_get(c, &(struct cache_key){ 7, 1, 1, 0, BS }, 0, 10, buf));
	assert_false(cache_get(c, &(struct cache_key){ 7, 1, 0, 1, BS }, 0, 10, buf));
	assert_false(cache_get(c, &(struct cache_key){ 7, 1, 0, 0, 2 * BS }, 0, 10, buf));
	assert_false(cache_get(c, &(struct cache_key){ 8, 1, 0, 0, BS }, 0, 10, buf));
	/* A range past the block is refused, not read. */
	assert_false(cache_get(c, &(struct cache_key){ 7, 1, 0, 0, BS }, BS - 4, 8, buf));
	stats(c, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 5);
	assert_int_equal(st.hit_bytes, 200);
	assert_int_equal(st.fill_bytes, BS);
	cache_free(c);
}

static void test_mem_bound(void **state)
{
	uint64_t mem = 64 * BS;
	struct cache *c = mk(mem, NULL, 0);
	struct strata_cache_stats st;

	(void)state;
	for (uint32_t i = 0; i < 1000; i++)
		put(c, key(1, 1, i), (uint8_t)i);
	stats(c, &st);
	assert_true(st.mem_bytes <= mem);
	assert_true(st.mem_bytes >= mem / 2);
	assert_int_equal(st.mem_limit, mem);
	assert_int_equal(st.evictions, 1000 - st.mem_bytes / BS);
	cache_free(c);
}

/* The next block number after *blk whose key falls in shard 0. */
static struct cache_key shard0_key(uint64_t ino, uint32_t *blk)
{
	for (;;) {
		struct cache_key k = key(ino, 1, (*blk)++);

		if (key_hash(&k) % CACHE_SHARDS == 0)
			return k;
	}
}

static void test_scan_resistant(void **state)
{
	/* 10 blocks a shard: 8 protected at most. */
	struct cache *c = mk(CACHE_SHARDS * 10 * BS, NULL, 0);
	struct cache_key hot[6];
	uint32_t blk = 0;
	uint8_t buf[16];

	(void)state;
	for (int i = 0; i < 6; i++) {
		hot[i] = shard0_key(1, &blk);
		put(c, hot[i], (uint8_t)i);
		assert_true(cache_get(c, &hot[i], 0, 1, buf));	/* promoted */
	}
	/* A scan of 200 blocks read once each, through the same shard. */
	for (int i = 0; i < 200; i++) {
		struct cache_key k = shard0_key(2, &blk);

		assert_false(cache_get(c, &k, 0, 1, buf));
		put(c, k, 0x55);
	}
	for (int i = 0; i < 6; i++) {
		assert_true(cache_get(c, &hot[i], 0, 16, buf));
		assert_int_equal(buf[15], i);
	}
	assert_true(c->sh[0].bytes[0] + c->sh[0].bytes[1] <= c->sh[0].cap);
	assert_true(c->sh[0].bytes[SEG_PROTECTED] <= c->sh[0].cap / 100 * PROTECTED_PCT);
	cache_free(c);
}

/* Readers copy out of blocks that writers evict meanwhile: every byte
 * read is the block's own (under ASan: no use after free). */
struct hammer {
	struct cache *c;
	uint64_t seed;
	uint64_t hits;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	uint8_t buf[BS];

	for (int i = 0; i < 20000; i++) {
		uint32_t blk = (uint32_t)rng_below(&h->seed, 64);
		struct cache_key k = key(9, 1, blk);

		if (rng_below(&h->seed, 4) == 0) {
			put(h->c, k, (uint8_t)blk);
		} else if (cache_get(h->c, &k, 0, BS, buf)) {
			h->hits++;
			for (uint32_t j = 0; j < BS; j += 512)
				if (buf[j] != (uint8_t)blk)
					return (void *)1;
		}
	}
	return NULL;
}

static void test_concurrent_readers_and_evictions(void **state)
{
	/* 2 blocks a shard for 64 blocks: most puts evict. */
	struct cache *c = mk(CACHE_SHARDS * 2 * BS, NULL, 0);
	struct hammer h[4];
	pthread_t t[4];
	uint64_t hits = 0;

	(void)state;
	for (int i = 0; i < 4; i++) {
		h[i] = (struct hammer){ c, 100 + (uint64_t)i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *rc;

		assert_int_equal(pthread_join(t[i], &rc), 0);
		assert_null(rc);
		hits += h[i].hits;
	}
	assert_true(hits > 0);
	cache_free(c);
}

static void block_path(struct cache *c, struct cache_key k, char *out, size_t len)
{
	assert_int_equal(key_path(c, &k, key_hash(&k), out, len), 0);
}

static void test_disk_tier(void **state)
{
	char dir[300];
	struct cache *a, *b;
	struct strata_cache_stats st;
	uint8_t buf[BS];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/disk", tmpdir);
	a = mk(0, dir, 1 << 20);	/* disk only */
	put(a, key(3, 9, 1), 0x11);
	/* Another cache over the same directory finds it. */
	b = mk(1 << 20, dir, 1 << 20);
	assert_true(cache_get(b, &(struct cache_key){ 3, 9, 0, 1, BS }, 0, BS, buf));
	assert_int_equal(buf[0], 0x11);
	assert_int_equal(buf[BS - 1], 0x11);
	assert_false(cache_get(b, &(struct cache_key){ 3, 10, 0, 1, BS }, 0, 1, buf));
	stats(b, &st);		/* the node's counters: both objects' */
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.disk_hits, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fill_bytes, BS);
	assert_int_equal(st.disk_bytes, DISK_HDR + BS);
	memset(&st, 0, sizeof(st));
	st.stats_size = sizeof(st);
	assert_int_equal(cache_dir_stats(dir, &st), 0);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.disk_bytes, DISK_HDR + BS);
	cache_free(a);
	cache_free(b);
	assert_int_equal(cache_dir_stats(tmpdir, &st), -ENOENT);
}

/* Damages block k's file with fn, then checks a fresh cache reads a miss
 * and removes the file. */
static void corrupt_one(const char *dir, struct cache_key k, void (*fn)(const char *path))
{
	struct cache *c = mk(0, dir, 1 << 20);
	struct strata_cache_stats st;
	char path[4096];
	uint8_t buf[BS];

	put(c, k, 0x22);
	block_path(c, k, path, sizeof(path));
	fn(path);
	memset(buf, 0, sizeof(buf));
	assert_false(cache_get(c, &k, 0, BS, buf));
	assert_int_equal(buf[0], 0);
	assert_int_not_equal(access(path, F_OK), 0);
	stats(c, &st);
	assert_true(st.disk_corrupt >= 1);
	cache_free(c);
}

static void flip_data(const char *path)
{
	FILE *f = fopen(path, "r+b");

	assert_non_null(f);
	assert_int_equal(fseek(f, DISK_HDR + 100, SEEK_SET), 0);
	assert_int_equal(fputc(0x23, f), 0x23);
	fclose(f);
}

static void flip_header(const char *path)
{
	FILE *f = fopen(path, "r+b");

	assert_non_null(f);
	assert_int_equal(fseek(f, 9, SEEK_SET), 0);
	assert_int_equal(fputc(0x7f, f), 0x7f);
	fclose(f);
}

static void cut_short(const char *path)
{
	assert_int_equal(truncate(path, DISK_HDR + BS / 2), 0);
}

static char other_path[4096];

/* Puts another block's (valid) file in this one's place. */
static void swap_in_other(const char *path)
{
	assert_int_equal(rename(other_path, path), 0);
}

static void test_disk_corrupt_is_a_miss(void **state)
{
	char dir[300];
	struct cache *c;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/bad", tmpdir);
	corrupt_one(dir, key(4, 1, 0), flip_data);
	corrupt_one(dir, key(4, 1, 1), flip_header);
	corrupt_one(dir, key(4, 1, 2), cut_short);
	c = mk(0, dir, 1 << 20);
	put(c, key(4, 2, 3), 0x33);
	block_path(c, key(4, 2, 3), other_path, sizeof(other_path));
	cache_free(c);
	corrupt_one(dir, key(4, 1, 3), swap_in_other);
}

static void test_disk_bound(void **state)
{
	char dir[300];
	struct cache *c;
	struct strata_cache_stats st;
	uint64_t limit = 20 * (BS + DISK_HDR);

	(void)state;
	snprintf(dir, sizeof(dir), "%s/bound", tmpdir);
	c = mk(0, dir, limit);
	for (uint32_t i = 0; i < 100; i++)
		put(c, key(5, 1, i), (uint8_t)i);
	stats(c, &st);
	assert_true(st.disk_bytes <= limit);
	assert_true(st.disk_evictions >= 80);
	assert_int_equal(st.disk_limit, limit);
	cache_free(c);
	memset(&st, 0, sizeof(st));
	st.stats_size = sizeof(st);
	assert_int_equal(cache_dir_stats(dir, &st), 0);
	assert_true(st.disk_bytes <= limit);
}

/* A block written by another process is read here; its counters add to
 * the node's. */
static void test_disk_shared_by_processes(void **state)
{
	char dir[300];
	struct cache *c;
	struct strata_cache_stats st;
	uint8_t buf[BS];
	int status;
	pid_t pid;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/shared", tmpdir);
	c = mk(1 << 20, dir, 1 << 20);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct cache *cc = mk(1 << 20, dir, 1 << 20);

		put(cc, key(6, 1, 0), 0x66);
		cache_free(cc);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(cache_has(c, &(struct cache_key){ 6, 1, 0, 0, BS }));
	assert_true(cache_get(c, &(struct cache_key){ 6, 1, 0, 0, BS }, 0, BS, buf));
	assert_int_equal(buf[BS / 2], 0x66);
	stats(c, &st);
	assert_int_equal(st.fill_bytes, BS);	/* the child's */
	assert_int_equal(st.disk_hits, 1);	/* ours */
	cache_free(c);
}

/* Temp files a dead process left are removed by the next scan once old;
 * a recent one (a write in progress) stays. */
static void test_stale_temp_removed(void **state)
{
	char dir[300], old[400], fresh[400];
	struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };
	FILE *f;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/tmpfiles", tmpdir);
	cache_free(mk(0, dir, 1 << 20));
	snprintf(old, sizeof(old), "%s/07/.tmp-1-1", dir);
	snprintf(fresh, sizeof(fresh), "%s/07/.tmp-1-2", dir);
	f = fopen(old, "wb");
	assert_non_null(f);
	fclose(f);
	f = fopen(fresh, "wb");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(utimensat(AT_FDCWD, old, ts, 0), 0);
	cache_free(mk(0, dir, 1 << 20));
	assert_int_not_equal(access(old, F_OK), 0);
	assert_int_equal(access(fresh, F_OK), 0);
}

static void test_stats_file_checked(void **state)
{
	char dir[300], path[400];
	struct strata_cache_stats st = { .stats_size = sizeof(st) };
	struct cache_opts o;
	struct cache *c = NULL;
	FILE *f;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/notstats", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/stats", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs("not a cache", f);
	fclose(f);
	assert_int_equal(cache_dir_stats(dir, &st), STRATA_EBADMSG);
	cache_opts_init(&o, sizeof(o));
	o.dir = dir;
	assert_int_equal(cache_new(&o, &c), STRATA_EBADMSG);
	assert_null(c);
	/* A directory others may read is refused (its blocks are file data). */
	snprintf(dir, sizeof(dir), "%s/open", tmpdir);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(chmod(dir, 0755), 0);
	o.dir = dir;
	assert_int_equal(cache_new(&o, &c), -EPERM);
	assert_null(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opts_checked),
		cmocka_unit_test(test_versioned_keys),
		cmocka_unit_test(test_mem_bound),
		cmocka_unit_test(test_scan_resistant),
		cmocka_unit_test(test_concurrent_readers_and_evictions),
		cmocka_unit_test(test_disk_tier),
		cmocka_unit_test(test_disk_corrupt_is_a_miss),
		cmocka_unit_test(test_disk_bound),
		cmocka_unit_test(test_disk_shared_by_processes),
		cmocka_unit_test(test_stale_temp_removed),
		cmocka_unit_test(test_stats_file_checked),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
