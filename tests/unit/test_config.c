/*
 * Unit tests for src/common/config: defaults, INI files, every kind of bad
 * input with the message it must give, flag overrides, and the value
 * parsers. Files are written to a mkdtemp directory removed at the end.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/errors_int.h"

struct conf {
	char name[CFG_STR_MAX];
	int64_t threads;
	bool verbose;
	uint64_t cache;
	char path[CFG_STR_MAX];
	int64_t timeout;
	int64_t port;
	int64_t offset;
};

static const struct cfg_key keys[] = {
	{ "", "name", CFG_STR, offsetof(struct conf, name), "strata", 0, 0, "node name" },
	{ "", "threads", CFG_INT, offsetof(struct conf, threads), "4", 1, 64, "reactors" },
	{ "", "verbose", CFG_BOOL, offsetof(struct conf, verbose), NULL, 0, 0, "log more" },
	{ "storage", "cache", CFG_SIZE, offsetof(struct conf, cache), "64M", 4096,
	  1ll << 40, "cache size" },
	{ "storage", "path", CFG_STR, offsetof(struct conf, path), NULL, 0, 0, "data dir" },
	{ "net", "timeout", CFG_MS, offsetof(struct conf, timeout), "3s", 1, 3600000, "rpc" },
	{ "net", "port", CFG_INT, offsetof(struct conf, port), "7000", 1, 65535, "port" },
	{ "net", "offset", CFG_INT, offsetof(struct conf, offset), "-5", 0, 0, "unbounded" },
};
static const struct cfg_schema schema = { keys, sizeof(keys) / sizeof(keys[0]) };

static char tmpdir[64];
static char err[512];

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/strata-test-config-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Writes text to tmpdir/name; returns the path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	return path;
}

static void load_defaults(struct conf *c)
{
	memset(c, 0xa5, sizeof(*c));
	err[0] = '\0';
	assert_int_equal(cfg_defaults(&schema, c, err, sizeof(err)), 0);
}

/* Loads text from a file; returns rc, message in err. */
static int load_text(struct conf *c, const char *text)
{
	const char *path = write_file("t.ini", text);

	err[0] = '\0';
	return cfg_load_file(&schema, c, path, err, sizeof(err));
}

static void assert_err_has(const char *needle)
{
	if (!strstr(err, needle))
		fail_msg("error message '%s' lacks '%s'", err, needle);
}

static void test_defaults(void **state)
{
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_string_equal(c.name, "strata");
	assert_int_equal(c.threads, 4);
	assert_false(c.verbose);
	assert_true(c.cache == 64ull << 20);
	assert_string_equal(c.path, "");
	assert_int_equal(c.timeout, 3000);
	assert_int_equal(c.port, 7000);
	assert_int_equal(c.offset, -5);
}

/* Another key's string read by name (a default that follows it); a key
 * that is not a string, or not there, is NULL. */
static void test_get_str(void **state)
{
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_int_equal(cfg_set(&schema, &c, "storage.path", "/d", err, sizeof(err)), 0);
	assert_string_equal(cfg_get_str(&schema, &c, "storage.path"), "/d");
	assert_string_equal(cfg_get_str(&schema, &c, "name"), "strata");
	assert_null(cfg_get_str(&schema, &c, "net.port"));
	assert_null(cfg_get_str(&schema, &c, "net.nope"));
	assert_null(cfg_get_str(&schema, &c, "path"));
}

static void test_bad_default(void **state)
{
	static const struct cfg_key bad[] = {
		{ "", "n", CFG_INT, 0, "ten", 0, 0, "" },
	};
	static const struct cfg_schema bs = { bad, 1 };
	int64_t v;

	(void)state;
	assert_int_equal(cfg_defaults(&bs, &v, err, sizeof(err)), STRATA_ECONFIG);
	assert_err_has("'n'");
}

