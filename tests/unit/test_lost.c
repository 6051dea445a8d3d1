/*
 * Unit tests for mgmt's set of lost chunks (src/mgmt/lost.c): reports add,
 * renew and remove entries, other errors are ignored, and entries not
 * reported again within LOST_FORGET_MS are forgotten.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mgmt/lost.h"
#include "common/errors_int.h"

static void test_report_and_clear(void **state)
{
	struct lost_set s;

	(void)state;
	lost_init(&s);
	assert_int_equal(lost_count(&s, 0), 0);
	/* Three replicas report the same chunk: one lost chunk. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(lost_report(&s, 7, 0, STRATA_ELOST, 100), 0);
	assert_int_equal(lost_report(&s, 7, 1, STRATA_ELOST, 100), 0);
	assert_int_equal(lost_count(&s, 100), 2);
	/* Integrity errors of single replicas are not losses. */
	assert_int_equal(lost_report(&s, 8, 0, STRATA_EINTEGRITY, 100), 0);
	assert_int_equal(lost_count(&s, 100), 2);
	/* Repaired or removed. */
	assert_int_equal(lost_report(&s, 7, 0, 0, 200), 0);
	assert_int_equal(lost_count(&s, 200), 1);
	assert_int_equal(lost_report(&s, 9, 9, 0, 200), 0);
	assert_int_equal(lost_count(&s, 200), 1);
	lost_release(&s);
}

static void test_forgotten_unless_repeated(void **state)
{
	struct lost_set s;

	(void)state;
	lost_init(&s);
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(lost_report(&s, 1, i, STRATA_ELOST, 1000), 0);
	/* Half of them are repeated later: the others are forgotten. */
	for (uint64_t i = 0; i < 50; i++)
		assert_int_equal(lost_report(&s, 1, i, STRATA_ELOST, 1000 + LOST_FORGET_MS), 0);
	assert_int_equal(lost_count(&s, 1000 + LOST_FORGET_MS), 100);
	assert_int_equal(lost_count(&s, 1001 + LOST_FORGET_MS), 50);
	assert_int_equal(lost_count(&s, 1001 + 2 * LOST_FORGET_MS), 0);
	lost_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_and_clear),
		cmocka_unit_test(test_forgotten_unless_repeated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
