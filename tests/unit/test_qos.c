/*
 * Unit tests for storage QoS (storage/qos.h): the token bucket in its
 * GCRA form (bursts, the rate held over any window, deadlines that never
 * decrease, both resources, caps of 0, idle time not hoarded, the clamp),
 * and the credential table (one bucket per id, slots of idle credentials
 * reused, a full window paced in the shared bucket and counted). Time is
 * simulated: every call is given its "now".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "storage/qos.h"

#define MS 1000000ull
#define S 1000000000ull
#define MIB (1ull << 20)

static void test_burst_then_rate(void **state)
{
	struct qos_bucket b = { 0 };
	struct qos_caps c = { .bw = 10 * MIB };
	uint64_t now = 5 * S;

	(void)state;
	/* 100 ms worth passes at once, the next waits its own time. */
	assert_int_equal(qos_bucket_charge(&b, &c, MIB, 1, now, 100 * MS), 0);
	assert_int_equal(qos_bucket_charge(&b, &c, MIB, 1, now, 100 * MS), 100 * MS);
	assert_int_equal(qos_bucket_charge(&b, &c, MIB, 1, now, 100 * MS), 200 * MS);
	/* A request larger than the burst waits even from idle. */
	memset(&b, 0, sizeof(b));
	assert_int_equal(qos_bucket_charge(&b, &c, 3 * MIB, 1, now, 100 * MS), 200 * MS);
	/* No cap: nothing is charged. */
	c.bw = 0;
	memset(&b, 0, sizeof(b));
	for (int i = 0; i < 1000; i++)
		assert_int_equal(qos_bucket_charge(&b, &c, 64 * MIB, 1, now, 100 * MS), 0);
	assert_true(qos_bucket_idle(&b, now));
}

/*
 * A greedy client: a request of a random size arrives whenever the one
 * before it was admitted (and sometimes several at once). Over every
 * window [0, T], what was admitted is at most rate * (T + burst), and at
 * least rate * T less one request: the cap holds, and is not undercut.
 */
static void test_rate_holds_over_any_window(void **state)
{
	struct qos_bucket b = { 0 };
	struct qos_caps c = { .bw = 20 * MIB };
	uint64_t t0 = 1 * S, now = t0, admitted = 0, last_due = 0, seed = 12345;
	const uint64_t burst = 100 * MS;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		uint64_t len, wait, due;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		len = 4096 + (seed >> 33) % (4 * MIB);
		wait = qos_bucket_charge(&b, &c, len, 1, now, burst);
		due = now + wait;
		assert_true(due >= last_due);	/* never reordered */
		last_due = due;
		admitted += len;
		/* Admitted by due: within rate * (due - t0 + burst). */
		assert_true((double)admitted <=
			    (double)c.bw * ((double)(due - t0 + burst) / S) + 1.0);
		if (due - t0 > burst)
			assert_true((double)admitted + 4.0 * MIB >=
				    (double)c.bw * ((double)(due - t0) / S));
		if ((seed >> 20) % 4)	/* mostly waits for it; else piles on */
			now = due;
	}
}

static void test_iops_and_both(void **state)
{
	struct qos_bucket b = { 0 };
	struct qos_caps c = { .iops = 100 };
	uint64_t now = 0, w;

	(void)state;
	/* 100 ops/s, 100 ms burst: 10 at once, then one per 10 ms. */
	for (int i = 0; i < 10; i++)
		assert_int_equal(qos_bucket_charge(&b, &c, 0, 1, now, 100 * MS), 0);
	assert_int_equal(qos_bucket_charge(&b, &c, 0, 1, now, 100 * MS), 10 * MS);
	assert_int_equal(qos_bucket_charge(&b, &c, 0, 1, now, 100 * MS), 20 * MS);
	/* A batch of 50 items counts 50. */
	assert_int_equal(qos_bucket_charge(&b, &c, 0, 50, now, 100 * MS), 520 * MS);
	/* Both caps: the larger wait wins. */
	memset(&b, 0, sizeof(b));
	c.bw = 1 * MIB;
	c.iops = 1000;
	w = qos_bucket_charge(&b, &c, 2 * MIB, 1, now, 100 * MS);
	assert_int_equal(w, 1900 * MS);	/* bytes: 2 s, less the burst */
	w = qos_bucket_charge(&b, &c, 0, 200, now, 100 * MS);
	assert_int_equal(w, 101 * MS);	/* ops: 1 + 200 ms, less the burst */
}

