/*
 * Unit tests for src/net/codec: round trips of every width, byte order on
 * the wire, and the decoder's sticky error on every kind of bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "net/codec.h"
#include "strata/errors.h"

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

static void test_round_trip_all_widths(void **state)
{
	struct fix *f = *state;
	static const uint8_t blob[] = { 0, 1, 2, 0xff, 0x80 };
	const uint8_t *bp;
	uint8_t raw[3];
	char str[32];
	struct rbuf r;

	wb_u8(&f->w, 0xab);
	wb_u16(&f->w, 0xbeef);
	wb_u32(&f->w, 0xdeadbeefu);
	wb_u64(&f->w, 0x0123456789abcdefull);
	wb_i32(&f->w, -2);
	wb_i64(&f->w, INT64_MIN);
	wb_u8(&f->w, 0);
	wb_u16(&f->w, UINT16_MAX);
	wb_u32(&f->w, UINT32_MAX);
	wb_u64(&f->w, UINT64_MAX);
	wb_raw(&f->w, "xyz", 3);
	wb_bytes(&f->w, blob, sizeof(blob));
	wb_bytes(&f->w, NULL, 0);
	wb_str(&f->w, "hello, strata");
	wb_str(&f->w, "");
	assert_int_equal(f->w.err, 0);
	assert_int_equal(f->b.len, 1 + 2 + 4 + 8 + 4 + 8 + 1 + 2 + 4 + 8 + 3 +
			 (4 + sizeof(blob)) + 4 + (4 + 13) + 4);

	rbuf_init(&r, f->b.buf, f->b.len);
	assert_int_equal(rb_u8(&r), 0xab);
	assert_int_equal(rb_u16(&r), 0xbeef);
	assert_int_equal(rb_u32(&r), 0xdeadbeefu);
	assert_true(rb_u64(&r) == 0x0123456789abcdefull);
	assert_int_equal(rb_i32(&r), -2);
	assert_true(rb_i64(&r) == INT64_MIN);
	assert_int_equal(rb_u8(&r), 0);
	assert_int_equal(rb_u16(&r), UINT16_MAX);
	assert_int_equal(rb_u32(&r), UINT32_MAX);
	assert_true(rb_u64(&r) == UINT64_MAX);
	rb_raw(&r, raw, 3);
	assert_memory_equal(raw, "xyz", 3);
	assert_int_equal(rb_bytes(&r, &bp, 100), sizeof(blob));
	assert_memory_equal(bp, blob, sizeof(blob));
	/* Borrowed: it points into the encoded buffer. */
	assert_true(bp > f->b.buf && bp < f->b.buf + f->b.len);
	assert_int_equal(rb_bytes(&r, &bp, 100), 0);
	rb_str(&r, str, sizeof(str));
	assert_string_equal(str, "hello, strata");
	rb_str(&r, str, sizeof(str));
	assert_string_equal(str, "");
	assert_int_equal(r.err, 0);
	assert_int_equal(rb_left(&r), 0);
	assert_int_equal(rb_finish(&r), 0);
}

static void test_little_endian_bytes(void **state)
{
	struct fix *f = *state;
	static const uint8_t want[] = {
		0x01,
		0x02, 0x01,
		0x04, 0x03, 0x02, 0x01,
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0xfe, 0xff, 0xff, 0xff,			/* i32 -2 */
		0x03, 0x00, 0x00, 0x00, 'a', 'b', 'c',	/* str "abc" */
	};
	uint8_t p[8];

	wb_u8(&f->w, 0x01);
	wb_u16(&f->w, 0x0102);
	wb_u32(&f->w, 0x01020304u);
	wb_u64(&f->w, 0x0102030405060708ull);
	wb_i32(&f->w, -2);
	wb_str(&f->w, "abc");
	assert_int_equal(f->w.err, 0);
	assert_int_equal(f->b.len, sizeof(want));
	assert_memory_equal(f->b.buf, want, sizeof(want));

	/* The inline helpers, both ways. */
	put_le16(p, 0xa1b2);
	assert_int_equal(p[0], 0xb2);
	assert_int_equal(p[1], 0xa1);
	assert_int_equal(get_le16(p), 0xa1b2);
	put_le32(p, 0xa1b2c3d4u);
	assert_int_equal(p[0], 0xd4);
	assert_int_equal(p[3], 0xa1);
	assert_int_equal(get_le32(p), 0xa1b2c3d4u);
	put_le64(p, 0xa1b2c3d4e5f60718ull);
	assert_int_equal(p[0], 0x18);
	assert_int_equal(p[7], 0xa1);
	assert_true(get_le64(p) == 0xa1b2c3d4e5f60718ull);
	/* High bit set in the top byte: no sign extension. */
	memset(p, 0xff, sizeof(p));
	assert_int_equal(get_le16(p), 0xffff);
	assert_int_equal(get_le32(p), 0xffffffffu);
	assert_true(get_le64(p) == UINT64_MAX);
}

