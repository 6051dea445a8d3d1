/*
 * Unit tests for the meta service's table (src/proto/meta.h): every
 * request and reply round trips through the generated codecs, and the
 * decoders reject a truncated body, trailing bytes, over-long strings,
 * NUL bytes in strings, out-of-range flags and counts, and the cross-field
 * rules written in src/proto/meta.c.
 */
#include <errno.h>
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
#include "net/codec.h"
#include "net/frame.h"
#include "proto/meta.h"
#include "strata/errors.h"

typedef void (*enc_fn)(struct wbuf *w, const void *m);
typedef int (*dec_fn)(const void *body, uint32_t len, void *out);

struct fix {
	struct bbuf b;
	struct wbuf w;
	uint8_t *copy;		/* what the kept decode's views point into */
};

static int setup(void **state)
{
	static struct fix f;

	bbuf_init(&f.b);
	wbuf_init(&f.w, &f.b);
	f.copy = NULL;
	*state = &f;
	return 0;
}

static void reset(struct fix *f)
{
	f->b.len = 0;
	f->w.err = 0;
	free(f->copy);
	f->copy = NULL;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	reset(f);
	bbuf_release(&f->b);
	return 0;
}

/* A heap copy of exactly n bytes of p, so ASan sees a read past the end. */
static uint8_t *exact(const void *p, size_t n)
{
	uint8_t *c = malloc(n ? n : 1);

	assert_non_null(c);
	if (n)
		memcpy(c, p, n);
	return c;
}

/* The decode of the body in f, from an exact copy. */
static int dec_body(struct fix *f, dec_fn dec, void *out)
{
	free(f->copy);
	f->copy = exact(f->b.buf, f->b.len);
	return dec(f->copy, (uint32_t)f->b.len, out);
}

/*
 * The body in f decodes into out (size bytes; views into f->copy, arrays
 * to be released by the caller) and re-encodes to the same bytes; every
 * strict prefix of it and the body with one more byte do not decode.
 */
static void check_strict(struct fix *f, enc_fn enc, dec_fn dec, void *out, size_t size)
{
	size_t len = f->b.len;
	void *tmp = malloc(size);
	struct bbuf again;
	struct wbuf w;
	uint8_t *p;

	assert_non_null(tmp);
	assert_int_equal(f->w.err, 0);
	for (size_t cut = 0; cut < len; cut++) {
		p = exact(f->b.buf, cut);
		assert_int_equal(dec(p, (uint32_t)cut, tmp), STRATA_EBADMSG);
		free(p);
	}
	p = malloc(len + 1);
	assert_non_null(p);
	memcpy(p, f->b.buf, len);
	p[len] = 0;
	assert_int_equal(dec(p, (uint32_t)len + 1, tmp), STRATA_EBADMSG);
	free(p);
	free(tmp);

	assert_int_equal(dec_body(f, dec, out), 0);
	bbuf_init(&again);
	wbuf_init(&w, &again);
	enc(&w, out);
	assert_int_equal(w.err, 0);
	assert_int_equal(again.len, len);
	assert_memory_equal(again.buf, f->b.buf, len);
	bbuf_release(&again);
}

/* Encodes m with enc into f (emptied first). */
static void put(struct fix *f, enc_fn enc, const void *m)
{
	reset(f);
	enc(&f->w, m);
	assert_int_equal(f->w.err, 0);
}

/* The body in f does not decode. */
static void refused(struct fix *f, dec_fn dec, size_t size)
{
	void *tmp = malloc(size);

	assert_non_null(tmp);
	assert_int_equal(dec_body(f, dec, tmp), STRATA_EBADMSG);
	free(tmp);
}