static void test_file_ok(void **state)
{
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_int_equal(load_text(&c,
		"; a comment\n"
		"# another comment\n"
		"name = node-a\n"
		"threads = 0x10\n"
		"verbose = yes\n"
		"\n"
		"[storage]\n"
		"cache = 2G\n"
		"path = /var/lib/strata   ; inline comment\n"
		"[net]\n"
		"timeout = 250ms\n"
		"port=7100\n"
		"offset = -123\n"), 0);
	assert_string_equal(c.name, "node-a");
	assert_int_equal(c.threads, 16);
	assert_true(c.verbose);
	assert_true(c.cache == 2ull << 30);
	assert_string_equal(c.path, "/var/lib/strata");
	assert_int_equal(c.timeout, 250);
	assert_int_equal(c.port, 7100);
	assert_int_equal(c.offset, -123);

	/* The same text from memory. */
	load_defaults(&c);
	assert_int_equal(cfg_load_string(&schema, &c, "[net]\nport = 9\n", err, sizeof(err)), 0);
	assert_int_equal(c.port, 9);
	/* Keys not named keep their defaults. */
	assert_int_equal(c.threads, 4);

	/* Empty file, CRLF line ends, a file without a final newline. */
	load_defaults(&c);
	assert_int_equal(load_text(&c, ""), 0);
	assert_int_equal(load_text(&c, "threads = 2\r\n[net]\r\nport = 80\r\n"), 0);
	assert_int_equal(c.threads, 2);
	assert_int_equal(c.port, 80);
	assert_int_equal(load_text(&c, "threads = 3"), 0);
	assert_int_equal(c.threads, 3);
}

static void test_missing_file(void **state)
{
	struct conf c;
	char path[128];

	(void)state;
	load_defaults(&c);
	snprintf(path, sizeof(path), "%s/does-not-exist.ini", tmpdir);
	assert_int_equal(cfg_load_file(&schema, &c, path, err, sizeof(err)), -ENOENT);
	assert_err_has("does-not-exist.ini");
}

static void test_unknown_key(void **state)
{
	struct conf c;
	const char *path;

	(void)state;
	load_defaults(&c);
	path = write_file("unknown.ini", "name = a\n\nbogus = 1\n");
	assert_int_equal(cfg_load_file(&schema, &c, path, err, sizeof(err)), STRATA_ECONFIG);
	assert_err_has(path);
	assert_err_has("unknown.ini:3:");
	assert_err_has("'bogus'");

	/* A key that exists, but in another section. */
	assert_int_equal(load_text(&c, "[storage]\nport = 1\n"), STRATA_ECONFIG);
	assert_err_has("t.ini:2:");
	assert_err_has("'port'");
	assert_err_has("[storage]");

	/* From a string: the origin is named too. */
	assert_int_equal(cfg_load_string(&schema, &c, "x = 1\n", err, sizeof(err)), STRATA_ECONFIG);
	assert_err_has("<string>:1:");
	assert_err_has("'x'");
}

static void test_unknown_section(void **state)
{
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_int_equal(load_text(&c, "[net]\nport = 1\n[nope]\nkey = 1\n"), STRATA_ECONFIG);
	assert_err_has(":4:");
	assert_err_has("[nope]");
	assert_err_has("'key'");
}

