/*
 * Unit tests for src/meta/meta_proto: every request and reply body round
 * trips, and every decoder rejects a truncated body, trailing bytes,
 * over-long strings, NUL bytes in strings and out-of-range flags/counts.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/buf.h"
#include "meta/meta_proto.h"
#include "net/codec.h"
#include "strata/errors.h"

typedef int (*decode_fn)(const void *body, uint32_t len);

/* Decoders with a uniform signature over static scratch space. */
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
} scratch;

static int d_name(const void *b, uint32_t l) { return mp_name_req_decode(b, l, &scratch.name); }
static int d_ino(const void *b, uint32_t l) { return mp_ino_req_decode(b, l, &scratch.ino); }
static int d_create(const void *b, uint32_t l) { return mp_create_req_decode(b, l, &scratch.create); }
static int d_open(const void *b, uint32_t l) { return mp_open_req_decode(b, l, &scratch.open); }
static int d_symlink(const void *b, uint32_t l) { return mp_symlink_req_decode(b, l, &scratch.symlink); }
static int d_rename(const void *b, uint32_t l) { return mp_rename_req_decode(b, l, &scratch.rename); }
static int d_setattr(const void *b, uint32_t l) { return mp_setattr_req_decode(b, l, &scratch.setattr); }
static int d_set_size(const void *b, uint32_t l) { return mp_set_size_req_decode(b, l, &scratch.set_size); }
static int d_truncate(const void *b, uint32_t l) { return mp_truncate_req_decode(b, l, &scratch.truncate); }
static int d_readdir(const void *b, uint32_t l) { return mp_readdir_req_decode(b, l, &scratch.readdir); }
static int d_set_layout(const void *b, uint32_t l) { return mp_set_layout_req_decode(b, l, &scratch.set_layout); }
static int d_resolve(const void *b, uint32_t l) { return mp_resolve_req_decode(b, l, &scratch.resolve); }
static int d_inode(const void *b, uint32_t l) { return mp_inode_rep_decode(b, l, &scratch.inode); }
static int d_attr(const void *b, uint32_t l) { return mp_attr_rep_decode(b, l, &scratch.attr); }
static int d_layout(const void *b, uint32_t l) { return mp_layout_rep_decode(b, l, &scratch.layout); }
static int d_statfs(const void *b, uint32_t l) { return mp_statfs_rep_decode(b, l, &scratch.statfs); }
static int d_readlink(const void *b, uint32_t l)
{
	return mp_readlink_rep_decode(b, l, scratch.target, sizeof(scratch.target));
}
static int d_readdir_rep(const void *b, uint32_t l)
{
	return mp_readdir_rep_decode(b, l, NULL, NULL, NULL, 0, NULL, NULL);
}

struct fix {
	struct bbuf b;
	struct wbuf w;
};

static int setup(void **state)
{
	static struct fix f;

	bbuf_init(&f.b);
	wbuf_init(&f.w, &f.b);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	bbuf_release(&f->b);
	return 0;
}

static void reset(struct fix *f)
{
	f->b.len = 0;
	f->w.err = 0;
}

/*
 * The body in f decodes; every strict prefix of it and the body with one
 * more byte do not. Each is decoded from its own heap copy of exactly its
 * length, so ASan sees any read past the end.
 */
static void check_strict(struct fix *f, decode_fn fn)
{
	size_t len = f->b.len;
	uint8_t *copy;

	assert_int_equal(f->w.err, 0);
	copy = malloc(len + 1);
	assert_non_null(copy);
	memcpy(copy, f->b.buf, len);
	assert_int_equal(fn(copy, (uint32_t)len), 0);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *p = malloc(cut ? cut : 1);

		assert_non_null(p);
		memcpy(p, copy, cut);
		assert_int_equal(fn(p, (uint32_t)cut), STRATA_EBADMSG);
		free(p);
	}
	copy[len] = 0;
	assert_int_equal(fn(copy, (uint32_t)len + 1), STRATA_EBADMSG);
	free(copy);
}

static void fill_layout(struct file_layout *l)
{
	l->chunk_size = 1u << 22;
	l->stripe = 7;
	l->table_len = 31;
	l->seed = 0xfedcba9876543210ull;
}

