/*
 * Unit tests of deterministic file placement: the mixing function's known
 * answers, pinned chain indexes (a change to placement must be deliberate:
 * it moves every existing file's chunks), distinct chains per file, even
 * spread, layout_check bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <cmocka.h>

#include "common/layout.h"
#include "common/rand.h"

static void test_mix64_known_answers(void **state)
{
	/* First outputs of SplitMix64 seeded with 0: the reference
	 * generator's state after n steps is n * golden gamma. */
	static const uint64_t want[3] = { 0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull,
					  0x06c45d188009454full };
	uint64_t st = 0;

	(void)state;
	for (uint64_t i = 0; i < 3; i++)
		assert_true(splitmix64(i * SPLITMIX64_GAMMA) == want[i]);
	/* The generator is the same sequence (rng_next is the reference
	 * SplitMix64 generator). */
	for (int i = 0; i < 3; i++)
		assert_true(rng_next(&st) == want[i]);
	assert_true(st == 3 * SPLITMIX64_GAMMA);
}

static void test_pinned(void **state)
{
	struct file_layout l = { .chunk_size = 1u << 20, .stripe = 16, .table_len = 100,
				 .seed = 42 };
	static const uint32_t pin42[8] = { 13, 96, 79, 62, 45, 28, 11, 94 };
	struct file_layout l2 = { .chunk_size = 1u << 20, .stripe = 3, .table_len = 7,
				  .seed = 0xdeadbeefcafeull };
	static const uint32_t pin2[6] = { 1, 0, 6, 1, 0, 6 };

	(void)state;
	assert_int_equal(layout_check(&l), 0);
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(layout_chain_index(&l, i), pin42[i]);
	/* Chunk i and i + stripe share a chain. */
	assert_int_equal(layout_chain_index(&l, 16), pin42[0]);
	assert_int_equal(layout_chain_index(&l, 16 * 1000003ull + 5), pin42[5]);
	for (uint32_t i = 0; i < 6; i++)
		assert_int_equal(layout_chain_index(&l2, i), pin2[i]);
}

static void test_distinct_chains(void **state)
{
	(void)state;
	for (uint32_t t = 1; t <= 64; t++)
		for (uint64_t seed = 0; seed < 50; seed++) {
			struct file_layout l = { .chunk_size = 1u << 16, .table_len = t,
						 .seed = seed * 7919 };
			uint8_t seen[64] = { 0 };

			l.stripe = t;
			assert_int_equal(layout_check(&l), 0);
			for (uint32_t i = 0; i < t; i++) {
				uint32_t c = layout_chain_index(&l, i);

				assert_true(c < t);
				assert_int_equal(seen[c], 0);
				seen[c] = 1;
			}
		}
}

static void test_spread(void **state)
{
	enum { T = 97, FILES = 20000, STRIPE = 4 };
	static uint32_t hits[T];
	uint32_t mn = UINT32_MAX, mx = 0;

	(void)state;
	for (uint64_t f = 0; f < FILES; f++) {
		struct file_layout l = { .chunk_size = 1u << 20, .stripe = STRIPE,
					 .table_len = T, .seed = f };

		for (uint32_t i = 0; i < STRIPE; i++)
			hits[layout_chain_index(&l, i)]++;
	}
	for (uint32_t c = 0; c < T; c++) {
		mn = hits[c] < mn ? hits[c] : mn;
		mx = hits[c] > mx ? hits[c] : mx;
	}
	/* Mean 824.7; a fair spread stays well within +-15%. */
	assert_true(mn > FILES * STRIPE / T * 85 / 100);
	assert_true(mx < FILES * STRIPE / T * 115 / 100);
}

/* A layout that places every chunk on one chosen chain, for each chain of
 * tables of several lengths. */
static void test_for_chain(void **state)
{
	struct file_layout l;

	(void)state;
	for (uint32_t t = 1; t <= 300; t += 37) {
		for (uint32_t c = 0; c < t; c++) {
			assert_int_equal(layout_for_chain(t, c, 65536, &l), 0);
			assert_int_equal(layout_check(&l), 0);
			assert_int_equal(layout_chain_index(&l, 0), c);
			assert_int_equal(layout_chain_index(&l, 12345), c);
		}
		assert_int_equal(layout_for_chain(t, t, 65536, &l), -EINVAL);
	}
	assert_int_equal(layout_for_chain(0, 0, 65536, &l), -EINVAL);
}

static void test_check(void **state)
{
	struct file_layout l = { .chunk_size = 1u << 16, .stripe = 1, .table_len = 1 };

	(void)state;
	assert_int_equal(layout_check(&l), 0);
	l.chunk_size = 1u << 26;
	assert_int_equal(layout_check(&l), 0);
	l.chunk_size = 1u << 27;
	assert_int_equal(layout_check(&l), -EINVAL);
	l.chunk_size = 1u << 15;
	assert_int_equal(layout_check(&l), -EINVAL);
	l.chunk_size = (1u << 20) + 4096;
	assert_int_equal(layout_check(&l), -EINVAL);
	l.chunk_size = 1u << 20;
	l.stripe = 0;
	assert_int_equal(layout_check(&l), -EINVAL);
	l.stripe = 2;
	assert_int_equal(layout_check(&l), -EINVAL);
	l.table_len = 1000;
	l.stripe = 256;
	assert_int_equal(layout_check(&l), 0);
	l.stripe = 257;
	assert_int_equal(layout_check(&l), -EINVAL);
	l.table_len = 0;
	l.stripe = 1;
	assert_int_equal(layout_check(&l), -EINVAL);
	/* Unchecked bad layouts do not divide by zero. */
	assert_int_equal(layout_chain_index(&l, 5), 0);
	assert_int_equal(layout_chunk_of(&(struct file_layout){ .chunk_size = 1u << 20 },
					 (5u << 20) + 1), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mix64_known_answers),
		cmocka_unit_test(test_pinned),
		cmocka_unit_test(test_distinct_chains),
		cmocka_unit_test(test_spread),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_for_chain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