static void test_bad_values(void **state)
{
	static const struct {
		const char *text;
		const char *needles[3];
	} cases[] = {
		{ "threads = abc\n", { ":1:", "'threads'", "'abc'" } },
		{ "threads = 5x\n", { ":1:", "'threads'", "integer" } },
		{ "threads = 1.5\n", { ":1:", "'threads'", "integer" } },
		{ "threads = 010x\n", { ":1:", "'threads'", "integer" } },
		{ "threads =\n", { ":1:", "'threads'", "integer" } },
		{ "[storage]\ncache = 12X\n", { ":2:", "'storage.cache'", "size" } },
		{ "[storage]\ncache = -1\n", { ":2:", "'storage.cache'", "size" } },
		{ "[storage]\ncache = 1.5G\n", { ":2:", "'storage.cache'", "size" } },
		{ "[net]\ntimeout = 5y\n", { ":2:", "'net.timeout'", "duration" } },
		{ "[net]\ntimeout = s\n", { ":2:", "'net.timeout'", "duration" } },
		{ "verbose = maybe\n", { ":1:", "'verbose'", "boolean" } },
		{ "verbose = 2\n", { ":1:", "'verbose'", "boolean" } },
	};
	struct conf c;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		load_defaults(&c);
		if (load_text(&c, cases[i].text) != STRATA_ECONFIG)
			fail_msg("case %zu '%s' was accepted", i, cases[i].text);
		for (int j = 0; j < 3; j++)
			assert_err_has(cases[i].needles[j]);
	}
}

static void test_bool_values(void **state)
{
	static const char *const yes[] = { "1", "true", "TRUE", "yes", "Yes", "on" };
	static const char *const no[] = { "0", "false", "False", "no", "off", "OFF" };
	char text[64];
	struct conf c;

	(void)state;
	for (size_t i = 0; i < 6; i++) {
		load_defaults(&c);
		snprintf(text, sizeof(text), "verbose = %s\n", yes[i]);
		assert_int_equal(load_text(&c, text), 0);
		assert_true(c.verbose);
		snprintf(text, sizeof(text), "verbose = %s\n", no[i]);
		assert_int_equal(load_text(&c, text), 0);
		assert_false(c.verbose);
	}
}

static void test_out_of_range(void **state)
{
	static const struct {
		const char *text;
		const char *needle;
	} cases[] = {
		{ "threads = 0\n", "'threads'" },
		{ "threads = 65\n", "'threads'" },
		{ "threads = -1\n", "'threads'" },
		{ "threads = 99999999999999999999\n", "'threads'" },	/* int64 overflow */
		{ "[net]\nport = 0\n", "'net.port'" },
		{ "[net]\nport = 65536\n", "'net.port'" },
		{ "[net]\ntimeout = 0\n", "'net.timeout'" },
		{ "[net]\ntimeout = 61m\n", "'net.timeout'" },
		{ "[storage]\ncache = 1K\n", "'storage.cache'" },
		{ "[storage]\ncache = 2T\n", "'storage.cache'" },
		/* Fits a uint64 but not the int64 the bounds are checked in. */
		{ "[storage]\ncache = 8388608T\n", "'storage.cache'" },
		{ "[storage]\ncache = 9223372036854775808\n", "'storage.cache'" },
	};
	struct conf c;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		load_defaults(&c);
		if (load_text(&c, cases[i].text) != STRATA_ECONFIG)
			fail_msg("case %zu '%s' was accepted", i, cases[i].text);
		assert_err_has(cases[i].needle);
	}
	/* The bounds themselves are in range, and the message names them. */
	load_defaults(&c);
	assert_int_equal(load_text(&c, "threads = 64\n[net]\nport = 65535\n[storage]\ncache = 1T\n"), 0);
	assert_int_equal(c.threads, 64);
	assert_int_equal(c.port, 65535);
	assert_true(c.cache == 1ull << 40);
	assert_int_equal(load_text(&c, "threads = 65\n"), STRATA_ECONFIG);
	assert_err_has("out of range [1, 64]");
}

static void test_string_length(void **state)
{
	char val[CFG_STR_MAX + 1];
	struct conf c;

	(void)state;
	load_defaults(&c);
	/* The longest string that fits: CFG_STR_MAX - 1 bytes. */
	memset(val, 'p', CFG_STR_MAX - 1);
	val[CFG_STR_MAX - 1] = '\0';
	assert_int_equal(cfg_set(&schema, &c, "storage.path", val, err, sizeof(err)), 0);
	assert_string_equal(c.path, val);
	/* One more byte does not, and the old value stays. */
	val[CFG_STR_MAX - 1] = 'p';
	val[CFG_STR_MAX] = '\0';
	assert_int_equal(cfg_set(&schema, &c, "storage.path", val, err, sizeof(err)),
			 STRATA_ECONFIG);
	assert_err_has("'storage.path'");
	assert_err_has("longer than 255");
	assert_int_equal(strlen(c.path), CFG_STR_MAX - 1);
}

