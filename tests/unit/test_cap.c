/*
 * Unit tests for chunk capabilities (common/cap.h): a cap meta makes
 * passes for its ino and rights until it expires, and every edit, another
 * key, another ino, rights it lacks or its expiry refuse it; the cache
 * spares the HMAC of a cap seen before and refuses the same things.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/cap.h"

static struct cluster_key key_a, key_b;

static int setup(void **state)
{
	(void)state;
	assert_int_equal(cluster_key_generate(&key_a), 0);
	assert_int_equal(cluster_key_generate(&key_b), 0);
	return 0;
}

#define NOW 1800000000

static void test_make_check(void **state)
{
	struct chunk_cap c;

	(void)state;
	cap_make(&key_a, 42, CAP_READ | CAP_WRITE, NOW + 600, &c);
	assert_int_equal(cap_check(&key_a, &c, 42, CAP_READ, NOW), 0);
	assert_int_equal(cap_check(&key_a, &c, 42, CAP_WRITE, NOW), 0);
	assert_int_equal(cap_check(&key_a, &c, 42, CAP_READ | CAP_WRITE, NOW + 599), 0);
	/* Expired, another ino, another cluster. */
	assert_int_equal(cap_check(&key_a, &c, 42, CAP_READ, NOW + 600), -EACCES);
	assert_int_equal(cap_check(&key_a, &c, 43, CAP_READ, NOW), -EACCES);
	assert_int_equal(cap_check(&key_b, &c, 42, CAP_READ, NOW), -EACCES);
}

static void test_rights(void **state)
{
	struct chunk_cap r, w;

	(void)state;
	cap_make(&key_a, 7, CAP_READ, NOW + 600, &r);
	cap_make(&key_a, 7, CAP_WRITE, NOW + 600, &w);
	assert_int_equal(cap_check(&key_a, &r, 7, CAP_READ, NOW), 0);
	assert_int_equal(cap_check(&key_a, &r, 7, CAP_WRITE, NOW), -EACCES);
	assert_int_equal(cap_check(&key_a, &w, 7, CAP_WRITE, NOW), 0);
	assert_int_equal(cap_check(&key_a, &w, 7, CAP_READ, NOW), -EACCES);
	/* The zero cap daemons send is nothing to a client. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(cap_check(&key_a, &r, 0, 0, 0), -EACCES);
}

static void test_edits(void **state)
{
	struct chunk_cap c, e;

	(void)state;
	cap_make(&key_a, 42, CAP_READ, NOW + 600, &c);
	e = c;
	e.rights = CAP_READ | CAP_WRITE;	/* widened */
	assert_int_equal(cap_check(&key_a, &e, 42, CAP_READ, NOW), -EACCES);
	e = c;
	e.expiry += 3600;			/* extended */
	assert_int_equal(cap_check(&key_a, &e, 42, CAP_READ, NOW), -EACCES);
	e = c;
	e.ino = 43;				/* moved to another file */
	assert_int_equal(cap_check(&key_a, &e, 43, CAP_READ, NOW), -EACCES);
	for (int i = 0; i < CAP_MAC_LEN; i++) {
		e = c;
		e.mac[i] ^= 1;
		assert_int_equal(cap_check(&key_a, &e, 42, CAP_READ, NOW), -EACCES);
	}
	e = c;
	e.rights = 4;				/* an unknown right */
	assert_int_equal(cap_check(&key_a, &e, 42, CAP_READ, NOW), -EACCES);
}

static void test_cache(void **state)
{
	struct cap_cache cc;
	struct chunk_cap c, e;

	(void)state;
	cap_cache_init(&cc);
	cap_make(&key_a, 42, CAP_READ, NOW + 600, &c);
	assert_int_equal(cap_cache_check(&cc, &key_a, &c, 42, CAP_READ, NOW), 0);
	assert_int_equal(cc.misses, 1);
	for (int i = 0; i < 10; i++)
		assert_int_equal(cap_cache_check(&cc, &key_a, &c, 42, CAP_READ, NOW), 0);
	assert_int_equal(cc.hits, 10);
	assert_int_equal(cc.misses, 1);
	/* A cached cap is still checked for ino, rights and expiry. */
	assert_int_equal(cap_cache_check(&cc, &key_a, &c, 43, CAP_READ, NOW), -EACCES);
	assert_int_equal(cap_cache_check(&cc, &key_a, &c, 42, CAP_WRITE, NOW), -EACCES);
	assert_int_equal(cap_cache_check(&cc, &key_a, &c, 42, CAP_READ, NOW + 600), -EACCES);
	/* An edit of a cached cap misses and fails the HMAC. */
	e = c;
	e.mac[31] ^= 0x80;
	assert_int_equal(cap_cache_check(&cc, &key_a, &e, 42, CAP_READ, NOW), -EACCES);
	e = c;
	e.expiry++;
	assert_int_equal(cap_cache_check(&cc, &key_a, &e, 42, CAP_READ, NOW), -EACCES);
	/* ...and does not evict the good one. */
	assert_int_equal(cap_cache_check(&cc, &key_a, &c, 42, CAP_READ, NOW), 0);
	assert_int_equal(cc.misses, 3);
	/* Caps of many files share the slots. */
	for (uint64_t ino = 1000; ino < 1000 + 4 * CAP_CACHE_SLOTS; ino++) {
		cap_make(&key_a, ino, CAP_WRITE, NOW + 600, &e);
		assert_int_equal(cap_cache_check(&cc, &key_a, &e, ino, CAP_WRITE, NOW), 0);
		assert_int_equal(cap_cache_check(&cc, &key_a, &e, ino, CAP_WRITE, NOW), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_make_check),
		cmocka_unit_test(test_rights),
		cmocka_unit_test(test_edits),
		cmocka_unit_test(test_cache),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
