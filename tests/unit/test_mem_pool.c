/* Unit tests of the mem service's object store (src/mem/mem_pool.c):
 * put/get/remove, leases and pins against eviction, LRU order, the
 * all-or-nothing refusal of a put that cannot fit, namespace charges and
 * quotas, and concurrent put/get/evict. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "mem/mem_pool.h"

#define KB 1024u
/* A 4 KiB value is charged 4 KiB plus a header; capacity for ~10 of them. */
#define CAP (10 * 4 * KB + 10 * 200)

static struct mem_pool *new_pool(uint64_t cap, bool evict)
{
	struct mem_pool_opts o;
	struct mem_pool *p = NULL;

	mem_pool_opts_init(&o, sizeof(o));
	o.capacity = cap;
	o.evict = evict;
	o.high_pct = 100;
	o.low_pct = 100;
	assert_int_equal(mem_pool_new(&o, &p), 0);
	return p;
}

static int put_val(struct mem_pool *p, const char *key, uint8_t fill, size_t len, unsigned fl)
{
	uint8_t buf[8192];

	memset(buf, fill, len);
	return mem_pool_put_copy(p, key, strlen(key), buf, len, fl, MEM_NO_QUOTA);
}

static int put_q(struct mem_pool *p, const char *key, size_t len, uint64_t quota)
{
	uint8_t buf[8192];

	memset(buf, 1, len);
	return mem_pool_put_copy(p, key, strlen(key), buf, len, 0, quota);
}

static bool has(struct mem_pool *p, const char *key)
{
	return mem_pool_exists(p, key, strlen(key), NULL) == 0;
}

static void test_basic(void **state)
{
	struct mem_pool *p = new_pool(1 << 20, true);
	struct mem_obj *o;
	uint64_t len;

	(void)state;
	assert_int_equal(put_val(p, "a", 7, 100, 0), 0);
	assert_int_equal(mem_pool_get(p, "a", 1, &o), 0);
	assert_int_equal(o->len, 100);
	assert_int_equal(((uint8_t *)o->data)[99], 7);
	mem_obj_release(o);
	assert_int_equal(mem_pool_exists(p, "a", 1, &len), 0);
	assert_int_equal(len, 100);
	assert_int_equal(put_val(p, "a", 8, 50, MEM_PUT_NX), -EEXIST);
	assert_int_equal(put_val(p, "a", 8, 50, 0), 0);
	assert_int_equal(mem_pool_exists(p, "a", 1, &len), 0);
	assert_int_equal(len, 50);
	assert_int_equal(mem_pool_get(p, "b", 1, &o), -ENOENT);
	assert_int_equal(mem_pool_remove(p, "a", 1), 0);
	assert_int_equal(mem_pool_remove(p, "a", 1), -ENOENT);
	assert_int_equal(mem_pool_pin(p, "a", 1, true), -ENOENT);
	mem_pool_free(p);
}

static void test_bad_input(void **state)
{
	struct mem_pool *p = new_pool(CAP, true);
	char key[MEM_KEY_MAX + 2];

	(void)state;
	memset(key, 'k', sizeof(key));
	assert_int_equal(put_val(p, "keep", 1, 4096, 0), 0);
	assert_int_equal(mem_pool_put_copy(p, key, MEM_KEY_MAX + 1, "x", 1, 0, MEM_NO_QUOTA), -ENAMETOOLONG);
	assert_int_equal(mem_pool_put_copy(p, key, 0, "x", 1, 0, MEM_NO_QUOTA), -EINVAL);
	assert_int_equal(mem_pool_check(p, 1, CAP + 1), -E2BIG);
	assert_int_equal(mem_pool_check(p, 1, MEM_VALUE_MAX + 1), -E2BIG);
	assert_true(has(p, "keep"));
	mem_pool_free(p);
}

static int count_cb(void *arg, const char *key, size_t klen, uint64_t len)
{
	(void)key;
	(void)klen;
	(void)len;
	(*(int *)arg)++;
	return 0;
}

static void test_list(void **state)
{
	struct mem_pool *p = new_pool(1 << 20, true);
	int n = 0;

	(void)state;
	put_val(p, "layer/1", 1, 10, 0);
	put_val(p, "layer/2", 1, 10, 0);
	put_val(p, "other", 1, 10, 0);
	assert_int_equal(mem_pool_list(p, "layer/", 6, 100, count_cb, &n), 2);
	assert_int_equal(n, 2);
	n = 0;
	assert_int_equal(mem_pool_list(p, "", 0, 100, count_cb, &n), 3);
	mem_pool_free(p);
}

