/*
 * libFuzzer target: the INI config loader (cfg_load_string) with a small
 * schema holding every key type, and, for inputs that start with "--",
 * the flag parser (cfg_apply_args) on the input's lines. Built and run by
 * scripts/fuzz.sh.
 *
 * Properties checked: no crash or sanitizer report; a result of 0 or
 * STRATA_ECONFIG (-ENOMEM aside) with a non-empty, NUL-terminated message
 * on error; every value the schema bounds stays within its bounds; string
 * fields stay NUL-terminated.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/errors_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

struct conf {
	char name[CFG_STR_MAX];
	int64_t threads;
	bool verbose;
	uint64_t cache;
	int64_t timeout;
	int64_t offset;
};

static const struct cfg_key keys[] = {
	{ "", "name", CFG_STR, offsetof(struct conf, name), "strata", 0, 0, "" },
	{ "", "threads", CFG_INT, offsetof(struct conf, threads), "4", 1, 64, "" },
	{ "", "verbose", CFG_BOOL, offsetof(struct conf, verbose), NULL, 0, 0, "" },
	{ "storage", "cache", CFG_SIZE, offsetof(struct conf, cache), "64M", 4096, 1ll << 40, "" },
	{ "net", "timeout", CFG_MS, offsetof(struct conf, timeout), "3s", 1, 3600000, "" },
	{ "net", "offset", CFG_INT, offsetof(struct conf, offset), "0", 0, 0, "" },
};
static const struct cfg_schema schema = { keys, sizeof(keys) / sizeof(keys[0]) };

static void check_conf(const struct conf *c)
{
	CHECK(memchr(c->name, '\0', sizeof(c->name)) != NULL);
	CHECK(c->threads >= 1 && c->threads <= 64);
	CHECK(c->cache >= 4096 && c->cache <= (1ull << 40));
	CHECK(c->timeout >= 1 && c->timeout <= 3600000);
}

static void check_rc(int rc, const char *err, size_t errlen)
{
	CHECK(rc == 0 || rc == STRATA_ECONFIG || rc == -ENOMEM);
	CHECK(memchr(err, '\0', errlen) != NULL);
	if (rc)
		CHECK(err[0] != '\0');
}

/* Splits text (modified in place) at newlines into at most 16 arguments. */
static void run_flags(char *text)
{
	static const char *const pass[] = { "data", "help", NULL };
	char *argv[16];
	char err[256] = "";
	struct conf c;
	int argc = 0, rc;

	for (char *p = text; p && argc < 16; ) {
		char *nl = strchr(p, '\n');

		argv[argc++] = p;
		if (nl)
			*nl++ = '\0';
		p = nl;
	}
	CHECK(cfg_defaults(&schema, &c, err, sizeof(err)) == 0);
	rc = cfg_apply_args(&schema, &c, argc, argv, pass, err, sizeof(err));
	check_rc(rc, err, sizeof(err));
	check_conf(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "";
	struct conf c;
	char *text;
	int rc;

	if (size > 1 << 16)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	CHECK(cfg_defaults(&schema, &c, err, sizeof(err)) == 0);
	rc = cfg_load_string(&schema, &c, text, err, sizeof(err));
	check_rc(rc, err, sizeof(err));
	check_conf(&c);

	if (size >= 2 && text[0] == '-' && text[1] == '-')
		run_flags(text);
	free(text);
	return 0;
}