/* inih reads lines into a fixed buffer; a longer line is an error naming
 * the line, not two lines or a silently cut value. */
static void test_long_line(void **state)
{
	char text[700];
	struct conf c;
	int n;

	(void)state;
	load_defaults(&c);
	n = snprintf(text, sizeof(text), "threads = 2\n[storage]\npath = ");
	memset(text + n, 'q', 400);
	snprintf(text + n + 400, sizeof(text) - n - 400, "\nbogus = 1\n");
	assert_int_equal(load_text(&c, text), STRATA_ECONFIG);
	assert_err_has("t.ini:3:");
	assert_err_has("line longer than");

	/* A long comment line is refused the same way. */
	n = snprintf(text, sizeof(text), "; ");
	memset(text + n, 'c', 300);
	snprintf(text + n + 300, sizeof(text) - n - 300, "\nthreads = 2\n");
	assert_int_equal(load_text(&c, text), STRATA_ECONFIG);
	assert_err_has("t.ini:1:");
	assert_err_has("line longer than");

	/* A line just under the limit is fine (from a string, too). */
	load_defaults(&c);
	n = snprintf(text, sizeof(text), "[storage]\npath = ");
	memset(text + n, 'r', 150);
	snprintf(text + n + 150, sizeof(text) - n - 150, "\n[net]\nport = 5\n");
	assert_int_equal(load_text(&c, text), 0);
	assert_int_equal(strlen(c.path), 150);
	assert_int_equal(c.port, 5);
	load_defaults(&c);
	assert_int_equal(cfg_load_string(&schema, &c, text, err, sizeof(err)), 0);
	assert_int_equal(strlen(c.path), 150);
}

static void test_syntax_error(void **state)
{
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_int_equal(load_text(&c, "threads = 2\nthis is not ini\n"), STRATA_ECONFIG);
	assert_err_has("t.ini:2:");
	assert_err_has("syntax error");
	assert_int_equal(load_text(&c, "[storage\ncache = 1M\n"), STRATA_ECONFIG);
	assert_err_has("t.ini:1:");
	assert_err_has("syntax error");

	/* The first error wins, whichever kind it is. */
	assert_int_equal(load_text(&c, "threads = 2\noops\n\nbogus = 1\n"), STRATA_ECONFIG);
	assert_err_has("t.ini:2:");
	assert_err_has("syntax error");
	assert_int_equal(load_text(&c, "bogus = 1\noops\n"), STRATA_ECONFIG);
	assert_err_has("t.ini:1:");
	assert_err_has("'bogus'");
	assert_int_equal(load_text(&c, "\n\nthreads = x\nbogus = 1\noops\n"), STRATA_ECONFIG);
	assert_err_has("t.ini:3:");
	assert_err_has("'threads'");
}

static void test_flags_override_file(void **state)
{
	char *argv[] = { "--storage.cache=1G", "--threads=8", "--verbose=on",
			 "--net.timeout=2m", "--name=from-flag", NULL };
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_int_equal(load_text(&c, "threads = 2\nname = from-file\n[storage]\ncache = 1M\n"
				   "[net]\nport = 81\n"), 0);
	assert_int_equal(cfg_apply_args(&schema, &c, 5, argv, NULL, err, sizeof(err)), 0);
	assert_true(c.cache == 1ull << 30);
	assert_int_equal(c.threads, 8);
	assert_true(c.verbose);
	assert_int_equal(c.timeout, 120000);
	assert_string_equal(c.name, "from-flag");
	/* Untouched by flags: the file's value. */
	assert_int_equal(c.port, 81);

	/* An empty value is a value: the empty string. */
	{
		char *a[] = { "--storage.path=" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)), 0);
		assert_string_equal(c.path, "");
	}
	/* '=' inside the value is kept. */
	{
		char *a[] = { "--name=a=b" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)), 0);
		assert_string_equal(c.name, "a=b");
	}
	assert_int_equal(cfg_apply_args(&schema, &c, 0, argv, NULL, err, sizeof(err)), 0);
}

