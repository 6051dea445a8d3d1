/*
 * Unit tests for src/net/frame: header layout on the wire, round trips, and
 * every validation failure with its error code and reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "net/codec.h"
#include "net/frame.h"
#include "strata/errors.h"

static struct frame_hdr sample(void)
{
	struct frame_hdr h = {
		.magic = FRAME_MAGIC,
		.version = STRATA_PROTO_VERSION,
		.opcode = 0x1234,
		.flags = FRAME_F_RESPONSE,
		.status = STRATA_EBADOP,
		.req_id = 0x0102030405060708ull,
		.body_len = 77,
		.reserved = 0,
		.bulk_len = 1ull << 20,
	};

	return h;
}

static void assert_hdr_equal(const struct frame_hdr *a, const struct frame_hdr *b)
{
	assert_int_equal(a->magic, b->magic);
	assert_int_equal(a->version, b->version);
	assert_int_equal(a->opcode, b->opcode);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->status, b->status);
	assert_true(a->req_id == b->req_id);
	assert_int_equal(a->body_len, b->body_len);
	assert_int_equal(a->reserved, b->reserved);
	assert_true(a->bulk_len == b->bulk_len);
}

static void test_round_trip(void **state)
{
	struct frame_hdr h = sample(), d;
	uint8_t wire[FRAME_HDR_LEN];
	const char *why = NULL;

	(void)state;
	frame_hdr_encode(&h, wire);
	assert_int_equal(frame_hdr_decode(wire, &d, &why), 0);
	assert_hdr_equal(&h, &d);

	/* Limits are inclusive; a request with no flags and status 0. */
	h.flags = 0;
	h.status = 0;
	h.opcode = UINT16_MAX;
	h.req_id = UINT64_MAX;
	h.body_len = FRAME_MAX_BODY;
	h.bulk_len = FRAME_MAX_BULK;
	frame_hdr_encode(&h, wire);
	assert_int_equal(frame_hdr_decode(wire, &d, &why), 0);
	assert_hdr_equal(&h, &d);

	h.body_len = 0;
	h.bulk_len = 0;
	frame_hdr_encode(&h, wire);
	assert_int_equal(frame_hdr_decode(wire, &d, &why), 0);
	assert_hdr_equal(&h, &d);
}

/* The layout documented in frame.h and docs/protocol.md, byte by byte. */
static void test_wire_layout(void **state)
{
	struct frame_hdr h = sample();
	uint8_t wire[FRAME_HDR_LEN];
	static const uint8_t want[FRAME_HDR_LEN] = {
		'S', 'T', 'R', 'A',			/* magic */
		0x07, 0x00,				/* version */
		0x34, 0x12,				/* opcode */
		0x01, 0x00, 0x00, 0x00,			/* flags */
		0xf6, 0xef, 0xff, 0xff,			/* status -(4096+10) */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,	/* req_id */
		77, 0x00, 0x00, 0x00,			/* body_len */
		0x00, 0x00, 0x00, 0x00,			/* reserved */
		0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,	/* bulk_len 1 MiB */
	};

	(void)state;
	assert_int_equal(STRATA_PROTO_VERSION, 7);
	assert_int_equal(STRATA_EBADOP, -4106);
	memset(wire, 0xaa, sizeof(wire));
	frame_hdr_encode(&h, wire);
	assert_memory_equal(wire, want, FRAME_HDR_LEN);
}

static void expect_reject(const struct frame_hdr *h, int want_rc, const char *want_why)
{
	uint8_t wire[FRAME_HDR_LEN];
	struct frame_hdr d;
	const char *why = NULL;

	frame_hdr_encode(h, wire);
	assert_int_equal(frame_hdr_decode(wire, &d, &why), want_rc);
	assert_non_null(why);
	assert_string_equal(why, want_why);
}

static void test_bad_magic(void **state)
{
	struct frame_hdr h = sample();
	uint8_t wire[FRAME_HDR_LEN];
	struct frame_hdr d;
	const char *why = NULL;

	(void)state;
	h.magic = 0x41525454;
	expect_reject(&h, STRATA_EPROTOVER, "bad magic");
	h.magic = 0;
	expect_reject(&h, STRATA_EPROTOVER, "bad magic");
	/* Big-endian "STRA" is not the magic. */
	h = sample();
	frame_hdr_encode(&h, wire);
	memcpy(wire, "ARTS", 4);
	assert_int_equal(frame_hdr_decode(wire, &d, &why), STRATA_EPROTOVER);
	assert_string_equal(why, "bad magic");
	/* An HTTP request sent to a Strata port. */
	memcpy(wire, "GET / HTTP/1.1\r\nHost: x\r\n\r\n.............", FRAME_HDR_LEN);
	assert_int_equal(frame_hdr_decode(wire, &d, &why), STRATA_EPROTOVER);
	assert_string_equal(why, "bad magic");
}

