/* INI config via libinih, with a key table, strict checking and flag
 * overrides. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "config.h"
#include "common/errors_int.h"

int parse_i64(const char *s, int64_t *out)
{
	const char *digits = s;
	char *end;
	long long v;
	int base;

	if (!s || !*s)
		return -EINVAL;
	if (*digits == '-' || *digits == '+')
		digits++;
	/* Decimal or 0x hex only: strtoll's base 0 would read "010" as octal
	 * 8, and strtoll skips leading blanks we do not want to accept. */
	if (!isdigit((unsigned char)*digits))
		return -EINVAL;
	base = (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) ? 16 : 10;
	errno = 0;
	v = strtoll(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (end == s || *end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_suffixed(const char *s, uint64_t *num, const char **suffix)
{
	char *end;
	unsigned long long v;

	/* strtoull skips blanks and accepts (and wraps) a minus sign: insist
	 * on a leading digit. */
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (end == s)
		return -EINVAL;
	*num = v;
	*suffix = end;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	uint64_t v, mult = 1;
	const char *suf;
	int rc = parse_suffixed(s, &v, &suf);

	if (rc)
		return rc;
	if (*suf) {
		switch (*suf) {
		case 'k': case 'K': mult = 1ull << 10; break;
		case 'm': case 'M': mult = 1ull << 20; break;
		case 'g': case 'G': mult = 1ull << 30; break;
		case 't': case 'T': mult = 1ull << 40; break;
		default: return -EINVAL;
		}
		suf++;
		if (*suf == 'i')
			suf++;
		if (*suf == 'b' || *suf == 'B')
			suf++;
		if (*suf)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

int parse_ms(const char *s, int64_t *out)
{
	uint64_t v, mult = 1;
	const char *suf;
	int rc = parse_suffixed(s, &v, &suf);

	if (rc)
		return rc;
	if (*suf == '\0' || strcmp(suf, "ms") == 0)
		mult = 1;
	else if (strcmp(suf, "s") == 0)
		mult = 1000;
	else if (strcmp(suf, "m") == 0 || strcmp(suf, "min") == 0)
		mult = 60000;
	else if (strcmp(suf, "h") == 0)
		mult = 3600000;
	else if (strcmp(suf, "d") == 0)
		mult = 86400000;
	else
		return -EINVAL;
	if (v > (uint64_t)INT64_MAX / mult)
		return -ERANGE;
	*out = (int64_t)(v * mult);
	return 0;
}

int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

static const struct cfg_key *find_key(const struct cfg_schema *s, const char *section,
				      const char *name)
{
	for (size_t i = 0; i < s->nkeys; i++) {
		if (strcmp(s->keys[i].section, section) == 0 && strcmp(s->keys[i].name, name) == 0)
			return &s->keys[i];
	}
	return NULL;
}

static int keyname(const struct cfg_key *k, char *buf, size_t len)
{
	if (k->section[0])
		return snprintf(buf, len, "%s.%s", k->section, k->name);
	return snprintf(buf, len, "%s", k->name);
}

static int set_value(const struct cfg_key *k, void *obj, const char *value, char *err, size_t errlen)
{
	char *field = (char *)obj + k->offset;
	char kn[128];
	int64_t i64;
	uint64_t u64;
	int b, rc = 0;
	bool bounded = !(k->min == 0 && k->max == 0);

	keyname(k, kn, sizeof(kn));
	switch (k->type) {
	case CFG_STR:
		if (strlen(value) >= CFG_STR_MAX) {
			snprintf(err, errlen, "key '%s': value longer than %d bytes", kn, CFG_STR_MAX - 1);
			return STRATA_ECONFIG;
		}
		snprintf(field, CFG_STR_MAX, "%s", value);
		return 0;
	case CFG_INT:
		rc = parse_i64(value, &i64);
		break;
	case CFG_MS:
		rc = parse_ms(value, &i64);
		break;
	case CFG_SIZE:
		rc = parse_size(value, &u64);
		if (!rc) {
			if (u64 > INT64_MAX)
				rc = -ERANGE;
			i64 = (int64_t)u64;
		}
		break;
	case CFG_BOOL:
		rc = parse_bool(value, &b);
		if (rc) {
			snprintf(err, errlen, "key '%s': '%s' is not a boolean (use true or false)", kn, value);
			return STRATA_ECONFIG;
		}
		*(bool *)field = b;
		return 0;
	}
	if (rc) {
		snprintf(err, errlen, "key '%s': '%s' is not a valid %s", kn, value,
			 k->type == CFG_SIZE ? "size (e.g. 4096, 64K, 1G)" :
			 k->type == CFG_MS ? "duration (e.g. 500ms, 3s)" : "integer");
		return STRATA_ECONFIG;
	}
	if (bounded && (i64 < k->min || i64 > k->max)) {
		snprintf(err, errlen, "key '%s': %s is out of range [%" PRId64 ", %" PRId64 "]",
			 kn, value, k->min, k->max);
		return STRATA_ECONFIG;
	}
	if (k->type == CFG_SIZE)
		*(uint64_t *)field = (uint64_t)i64;
	else
		*(int64_t *)field = i64;
	return 0;
}

int cfg_defaults(const struct cfg_schema *s, void *obj, char *err, size_t errlen)
{
	for (size_t i = 0; i < s->nkeys; i++) {
		const struct cfg_key *k = &s->keys[i];
		const char *def = k->def;

		if (!def)
			def = (k->type == CFG_STR) ? "" : (k->type == CFG_BOOL ? "false" : "0");
		int rc = set_value(k, obj, def, err, errlen);

		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Lines reach inih through our own reader so that we know which line the
 * handler is on (inih reports only the first error's line, which may be a
 * syntax error before the key we refused) and so that a line longer than
 * inih's buffer is an error instead of being cut into two lines.
 */
struct ini_src {
	FILE *f;		/* read from f, or from text when f is NULL */
	const char *text;
	int lineno;		/* lines handed to inih so far */
	int long_line;		/* first line longer than inih's buffer, or 0 */
	int maxlen;		/* the longest line inih takes, in bytes */
};

static int src_getc(struct ini_src *src)
{
	if (src->f)
		return getc(src->f);
	if (*src->text == '\0')
		return EOF;
	return (unsigned char)*src->text++;
}

/* fgets-style: one whole line per call, the rest of an over-long line
 * dropped (and recorded). */
static char *ini_read_line(char *str, int num, void *stream)
{
	struct ini_src *src = stream;
	int n = 0, ch = EOF;

	if (num < 2)
		return NULL;
	src->maxlen = num - 1;
	while (n < num - 1 && (ch = src_getc(src)) != EOF) {
		str[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (n == 0)
		return NULL;
	if (n == num - 1 && str[n - 1] != '\n') {
		ch = src_getc(src);
		if (ch != '\n' && ch != EOF) {
			if (!src->long_line)
				src->long_line = src->lineno + 1;
			while ((ch = src_getc(src)) != EOF && ch != '\n')
				;
		}
	}
	str[n] = '\0';
	src->lineno++;
	return str;
}

struct ini_ctx {
	const struct cfg_schema *s;
	void *obj;
	char *err;
	size_t errlen;
	const char *origin;
	struct ini_src src;
	int rc;
	int err_line;		/* line of the error in msg */
	char msg[512];
};

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *c = user;
	const struct cfg_key *k;
	int rc;

	if (c->rc)
		return 0;
	k = find_key(c->s, section, name);
	if (!k) {
		if (section[0])
			snprintf(c->msg, sizeof(c->msg), "unknown key '%s' in section [%s]", name, section);
		else
			snprintf(c->msg, sizeof(c->msg), "unknown key '%s'", name);
		rc = STRATA_ECONFIG;
	} else {
		rc = set_value(k, c->obj, value, c->msg, sizeof(c->msg));
	}
	if (rc) {
		c->rc = rc;
		c->err_line = c->src.lineno;
		return 0;
	}
	return 1;
}

/* Reports the first error by line: an over-long line, a key or value we
 * refused, or a line inih could not parse. */
static int finish_parse(struct ini_ctx *c, int ini_rc)
{
	int syn = ini_rc > 0 ? ini_rc : INT_MAX;
	int mine = c->rc ? c->err_line : INT_MAX;
	int lng = c->src.long_line ? c->src.long_line : INT_MAX;

	if (ini_rc == -2) {
		snprintf(c->err, c->errlen, "%s: out of memory while parsing", c->origin);
		return -ENOMEM;
	}
	if (lng != INT_MAX && lng <= syn && lng <= mine) {
		snprintf(c->err, c->errlen, "%s:%d: line longer than %d bytes", c->origin, lng,
			 c->src.maxlen);
		return STRATA_ECONFIG;
	}
	if (mine != INT_MAX && mine <= syn) {
		snprintf(c->err, c->errlen, "%s:%d: %s", c->origin, mine, c->msg);
		return c->rc;
	}
	if (syn != INT_MAX) {
		snprintf(c->err, c->errlen, "%s:%d: syntax error (expected 'key = value' or '[section]')",
			 c->origin, syn);
		return STRATA_ECONFIG;
	}
	return 0;
}

static void ini_ctx_init(struct ini_ctx *c, const struct cfg_schema *s, void *obj,
			 const char *origin, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->s = s;
	c->obj = obj;
	c->err = err;
	c->errlen = errlen;
	c->origin = origin;
}

int cfg_load_file(const struct cfg_schema *s, void *obj, const char *path, char *err, size_t errlen)
{
	struct ini_ctx c;
	FILE *f = fopen(path, "r");
	int rc;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "config file '%s': %s", path, strerror(errno));
		return rc;
	}
	ini_ctx_init(&c, s, obj, path, err, errlen);
	c.src.f = f;
	rc = ini_parse_stream(ini_read_line, &c.src, ini_cb, &c);
	fclose(f);
	return finish_parse(&c, rc);
}

int cfg_load_string(const struct cfg_schema *s, void *obj, const char *text, char *err, size_t errlen)
{
	struct ini_ctx c;

	ini_ctx_init(&c, s, obj, "<string>", err, errlen);
	c.src.text = text;
	return finish_parse(&c, ini_parse_stream(ini_read_line, &c.src, ini_cb, &c));
}

int cfg_set(const struct cfg_schema *s, void *obj, const char *dotted, const char *value,
	    char *err, size_t errlen)
{
	char section[128] = "";
	const char *name = dotted;
	const char *dot = strchr(dotted, '.');
	const struct cfg_key *k;

	if (dot) {
		size_t n = (size_t)(dot - dotted);

		if (n >= sizeof(section)) {
			snprintf(err, errlen, "unknown key '%s'", dotted);
			return STRATA_ECONFIG;
		}
		memcpy(section, dotted, n);
		section[n] = '\0';
		name = dot + 1;
	}
	k = find_key(s, section, name);
	if (!k) {
		snprintf(err, errlen, "unknown key '%s' (see --help for the keys)", dotted);
		return STRATA_ECONFIG;
	}
	return set_value(k, obj, value, err, errlen);
}

const char *cfg_get_str(const struct cfg_schema *s, const void *obj, const char *dotted)
{
	const char *dot = strchr(dotted, '.');
	char section[128] = "";
	const struct cfg_key *k;

	if (dot && (size_t)(dot - dotted) < sizeof(section))
		memcpy(section, dotted, (size_t)(dot - dotted));
	else if (dot)
		return NULL;
	k = find_key(s, section, dot ? dot + 1 : dotted);
	return k && k->type == CFG_STR ? (const char *)obj + k->offset : NULL;
}

static bool is_passthrough(const char *flag, size_t n, const char *const *pass)
{
	for (; pass && *pass; pass++) {
		if (strlen(*pass) == n && strncmp(flag, *pass, n) == 0)
			return true;
	}
	return false;
}

int cfg_apply_args(const struct cfg_schema *s, void *obj, int argc, char **argv,
		   const char *const *passthrough, char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *eq;
		char key[256];
		size_t n;
		int rc;

		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, errlen, "unexpected argument '%s'", a);
			return STRATA_ECONFIG;
		}
		a += 2;
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		if (is_passthrough(a, n, passthrough))
			continue;
		if (!eq) {
			snprintf(err, errlen, "flag '--%s' needs a value (--%s=VALUE)", a, a);
			return STRATA_ECONFIG;
		}
		if (n >= sizeof(key)) {
			snprintf(err, errlen, "flag too long: '%.40s...'", argv[i]);
			return STRATA_ECONFIG;
		}
		memcpy(key, a, n);
		key[n] = '\0';
		rc = cfg_set(s, obj, key, eq + 1, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}
