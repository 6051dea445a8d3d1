/*
 * File helpers of libstrata's own features (checkpoints, packed datasets)
 * built only on the public API (strata/strata.h), so those features could
 * live outside the library unchanged. Every function returns 0 (or a
 * count) or a negative error code, as the public API does.
 */
#ifndef STRATA_CLIENT_FSUTIL_H
#define STRATA_CLIENT_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "strata/strata.h"

#define FSU_PATH_MAX 4096

/* a + "/" + b into out. Returns 0 or -ENAMETOOLONG. */
int fsu_join(char *out, size_t len, const char *a, const char *b);

/* Removes a file or a directory tree; entries already gone are not
 * errors. */
int fsu_rmtree(struct strata *s, const char *path);

/* Creates (or truncates) path and writes len bytes of buf at 0, then
 * closes it (close persists it on every replica). */
int fsu_write_file(struct strata *s, const char *path, const void *buf, size_t len);

/* Reads the whole file path, at most max bytes (-EFBIG past that), into a
 * NUL-terminated malloc'd string: *out (the caller frees it) and its
 * length in *outlen (may be NULL). */
int fsu_read_file(struct strata *s, const char *path, uint64_t max, char **out, size_t *outlen);

/* fsu_read_file, parsed as JSON. Returns the value (the caller
 * json_decref's it) or NULL with *err set (STRATA_EBADMSG when it is not
 * JSON). */
json_t *fsu_read_json(struct strata *s, const char *path, uint64_t max, int *err);

#endif