static void test_overrun_is_sticky(void **state)
{
	static const uint8_t in[] = { 1, 2, 3 };
	uint8_t raw[4] = { 9, 9, 9, 9 };
	const uint8_t *bp = in;
	char str[8] = "junk";
	struct rbuf r;

	(void)state;
	rbuf_init(&r, in, sizeof(in));
	assert_int_equal(rb_u16(&r), 0x0201);
	assert_int_equal(rb_u16(&r), 0);	/* 1 byte left: overrun */
	assert_int_equal(r.err, STRATA_EBADMSG);
	/* Every later read returns zeros, even one that would fit. */
	assert_int_equal(rb_u8(&r), 0);
	assert_int_equal(rb_u32(&r), 0);
	assert_true(rb_u64(&r) == 0);
	rb_raw(&r, raw, sizeof(raw));
	assert_memory_equal(raw, "\0\0\0\0", 4);
	assert_int_equal(rb_bytes(&r, &bp, 10), 0);
	assert_null(bp);
	rb_str(&r, str, sizeof(str));
	assert_string_equal(str, "");
	assert_int_equal(r.err, STRATA_EBADMSG);
	assert_int_equal(rb_finish(&r), STRATA_EBADMSG);

	/* Each width on an empty buffer. */
	rbuf_init(&r, in, 0);
	assert_int_equal(rb_u8(&r), 0);
	assert_int_equal(r.err, STRATA_EBADMSG);
	rbuf_init(&r, in, 3);
	assert_int_equal(rb_u32(&r), 0);
	assert_int_equal(r.err, STRATA_EBADMSG);
	rbuf_init(&r, in, 3);
	assert_true(rb_u64(&r) == 0);
	assert_int_equal(r.err, STRATA_EBADMSG);
	rbuf_init(&r, in, 3);
	memset(raw, 9, sizeof(raw));
	rb_raw(&r, raw, 4);
	assert_memory_equal(raw, "\0\0\0\0", 4);
	assert_int_equal(r.err, STRATA_EBADMSG);
}

