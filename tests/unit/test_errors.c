/*
 * Unit tests for strata_strerror(): Strata's own codes, negated errno
 * codes, zero, positive and unknown inputs.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/errors_int.h"

static const int all_codes[] = {
	STRATA_ESTALE_MAP, STRATA_EINTEGRITY, STRATA_EDIRTY, STRATA_ENOTHEAD,
	STRATA_EUNAVAIL, STRATA_EPROTOVER, STRATA_EBADMSG, STRATA_ECONFIG,
	STRATA_ESYNCING, STRATA_EBADOP, STRATA_ENEEDFULL, STRATA_ENOCRED, STRATA_ETLSREQ,
	STRATA_ETLS, STRATA_ELOST, STRATA_ENOTLEADER,
};
#define NCODES (sizeof(all_codes) / sizeof(all_codes[0]))

static void test_code_range(void **state)
{
	(void)state;
	/* The list above must cover the enum: every code from -(BASE+1) down to
	 * STRATA_ERR_LAST, once. A new code added to errors.h fails here until
	 * it is added to the list (and given a message). */
	assert_int_equal(NCODES, (size_t)(-STRATA_ERR_LAST - STRATA_ERR_BASE));
	for (size_t i = 0; i < NCODES; i++)
		assert_int_equal(all_codes[i], -(STRATA_ERR_BASE + 1 + (int)i));
}

static void test_strata_codes_distinct(void **state)
{
	(void)state;
	for (int code = -(STRATA_ERR_BASE + 1); code >= STRATA_ERR_LAST; code--) {
		const char *m = strata_strerror(code);

		assert_non_null(m);
		assert_true(strlen(m) > 5);
		assert_string_not_equal(m, "unknown strata error");
		assert_null(strstr(m, "Unknown error"));
		for (int other = code - 1; other >= STRATA_ERR_LAST; other--)
			assert_string_not_equal(m, strata_strerror(other));
	}
}

static void test_strata_codes_named(void **state)
{
	(void)state;
	/* Spot checks: the message says what the code means. */
	assert_non_null(strstr(strata_strerror(STRATA_ESTALE_MAP), "stale"));
	assert_non_null(strstr(strata_strerror(STRATA_EINTEGRITY), "checksum"));
	assert_non_null(strstr(strata_strerror(STRATA_EPROTOVER), "protocol"));
	assert_non_null(strstr(strata_strerror(STRATA_EBADMSG), "malformed"));
	assert_non_null(strstr(strata_strerror(STRATA_ECONFIG), "configuration"));
}

static void test_errno_codes(void **state)
{
	static const int errs[] = { EPERM, ENOENT, EIO, ENOMEM, EACCES, EEXIST, EINVAL,
				    ENOSPC, ERANGE, ETIMEDOUT, ECONNRESET, EAGAIN };

	(void)state;
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		assert_string_equal(strata_strerror(-errs[i]), strerror(errs[i]));
}

static void test_zero_and_positive(void **state)
{
	(void)state;
	assert_string_equal(strata_strerror(0), "success");
	assert_non_null(strata_strerror(1));
	assert_non_null(strstr(strata_strerror(1), "positive"));
	assert_non_null(strstr(strata_strerror(EIO), "positive"));
	assert_non_null(strstr(strata_strerror(INT_MAX), "positive"));
}

static void test_unknown_codes(void **state)
{
	const char *m;

	(void)state;
	/* Just past the last Strata code, and far past it. */
	assert_string_equal(strata_strerror(STRATA_ERR_LAST - 1), "unknown strata error");
	assert_string_equal(strata_strerror(-(STRATA_ERR_BASE + 1000)), "unknown strata error");
	assert_string_equal(strata_strerror(INT_MIN + 1), "unknown strata error");
	/* INT_MIN cannot be negated in an int: must not overflow. */
	assert_string_equal(strata_strerror(INT_MIN), "unknown strata error");
	/* An errno-range number no errno uses, and the base itself. */
	m = strata_strerror(-4000);
	assert_non_null(m);
	assert_true(strlen(m) > 0);
	m = strata_strerror(-STRATA_ERR_BASE);
	assert_non_null(m);
	assert_true(strlen(m) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_code_range),
		cmocka_unit_test(test_strata_codes_distinct),
		cmocka_unit_test(test_strata_codes_named),
		cmocka_unit_test(test_errno_codes),
		cmocka_unit_test(test_zero_and_positive),
		cmocka_unit_test(test_unknown_codes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
