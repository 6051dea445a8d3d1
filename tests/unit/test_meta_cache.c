/*
 * Unit tests for src/client/meta_cache.c: hits and negative entries, the
 * epoch that drops everything and refuses answers that raced a change,
 * expiry, the size bound, the settings' bounds, and threads that look up,
 * fill and drop at once (every hit must be the key's own answer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include <cmocka.h>

#include "../../src/client/meta_cache.c"

static struct mt_inode inode_of(uint64_t ino)
{
	struct mt_inode in;

	memset(&in, 0, sizeof(in));
	in.ino = ino;
	in.gen = ino * 7 + 1;
	in.size = ino * 3;
	return in;
}

static void test_bad_settings(void **state)
{
	struct mcache *c = NULL;

	(void)state;
	assert_int_equal(mcache_new(0, 1024, &c), -EINVAL);
	assert_int_equal(mcache_new(MCACHE_TTL_MAX_MS + 1, 1024, &c), -EINVAL);
	assert_int_equal(mcache_new(1000, MCACHE_ENTRIES_MIN - 1, &c), -EINVAL);
	assert_int_equal(mcache_new(1000, MCACHE_ENTRIES_MAX + 1, &c), -EINVAL);
	assert_null(c);
	mcache_free(NULL);
}

static void test_hit_negative_and_kinds(void **state)
{
	struct mcache *c;
	struct mt_inode in = inode_of(42), got;
	struct mcache_stats st;
	uint64_t e;

	(void)state;
	assert_int_equal(mcache_new(60000, 64, &c), 0);
	assert_int_equal(mcache_get(c, MCACHE_PATH, "/a", 2, &got), 1);
	e = mcache_epoch(c);
	mcache_put(c, MCACHE_PATH, "/a", 2, e, 0, &in);
	mcache_put(c, MCACHE_PATH, "/none", 5, e, -ENOENT, NULL);
	mcache_put(c, MCACHE_PATH, "/eio", 4, e, -EIO, NULL);	/* not kept */
	assert_int_equal(mcache_get(c, MCACHE_PATH, "/a", 2, &got), 0);
	assert_int_equal(got.ino, 42);
	assert_int_equal(got.size, 126);
	assert_int_equal(mcache_get(c, MCACHE_PATH, "/none", 5, &got), -ENOENT);
	assert_int_equal(mcache_get(c, MCACHE_PATH, "/eio", 4, &got), 1);
	/* The same bytes under another kind are another key. */
	assert_int_equal(mcache_get(c, MCACHE_LPATH, "/a", 2, &got), 1);
	/* A prefix is another key. */
	assert_int_equal(mcache_get(c, MCACHE_PATH, "/", 1, &got), 1);
	mcache_stats(c, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.neg_hits, 1);
	assert_int_equal(st.misses, 4);
	assert_int_equal(st.inserts, 2);
	mcache_free(c);
}

static void test_epoch_drops_and_refuses_raced_answers(void **state)
{
	struct mcache *c;
	struct mt_inode in = inode_of(7), got;
	uint64_t before;

	(void)state;
	assert_int_equal(mcache_new(60000, 64, &c), 0);
	mcache_put(c, MCACHE_NAME, "k", 1, mcache_epoch(c), 0, &in);
	assert_int_equal(mcache_get(c, MCACHE_NAME, "k", 1, &got), 0);
	mcache_drop_all(c);
	assert_int_equal(mcache_get(c, MCACHE_NAME, "k", 1, &got), 1);
	/* An answer asked before a change and put after it is not kept. */
	before = mcache_epoch(c);
	mcache_drop_all(c);
	mcache_put(c, MCACHE_NAME, "k", 1, before, 0, &in);
	assert_int_equal(mcache_get(c, MCACHE_NAME, "k", 1, &got), 1);
	mcache_put(c, MCACHE_NAME, "k", 1, mcache_epoch(c), -ENOENT, NULL);
	assert_int_equal(mcache_get(c, MCACHE_NAME, "k", 1, &got), -ENOENT);
	mcache_free(c);
}

