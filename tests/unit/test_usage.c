/*
 * Unit tests of the composer's metering (src/composer/usage.c): each
 * composition's holding clipped to the window, released and failed ones,
 * per-tenant sums sorted by tenant.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "composer/usage.h"

static struct comp mk(const char *tenant, uint32_t state, int64_t created, int64_t changed,
		      uint32_t gpus, uint64_t storage, uint64_t memory)
{
	struct comp c;

	memset(&c, 0, sizeof(c));
	snprintf(c.tenant, sizeof(c.tenant), "%s", tenant);
	c.state = state;
	c.created = created;
	c.changed = changed;
	c.ngpus = gpus;
	c.rq.storage = storage;
	c.rq.memory = memory;
	return c;
}

static void test_windows_and_states(void **state)
{
	struct comp v[] = {
		/* b: 2 GPUs held 1 h, released at 4600. */
		mk("b", COMP_RELEASED, 1000, 4600, 2, 1000000000000ull, 0),
		/* a: still composed since 0: counted to the window's end. */
		mk("a", COMP_COMPOSED, 0, 10, 1, 0, 2000000000ull),
		/* failed: held nothing. */
		mk("a", COMP_FAILED, 0, 5000, 8, 0, 0),
		/* b: degraded (holds) since 9000. */
		mk("b", COMP_DEGRADED, 9000, 9100, 1, 0, 0),
	};
	struct usage_row *r;
	uint32_t n;

	(void)state;
	assert_int_equal(usage_sum(v, 4, 0, 7200, &r, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(r[0].tenant, "a");
	assert_true(r[0].gpu_hours > 1.999 && r[0].gpu_hours < 2.001);
	assert_true(r[0].memory_gb_hours > 3.999 && r[0].memory_gb_hours < 4.001);
	assert_int_equal(r[0].compositions, 1);
	assert_string_equal(r[1].tenant, "b");
	assert_true(r[1].gpu_hours > 1.999 && r[1].gpu_hours < 2.001);
	assert_true(r[1].storage_tb_hours > 0.999 && r[1].storage_tb_hours < 1.001);
	assert_int_equal(r[1].compositions, 1);	/* the degraded one starts later */
	free(r);
	/* A window after b's release and before its degraded one: only a. */
	assert_int_equal(usage_sum(v, 4, 4600, 9000, &r, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(r[0].tenant, "a");
	free(r);
	/* Nothing held: no rows. */
	assert_int_equal(usage_sum(v + 2, 1, 0, 7200, &r, &n), 0);
	assert_int_equal(n, 0);
	assert_null(r);
	assert_int_equal(usage_sum(v, 4, 10, 5, &r, &n), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_and_states),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