/* LRU: the least recently used goes first; a get refreshes. */
static void test_lru(void **state)
{
	struct mem_pool *p = new_pool(CAP, true);
	struct mem_obj *o;
	char k[16];

	(void)state;
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(put_val(p, k, (uint8_t)i, 4096, 0), 0);
	}
	assert_int_equal(mem_pool_get(p, "k0", 2, &o), 0);	/* k0 is now recent */
	mem_obj_release(o);
	assert_int_equal(put_val(p, "new", 1, 4096, 0), 0);
	assert_true(has(p, "k0"));
	assert_false(has(p, "k1"));
	assert_true(has(p, "new"));
	mem_pool_free(p);
}

/* A leased or pinned object is never evicted; a put that cannot fit is
 * refused and evicts nothing. */
static void test_lease_pin(void **state)
{
	struct mem_pool *p = new_pool(CAP, true);
	struct mem_pool_stats st;
	struct mem_obj *lease;
	char k[16];

	(void)state;
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(put_val(p, k, (uint8_t)i, 4096, i < 5 ? MEM_PUT_PIN : 0), 0);
	}
	assert_int_equal(mem_pool_get(p, "k5", 2, &lease), 0);
	/* Room for 4 more by evicting k6..k9; k5 is leased, k0..k4 pinned. */
	for (int i = 0; i < 4; i++) {
		snprintf(k, sizeof(k), "n%d", i);
		assert_int_equal(put_val(p, k, 0xee, 4096, 0), 0);
	}
	for (int i = 0; i < 6; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_true(has(p, k));
	}
	/* Pool full of pinned/leased/recent: n0..n3 are evictable, so make
	 * them pinned too; then a put must fail and lose nothing. */
	for (int i = 0; i < 4; i++) {
		snprintf(k, sizeof(k), "n%d", i);
		assert_int_equal(mem_pool_pin(p, k, 2, true), 0);
	}
	assert_int_equal(put_val(p, "x", 1, 4096, 0), -ENOSPC);
	mem_pool_stats(p, &st);
	assert_int_equal(st.objects, 10);
	assert_int_equal(st.refused, 1);
	assert_int_equal(((uint8_t *)lease->data)[0], 5);
	/* Removing a leased object keeps the reader's bytes until release. */
	assert_int_equal(mem_pool_remove(p, "k5", 2), 0);
	assert_int_equal(((uint8_t *)lease->data)[4095], 5);
	mem_obj_release(lease);
	assert_int_equal(put_val(p, "x", 1, 4096, 0), 0);
	mem_pool_free(p);
}

static void test_noevict(void **state)
{
	struct mem_pool *p = new_pool(CAP, false);
	char k[16];

	(void)state;
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(put_val(p, k, 1, 4096, 0), 0);
	}
	assert_int_equal(put_val(p, "x", 1, 4096, 0), -ENOSPC);
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_true(has(p, k));
	}
	mem_pool_free(p);
}

struct worker {
	struct mem_pool *p;
	int id;
	int bad;
};

/* Each value is filled with one byte derived from its key and version; a
 * reader checks every byte of what it got under its lease. */