static void test_idle_time_is_not_hoarded(void **state)
{
	struct qos_bucket b = { 0 };
	struct qos_caps c = { .bw = 10 * MIB };
	uint64_t now = 10 * S;

	(void)state;
	assert_int_equal(qos_bucket_charge(&b, &c, 5 * MIB, 1, now, 100 * MS), 400 * MS);
	assert_false(qos_bucket_idle(&b, now + 400 * MS));
	assert_true(qos_bucket_idle(&b, now + 500 * MS));
	/* An hour idle buys one burst, not an hour's worth. */
	now += 3600 * S;
	assert_int_equal(qos_bucket_charge(&b, &c, MIB, 1, now, 100 * MS), 0);
	assert_int_equal(qos_bucket_charge(&b, &c, MIB, 1, now, 100 * MS), 100 * MS);
	/* A cap of one byte per second and a huge request: clamped to a day. */
	memset(&b, 0, sizeof(b));
	c.bw = 1;
	assert_true(qos_bucket_charge(&b, &c, 1ull << 44, 1, now, 100 * MS) <= 86400 * S);
}

static void id_of(int i, char out[TOKEN_ID_LEN + 1])
{
	snprintf(out, TOKEN_ID_LEN + 1, "%016x", (unsigned)i);
}

static void test_table(void **state)
{
	static struct qos_table q;
	struct qos_caps c = { .bw = MIB };
	struct qos_stats st;
	char a[TOKEN_ID_LEN + 1], b[TOKEN_ID_LEN + 1];
	uint64_t now = 100 * S;

	(void)state;
	qos_table_init(&q, 0);
	id_of(1, a);
	id_of(2, b);
	/* One bucket per credential. */
	assert_int_equal(qos_charge(&q, a, &c, 2 * MIB, 1, now), 1900 * MS);
	assert_int_equal(qos_charge(&q, b, &c, MIB, 1, now), 900 * MS);
	assert_int_equal(qos_charge(&q, a, &c, MIB, 1, now), 2900 * MS);
	qos_stats_get(&q, now, &st);
	assert_int_equal(st.charged, 3);
	assert_int_equal(st.delayed, 3);
	assert_int_equal(st.delay_ms, 1900 + 900 + 2900);
	assert_int_equal(st.active, 2);
	assert_int_equal(st.overflow, 0);
	/* More credentials owing time than the table holds: some are paced
	 * in the shared bucket, counted; none goes uncharged. */
	for (int i = 10; i < 10 + (int)QOS_SLOTS + 200; i++) {
		char id[TOKEN_ID_LEN + 1];

		id_of(i, id);
		(void)qos_charge(&q, id, &c, MIB, 1, now);
	}
	qos_stats_get(&q, now, &st);
	assert_true(st.overflow >= 200);
	assert_true(st.active <= QOS_SLOTS);
	assert_int_equal(st.charged, 3 + QOS_SLOTS + 200);
	/* The shared bucket paces too: every one of them waits. */
	assert_int_equal(st.delayed, st.charged);
	/* Once they are idle their slots serve new credentials. */
	now += 3600 * S;
	qos_stats_get(&q, now, &st);
	assert_int_equal(st.active, 0);
	{
		uint64_t before = st.overflow;

		for (int i = 5000; i < 5000 + (int)QOS_SLOTS / 2; i++) {
			char id[TOKEN_ID_LEN + 1];

			id_of(i, id);
			(void)qos_charge(&q, id, &c, MIB, 1, now);
		}
		qos_stats_get(&q, now, &st);
		assert_int_equal(st.overflow, before);
	}
	qos_table_release(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_rate),
		cmocka_unit_test(test_rate_holds_over_any_window),
		cmocka_unit_test(test_iops_and_both),
		cmocka_unit_test(test_idle_time_is_not_hoarded),
		cmocka_unit_test(test_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
