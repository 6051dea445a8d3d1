/*
 * Unit tests of the mgmt address list (net/mgmt_addrs.h): parsing,
 * moving to the leader a follower names, to the next address on a
 * transport failure, once for several failed calls to one address, and
 * staying on other errors; the bounded call timeout of a list; the read
 * cursor, drawn apart from the leader's and moved on its own.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/errors_int.h"
#include "net/conn.h"
#include "net/mgmt_addrs.h"

static void test_parse(void **state)
{
	struct mgmt_addrs a;
	char many[40 * 20] = "";

	(void)state;
	assert_int_equal(mgmt_addrs_init(&a, "h1:1"), 0);
	assert_int_equal(a.n, 1);
	assert_string_equal(mgmt_addrs_cur(&a), "h1:1");
	assert_int_equal(mgmt_addrs_init(&a, " h1:1 , h2:2,h3:3 "), 0);
	assert_int_equal(a.n, 3);
	assert_string_equal(a.addr[1], "h2:2");
	assert_string_equal(a.addr[2], "h3:3");
	assert_int_equal(mgmt_addrs_init(&a, ""), -EINVAL);
	assert_int_equal(mgmt_addrs_init(&a, NULL), -EINVAL);
	assert_int_equal(mgmt_addrs_init(&a, "h1:1,,h2:2"), -EINVAL);
	assert_int_equal(mgmt_addrs_init(&a, "h1:1,"), -EINVAL);
	assert_int_equal(mgmt_addrs_init(&a, "x234567890123456789012345678901234567890123456789012345678901234"),
			 -EINVAL);
	for (int i = 0, n = 0; i <= MGMT_ADDRS_MAX; i++)
		n += snprintf(many + n, sizeof(many) - (size_t)n, "%sh:1", i ? "," : "");
	assert_int_equal(mgmt_addrs_init(&a, many), -EINVAL);
}

static void test_failover(void **state)
{
	struct mgmt_addrs a;
	struct rpc_msg r = { 0 };
	const char *c;

	(void)state;
	assert_int_equal(mgmt_addrs_init(&a, "h1:1,h2:2,h3:3"), 0);
	c = mgmt_addrs_cur(&a);
	/* Not a reason to go elsewhere. */
	assert_false(mgmt_addrs_failed(&a, c, -ENOENT, NULL));
	assert_false(mgmt_addrs_failed(&a, c, STRATA_EBADMSG, NULL));
	assert_string_equal(mgmt_addrs_cur(&a), "h1:1");
	/* A follower naming the leader. */
	r.body = (const uint8_t *)"h3:3";
	r.hdr.body_len = 4;
	assert_true(mgmt_addrs_failed(&a, c, STRATA_ENOTLEADER, &r));
	assert_string_equal(mgmt_addrs_cur(&a), "h3:3");
	/* A second failure of the call to h1 does not move it again. */
	assert_false(mgmt_addrs_failed(&a, c, -ECONNREFUSED, NULL));
	assert_string_equal(mgmt_addrs_cur(&a), "h3:3");
	/* The leader dies: the next one, wrapping around. */
	assert_true(mgmt_addrs_failed(&a, mgmt_addrs_cur(&a), -ECONNRESET, NULL));
	assert_string_equal(mgmt_addrs_cur(&a), "h1:1");
	/* A follower that knows no leader, or names one not in the list. */
	assert_true(mgmt_addrs_failed(&a, mgmt_addrs_cur(&a), STRATA_ENOTLEADER, NULL));
	assert_string_equal(mgmt_addrs_cur(&a), "h2:2");
	r.body = (const uint8_t *)"elsewhere:9";
	r.hdr.body_len = 11;
	assert_true(mgmt_addrs_failed(&a, mgmt_addrs_cur(&a), STRATA_ENOTLEADER, &r));
	assert_string_equal(mgmt_addrs_cur(&a), "h3:3");
	assert_true(mgmt_addrs_failed(&a, mgmt_addrs_cur(&a), -ETIMEDOUT, NULL));
	/* One address: nowhere to go. */
	assert_int_equal(mgmt_addrs_init(&a, "h1:1"), 0);
	assert_false(mgmt_addrs_failed(&a, "h1:1", -ECONNREFUSED, NULL));
	/* One mgmt: the caller's timeout; several: bounded. */
	assert_int_equal(mgmt_addrs_timeout(&a, 10000), 10000);
	assert_int_equal(mgmt_addrs_init(&a, "h1:1,h2:2"), 0);
	assert_int_equal(mgmt_addrs_timeout(&a, 10000), MGMT_ADDRS_CALL_MS);
	assert_int_equal(mgmt_addrs_timeout(&a, 500), 500);
	assert_true(mgmt_addrs_retry_elsewhere(STRATA_ENOTLEADER));
	assert_false(mgmt_addrs_retry_elsewhere(0));
}

static void test_reads_spread(void **state)
{
	struct mgmt_addrs a[64];
	struct rpc_msg r = { 0 };
	uint32_t seen[3] = { 0 };
	const char *rd;

	(void)state;
	/* Lists made at once (many clients) read from different addresses;
	 * every one's writes start at the first. */
	for (int i = 0; i < 64; i++) {
		assert_int_equal(mgmt_addrs_init(&a[i], "h1:1,h2:2,h3:3"), 0);
		assert_string_equal(mgmt_addrs_cur(&a[i]), "h1:1");
		rd = mgmt_addrs_read(&a[i]);
		seen[rd[1] - '1']++;
	}
	for (int k = 0; k < 3; k++)
		assert_true(seen[k] > 0);
	/* A failed read moves the read cursor only: to the next address, or
	 * to the leader a follower names. */
	rd = mgmt_addrs_read(&a[0]);
	assert_true(mgmt_addrs_read_failed(&a[0], rd, -ECONNREFUSED, NULL));
	assert_string_not_equal(mgmt_addrs_read(&a[0]), rd);
	assert_false(mgmt_addrs_read_failed(&a[0], rd, -ECONNREFUSED, NULL));
	assert_string_equal(mgmt_addrs_cur(&a[0]), "h1:1");
	r.body = (const uint8_t *)"h2:2";
	r.hdr.body_len = 4;
	rd = mgmt_addrs_read(&a[0]);
	if (strcmp(rd, "h2:2")) {
		assert_true(mgmt_addrs_read_failed(&a[0], rd, STRATA_ENOTLEADER, &r));
		assert_string_equal(mgmt_addrs_read(&a[0]), "h2:2");
	}
	assert_false(mgmt_addrs_read_failed(&a[0], mgmt_addrs_read(&a[0]), -ENOENT, NULL));
	assert_string_equal(mgmt_addrs_cur(&a[0]), "h1:1");
	/* One address: reads go there. */
	assert_int_equal(mgmt_addrs_init(&a[0], "h1:1"), 0);
	assert_string_equal(mgmt_addrs_read(&a[0]), "h1:1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_failover),
		cmocka_unit_test(test_reads_spread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
