/*
 * Table-driven configuration: INI files (libinih) and flag overrides.
 *
 * A service describes its keys with a table of struct cfg_key; values land
 * in fields of a caller-owned struct at the given offsets. Unknown sections
 * or keys, malformed values and out-of-range numbers are errors whose
 * message names the file, line, key and the problem.
 *
 * Flags override file values: "--section.key=value" (or "--key=value" for
 * keys of section "" / the daemon's main section).
 */
#ifndef STRATA_COMMON_CONFIG_H
#define STRATA_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CFG_STR_MAX 256

enum cfg_type {
	CFG_STR,	/* char[CFG_STR_MAX] */
	CFG_INT,	/* int64_t, decimal/hex, within [min, max] */
	CFG_BOOL,	/* bool: true/false/yes/no/on/off/1/0 */
	CFG_SIZE,	/* uint64_t, with optional K/M/G/T suffix (powers of 1024) */
	CFG_MS,		/* int64_t milliseconds, optional ms/s/m suffix */
};

struct cfg_key {
	const char *section;	/* "" for top-level keys */
	const char *name;
	enum cfg_type type;
	size_t offset;		/* offsetof() in the target struct */
	const char *def;	/* default value as text; NULL = empty/zero */
	int64_t min, max;	/* numeric bounds (ignored when min == max == 0) */
	const char *help;
};

struct cfg_schema {
	const struct cfg_key *keys;
	size_t nkeys;
};

/* One key of a table filling struct type: CFG_KEY(struct storage_cfg,
 * "storage", "targets", CFG_INT, targets, "1", 1, 64, "help"). */
#define CFG_KEY(type, sec, name, kind, field, def, min, max, help) \
	{ sec, name, kind, offsetof(type, field), def, min, max, help }
#define CFG_SCHEMA(keys) { keys, sizeof(keys) / sizeof((keys)[0]) }

/* Fills obj with every key's default. Returns 0 or STRATA_ECONFIG (with
 * err filled) if a default is malformed (a programming error). */
int cfg_defaults(const struct cfg_schema *s, void *obj, char *err, size_t errlen);
/* Parses the INI file at path into obj. Returns 0, -ENOENT when the file
 * cannot be opened, or STRATA_ECONFIG with a message in err. */
int cfg_load_file(const struct cfg_schema *s, void *obj, const char *path, char *err, size_t errlen);
/* Parses INI text held in memory (used by tests and the fuzz target). */
int cfg_load_string(const struct cfg_schema *s, void *obj, const char *text, char *err, size_t errlen);
/* Sets one key from "section.key" (or "key") and its value text. */
int cfg_set(const struct cfg_schema *s, void *obj, const char *dotted, const char *value,
	    char *err, size_t errlen);
/* Applies flags of form --section.key=value or --key=value from argv. Flags
 * not of that form are errors unless listed in passthrough (NULL-terminated,
 * names without the leading dashes, matched before '='), which are skipped. */
int cfg_apply_args(const struct cfg_schema *s, void *obj, int argc, char **argv,
		   const char *const *passthrough, char *err, size_t errlen);

/* The value of string key dotted ("section.key") in obj, or NULL when s
 * has no such string key. The text is obj's (borrowed). */
const char *cfg_get_str(const struct cfg_schema *s, const void *obj, const char *dotted);

/* Value parsers, shared with the CLI. Return 0 or -EINVAL / -ERANGE. */
int parse_i64(const char *s, int64_t *out);
int parse_size(const char *s, uint64_t *out);
/* A duration: a number with ms (the default), s, m (min), h or d. */
int parse_ms(const char *s, int64_t *out);
int parse_bool(const char *s, int *out);

#endif