static void test_bytes_length_checks(void **state)
{
	struct fix *f = *state;
	const uint8_t *bp;
	struct rbuf r;

	wb_bytes(&f->w, "0123456789", 10);
	assert_int_equal(f->w.err, 0);

	/* Exactly max is fine. */
	rbuf_init(&r, f->b.buf, f->b.len);
	assert_int_equal(rb_bytes(&r, &bp, 10), 10);
	assert_int_equal(rb_finish(&r), 0);

	/* Over max. */
	rbuf_init(&r, f->b.buf, f->b.len);
	assert_int_equal(rb_bytes(&r, &bp, 9), 0);
	assert_null(bp);
	assert_int_equal(r.err, STRATA_EBADMSG);

	/* The prefix claims more than the buffer holds. */
	rbuf_init(&r, f->b.buf, f->b.len - 1);
	assert_int_equal(rb_bytes(&r, &bp, 100), 0);
	assert_null(bp);
	assert_int_equal(r.err, STRATA_EBADMSG);

	/* A huge length prefix, within max: still bounded by the buffer. */
	{
		uint8_t in[8] = { 0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c', 'd' };

		rbuf_init(&r, in, sizeof(in));
		assert_int_equal(rb_bytes(&r, &bp, UINT32_MAX), 0);
		assert_int_equal(r.err, STRATA_EBADMSG);
	}
}

static void test_str_checks(void **state)
{
	struct fix *f = *state;
	char dst[6];
	struct rbuf r;

	wb_str(&f->w, "hello");		/* 5 chars: fits dst[6] exactly */
	wb_str(&f->w, "hello!");	/* 6 chars: one too many */
	assert_int_equal(f->w.err, 0);

	rbuf_init(&r, f->b.buf, f->b.len);
	rb_str(&r, dst, sizeof(dst));
	assert_int_equal(r.err, 0);
	assert_string_equal(dst, "hello");
	rb_str(&r, dst, sizeof(dst));
	assert_int_equal(r.err, STRATA_EBADMSG);
	assert_string_equal(dst, "");

	/* Embedded NUL. */
	bbuf_release(&f->b);
	bbuf_init(&f->b);
	wbuf_init(&f->w, &f->b);
	wb_bytes(&f->w, "ab\0cd", 5);
	rbuf_init(&r, f->b.buf, f->b.len);
	rb_str(&r, dst, sizeof(dst));
	assert_int_equal(r.err, STRATA_EBADMSG);
	assert_string_equal(dst, "");

	/* dstlen 0: nothing fits, nothing written. */
	rbuf_init(&r, f->b.buf, f->b.len);
	rb_str(&r, dst, 0);
	assert_int_equal(r.err, STRATA_EBADMSG);

	/* dstlen 1 takes only the empty string. */
	bbuf_release(&f->b);
	bbuf_init(&f->b);
	wbuf_init(&f->w, &f->b);
	wb_str(&f->w, "");
	rbuf_init(&r, f->b.buf, f->b.len);
	memset(dst, 'x', sizeof(dst));
	rb_str(&r, dst, 1);
	assert_int_equal(r.err, 0);
	assert_int_equal(dst[0], '\0');
	assert_int_equal(rb_finish(&r), 0);
}

static void test_finish_trailing(void **state)
{
	static const uint8_t in[] = { 1, 0, 0, 0, 0xee };
	struct rbuf r;

	(void)state;
	rbuf_init(&r, in, sizeof(in));
	assert_int_equal(rb_u32(&r), 1);
	assert_int_equal(r.err, 0);
	assert_int_equal(rb_left(&r), 1);
	assert_int_equal(rb_finish(&r), STRATA_EBADMSG);
	assert_int_equal(r.err, STRATA_EBADMSG);

	/* An empty body consumed by no reads finishes cleanly. */
	rbuf_init(&r, NULL, 0);
	assert_int_equal(rb_finish(&r), 0);
}

static void test_encoder_grows(void **state)
{
	struct fix *f = *state;
	struct rbuf r;

	for (uint32_t i = 0; i < 100000; i++)
		wb_u32(&f->w, i * 2654435761u);
	assert_int_equal(f->w.err, 0);
	assert_int_equal(f->b.len, 400000);
	rbuf_init(&r, f->b.buf, f->b.len);
	for (uint32_t i = 0; i < 100000; i++)
		assert_int_equal(rb_u32(&r), i * 2654435761u);
	assert_int_equal(rb_finish(&r), 0);
}

static void test_encoder_error_sticky(void **state)
{
	struct fix *f = *state;
	size_t len;

	wb_u32(&f->w, 7);
	len = f->b.len;
	/* Once err is set (as after an ENOMEM), puts write nothing. */
	f->w.err = -12;
	wb_u8(&f->w, 1);
	wb_u64(&f->w, 1);
	wb_str(&f->w, "abc");
	wb_bytes(&f->w, "abc", 3);
	assert_int_equal(f->b.len, len);
	assert_int_equal(f->w.err, -12);
}

/* An empty body may come as (NULL, 0); zero-length reads and writes must
 * not do pointer arithmetic on NULL (clang's UBSan flags NULL + 0). */
static void test_empty_null_buffers(void **state)
{
	struct fix *f = *state;
	const uint8_t *bp = (const uint8_t *)"x";
	uint8_t raw[1] = { 7 };
	char str[4] = "abc";
	struct rbuf r;

	wb_raw(&f->w, NULL, 0);
	assert_int_equal(f->w.err, 0);
	assert_int_equal(f->b.len, 0);

	rbuf_init(&r, NULL, 0);
	rb_raw(&r, raw, 0);
	assert_int_equal(raw[0], 7);
	assert_int_equal(r.err, 0);
	assert_int_equal(rb_finish(&r), 0);
	assert_int_equal(rb_u8(&r), 0);
	assert_int_equal(r.err, STRATA_EBADMSG);

	/* A zero-length string or byte string read from a real buffer. */
	wb_str(&f->w, "");
	wb_bytes(&f->w, NULL, 0);
	rbuf_init(&r, f->b.buf, f->b.len);
	rb_str(&r, str, sizeof(str));
	assert_string_equal(str, "");
	assert_int_equal(rb_bytes(&r, &bp, 0), 0);
	assert_int_equal(rb_finish(&r), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_round_trip_all_widths),
		T(test_little_endian_bytes),
		T(test_overrun_is_sticky),
		T(test_bytes_length_checks),
		T(test_str_checks),
		T(test_finish_trailing),
		T(test_encoder_grows),
		T(test_encoder_error_sticky),
		T(test_empty_null_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
