/*
 * libFuzzer target: the frame header decoder, then a whole stream of
 * frames as a connection would read it (header, body through an rbuf,
 * bulk skipped). Built and run by scripts/fuzz.sh.
 *
 * Properties checked beyond "no crash, no sanitizer report":
 * - a header that decodes re-encodes to the same 40 bytes;
 * - a header that decodes is within the limits and names a reason
 *   when it does not;
 * - rbuf reads never move past the body and return zeros once err is set.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net/codec.h"
#include "net/frame.h"
#include "strata/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

/* The body of a made-up request: the field kinds every real one uses. */
static void decode_body(const uint8_t *p, size_t len)
{
	struct rbuf r;
	const uint8_t *bytes;
	char name[64];
	uint64_t id;
	uint32_t n, count;
	uint16_t kind;
	int rc;

	rbuf_init(&r, p, len);
	id = rb_u64(&r);
	rb_str(&r, name, sizeof(name));
	n = rb_bytes(&r, &bytes, 1024);
	count = rb_u32(&r);
	kind = rb_u16(&r);
	CHECK(r.off <= r.len);
	CHECK(strlen(name) < sizeof(name));
	if (r.err) {
		CHECK(r.err == STRATA_EBADMSG);
		/* Fields read after the error are zero. */
		CHECK(kind == 0);
	} else {
		CHECK(n <= 1024);
		CHECK(n == 0 || (bytes >= p && bytes + n <= p + len));
	}
	rc = rb_finish(&r);
	CHECK(rc == 0 || rc == STRATA_EBADMSG);
	CHECK(rc != 0 || r.off == len);
	(void)id;
	(void)count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (size - off >= FRAME_HDR_LEN) {
		struct frame_hdr h;
		uint8_t again[FRAME_HDR_LEN];
		const char *why = NULL;
		int rc = frame_hdr_decode(data + off, &h, &why);

		if (rc) {
			CHECK(rc == STRATA_EPROTOVER || rc == STRATA_EBADMSG);
			CHECK(why != NULL && why[0] != '\0');
			break;	/* a connection would be closed here */
		}
		CHECK(h.magic == FRAME_MAGIC && h.version == STRATA_PROTO_VERSION);
		CHECK(h.body_len <= FRAME_MAX_BODY && h.bulk_len <= FRAME_MAX_BULK);
		CHECK((h.flags & ~FRAME_F_KNOWN) == 0 && h.reserved == 0);
		frame_hdr_encode(&h, again);
		CHECK(memcmp(again, data + off, FRAME_HDR_LEN) == 0);
		off += FRAME_HDR_LEN;

		/* A short body or bulk: the reader would wait for more bytes. */
		if (h.body_len > size - off)
			break;
		decode_body(data + off, h.body_len);
		off += h.body_len;
		if (h.bulk_len > size - off)
			break;
		off += (size_t)h.bulk_len;
	}
	return 0;
}