static void test_bad_version(void **state)
{
	struct frame_hdr h = sample();

	(void)state;
	h.version = STRATA_PROTO_VERSION + 1;
	expect_reject(&h, STRATA_EPROTOVER, "unsupported protocol version");
	h.version = 0;
	expect_reject(&h, STRATA_EPROTOVER, "unsupported protocol version");
	h.version = UINT16_MAX;
	expect_reject(&h, STRATA_EPROTOVER, "unsupported protocol version");
}

static void test_unknown_flags(void **state)
{
	struct frame_hdr h = sample();

	(void)state;
	for (int bit = 0; bit < 32; bit++) {
		h.flags = 1u << bit;
		if (h.flags & FRAME_F_KNOWN)
			continue;
		expect_reject(&h, STRATA_EBADMSG, "unknown flags");
	}
	h.flags = FRAME_F_KNOWN | 0x80000000u;
	expect_reject(&h, STRATA_EBADMSG, "unknown flags");
}

static void test_reserved_nonzero(void **state)
{
	struct frame_hdr h = sample();

	(void)state;
	h.reserved = 1;
	expect_reject(&h, STRATA_EBADMSG, "reserved field not zero");
	h.reserved = 0x80000000u;
	expect_reject(&h, STRATA_EBADMSG, "reserved field not zero");
}

static void test_lengths_over_limit(void **state)
{
	struct frame_hdr h = sample();

	(void)state;
	h.body_len = FRAME_MAX_BODY + 1;
	expect_reject(&h, STRATA_EBADMSG, "body length over limit");
	h.body_len = UINT32_MAX;
	expect_reject(&h, STRATA_EBADMSG, "body length over limit");
	h = sample();
	h.bulk_len = FRAME_MAX_BULK + 1;
	expect_reject(&h, STRATA_EBADMSG, "bulk length over limit");
	h.bulk_len = UINT64_MAX;
	expect_reject(&h, STRATA_EBADMSG, "bulk length over limit");
	/* A bulk length whose low 32 bits look small must not pass. */
	h.bulk_len = (1ull << 32) | 16;
	expect_reject(&h, STRATA_EBADMSG, "bulk length over limit");
}

/* A whole frame: header, body through the codec, bulk after the body. */
static void test_whole_frame(void **state)
{
	struct frame_hdr h = sample(), d;
	struct bbuf b;
	struct wbuf w;
	struct rbuf r;
	uint8_t hdr[FRAME_HDR_LEN];
	const char *why = NULL;
	static const char bulk[] = "bulk bytes go straight to the caller";
	char name[32];

	(void)state;
	memset(hdr, 0, sizeof(hdr));
	bbuf_init(&b);
	assert_int_equal(bbuf_append(&b, hdr, FRAME_HDR_LEN), 0);	/* room for the header */
	wbuf_init(&w, &b);
	wb_u64(&w, 42);
	wb_str(&w, "chunk-0007");
	wb_u32(&w, 4096);
	assert_int_equal(w.err, 0);
	h.body_len = (uint32_t)(b.len - FRAME_HDR_LEN);
	h.bulk_len = sizeof(bulk);
	frame_hdr_encode(&h, b.buf);
	assert_int_equal(bbuf_append(&b, bulk, sizeof(bulk)), 0);

	assert_int_equal(frame_hdr_decode(b.buf, &d, &why), 0);
	assert_int_equal(FRAME_HDR_LEN + d.body_len + d.bulk_len, b.len);
	rbuf_init(&r, b.buf + FRAME_HDR_LEN, d.body_len);
	assert_true(rb_u64(&r) == 42);
	rb_str(&r, name, sizeof(name));
	assert_string_equal(name, "chunk-0007");
	assert_int_equal(rb_u32(&r), 4096);
	assert_int_equal(rb_finish(&r), 0);
	assert_memory_equal(b.buf + FRAME_HDR_LEN + d.body_len, bulk, sizeof(bulk));
	bbuf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_wire_layout),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_bad_version),
		cmocka_unit_test(test_unknown_flags),
		cmocka_unit_test(test_reserved_nonzero),
		cmocka_unit_test(test_lengths_over_limit),
		cmocka_unit_test(test_whole_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