static void fill_inode(struct meta_inode *in)
{
	memset(in, 0, sizeof(*in));
	in->ino = UINT64_MAX - 3;
	in->mode = S_IFREG | 0640;
	in->uid = 1000;
	in->gid = UINT32_MAX;
	in->nlink = 1;
	in->size = (1ull << 40) + 12345;
	in->atime_ns = -1;
	in->mtime_ns = INT64_MAX;
	in->ctime_ns = INT64_MIN;
	in->parent = 42;
	fill_layout(&in->layout);
}

static void assert_layout_eq(const struct file_layout *a, const struct file_layout *b)
{
	assert_int_equal(a->chunk_size, b->chunk_size);
	assert_int_equal(a->stripe, b->stripe);
	assert_int_equal(a->table_len, b->table_len);
	assert_true(a->seed == b->seed);
}

static void assert_inode_eq(const struct meta_inode *a, const struct meta_inode *b)
{
	assert_true(a->ino == b->ino);
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	assert_int_equal(a->nlink, b->nlink);
	assert_true(a->size == b->size);
	assert_true(a->atime_ns == b->atime_ns);
	assert_true(a->mtime_ns == b->mtime_ns);
	assert_true(a->ctime_ns == b->ctime_ns);
	assert_true(a->parent == b->parent);
	assert_layout_eq(&a->layout, &b->layout);
}