#define STRICT(f, type, out) \
	check_strict((f), type##_enc_any, type##_decode_any, (out), sizeof(struct type))
#define REFUSED(f, type) refused((f), type##_decode_any, sizeof(struct type))

/* A string of n copies of c, in a static buffer. */
static struct pstr rep_str(char c, size_t n)
{
	static char s[MD_PATH_MAX + 16];

	assert_true(n < sizeof(s));
	memset(s, c, n);
	s[n] = '\0';
	return (struct pstr){ s, (uint32_t)n };
}

static const struct mt_handle H = { UINT64_MAX - 1, 0x0123456789abcdefull };

static void assert_handle(struct mt_handle h)
{
	assert_true(h.ino == H.ino);
	assert_true(h.gen == H.gen);
}

static void fill_layout(struct mt_layout *l)
{
	memset(l, 0, sizeof(*l));	/* padding too: compared whole below */
	l->chunk_size = 1u << 22;
	l->stripe = 7;
	l->table_len = 31;
	l->seed = 0xfedcba9876543210ull;
}

static void fill_inode(struct mt_inode *in)
{
	memset(in, 0, sizeof(*in));
	in->ino = UINT64_MAX - 3;
	in->gen = 77;
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

/* ---- requests ---- */

static void test_name_and_ino(void **state)
{
	struct fix *f = *state;
	struct mt_name n = { .dir = H, .name = pstr_c("hello") }, got;
	struct mt_ino i = { .h = H }, goti;

	put(f, mt_name_enc_any, &n);
	STRICT(f, mt_name, &got);
	assert_handle(got.dir);
	assert_true(pstr_eq(got.name, "hello"));

	/* 255 bytes is the longest name, 256 is refused. */
	n.name = rep_str('n', MD_NAME_MAX);
	put(f, mt_name_enc_any, &n);
	assert_int_equal(dec_body(f, mt_name_decode_any, &got), 0);
	assert_int_equal(got.name.len, MD_NAME_MAX);
	reset(f);
	mt_handle_enc(&f->w, &H);
	wb_bytes(&f->w, rep_str('n', MD_NAME_MAX + 1).p, MD_NAME_MAX + 1);
	REFUSED(f, mt_name);
	/* ... and the encoder will not send it. */
	reset(f);
	n.name = rep_str('n', MD_NAME_MAX + 1);
	mt_name_enc(&f->w, &n);
	assert_int_equal(f->w.err, -ENAMETOOLONG);

	/* A NUL inside a name. */
	reset(f);
	mt_handle_enc(&f->w, &H);
	wb_bytes(&f->w, "a\0b", 3);
	REFUSED(f, mt_name);

	/* A length beyond the body. */
	reset(f);
	mt_handle_enc(&f->w, &H);
	wb_u32(&f->w, 100);
	wb_raw(&f->w, "abc", 3);
	REFUSED(f, mt_name);

	put(f, mt_ino_enc_any, &i);
	assert_int_equal(f->b.len, 16);
	STRICT(f, mt_ino, &goti);
	assert_handle(goti.h);
}

static void test_create_open(void **state)
{
	struct fix *f = *state;
	struct mt_create c = { .dir = H, .name = pstr_c("file.bin"), .mode = 0644, .uid = 5,
			       .gid = 6, .flags = MD_CREATE_EXCL | MD_CREATE_TRUNC }, gotc;
	struct mt_open o = { .h = H, .flags = MD_O_RDWR | MD_O_TRUNC }, goto_;

	put(f, mt_create_enc_any, &c);
	STRICT(f, mt_create, &gotc);
	assert_handle(gotc.dir);
	assert_true(pstr_eq(gotc.name, "file.bin"));
	assert_int_equal(gotc.mode, 0644);
	assert_int_equal(gotc.uid, 5);
	assert_int_equal(gotc.gid, 6);
	assert_int_equal(gotc.flags, MD_CREATE_EXCL | MD_CREATE_TRUNC);

	c.flags = 1u << 5;
	put(f, mt_create_enc_any, &c);
	REFUSED(f, mt_create);

	put(f, mt_open_enc_any, &o);
	STRICT(f, mt_open, &goto_);
	assert_handle(goto_.h);
	assert_int_equal(goto_.flags, MD_O_RDWR | MD_O_TRUNC);

	/* Access mode 3 (mt_open_check) and unknown bits are refused. */
	o.flags = MD_O_ACCMODE;
	put(f, mt_open_enc_any, &o);
	REFUSED(f, mt_open);
	o.flags = 1u << 8;
	put(f, mt_open_enc_any, &o);
	REFUSED(f, mt_open);
}

/* The compound operations by path: strict round trips; over-long paths
 * and names, unknown flags and access mode 3 are refused. */
static void test_path_ops(void **state)
{
	struct fix *f = *state;
	struct mt_create_path c = { .dir = pstr_c("/a/b"), .name = pstr_c("f"), .mode = 0600,
				    .uid = 7, .gid = 8, .flags = MD_CREATE_EXCL }, gotc;
	struct mt_open_path o = { .path = pstr_c("/a/b/f"), .flags = MD_O_WRONLY | MD_O_TRUNC },
			    goto_;
	struct mt_path_name u = { .dir = pstr_c("/"), .name = pstr_c("x") }, gotu;

	put(f, mt_create_path_enc_any, &c);
	STRICT(f, mt_create_path, &gotc);
	assert_true(pstr_eq(gotc.dir, "/a/b"));
	assert_true(pstr_eq(gotc.name, "f"));
	assert_int_equal(gotc.mode, 0600);
	assert_int_equal(gotc.uid, 7);
	assert_int_equal(gotc.gid, 8);
	assert_int_equal(gotc.flags, MD_CREATE_EXCL);
	c.flags = 1u << 7;
	put(f, mt_create_path_enc_any, &c);
	REFUSED(f, mt_create_path);
	/* Over-long directory path or name (the encoder would not send them). */
	reset(f);
	wb_bytes(&f->w, rep_str('d', MD_PATH_MAX + 1).p, MD_PATH_MAX + 1);
	wb_bytes(&f->w, "f", 1);
	for (int i = 0; i < 4; i++)
		wb_u32(&f->w, 0);
	REFUSED(f, mt_create_path);
	reset(f);
	wb_bytes(&f->w, "/", 1);
	wb_bytes(&f->w, rep_str('n', MD_NAME_MAX + 1).p, MD_NAME_MAX + 1);
	for (int i = 0; i < 4; i++)
		wb_u32(&f->w, 0);
	REFUSED(f, mt_create_path);

	put(f, mt_open_path_enc_any, &o);
	STRICT(f, mt_open_path, &goto_);
	assert_true(pstr_eq(goto_.path, "/a/b/f"));
	assert_int_equal(goto_.flags, MD_O_WRONLY | MD_O_TRUNC);
	o.flags = MD_O_ACCMODE;
	put(f, mt_open_path_enc_any, &o);
	REFUSED(f, mt_open_path);
	o.flags = 1u << 9;
	put(f, mt_open_path_enc_any, &o);
	REFUSED(f, mt_open_path);
	reset(f);
	wb_bytes(&f->w, rep_str('p', MD_PATH_MAX + 1).p, MD_PATH_MAX + 1);
	wb_u32(&f->w, 0);
	REFUSED(f, mt_open_path);

	put(f, mt_path_name_enc_any, &u);
	STRICT(f, mt_path_name, &gotu);
	assert_true(pstr_eq(gotu.dir, "/"));
	assert_true(pstr_eq(gotu.name, "x"));
	reset(f);
	wb_bytes(&f->w, "/", 1);
	wb_bytes(&f->w, rep_str('n', MD_NAME_MAX + 1).p, MD_NAME_MAX + 1);
	REFUSED(f, mt_path_name);
	/* A NUL inside the directory path. */
	reset(f);
	wb_bytes(&f->w, "/a\0b", 4);
	wb_bytes(&f->w, "x", 1);
	REFUSED(f, mt_path_name);
}

static void test_open_flags(void **state)
{
	(void)state;
	assert_int_equal(md_open_flags_to_wire(O_RDONLY), MD_O_RDONLY);
	assert_int_equal(md_open_flags_to_wire(O_WRONLY | O_CREAT), MD_O_WRONLY);
	assert_int_equal(md_open_flags_to_wire(O_RDWR | O_TRUNC), MD_O_RDWR | MD_O_TRUNC);
	assert_int_equal(md_open_flags_from_wire(MD_O_WRONLY | MD_O_TRUNC), O_WRONLY | O_TRUNC);
	assert_int_equal(md_open_flags_from_wire(MD_O_RDWR), O_RDWR);
	assert_int_equal(md_open_flags_from_wire(MD_O_RDONLY), O_RDONLY);
}

static void test_symlink_rename(void **state)
{
	struct fix *f = *state;
	struct mt_symlink s = { .dir = H, .name = pstr_c("ln"), .uid = 11, .gid = 12 }, gots;
	struct mt_rename r = { .src_dir = H, .src_name = pstr_c("a"), .dst_dir = { 4, 5 },
			       .dst_name = pstr_c("b"), .flags = MD_RENAME_NOREPLACE }, gotr;

	s.target = rep_str('t', MD_TARGET_MAX);
	put(f, mt_symlink_enc_any, &s);
	STRICT(f, mt_symlink, &gots);
	assert_handle(gots.dir);
	assert_true(pstr_eq(gots.name, "ln"));
	assert_int_equal(gots.target.len, MD_TARGET_MAX);
	assert_int_equal(gots.uid, 11);
	assert_int_equal(gots.gid, 12);

	/* A target of 4097 bytes. */
	reset(f);
	mt_handle_enc(&f->w, &H);
	wb_str(&f->w, "ln");
	wb_bytes(&f->w, rep_str('t', MD_TARGET_MAX + 1).p, MD_TARGET_MAX + 1);
	wb_u32(&f->w, 0);
	wb_u32(&f->w, 0);
	REFUSED(f, mt_symlink);

	put(f, mt_rename_enc_any, &r);
	STRICT(f, mt_rename, &gotr);
	assert_handle(gotr.src_dir);
	assert_true(gotr.dst_dir.ino == 4 && gotr.dst_dir.gen == 5);
	assert_true(pstr_eq(gotr.src_name, "a"));
	assert_true(pstr_eq(gotr.dst_name, "b"));
	assert_int_equal(gotr.flags, MD_RENAME_NOREPLACE);

	r.flags = 4;
	put(f, mt_rename_enc_any, &r);
	REFUSED(f, mt_rename);
}

/* LINK: the file, the new directory and name; a name past MD_NAME_MAX
 * is refused. */
static void test_link(void **state)
{
	struct fix *f = *state;
	struct mt_link l = { .h = { 7, 8 }, .dir = H, .name = pstr_c("again") }, got;

	put(f, mt_link_enc_any, &l);
	STRICT(f, mt_link, &got);
	assert_true(got.h.ino == 7 && got.h.gen == 8);
	assert_handle(got.dir);
	assert_true(pstr_eq(got.name, "again"));

	reset(f);
	mt_handle_enc(&f->w, &l.h);
	mt_handle_enc(&f->w, &H);
	wb_bytes(&f->w, rep_str('n', MD_NAME_MAX + 1).p, MD_NAME_MAX + 1);
	REFUSED(f, mt_link);
	assert_string_equal(meta_ops[OP_META_LINK - OP_META_LOOKUP].name, "META_LINK");
	assert_string_equal(meta_ops[OP_META_MKNOD - OP_META_LOOKUP].name, "META_MKNOD");
}

static void test_attrs_sizes(void **state)
{
	struct fix *f = *state;
	struct mt_setattr sa = { .h = H, .mask = MD_ATTR_MODE | MD_ATTR_SIZE | MD_ATTR_MTIME_NOW,
				 .mode = 0600, .uid = 1, .gid = 2, .atime_ns = 3, .mtime_ns = -4,
				 .size = 123456789 }, got;
	struct mt_set_size ss = { .h = H, .size = 1ull << 50, .mtime_ns = -7 }, gotss;
	struct mt_truncate tr = { .h = H, .size = 4097 }, gottr;

	put(f, mt_setattr_enc_any, &sa);
	STRICT(f, mt_setattr, &got);
	assert_handle(got.h);
	assert_int_equal(got.mask, sa.mask);
	assert_int_equal(got.mode, 0600);
	assert_int_equal(got.uid, 1);
	assert_int_equal(got.gid, 2);
	assert_true(got.atime_ns == 3);
	assert_true(got.mtime_ns == -4);
	assert_true(got.size == 123456789);

	sa.mask = 0x100;
	put(f, mt_setattr_enc_any, &sa);
	REFUSED(f, mt_setattr);

	put(f, mt_set_size_enc_any, &ss);
	STRICT(f, mt_set_size, &gotss);
	assert_handle(gotss.h);
	assert_true(gotss.size == 1ull << 50);
	assert_true(gotss.mtime_ns == -7);

	put(f, mt_truncate_enc_any, &tr);
	STRICT(f, mt_truncate, &gottr);
	assert_handle(gottr.h);
	assert_true(gottr.size == 4097);
}

static void test_readdir_layout_resolve(void **state)
{
	struct fix *f = *state;
	struct mt_readdir rd = { .dir = H, .max = MD_READDIR_MAX }, gotrd;
	struct mt_set_layout sl = { .dir = H }, gotsl;
	struct mt_resolve rs = { .flags = MD_RESOLVE_FOLLOW }, gotrs;
	struct proto_void v;
	char path[MD_PATH_MAX + 1];

	rd.cookie = rep_str('c', MD_NAME_MAX);
	put(f, mt_readdir_enc_any, &rd);
	STRICT(f, mt_readdir, &gotrd);
	assert_handle(gotrd.dir);
	assert_int_equal(gotrd.cookie.len, MD_NAME_MAX);
	assert_int_equal(gotrd.max, MD_READDIR_MAX);

	/* max out of 1..1024 (0: mt_readdir_check; 1025: its range). */
	rd.max = 0;
	put(f, mt_readdir_enc_any, &rd);
	REFUSED(f, mt_readdir);
	rd.max = MD_READDIR_MAX + 1;
	put(f, mt_readdir_enc_any, &rd);
	REFUSED(f, mt_readdir);

	fill_layout(&sl.layout);
	put(f, mt_set_layout_enc_any, &sl);
	STRICT(f, mt_set_layout, &gotsl);
	assert_handle(gotsl.dir);
	assert_memory_equal(&gotsl.layout, &sl.layout, sizeof(sl.layout));

	snprintf(path, sizeof(path), "/%s", rep_str('p', MD_PATH_MAX - 1).p);
	rs.path = pstr_c(path);
	put(f, mt_resolve_enc_any, &rs);
	STRICT(f, mt_resolve, &gotrs);
	assert_int_equal(gotrs.path.len, MD_PATH_MAX);
	assert_int_equal(gotrs.flags, MD_RESOLVE_FOLLOW);

	reset(f);
	wb_bytes(&f->w, rep_str('p', MD_PATH_MAX + 1).p, MD_PATH_MAX + 1);
	wb_u32(&f->w, 0);
	REFUSED(f, mt_resolve);
	reset(f);
	wb_str(&f->w, "/x");
	wb_u32(&f->w, 2);
	REFUSED(f, mt_resolve);

	/* STATFS takes an empty body. */
	assert_int_equal(proto_void_decode(NULL, 0, &v), 0);
	assert_int_equal(proto_void_decode("x", 1, &v), STRATA_EBADMSG);
}

/* ---- replies ---- */

static void test_inode_attr_reps(void **state)
{
	struct fix *f = *state;
	struct mt_inode in, got;
	struct mt_attr_rep rep, gotr;
	size_t at;

	fill_inode(&in);
	put(f, mt_inode_enc_any, &in);
	assert_int_equal(f->b.len, 92);	/* the wire size of an inode */
	assert_int_equal(mt_inode_MIN, 92);
	STRICT(f, mt_inode, &got);
	assert_memory_equal(&got, &in, sizeof(in));

	memset(&rep, 0, sizeof(rep));
	rep.created = 1;
	rep.inode = in;
	rep.trunc.partial = 1;
	rep.trunc.chunk = 3;
	rep.trunc.len = 100;
	rep.trunc.gc_from = 4;
	rep.trunc.gc_to = 9;
	rep.trunc.layout = in.layout;
	put(f, mt_attr_rep_enc_any, &rep);
	STRICT(f, mt_attr_rep, &gotr);
	assert_int_equal(gotr.created, 1);
	assert_memory_equal(&gotr.inode, &in, sizeof(in));
	assert_int_equal(gotr.trunc.partial, 1);
	assert_true(gotr.trunc.chunk == 3);
	assert_int_equal(gotr.trunc.len, 100);
	assert_true(gotr.trunc.gc_from == 4);
	assert_true(gotr.trunc.gc_to == 9);

	/* created and partial are 0 or 1; gc_from <= gc_to (mt_trunc_check). */
	at = 1 + mt_inode_MIN;
	f->b.buf[0] = 2;
	REFUSED(f, mt_attr_rep);
	f->b.buf[0] = 0;
	f->b.buf[at] = 2;
	REFUSED(f, mt_attr_rep);
	f->b.buf[at] = 0;
	assert_int_equal(dec_body(f, mt_attr_rep_decode_any, &gotr), 0);
	assert_int_equal(gotr.created, 0);
	rep.trunc.gc_from = 10;
	put(f, mt_attr_rep_enc_any, &rep);
	REFUSED(f, mt_attr_rep);
}

static void test_small_reps(void **state)
{
	struct fix *f = *state;
	struct mt_layout l, gotl;
	struct mt_statfs st = { .inodes = 1000, .bytes = 1ull << 45, .table_len = 64 }, gotst;
	struct mt_target t = { .target = pstr_c("../target") }, gott;
	struct file_layout fl;

	fill_layout(&l);
	put(f, mt_layout_enc_any, &l);
	STRICT(f, mt_layout, &gotl);
	assert_memory_equal(&gotl, &l, sizeof(l));
	mt_layout_get(&l, &fl);
	memset(&gotl, 0, sizeof(gotl));
	mt_layout_set(&gotl, &fl);
	assert_memory_equal(&gotl, &l, sizeof(l));

	put(f, mt_statfs_enc_any, &st);
	STRICT(f, mt_statfs, &gotst);
	assert_true(gotst.inodes == 1000);
	assert_true(gotst.bytes == 1ull << 45);
	assert_int_equal(gotst.table_len, 64);

	put(f, mt_target_enc_any, &t);
	STRICT(f, mt_target, &gott);
	assert_true(pstr_eq(gott.target, "../target"));
	/* The target is a view into the body, not a copy. */
	assert_ptr_equal(gott.target.p, (const char *)f->copy + 4);

	t.target = rep_str('x', MD_TARGET_MAX);
	put(f, mt_target_enc_any, &t);
	assert_int_equal(dec_body(f, mt_target_decode_any, &gott), 0);
	reset(f);
	wb_bytes(&f->w, rep_str('x', MD_TARGET_MAX + 1).p, MD_TARGET_MAX + 1);
	REFUSED(f, mt_target);
}

/* Encodes a READDIR reply of the given names into f. */
static void put_listing(struct fix *f, const char *const *names, uint32_t n, const char *cookie,
			bool eof)
{
	struct mt_dirent ents[8];
	struct mt_readdir_rep rep = { .ents = ents, .ents_n = n, .next_cookie = pstr_c(cookie),
				      .eof = eof };

	assert_true(n <= 8);
	for (uint32_t i = 0; i < n; i++)
		ents[i] = (struct mt_dirent){ pstr_c(names[i]), 100 + i,
					      i % 2 ? S_IFDIR : S_IFREG };
	put(f, mt_readdir_rep_enc_any, &rep);
}

static void test_readdir_rep(void **state)
{
	struct fix *f = *state;
	static const char *const names[] = { "a", "bb", "ccc" };
	struct mt_readdir_rep got;
	struct mt_dirent d = { .name = pstr_c("a"), .ino = 1, .type = S_IFREG };

	put_listing(f, names, 3, "ccc", true);
	STRICT(f, mt_readdir_rep, &got);
	assert_int_equal(got.ents_n, 3);
	assert_true(pstr_eq(got.ents[0].name, "a"));
	assert_true(pstr_eq(got.ents[2].name, "ccc"));
	assert_true(got.ents[1].ino == 101);
	assert_int_equal(got.ents[1].type, S_IFDIR);
	assert_true(pstr_eq(got.next_cookie, "ccc"));
	assert_int_equal(got.eof, 1);
	mt_readdir_rep_release(&got);
	assert_null(got.ents);

	/* An empty listing. */
	put_listing(f, names, 0, "", false);
	STRICT(f, mt_readdir_rep, &got);
	assert_int_equal(got.ents_n, 0);
	assert_null(got.ents);
	assert_int_equal(got.next_cookie.len, 0);

	/* A malformed third entry: the whole reply is refused. */
	reset(f);
	wb_u32(&f->w, 3);
	mt_dirent_enc(&f->w, &d);
	mt_dirent_enc(&f->w, &d);
	wb_u32(&f->w, MD_NAME_MAX + 1);
	REFUSED(f, mt_readdir_rep);

	/* More entries than MD_READDIR_MAX claimed; more than the body holds. */
	reset(f);
	wb_u32(&f->w, MD_READDIR_MAX + 1);
	REFUSED(f, mt_readdir_rep);
	reset(f);
	wb_u32(&f->w, 1000);
	mt_dirent_enc(&f->w, &d);
	REFUSED(f, mt_readdir_rep);

	/* An empty name (mt_dirent_check), an eof byte of 2, an over-long
	 * cookie. */
	reset(f);
	wb_u32(&f->w, 1);
	wb_str(&f->w, "");
	wb_u64(&f->w, 1);
	wb_u32(&f->w, S_IFREG);
	wb_str(&f->w, "");
	wb_u8(&f->w, 1);
	REFUSED(f, mt_readdir_rep);
	put_listing(f, names, 1, "a", true);
	f->b.buf[f->b.len - 1] = 2;
	REFUSED(f, mt_readdir_rep);
	reset(f);
	wb_u32(&f->w, 0);
	wb_bytes(&f->w, rep_str('k', MD_NAME_MAX + 1).p, MD_NAME_MAX + 1);
	wb_u8(&f->w, 0);
	REFUSED(f, mt_readdir_rep);

	/* The encoder will not send more entries than a reply may hold. */
	reset(f);
	{
		struct mt_readdir_rep big = { .ents = &d, .ents_n = MD_READDIR_MAX + 1 };

		mt_readdir_rep_enc(&f->w, &big);
		assert_int_equal(f->w.err, -E2BIG);
	}
}

/* READDIRPLUS: entries with whole inodes, as strict as READDIR's. */
static void test_readdirplus_rep(void **state)
{
	struct fix *f = *state;
	struct mt_direntplus ents[2];
	struct mt_readdirplus_rep rep = { .ents = ents, .ents_n = 2, .next_cookie = pstr_c("b"),
					  .eof = 1 }, got;

	fill_inode(&ents[0].inode);
	fill_inode(&ents[1].inode);
	ents[0].name = pstr_c("a");
	ents[1].name = pstr_c("b");
	ents[1].inode.gen = 78;
	put(f, mt_readdirplus_rep_enc_any, &rep);
	assert_int_equal(f->b.len, 4 + 2 * (4 + 1 + mt_inode_MIN) + 4 + 1 + 1);
	STRICT(f, mt_readdirplus_rep, &got);
	assert_int_equal(got.ents_n, 2);
	assert_true(pstr_eq(got.ents[1].name, "b"));
	assert_memory_equal(&got.ents[1].inode, &ents[1].inode, sizeof(ents[1].inode));
	mt_readdirplus_rep_release(&got);

	/* An empty name (mt_direntplus_check), an entry cut short. */
	ents[0].name = pstr_c("");
	put(f, mt_readdirplus_rep_enc_any, &rep);
	REFUSED(f, mt_readdirplus_rep);
	reset(f);
	wb_u32(&f->w, 1);
	wb_str(&f->w, "a");
	wb_raw(&f->w, "short", 5);
	REFUSED(f, mt_readdirplus_rep);
}

/* A full page of the longest names fits a frame body. */
static void test_readdir_full_page(void **state)
{
	struct fix *f = *state;
	struct mt_dirent *ents = calloc(MD_READDIR_MAX, sizeof(*ents));
	char (*names)[MD_NAME_MAX + 1] = calloc(MD_READDIR_MAX, sizeof(*names));
	struct mt_readdir_rep rep = { .ents = ents, .ents_n = MD_READDIR_MAX }, got;

	assert_non_null(ents);
	assert_non_null(names);
	for (uint32_t i = 0; i < MD_READDIR_MAX; i++) {
		memset(names[i], 'z', MD_NAME_MAX);
		snprintf(names[i] + MD_NAME_MAX - 8, 9, "%08u", i);
		ents[i] = (struct mt_dirent){ pstr_c(names[i]), i + 2, S_IFREG };
	}
	rep.next_cookie = ents[MD_READDIR_MAX - 1].name;
	put(f, mt_readdir_rep_enc_any, &rep);
	assert_true(f->b.len < FRAME_MAX_BODY);
	assert_int_equal(dec_body(f, mt_readdir_rep_decode_any, &got), 0);
	assert_int_equal(got.ents_n, MD_READDIR_MAX);
	mt_readdir_rep_release(&got);
	free(ents);
	free(names);
}

/* Inline data on the wire: an open_rep carries bytes only for an inline
 * file, exactly its size, at most MD_INLINE_MAX; an INLINE_SET is one of
 * PUBLISH (its len bytes) or CONVERT (none). */
static void test_inline_messages(void **state)
{
	static uint8_t data[MD_INLINE_MAX + 1];
	struct fix *f = *state;
	struct mt_open_rep rep = { .inline_max = 4096, .inl = 1 }, got;
	struct mt_inline_set set = { .h = { 5, 1 }, .flags = MD_INL_PUBLISH, .len = 3 }, sgot;

	rep.attr.inode.size = 3;
	rep.data = (struct pbytes){ data, 3 };
	put(f, mt_open_rep_enc_any, &rep);
	assert_int_equal(dec_body(f, mt_open_rep_decode_any, &got), 0);
	assert_int_equal(got.inl, 1);
	assert_int_equal(got.data.len, 3);
	assert_int_equal(got.inline_max, 4096);
	rep.attr.inode.size = 4;		/* bytes that are not the file's size */
	put(f, mt_open_rep_enc_any, &rep);
	REFUSED(f, mt_open_rep);
	rep.inl = 0;				/* bytes for a file that is not inline */
	rep.attr.inode.size = 3;
	put(f, mt_open_rep_enc_any, &rep);
	REFUSED(f, mt_open_rep);
	rep.inl = 1;				/* an inline file with no bytes */
	rep.data.len = 0;
	rep.attr.inode.size = 0;
	put(f, mt_open_rep_enc_any, &rep);
	REFUSED(f, mt_open_rep);
	rep = (struct mt_open_rep){ .inline_max = MD_INLINE_MAX + 1 };	/* past the bound */
	put(f, mt_open_rep_enc_any, &rep);
	REFUSED(f, mt_open_rep);

	set.data = (struct pbytes){ data, 3 };
	put(f, mt_inline_set_enc_any, &set);
	assert_int_equal(dec_body(f, mt_inline_set_decode_any, &sgot), 0);
	assert_int_equal(sgot.len, 3);
	set.len = 2;				/* len and bytes disagree */
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	set = (struct mt_inline_set){ .flags = MD_INL_CONVERT, .len = 3, .crc = 9 };
	put(f, mt_inline_set_enc_any, &set);
	assert_int_equal(dec_body(f, mt_inline_set_decode_any, &sgot), 0);
	set.data = (struct pbytes){ data, 3 };	/* a conversion carries no bytes */
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	set = (struct mt_inline_set){ .flags = MD_INL_CONVERT | MD_INL_PUBLISH, .len = 1 };
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	set = (struct mt_inline_set){ .flags = MD_INL_GUARD, .len = 1 };	/* GUARD alone */
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	set = (struct mt_inline_set){ .flags = MD_INL_CONVERT | MD_INL_GUARD, .len = 1 };
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	set = (struct mt_inline_set){ .flags = 8, .len = 1 };	/* an unknown flag */
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	/* A guarded publish carries the CRC it expects; unguarded, crc 0. */
	set = (struct mt_inline_set){ .flags = MD_INL_PUBLISH | MD_INL_GUARD, .len = 3,
				      .crc = 0x1234, .data = { data, 3 } };
	put(f, mt_inline_set_enc_any, &set);
	assert_int_equal(dec_body(f, mt_inline_set_decode_any, &sgot), 0);
	assert_int_equal(sgot.crc, 0x1234);
	set.flags = MD_INL_PUBLISH;
	put(f, mt_inline_set_enc_any, &set);
	REFUSED(f, mt_inline_set);
	/* More bytes than the bound: the encoder refuses them already. */
	set = (struct mt_inline_set){ .flags = MD_INL_PUBLISH, .len = MD_INLINE_MAX };
	set.data = (struct pbytes){ data, MD_INLINE_MAX + 1 };
	reset(f);
	mt_inline_set_enc_any(&f->w, &set);
	assert_int_not_equal(f->w.err, 0);
}

/* The table: opcodes from 64 in order, named, with decoders both ways. */
static void test_table(void **state)
{
	(void)state;
	assert_int_equal(meta_NOPS, 32);
	for (uint32_t i = 0; i < meta_NOPS; i++) {
		assert_int_equal(meta_ops[i].op, OP_META_LOOKUP + i);
		assert_true(strncmp(meta_ops[i].name, "META_", 5) == 0);
		assert_non_null(meta_ops[i].req_decode);
		assert_non_null(meta_ops[i].rep_decode);
	}
	assert_int_equal(OP_META_LOOKUP, 64);
	assert_string_equal(meta_ops[OP_META_SET_SIZE - OP_META_LOOKUP].name, "META_SET_SIZE");
	/* Which replies keep views into their bodies (a blocking call then
	 * needs somewhere to keep the body). */
	assert_int_equal(mt_inode_VIEWS, 0);
	assert_int_equal(mt_attr_rep_VIEWS, 0);
	assert_int_equal(mt_target_VIEWS, 1);
	assert_int_equal(mt_readdir_rep_VIEWS, 1);
	assert_int_equal(mt_readdirplus_rep_VIEWS, 1);
	assert_string_equal(meta_ops[OP_META_READDIRPLUS - OP_META_LOOKUP].name,
			    "META_READDIRPLUS");
	assert_int_equal(mt_name_VIEWS, 1);
	assert_int_equal(mt_quota_VIEWS, 0);
	assert_int_equal(mt_quota_list_rep_VIEWS, 1);
	assert_string_equal(meta_ops[OP_META_QUOTA_LIST - OP_META_LOOKUP].name,
			    "META_QUOTA_LIST");
	assert_int_equal(OP_META_CREATE_PATH, 88);
	assert_string_equal(meta_ops[OP_META_UNLINK_PATH - OP_META_LOOKUP].name,
			    "META_UNLINK_PATH");
	assert_int_equal(mt_create_path_VIEWS, 1);
}

/* The largest QUOTA_LIST page (every path MD_PATH_MAX long) fits a frame. */
static void test_quota_list_max(void **state)
{
	struct fix *f = *state;
	struct mt_quota_ent *ents = calloc(MD_QUOTA_LIST_MAX, sizeof(*ents));
	char *path = malloc(MD_PATH_MAX + 1);
	struct mt_quota_list_rep rep = { 0 }, got;

	assert_non_null(ents);
	assert_non_null(path);
	memset(path, 'p', MD_PATH_MAX);
	path[0] = '/';
	path[MD_PATH_MAX] = '\0';
	for (uint32_t i = 0; i < MD_QUOTA_LIST_MAX; i++) {
		ents[i].quota = (struct mt_quota){ i + 2, 1, 2, 3, 4 };
		ents[i].path = pstr_c(path);
	}
	rep.ents = ents;
	rep.ents_n = MD_QUOTA_LIST_MAX;
	rep.eof = 1;
	put(f, mt_quota_list_rep_enc_any, &rep);
	assert_true(f->b.len < FRAME_MAX_BODY);
	assert_int_equal(dec_body(f, mt_quota_list_rep_decode_any, &got), 0);
	assert_int_equal(got.ents_n, MD_QUOTA_LIST_MAX);
	assert_int_equal(got.ents[5].quota.max_inodes, 2);
	assert_int_equal(got.ents[5].path.len, MD_PATH_MAX);
	mt_quota_list_rep_release(&got);
	free(ents);
	free(path);
}

/* Every decoder of the table survives arbitrary bytes: no crash, 0 or
 * EBADMSG, and what decoded releases cleanly. */
static void test_garbage(void **state)
{
	uint8_t buf[512];
	uint32_t seed = 12345;
	void *m = malloc(4096);

	(void)state;
	assert_non_null(m);
	for (int round = 0; round < 2000; round++) {
		uint32_t len = (uint32_t)(round % sizeof(buf));

		for (uint32_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			/* Small values make plausible lengths and counts. */
			buf[i] = (uint8_t)(seed >> 16) & (round % 3 ? 0xff : 0x07);
		}
		for (uint32_t k = 0; k < meta_NOPS; k++) {
			const struct proto_op *op = &meta_ops[k];
			int rc;

			assert_true(op->req_size <= 4096 && op->rep_size <= 4096);
			rc = op->req_decode(buf, len, m);
			assert_true(rc == 0 || rc == STRATA_EBADMSG);
			if (!rc)
				op->req_release(m);
			rc = op->rep_decode(buf, len, m);
			assert_true(rc == 0 || rc == STRATA_EBADMSG);
			if (!rc)
				op->rep_release(m);
		}
	}
	free(m);
}

/* Request ids: the last 16 bytes of the requests that carry one (client,
 * then seq, little-endian); a body without them (a peer of the version
 * before) does not decode; LOOKUP, which shares UNLINK's fields but
 * reads, carries none. */
static void test_request_ids(void **state)
{
	struct fix *f = *state;
	struct mt_reqid id = { 0x1122334455667788ull, 9 };
	struct mt_unlink u = { .dir = H, .name = pstr_c("x"), .rid = id }, gotu;
	struct mt_rename r = { .src_dir = H, .src_name = pstr_c("a"), .dst_dir = H,
			       .dst_name = pstr_c("b"), .rid = id }, gotr;
	struct mt_name n = { .dir = H, .name = pstr_c("x") };
	static const uint8_t tail[16] = { 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
					  9, 0, 0, 0, 0, 0, 0, 0 };
	size_t len;

	put(f, mt_unlink_enc_any, &u);
	len = f->b.len;
	assert_int_equal(len, 16 + 4 + 1 + 16);
	assert_memory_equal(f->b.buf + len - 16, tail, 16);
	STRICT(f, mt_unlink, &gotu);
	assert_int_equal(gotu.rid.client, id.client);
	assert_int_equal(gotu.rid.seq, id.seq);
	f->b.len = len - 16;
	REFUSED(f, mt_unlink);

	put(f, mt_rename_enc_any, &r);
	assert_memory_equal(f->b.buf + f->b.len - 16, tail, 16);
	STRICT(f, mt_rename, &gotr);
	assert_int_equal(gotr.rid.client, id.client);

	put(f, mt_name_enc_any, &n);
	assert_int_equal(f->b.len, 16 + 4 + 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_name_and_ino),
		T(test_create_open),
		T(test_path_ops),
		T(test_open_flags),
		T(test_symlink_rename),
		T(test_link),
		T(test_attrs_sizes),
		T(test_readdir_layout_resolve),
		T(test_inode_attr_reps),
		T(test_small_reps),
		T(test_readdir_rep),
		T(test_readdirplus_rep),
		T(test_readdir_full_page),
		T(test_inline_messages),
		T(test_table),
		T(test_quota_list_max),
		T(test_garbage),
		T(test_request_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
