/*
 * libFuzzer target: rbuf reads driven by the input. Built and run by
 * scripts/fuzz.sh.
 *
 * Input layout: byte 0 = number of op bytes n (mod 64), then n op bytes,
 * then the buffer the ops read from. Each op byte picks a read (low 3 bits)
 * and its size or limit (high 5 bits).
 *
 * Every value read without error is written again through a wbuf; the
 * re-encoding must equal the bytes consumed up to the first failed read
 * (decode/encode round trip). Once err is set every read must return zeros
 * and consume nothing.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "net/codec.h"
#include "strata/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

static int all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		if (b[i])
			return 0;
	}
	return 1;
}

static void run_op(struct rbuf *r, struct wbuf *w, uint8_t op)
{
	unsigned arg = op >> 3;
	size_t before = r->off;
	int had_err = r->err != 0;
	uint8_t raw[32];
	char str[32];
	const uint8_t *bp = NULL;
	uint64_t v = 0;
	uint32_t n;

	str[0] = '\0';
	switch (op & 7) {
	case 0:
		v = rb_u8(r);
		if (!r->err)
			wb_u8(w, (uint8_t)v);
		break;
	case 1:
		v = rb_u16(r);
		if (!r->err)
			wb_u16(w, (uint16_t)v);
		break;
	case 2:
		v = rb_u32(r);
		if (!r->err)
			wb_u32(w, (uint32_t)v);
		break;
	case 3:
		v = rb_u64(r);
		if (!r->err)
			wb_u64(w, v);
		break;
	case 4:
		rb_raw(r, raw, arg);
		if (!r->err)
			wb_raw(w, raw, arg);
		else
			CHECK(all_zero(raw, arg));
		break;
	case 5:
		/* max from 0 to 31, or "no limit" */
		n = rb_bytes(r, &bp, arg == 31 ? UINT32_MAX : arg);
		if (!r->err) {
			CHECK(arg == 31 || n <= arg);
			CHECK(bp != NULL && bp >= r->p && bp + n <= r->p + r->len);
			wb_bytes(w, bp, n);
		} else {
			CHECK(n == 0 && bp == NULL);
		}
		break;
	case 6:
		/* dstlen from 0 to 31; with 0 only the empty string is taken,
		 * and str is left as it was */
		rb_str(r, str, arg);
		if (arg)
			CHECK(strlen(str) < arg);
		if (!r->err)
			wb_str(w, str);
		else if (arg)
			CHECK(str[0] == '\0');
		break;
	case 7:
		(void)rb_finish(r);
		CHECK(r->err || r->off == r->len);
		break;
	}
	CHECK(r->off <= r->len);
	CHECK(r->off >= before);
	if (r->err)
		CHECK(r->err == STRATA_EBADMSG);
	if (had_err) {
		CHECK(r->off == before);
		CHECK(v == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rbuf r;
	struct bbuf b;
	struct wbuf w;
	size_t nops, good = 0;

	if (size < 1)
		return 0;
	nops = data[0] % 64;
	if (nops > size - 1)
		nops = size - 1;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	rbuf_init(&r, data + 1 + nops, size - 1 - nops);
	for (size_t i = 0; i < nops; i++) {
		run_op(&r, &w, data[1 + i]);
		if (!r.err)
			good = r.off;
	}
	CHECK(rb_left(&r) == r.len - r.off);
	/* Every byte consumed before the first failed read was re-encoded
	 * identically. */
	if (!w.err) {
		CHECK(b.len == good);
		CHECK(good == 0 || memcmp(b.buf, r.p, good) == 0);
	}
	bbuf_release(&b);
	return 0;
}
