/*
 * libFuzzer target: every decoder of the meta service's bodies
 * (src/meta/meta_proto.c) on the same input. Built and run by
 * scripts/fuzz.sh, which must compile src/meta/meta_proto.c with it.
 *
 * Properties checked beyond "no crash, no sanitizer report":
 * - a decoder returns 0 or STRATA_EBADMSG, nothing else;
 * - a body that decodes re-encodes to the same bytes (the encoding is
 *   canonical: one byte string per message);
 * - decoded strings are NUL-terminated within their bounds;
 * - a READDIR reply that fails validation runs no callback, and one that
 *   passes runs it once per entry, with names of 1..255 bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "meta/meta_proto.h"
#include "net/codec.h"
#include "strata/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

static union {
	struct mp_name_req name;
	struct mp_ino_req ino;
	struct mp_create_req create;
	struct mp_open_req open;
	struct mp_symlink_req symlink;
	struct mp_rename_req rename;
	struct mp_setattr_req setattr;
	struct mp_set_size_req set_size;
	struct mp_truncate_req truncate;
	struct mp_readdir_req readdir;
	struct mp_set_layout_req set_layout;
	struct mp_resolve_req resolve;
	struct meta_inode inode;
	struct mp_attr_rep attr;
	struct file_layout layout;
	struct mp_statfs_rep statfs;
	char target[MP_TARGET_MAX + 1];
} u;

static struct bbuf again;

/* rc is a decoder's result on data: on success, what the encoder wrote
 * into again must equal the input. */
static void check(int rc, const uint8_t *data, uint32_t len, struct wbuf *w)
{
	CHECK(rc == 0 || rc == STRATA_EBADMSG);
	if (rc)
		return;
	CHECK(w->err == 0);
	CHECK(again.len == len);
	CHECK(len == 0 || memcmp(again.buf, data, len) == 0);
}

static struct wbuf *fresh(struct wbuf *w)
{
	again.len = 0;
	wbuf_init(w, &again);
	return w;
}

static uint32_t dirents;

static int count_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	size_t n = strlen(name);

	(void)arg;
	(void)ino;
	(void)type;
	CHECK(n >= 1 && n <= MP_NAME_MAX);
	dirents++;
	return 0;
}

static void requests(const uint8_t *data, uint32_t len)
{
	struct wbuf w;
	int rc;

	rc = mp_name_req_decode(data, len, &u.name);
	if (!rc) {
		CHECK(strlen(u.name.name) <= MP_NAME_MAX);
		mp_name_req_encode(fresh(&w), u.name.parent, u.name.name);
	}
	check(rc, data, len, &w);
	rc = mp_ino_req_decode(data, len, &u.ino);
	if (!rc)
		mp_ino_req_encode(fresh(&w), u.ino.ino);
	check(rc, data, len, &w);
	rc = mp_create_req_decode(data, len, &u.create);
	if (!rc)
		mp_create_req_encode(fresh(&w), &u.create);
	check(rc, data, len, &w);
	rc = mp_open_req_decode(data, len, &u.open);
	if (!rc)
		mp_open_req_encode(fresh(&w), &u.open);
	check(rc, data, len, &w);
	rc = mp_symlink_req_decode(data, len, &u.symlink);
	if (!rc) {
		CHECK(strlen(u.symlink.target) <= MP_TARGET_MAX);
		mp_symlink_req_encode(fresh(&w), &u.symlink);
	}
	check(rc, data, len, &w);
	rc = mp_rename_req_decode(data, len, &u.rename);
	if (!rc)
		mp_rename_req_encode(fresh(&w), &u.rename);
	check(rc, data, len, &w);
	rc = mp_setattr_req_decode(data, len, &u.setattr);
	if (!rc)
		mp_setattr_req_encode(fresh(&w), &u.setattr);
	check(rc, data, len, &w);
	rc = mp_set_size_req_decode(data, len, &u.set_size);
	if (!rc)
		mp_set_size_req_encode(fresh(&w), &u.set_size);
	check(rc, data, len, &w);
	rc = mp_truncate_req_decode(data, len, &u.truncate);
	if (!rc)
		mp_truncate_req_encode(fresh(&w), &u.truncate);
	check(rc, data, len, &w);
	rc = mp_readdir_req_decode(data, len, &u.readdir);
	if (!rc) {
		CHECK(u.readdir.max >= 1 && u.readdir.max <= MP_READDIR_MAX);
		mp_readdir_req_encode(fresh(&w), &u.readdir);
	}
	check(rc, data, len, &w);
	rc = mp_set_layout_req_decode(data, len, &u.set_layout);
	if (!rc)
		mp_set_layout_req_encode(fresh(&w), &u.set_layout);
	check(rc, data, len, &w);
	rc = mp_resolve_req_decode(data, len, &u.resolve);
	if (!rc) {
		CHECK(strlen(u.resolve.path) <= MP_PATH_MAX);
		mp_resolve_req_encode(fresh(&w), &u.resolve);
	}
	check(rc, data, len, &w);
	rc = mp_empty_decode(data, len);
	CHECK(rc == 0 || rc == STRATA_EBADMSG);
	CHECK((rc == 0) == (len == 0));
}

static void replies(const uint8_t *data, uint32_t len)
{
	char cookie[MP_NAME_MAX + 1];
	struct wbuf w;
	uint32_t taken = 0;
	bool eof;
	int rc;

	rc = mp_inode_rep_decode(data, len, &u.inode);
	if (!rc)
		mp_inode_encode(fresh(&w), &u.inode);
	check(rc, data, len, &w);
	rc = mp_attr_rep_decode(data, len, &u.attr);
	if (!rc)
		mp_attr_rep_encode(fresh(&w), &u.attr);
	check(rc, data, len, &w);
	rc = mp_layout_rep_decode(data, len, &u.layout);
	if (!rc)
		mp_layout_encode(fresh(&w), &u.layout);
	check(rc, data, len, &w);
	rc = mp_statfs_rep_decode(data, len, &u.statfs);
	if (!rc)
		mp_statfs_rep_encode(fresh(&w), &u.statfs);
	check(rc, data, len, &w);
	rc = mp_readlink_rep_decode(data, len, u.target, sizeof(u.target));
	if (!rc)
		mp_readlink_rep_encode(fresh(&w), u.target, (uint32_t)strlen(u.target));
	check(rc, data, len, &w);

	dirents = 0;
	rc = mp_readdir_rep_decode(data, len, count_cb, NULL, cookie, sizeof(cookie), &eof,
				   &taken);
	CHECK(rc == 0 || rc == STRATA_EBADMSG);
	if (rc) {
		CHECK(dirents == 0 && taken == 0);
	} else {
		CHECK(dirents == taken && taken <= MP_READDIR_MAX);
		CHECK(strlen(cookie) <= MP_NAME_MAX);
		CHECK(len >= 4 && get_le32(data) == taken);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (8u << 20))
		return 0;
	requests(data, (uint32_t)size);
	replies(data, (uint32_t)size);
	return 0;
}