static void *hammer(void *arg)
{
	struct worker *w = arg;
	uint8_t buf[8192];
	char k[16];

	for (int i = 0; i < 20000; i++) {
		int key = (i * 7 + w->id * 13) % 64;
		struct mem_obj *o;

		snprintf(k, sizeof(k), "k%d", key);
		if (i % 3 == 0) {
			memset(buf, key, sizeof(buf));
			mem_pool_put_copy(w->p, k, strlen(k), buf, 1024 + (size_t)(i % 7) * 1024, 0,
					  MEM_NO_QUOTA);
		} else if (i % 17 == 0) {
			mem_pool_remove(w->p, k, strlen(k));
		} else if (mem_pool_get(w->p, k, strlen(k), &o) == 0) {
			for (uint64_t b = 0; b < o->len; b++)
				w->bad += ((uint8_t *)o->data)[b] != key;
			mem_obj_release(o);
		}
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct mem_pool_opts o;
	struct mem_pool *p;
	struct mem_pool_stats st;
	pthread_t th[4];
	struct worker w[4];

	(void)state;
	mem_pool_opts_init(&o, sizeof(o));
	o.capacity = 96 * KB;	/* much smaller than the working set: evicts */
	assert_int_equal(mem_pool_new(&o, &p), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ p, i, 0 };
		pthread_create(&th[i], NULL, hammer, &w[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	mem_pool_stats(p, &st);
	assert_true(st.evictions > 0);
	assert_true(st.used <= o.capacity);
	assert_int_equal(st.leased, 0);
	mem_pool_free(p);
}

static int spilled;

static void on_evict(void *arg, struct mem_obj *o)
{
	(void)arg;
	spilled++;
	mem_obj_release(o);
}

static void test_evict_hook_watermarks(void **state)
{
	struct mem_pool_opts o;
	struct mem_pool *p;
	struct mem_pool_stats st;
	char k[16];

	(void)state;
	mem_pool_opts_init(&o, sizeof(o));
	o.capacity = 100 * 4400;
	o.high_pct = 50;
	o.low_pct = 25;
	o.on_evict = on_evict;
	assert_int_equal(mem_pool_new(&o, &p), 0);
	for (int i = 0; i < 60; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(put_val(p, k, 1, 4096, 0), 0);
	}
	mem_pool_stats(p, &st);
	assert_true(spilled > 0);
	assert_int_equal(st.evictions, (uint64_t)spilled);
	assert_true(st.used <= o.capacity / 2);
	mem_pool_free(p);
}

/* The charge of key "t1/k" with a len-byte value, as the pool counts it:
 * measured, so that the quota below is exact. */
static uint64_t charge_of(size_t len)
{
	struct mem_pool *p = new_pool(1 << 20, true);
	struct mem_ns_stat st;
	uint64_t c;

	assert_int_equal(put_q(p, "t1/k", len, MEM_NO_QUOTA), 0);
	assert_int_equal(mem_pool_ns_stats(p, &st, 1), 1);
	c = st.used;
	mem_pool_free(p);
	return c;
}

static void test_ns_quota(void **state)
{
	struct mem_pool *p = new_pool(1 << 20, true);
	uint64_t c = charge_of(4 * KB);
	struct mem_ns_stat st[4];
	struct mem_obj *o;

	(void)state;
	/* Exactly three fit under a quota of three charges; the fourth is
	 * refused and stores nothing. */
	assert_int_equal(put_q(p, "t1/a", 4 * KB, 3 * c), 0);
	assert_int_equal(put_q(p, "t1/b", 4 * KB, 3 * c), 0);
	assert_int_equal(put_q(p, "t1/c", 4 * KB, 3 * c), 0);
	assert_int_equal(put_q(p, "t1/d", 4 * KB, 3 * c), -EDQUOT);
	assert_false(has(p, "t1/d"));
	assert_int_equal(put_q(p, "t1/d", 4 * KB, 3 * c - 1), -EDQUOT);
	/* Replacing a key counts the bytes it frees. */
	assert_int_equal(put_q(p, "t1/a", 4 * KB, 3 * c), 0);
	/* ... unless a reader holds the old value: it stays charged. */
	assert_int_equal(mem_pool_get(p, "t1/b", 4, &o), 0);
	assert_int_equal(put_q(p, "t1/b", 4 * KB, 3 * c), -EDQUOT);
	mem_obj_release(o);
	assert_int_equal(put_q(p, "t1/b", 4 * KB, 3 * c), 0);
	/* Other namespaces, keys without one, and no quota are separate. */
	assert_int_equal(put_q(p, "t2/a", 4 * KB, c), 0);
	assert_int_equal(put_q(p, "t2/b", 4 * KB, c), -EDQUOT);
	assert_int_equal(put_q(p, "plain", 4 * KB, MEM_NO_QUOTA), 0);
	assert_int_equal(put_q(p, "t1/e", 4 * KB, MEM_NO_QUOTA), 0);
	assert_int_equal(mem_pool_ns_stats(p, st, 4), 2);
	assert_string_equal(st[0].ns, "t1");
	assert_int_equal(st[0].used, 4 * c);
	assert_int_equal(st[0].objects, 4);
	assert_string_equal(st[1].ns, "t2");
	assert_int_equal(st[1].used, c);
	/* Removal gives the room back; an empty namespace disappears. */
	assert_int_equal(mem_pool_remove(p, "t1/e", 4), 0);
	assert_int_equal(mem_pool_remove(p, "t1/a", 4), 0);
	assert_int_equal(put_q(p, "t1/d", 4 * KB, 3 * c), 0);
	assert_int_equal(mem_pool_remove(p, "t2/a", 4), 0);
	assert_int_equal(mem_pool_ns_stats(p, st, 4), 1);
	mem_pool_free(p);
}

/* An evicted object leaves its namespace's charge. */
static void test_ns_eviction(void **state)
{
	struct mem_pool *p = new_pool(CAP, true);
	struct mem_pool_stats ps;
	struct mem_ns_stat st;
	char key[16];

	(void)state;
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "t1/%d", i);
		assert_int_equal(put_val(p, key, 1, 4 * KB, 0), 0);
	}
	assert_int_equal(mem_pool_ns_stats(p, &st, 1), 1);
	mem_pool_stats(p, &ps);
	assert_true(ps.evictions > 0);
	assert_int_equal(st.used, ps.used);
	assert_int_equal(st.objects, ps.objects);
	mem_pool_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_lru),
		cmocka_unit_test(test_lease_pin),
		cmocka_unit_test(test_noevict),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_ns_quota),
		cmocka_unit_test(test_ns_eviction),
		cmocka_unit_test(test_evict_hook_watermarks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