static void test_expiry(void **state)
{
	struct mcache *c;
	struct mt_inode in = inode_of(9), got;
	struct timespec ts = { 0, 30 * 1000 * 1000 };
	uint64_t t0, t1;

	(void)state;
	assert_int_equal(mcache_new(20, 64, &c), 0);
	t0 = mono_ms();
	mcache_put(c, MCACHE_HANDLE, "h", 1, mcache_epoch(c), 0, &in);
	t1 = mono_ms();		/* the entry expires from t0 + 20 to t1 + 20 */
	if (mono_ms() - t0 < 10)	/* a slow machine may have taken the 20 ms */
		assert_int_equal(mcache_get(c, MCACHE_HANDLE, "h", 1, &got), 0);
	while (mono_ms() <= t1 + 20)
		nanosleep(&ts, NULL);
	assert_int_equal(mcache_get(c, MCACHE_HANDLE, "h", 1, &got), 1);
	mcache_free(c);
}

static void test_bounded(void **state)
{
	struct mcache *c;
	struct mcache_stats st;
	struct mt_inode got;
	char key[32];
	int held = 0;

	(void)state;
	assert_int_equal(mcache_new(60000, 64, &c), 0);
	for (uint64_t i = 0; i < 1000; i++) {
		struct mt_inode in = inode_of(i);
		int n = snprintf(key, sizeof(key), "/f%llu", (unsigned long long)i);

		mcache_put(c, MCACHE_PATH, key, (size_t)n, mcache_epoch(c), 0, &in);
	}
	for (uint64_t i = 0; i < 1000; i++) {
		int n = snprintf(key, sizeof(key), "/f%llu", (unsigned long long)i);
		int rc = mcache_get(c, MCACHE_PATH, key, (size_t)n, &got);

		assert_true(rc == 0 || rc == 1);
		if (rc == 0) {
			assert_int_equal(got.ino, i);
			held++;
		}
	}
	assert_true(held > 0 && held <= 64);
	mcache_stats(c, &st);
	assert_int_equal(st.inserts, 1000);
	assert_int_equal(st.evictions, 1000 - 64);
	mcache_free(c);
}

struct hammer {
	struct mcache *c;
	unsigned seed;
	int bad;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	struct mt_inode got;
	char key[32];

	for (int i = 0; i < 200000; i++) {
		uint64_t k;
		int n, rc;

		h->seed = h->seed * 1103515245u + 12345u;
		k = (h->seed >> 8) % 500;
		n = snprintf(key, sizeof(key), "/k%llu", (unsigned long long)k);
		rc = mcache_get(h->c, MCACHE_PATH, key, (size_t)n, &got);
		if (rc == 0 && (got.ino != k || got.size != k * 3))
			h->bad++;
		if (rc == -ENOENT && k % 2 == 0)
			h->bad++;
		if (rc == 1) {
			struct mt_inode in = inode_of(k);
			uint64_t e = mcache_epoch(h->c);

			mcache_put(h->c, MCACHE_PATH, key, (size_t)n, e, k % 2 ? -ENOENT : 0, &in);
		}
		if ((h->seed >> 4) % 1000 == 0)
			mcache_drop_all(h->c);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct hammer h[4];
	pthread_t t[4];
	struct mcache *c;
	struct mcache_stats st;

	(void)state;
	assert_int_equal(mcache_new(60000, 256, &c), 0);
	for (int i = 0; i < 4; i++) {
		h[i] = (struct hammer){ c, (unsigned)i * 7919u + 1, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(h[i].bad, 0);
	}
	mcache_stats(c, &st);
	assert_int_equal(st.hits + st.neg_hits + st.misses, 800000);
	assert_true(st.hits > 0 && st.neg_hits > 0);
	mcache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_settings),
		cmocka_unit_test(test_hit_negative_and_kinds),
		cmocka_unit_test(test_epoch_drops_and_refuses_raced_answers),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
