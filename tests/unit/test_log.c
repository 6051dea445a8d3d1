/*
 * Unit tests of the rate-limited log lines (common/log.h): LOG_LIMIT_BURST
 * lines per call site per LOG_LIMIT_MS, the rest dropped and counted; two
 * call sites are limited apart; a level below the threshold is not
 * counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"

static int lines;
static char last[1024];

static void sink(void *arg, enum log_level level, const char *comp, const char *msg)
{
	(void)arg;
	(void)level;
	(void)comp;
	lines++;
	snprintf(last, sizeof(last), "%s", msg);
}

static void site_a(int i)
{
	log_warn_limited("test", "a %d", i);
}

static void site_b(int i)
{
	log_warn_limited("test", "b %d", i);
}

static void test_one_line_per_site(void **state)
{
	(void)state;
	log_set_sink(sink, NULL);
	lines = 0;
	for (int i = 0; i < 1000; i++)
		site_a(i);
	assert_int_equal(lines, LOG_LIMIT_BURST);
	assert_non_null(strstr(last, "a 31 (more lines like this in the next 10 s are dropped)"));
	for (int i = 0; i < 1000; i++)
		site_b(i);
	assert_int_equal(lines, 2 * LOG_LIMIT_BURST);
}

/* A limit whose interval has passed lets the next line through, which
 * counts the lines dropped meanwhile. */
static void test_dropped_are_counted(void **state)
{
	struct log_limit l = { 0 };

	(void)state;
	log_set_sink(sink, NULL);
	lines = 0;
	for (int i = 0; i < LOG_LIMIT_BURST + 5; i++)
		log_limited(&l, LOG_WARN, "test", "again");
	assert_int_equal(lines, LOG_LIMIT_BURST);
	l.window_ms -= LOG_LIMIT_MS;	/* as if the window had passed */
	log_limited(&l, LOG_WARN, "test", "later");
	assert_int_equal(lines, LOG_LIMIT_BURST + 1);
	assert_non_null(strstr(last, "later (and 5 more like it dropped before)"));
	/* Below the level: neither logged nor counted. */
	log_set_level(LOG_ERROR);
	log_limited(&l, LOG_WARN, "test", "hidden");
	log_set_level(LOG_INFO);
	assert_int_equal(lines, LOG_LIMIT_BURST + 1);
	assert_int_equal(l.dropped, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_line_per_site),
		cmocka_unit_test(test_dropped_are_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