/* A string of n copies of c, in a static buffer. */
static const char *rep_str(char c, size_t n)
{
	static char s[MP_PATH_MAX + 16];

	assert_true(n < sizeof(s));
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- requests ---- */

static void test_name_and_ino(void **state)
{
	struct fix *f = *state;

	mp_name_req_encode(&f->w, 7, "hello");
	check_strict(f, d_name);
	assert_true(scratch.name.parent == 7);
	assert_string_equal(scratch.name.name, "hello");

	/* 255 bytes is the longest name, 256 is refused. */
	reset(f);
	mp_name_req_encode(&f->w, 1, rep_str('n', MP_NAME_MAX));
	assert_int_equal(d_name(f->b.buf, (uint32_t)f->b.len), 0);
	assert_int_equal(strlen(scratch.name.name), MP_NAME_MAX);
	reset(f);
	mp_name_req_encode(&f->w, 1, rep_str('n', MP_NAME_MAX + 1));
	assert_int_equal(d_name(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	/* A NUL inside a name. */
	reset(f);
	wb_u64(&f->w, 1);
	wb_bytes(&f->w, "a\0b", 3);
	assert_int_equal(d_name(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	/* A length beyond the body. */
	reset(f);
	wb_u64(&f->w, 1);
	wb_u32(&f->w, 100);
	wb_raw(&f->w, "abc", 3);
	assert_int_equal(d_name(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	reset(f);
	mp_ino_req_encode(&f->w, UINT64_MAX);
	check_strict(f, d_ino);
	assert_true(scratch.ino.ino == UINT64_MAX);
}

static void test_create_open(void **state)
{
	struct fix *f = *state;
	struct mp_create_req c = { .parent = 9, .mode = 0644, .uid = 5, .gid = 6,
				   .flags = MP_CREATE_EXCL | MP_CREATE_TRUNC };
	struct mp_open_req o = { .ino = 77, .flags = MP_O_RDWR | MP_O_TRUNC };

	snprintf(c.name, sizeof(c.name), "file.bin");
	mp_create_req_encode(&f->w, &c);
	check_strict(f, d_create);
	assert_true(scratch.create.parent == 9);
	assert_string_equal(scratch.create.name, "file.bin");
	assert_int_equal(scratch.create.mode, 0644);
	assert_int_equal(scratch.create.uid, 5);
	assert_int_equal(scratch.create.gid, 6);
	assert_int_equal(scratch.create.flags, MP_CREATE_EXCL | MP_CREATE_TRUNC);

	reset(f);
	c.flags = 1u << 5;
	mp_create_req_encode(&f->w, &c);
	assert_int_equal(d_create(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	reset(f);
	mp_open_req_encode(&f->w, &o);
	check_strict(f, d_open);
	assert_true(scratch.open.ino == 77);
	assert_int_equal(scratch.open.flags, MP_O_RDWR | MP_O_TRUNC);

	/* Access mode 3 and unknown bits are refused. */
	reset(f);
	o.flags = MP_O_ACCMODE;
	mp_open_req_encode(&f->w, &o);
	assert_int_equal(d_open(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	reset(f);
	o.flags = 1u << 8;
	mp_open_req_encode(&f->w, &o);
	assert_int_equal(d_open(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
}

static void test_open_flags(void **state)
{
	(void)state;
	assert_int_equal(mp_open_flags_to_wire(O_RDONLY), MP_O_RDONLY);
	assert_int_equal(mp_open_flags_to_wire(O_WRONLY | O_CREAT), MP_O_WRONLY);
	assert_int_equal(mp_open_flags_to_wire(O_RDWR | O_TRUNC), MP_O_RDWR | MP_O_TRUNC);
	assert_int_equal(mp_open_flags_from_wire(MP_O_WRONLY | MP_O_TRUNC), O_WRONLY | O_TRUNC);
	assert_int_equal(mp_open_flags_from_wire(MP_O_RDWR), O_RDWR);
	assert_int_equal(mp_open_flags_from_wire(MP_O_RDONLY), O_RDONLY);
}

static void test_symlink_rename(void **state)
{
	struct fix *f = *state;
	static struct mp_symlink_req s;
	struct mp_rename_req r = { .src_parent = 3, .dst_parent = 4,
				   .flags = NS_RENAME_NOREPLACE };

	memset(&s, 0, sizeof(s));
	s.parent = 2;
	snprintf(s.name, sizeof(s.name), "ln");
	snprintf(s.target, sizeof(s.target), "%s", rep_str('t', MP_TARGET_MAX));
	s.uid = 11;
	s.gid = 12;
	mp_symlink_req_encode(&f->w, &s);
	check_strict(f, d_symlink);
	assert_true(scratch.symlink.parent == 2);
	assert_string_equal(scratch.symlink.name, "ln");
	assert_int_equal(strlen(scratch.symlink.target), MP_TARGET_MAX);
	assert_int_equal(scratch.symlink.uid, 11);
	assert_int_equal(scratch.symlink.gid, 12);

	/* A target of 4097 bytes. */
	reset(f);
	wb_u64(&f->w, 2);
	wb_str(&f->w, "ln");
	wb_str(&f->w, rep_str('t', MP_TARGET_MAX + 1));
	wb_u32(&f->w, 0);
	wb_u32(&f->w, 0);
	assert_int_equal(d_symlink(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	reset(f);
	snprintf(r.src_name, sizeof(r.src_name), "a");
	snprintf(r.dst_name, sizeof(r.dst_name), "b");
	mp_rename_req_encode(&f->w, &r);
	check_strict(f, d_rename);
	assert_true(scratch.rename.src_parent == 3);
	assert_true(scratch.rename.dst_parent == 4);
	assert_string_equal(scratch.rename.src_name, "a");
	assert_string_equal(scratch.rename.dst_name, "b");
	assert_int_equal(scratch.rename.flags, NS_RENAME_NOREPLACE);

	reset(f);
	r.flags = 4;
	mp_rename_req_encode(&f->w, &r);
	assert_int_equal(d_rename(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
}

static void test_attrs_sizes(void **state)
{
	struct fix *f = *state;
	struct mp_setattr_req sa;
	struct mp_set_size_req ss = { .ino = 5, .size = 1ull << 50, .mtime_ns = -7 };
	struct mp_truncate_req tr = { .ino = 6, .size = 4097 };

	memset(&sa, 0, sizeof(sa));
	sa.ino = 8;
	sa.mask = NS_ATTR_MODE | NS_ATTR_SIZE | NS_ATTR_MTIME_NOW;
	sa.attrs.mode = 0600;
	sa.attrs.uid = 1;
	sa.attrs.gid = 2;
	sa.attrs.atime_ns = 3;
	sa.attrs.mtime_ns = -4;
	sa.attrs.size = 123456789;
	mp_setattr_req_encode(&f->w, &sa);
	check_strict(f, d_setattr);
	assert_true(scratch.setattr.ino == 8);
	assert_int_equal(scratch.setattr.mask, sa.mask);
	assert_int_equal(scratch.setattr.attrs.mode, 0600);
	assert_int_equal(scratch.setattr.attrs.uid, 1);
	assert_int_equal(scratch.setattr.attrs.gid, 2);
	assert_true(scratch.setattr.attrs.atime_ns == 3);
	assert_true(scratch.setattr.attrs.mtime_ns == -4);
	assert_true(scratch.setattr.attrs.size == 123456789);

	reset(f);
	sa.mask = 0x100;
	mp_setattr_req_encode(&f->w, &sa);
	assert_int_equal(d_setattr(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	reset(f);
	mp_set_size_req_encode(&f->w, &ss);
	check_strict(f, d_set_size);
	assert_true(scratch.set_size.ino == 5);
	assert_true(scratch.set_size.size == 1ull << 50);
	assert_true(scratch.set_size.mtime_ns == -7);

	reset(f);
	mp_truncate_req_encode(&f->w, &tr);
	check_strict(f, d_truncate);
	assert_true(scratch.truncate.ino == 6);
	assert_true(scratch.truncate.size == 4097);
}

static void test_readdir_layout_resolve(void **state)
{
	struct fix *f = *state;
	struct mp_readdir_req rd = { .dir = 1, .max = MP_READDIR_MAX };
	struct mp_set_layout_req sl = { .dir = 12 };
	static struct mp_resolve_req rs;

	snprintf(rd.cookie, sizeof(rd.cookie), "%s", rep_str('c', MP_NAME_MAX));
	mp_readdir_req_encode(&f->w, &rd);
	check_strict(f, d_readdir);
	assert_true(scratch.readdir.dir == 1);
	assert_int_equal(strlen(scratch.readdir.cookie), MP_NAME_MAX);
	assert_int_equal(scratch.readdir.max, MP_READDIR_MAX);

	/* max out of 1..1024. */
	reset(f);
	rd.max = 0;
	mp_readdir_req_encode(&f->w, &rd);
	assert_int_equal(d_readdir(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	reset(f);
	rd.max = MP_READDIR_MAX + 1;
	mp_readdir_req_encode(&f->w, &rd);
	assert_int_equal(d_readdir(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	reset(f);
	fill_layout(&sl.layout);
	mp_set_layout_req_encode(&f->w, &sl);
	check_strict(f, d_set_layout);
	assert_true(scratch.set_layout.dir == 12);
	assert_layout_eq(&scratch.set_layout.layout, &sl.layout);

	reset(f);
	memset(&rs, 0, sizeof(rs));
	snprintf(rs.path, sizeof(rs.path), "/%s", rep_str('p', MP_PATH_MAX - 1));
	rs.flags = NS_RESOLVE_FOLLOW;
	mp_resolve_req_encode(&f->w, &rs);
	check_strict(f, d_resolve);
	assert_int_equal(strlen(scratch.resolve.path), MP_PATH_MAX);
	assert_int_equal(scratch.resolve.flags, NS_RESOLVE_FOLLOW);

	reset(f);
	wb_str(&f->w, rep_str('p', MP_PATH_MAX + 1));
	wb_u32(&f->w, 0);
	assert_int_equal(d_resolve(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	reset(f);
	wb_str(&f->w, "/x");
	wb_u32(&f->w, 2);
	assert_int_equal(d_resolve(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	/* STATFS takes an empty body. */
	assert_int_equal(mp_empty_decode(NULL, 0), 0);
	assert_int_equal(mp_empty_decode("x", 1), STRATA_EBADMSG);
}

/* ---- replies ---- */

static void test_inode_attr_reps(void **state)
{
	struct fix *f = *state;
	struct meta_inode in;
	struct mp_attr_rep rep;

	fill_inode(&in);
	mp_inode_encode(&f->w, &in);
	assert_int_equal(f->b.len, 84);	/* the wire size of an inode */
	check_strict(f, d_inode);
	assert_inode_eq(&scratch.inode, &in);

	reset(f);
	memset(&rep, 0, sizeof(rep));
	rep.created = true;
	rep.inode = in;
	rep.trunc.partial = true;
	rep.trunc.chunk = 3;
	rep.trunc.len = 100;
	rep.trunc.gc_from = 4;
	rep.trunc.gc_to = 9;
	rep.trunc.layout = in.layout;
	mp_attr_rep_encode(&f->w, &rep);
	check_strict(f, d_attr);
	assert_true(scratch.attr.created);
	assert_inode_eq(&scratch.attr.inode, &in);
	assert_true(scratch.attr.trunc.partial);
	assert_true(scratch.attr.trunc.chunk == 3);
	assert_int_equal(scratch.attr.trunc.len, 100);
	assert_true(scratch.attr.trunc.gc_from == 4);
	assert_true(scratch.attr.trunc.gc_to == 9);
	assert_layout_eq(&scratch.attr.trunc.layout, &in.layout);

	/* created and partial are 0 or 1; gc_from <= gc_to. */
	f->b.buf[0] = 2;
	assert_int_equal(d_attr(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	f->b.buf[0] = 0;
	f->b.buf[1 + 84] = 2;
	assert_int_equal(d_attr(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	f->b.buf[1 + 84] = 0;
	assert_int_equal(d_attr(f->b.buf, (uint32_t)f->b.len), 0);
	assert_false(scratch.attr.created);
	reset(f);
	rep.trunc.gc_from = 10;
	mp_attr_rep_encode(&f->w, &rep);
	assert_int_equal(d_attr(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
}

static void test_small_reps(void **state)
{
	struct fix *f = *state;
	struct file_layout l;
	struct mp_statfs_rep st = { .inodes = 1000, .bytes = 1ull << 45, .table_len = 64 };
	const char *t = rep_str('x', MP_TARGET_MAX);
	char small[8];

	fill_layout(&l);
	mp_layout_encode(&f->w, &l);
	check_strict(f, d_layout);
	assert_layout_eq(&scratch.layout, &l);

	reset(f);
	mp_statfs_rep_encode(&f->w, &st);
	check_strict(f, d_statfs);
	assert_true(scratch.statfs.inodes == 1000);
	assert_true(scratch.statfs.bytes == 1ull << 45);
	assert_int_equal(scratch.statfs.table_len, 64);

	reset(f);
	mp_readlink_rep_encode(&f->w, "../target", 9);
	check_strict(f, d_readlink);
	assert_string_equal(scratch.target, "../target");
	/* A buffer that cannot hold it. */
	assert_int_equal(mp_readlink_rep_decode(f->b.buf, (uint32_t)f->b.len, small, 4),
			 STRATA_EBADMSG);
	assert_int_equal(mp_readlink_rep_decode(f->b.buf, (uint32_t)f->b.len, small, 0),
			 STRATA_EBADMSG);

	reset(f);
	mp_readlink_rep_encode(&f->w, t, MP_TARGET_MAX);
	assert_int_equal(d_readlink(f->b.buf, (uint32_t)f->b.len), 0);
	reset(f);
	mp_readlink_rep_encode(&f->w, rep_str('x', MP_TARGET_MAX + 1), MP_TARGET_MAX + 1);
	assert_int_equal(d_readlink(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
}

struct collect {
	uint32_t n, stop_at;
	char names[8][MP_NAME_MAX + 1];
	uint64_t inos[8];
	uint32_t types[8];
};

static int collect_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct collect *c = arg;

	if (c->n == c->stop_at)
		return 7;
	assert_true(c->n < 8);
	snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
	c->inos[c->n] = ino;
	c->types[c->n] = type;
	c->n++;
	return 0;
}

/* Encodes a READDIR reply of the given names into f. */
static void encode_listing(struct fix *f, const char *const *names, uint32_t n,
			   const char *cookie, bool eof)
{
	struct bbuf ents;
	struct wbuf w;

	bbuf_init(&ents);
	wbuf_init(&w, &ents);
	for (uint32_t i = 0; i < n; i++)
		mp_dirent_encode(&w, names[i], 100 + i, i % 2 ? S_IFDIR : S_IFREG);
	assert_int_equal(w.err, 0);
	mp_readdir_rep_encode(&f->w, n, ents.buf, ents.len, cookie, eof);
	bbuf_release(&ents);
}

static void test_readdir_rep(void **state)
{
	struct fix *f = *state;
	static const char *const names[] = { "a", "bb", "ccc" };
	struct collect c = { .stop_at = UINT32_MAX };
	char next[MP_NAME_MAX + 1];
	bool eof = false;
	uint32_t taken;

	encode_listing(f, names, 3, "ccc", true);
	check_strict(f, d_readdir_rep);
	assert_int_equal(mp_readdir_rep_decode(f->b.buf, (uint32_t)f->b.len, collect_cb, &c,
					       next, sizeof(next), &eof, &taken), 0);
	assert_int_equal(taken, 3);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.names[0], "a");
	assert_string_equal(c.names[2], "ccc");
	assert_true(c.inos[1] == 101);
	assert_int_equal(c.types[1], S_IFDIR);
	assert_string_equal(next, "ccc");
	assert_true(eof);

	/* The callback stops the listing at the second entry. */
	memset(&c, 0, sizeof(c));
	c.stop_at = 1;
	assert_int_equal(mp_readdir_rep_decode(f->b.buf, (uint32_t)f->b.len, collect_cb, &c,
					       NULL, 0, NULL, &taken), 7);
	assert_int_equal(taken, 1);

	/* An empty listing. */
	reset(f);
	encode_listing(f, names, 0, "", false);
	check_strict(f, d_readdir_rep);
	assert_int_equal(mp_readdir_rep_decode(f->b.buf, (uint32_t)f->b.len, collect_cb, &c,
					       next, sizeof(next), &eof, &taken), 0);
	assert_int_equal(taken, 0);
	assert_false(eof);
	assert_string_equal(next, "");

	/* A malformed third entry: no callback runs at all. */
	reset(f);
	wb_u32(&f->w, 3);
	mp_dirent_encode(&f->w, "a", 1, S_IFREG);
	mp_dirent_encode(&f->w, "b", 2, S_IFREG);
	wb_u32(&f->w, MP_NAME_MAX + 1);
	memset(&c, 0, sizeof(c));
	c.stop_at = UINT32_MAX;
	assert_int_equal(mp_readdir_rep_decode(f->b.buf, (uint32_t)f->b.len, collect_cb, &c,
					       NULL, 0, NULL, &taken), STRATA_EBADMSG);
	assert_int_equal(c.n, 0);

	/* More entries than MP_READDIR_MAX claimed. */
	reset(f);
	wb_u32(&f->w, MP_READDIR_MAX + 1);
	assert_int_equal(d_readdir_rep(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);

	/* An empty name, an eof byte of 2, an over-long cookie. */
	reset(f);
	wb_u32(&f->w, 1);
	mp_dirent_encode(&f->w, "", 1, S_IFREG);
	wb_str(&f->w, "");
	wb_u8(&f->w, 1);
	assert_int_equal(d_readdir_rep(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	reset(f);
	encode_listing(f, names, 1, "a", true);
	f->b.buf[f->b.len - 1] = 2;
	assert_int_equal(d_readdir_rep(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
	reset(f);
	wb_u32(&f->w, 0);
	wb_str(&f->w, rep_str('k', MP_NAME_MAX + 1));
	wb_u8(&f->w, 0);
	assert_int_equal(d_readdir_rep(f->b.buf, (uint32_t)f->b.len), STRATA_EBADMSG);
}

/* A full page of the longest names fits a frame body. */
static void test_readdir_full_page(void **state)
{
	struct fix *f = *state;
	struct bbuf ents;
	struct wbuf w;
	char name[MP_NAME_MAX + 1];
	uint32_t taken = 0;

	bbuf_init(&ents);
	wbuf_init(&w, &ents);
	for (uint32_t i = 0; i < MP_READDIR_MAX; i++) {
		memset(name, 'z', MP_NAME_MAX);
		snprintf(name + MP_NAME_MAX - 8, 9, "%08u", i);
		mp_dirent_encode(&w, name, i + 2, S_IFREG);
	}
	mp_readdir_rep_encode(&f->w, MP_READDIR_MAX, ents.buf, ents.len, name, false);
	bbuf_release(&ents);
	assert_int_equal(f->w.err, 0);
	assert_true(f->b.len < (4u << 20));
	assert_int_equal(mp_readdir_rep_decode(f->b.buf, (uint32_t)f->b.len, NULL, NULL, NULL, 0,
					       NULL, &taken), 0);
}

/* Every decoder survives arbitrary bytes: no crash, 0 or EBADMSG. */
static void test_garbage(void **state)
{
	static const decode_fn fns[] = {
		d_name, d_ino, d_create, d_open, d_symlink, d_rename, d_setattr, d_set_size,
		d_truncate, d_readdir, d_set_layout, d_resolve, d_inode, d_attr, d_layout,
		d_statfs, d_readlink, d_readdir_rep,
	};
	uint8_t buf[512];
	uint32_t seed = 12345;

	(void)state;
	for (int round = 0; round < 2000; round++) {
		uint32_t len = (uint32_t)(round % sizeof(buf));

		for (uint32_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			/* Small values make plausible lengths and counts. */
			buf[i] = (uint8_t)(seed >> 16) & (round % 3 ? 0xff : 0x07);
		}
		for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++) {
			int rc = fns[k](buf, len);

			assert_true(rc == 0 || rc == STRATA_EBADMSG);
		}
	}
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_name_and_ino),
		T(test_create_open),
		T(test_open_flags),
		T(test_symlink_rename),
		T(test_attrs_sizes),
		T(test_readdir_layout_resolve),
		T(test_inode_attr_reps),
		T(test_small_reps),
		T(test_readdir_rep),
		T(test_readdir_full_page),
		T(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