static void test_flag_errors(void **state)
{
	struct conf c;

	(void)state;
	load_defaults(&c);
	{
		char *a[] = { "--threads" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
		assert_err_has("'--threads'");
		assert_err_has("needs a value");
	}
	{
		char *a[] = { "--threads=8", "stray" };

		assert_int_equal(cfg_apply_args(&schema, &c, 2, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
		assert_err_has("unexpected argument 'stray'");
	}
	{
		char *a[] = { "-t=8" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
		assert_err_has("'-t=8'");
	}
	{
		char *a[] = { "--storage.nope=1" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
		assert_err_has("'storage.nope'");
	}
	{
		/* A top-level key is not reachable through a section. */
		char *a[] = { "--net.threads=2" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
		assert_err_has("'net.threads'");
	}
	{
		char *a[] = { "--net.port=70000" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
		assert_err_has("out of range");
	}
	{
		char *a[] = { "--threads= 5" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
	}
	{
		char *a[] = { "--storage.cache=-1" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
	}
	{
		char key[400];
		char *a[] = { key };

		memset(key, 'k', sizeof(key) - 3);
		memcpy(key, "--", 2);
		memcpy(key + sizeof(key) - 3, "=1", 3);
		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, NULL, err, sizeof(err)),
				 STRATA_ECONFIG);
	}
	/* An error stops at the bad flag; the good ones before it applied. */
	assert_int_equal(c.threads, 8);
}

static void test_passthrough(void **state)
{
	static const char *const pass[] = { "data", "help", NULL };
	char *argv[] = { "--data=/srv/strata", "--help", "--threads=3", "--data" };
	struct conf c;

	(void)state;
	load_defaults(&c);
	assert_int_equal(cfg_apply_args(&schema, &c, 4, argv, pass, err, sizeof(err)), 0);
	assert_int_equal(c.threads, 3);
	/* A prefix of a passthrough name is not passthrough. */
	{
		char *a[] = { "--dat=1" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, pass, err, sizeof(err)),
				 STRATA_ECONFIG);
	}
	{
		char *a[] = { "--database=1" };

		assert_int_equal(cfg_apply_args(&schema, &c, 1, a, pass, err, sizeof(err)),
				 STRATA_ECONFIG);
	}
}

static void test_parse_size(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 }, { "4096", 4096 }, { "1K", 1024 }, { "1k", 1024 },
		{ "2M", 2ull << 20 }, { "1G", 1ull << 30 }, { "3T", 3ull << 40 },
		{ "1KiB", 1024 }, { "4MiB", 4ull << 20 }, { "1GiB", 1ull << 30 },
		{ "8KB", 8192 }, { "1gb", 1ull << 30 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ull << 40 },
	};
	static const char *const bad[] = {
		"", "K", "G1", "-1", "+1", " 1", "1 ", "1X", "1Kx", "1KiBs", "1.5G", "0x10",
		"1 G", "1P",
	};
	static const char *const range[] = {
		"18446744073709551616", "16777216T", "17179869184G", "99999999999999999999999",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 12345;
		if (parse_size(ok[i].s, &v) != 0 || v != ok[i].v)
			fail_msg("parse_size('%s') gave %llu", ok[i].s, (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse_size(bad[i], &v) != -EINVAL)
			fail_msg("parse_size('%s') was not -EINVAL", bad[i]);
	}
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
		if (parse_size(range[i], &v) != -ERANGE)
			fail_msg("parse_size('%s') was not -ERANGE", range[i]);
	}
	assert_int_equal(parse_size(NULL, &v), -EINVAL);
}

static void test_parse_ms(void **state)
{
	static const struct {
		const char *s;
		int64_t v;
	} ok[] = {
		{ "0", 0 }, { "250", 250 }, { "250ms", 250 }, { "3s", 3000 },
		{ "2m", 120000 }, { "1min", 60000 }, { "3h", 10800000 }, { "2d", 172800000 },
		{ "9223372036854775807", INT64_MAX }, { "9223372036854775ms", 9223372036854775ll },
	};
	static const char *const bad[] = {
		"", "s", "ms", "-1", "3y", "1.5s", "3 s", " 3", "3S", "3sec", "0x10",
	};
	static const char *const range[] = {
		"9223372036854775808", "9223372036854776s", "153722867280913m", "106751991167301d",
	};
	int64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 12345;
		if (parse_ms(ok[i].s, &v) != 0 || v != ok[i].v)
			fail_msg("parse_ms('%s') gave %lld", ok[i].s, (long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse_ms(bad[i], &v) != -EINVAL)
			fail_msg("parse_ms('%s') was not -EINVAL", bad[i]);
	}
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
		if (parse_ms(range[i], &v) != -ERANGE)
			fail_msg("parse_ms('%s') was not -ERANGE", range[i]);
	}
}

static void test_parse_i64(void **state)
{
	int64_t v;

	(void)state;
	assert_int_equal(parse_i64("42", &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(parse_i64("-42", &v), 0);
	assert_int_equal(v, -42);
	assert_int_equal(parse_i64("+7", &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(parse_i64("0x1F", &v), 0);
	assert_int_equal(v, 31);
	assert_int_equal(parse_i64("-0x10", &v), 0);
	assert_int_equal(v, -16);
	/* A leading zero is decimal, not octal. */
	assert_int_equal(parse_i64("010", &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse_i64("09", &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(parse_i64("9223372036854775807", &v), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(parse_i64("-9223372036854775808", &v), 0);
	assert_true(v == INT64_MIN);
	assert_int_equal(parse_i64("9223372036854775808", &v), -ERANGE);
	assert_int_equal(parse_i64("-9223372036854775809", &v), -ERANGE);
	assert_int_equal(parse_i64("", &v), -EINVAL);
	assert_int_equal(parse_i64(NULL, &v), -EINVAL);
	assert_int_equal(parse_i64("-", &v), -EINVAL);
	assert_int_equal(parse_i64("0x", &v), -EINVAL);
	assert_int_equal(parse_i64(" 5", &v), -EINVAL);
	assert_int_equal(parse_i64("5 ", &v), -EINVAL);
	assert_int_equal(parse_i64("--5", &v), -EINVAL);
	assert_int_equal(parse_i64("1e3", &v), -EINVAL);
}

static void test_parse_bool(void **state)
{
	int b = -1;

	(void)state;
	assert_int_equal(parse_bool("On", &b), 0);
	assert_int_equal(b, 1);
	assert_int_equal(parse_bool("0", &b), 0);
	assert_int_equal(b, 0);
	assert_int_equal(parse_bool("", &b), -EINVAL);
	assert_int_equal(parse_bool("y", &b), -EINVAL);
	assert_int_equal(parse_bool("truex", &b), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_get_str),
		cmocka_unit_test(test_bad_default),
		cmocka_unit_test(test_file_ok),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_unknown_section),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_bool_values),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_string_length),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_flags_override_file),
		cmocka_unit_test(test_flag_errors),
		cmocka_unit_test(test_passthrough),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_ms),
		cmocka_unit_test(test_parse_i64),
		cmocka_unit_test(test_parse_bool),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
