/*
 * libFuzzer target: every request and reply decoder of the meta service,
 * reached through its table (meta_ops[], src/proto/meta.h), on the same
 * input. Built and run by scripts/fuzz.sh.
 *
 * Properties checked beyond "no crash, no sanitizer report":
 * - a decoder returns 0 or STRATA_EBADMSG, nothing else;
 * - a body that decodes re-encodes to the same bytes (the encoding is
 *   canonical: one byte string per message), so every string kept its
 *   bounds and every flag and count its range;
 * - what a decode allocated is released (LeakSanitizer sees the rest).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "net/codec.h"
#include "proto/meta.h"
#include "strata/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

/* Decodes data with dec into a fresh message of size bytes; on success
 * checks that enc gives data back, then releases the message. */
static void one(int (*dec)(const void *, uint32_t, void *), void (*rel)(void *),
		void (*enc)(struct wbuf *, const void *), size_t size, const uint8_t *data,
		uint32_t len)
{
	void *m = malloc(size);
	struct bbuf again;
	struct wbuf w;
	int rc;

	CHECK(m != NULL);
	rc = dec(data, len, m);
	CHECK(rc == 0 || rc == STRATA_EBADMSG);
	if (!rc) {
		bbuf_init(&again);
		wbuf_init(&w, &again);
		enc(&w, m);
		CHECK(w.err == 0);
		CHECK(again.len == len);
		CHECK(len == 0 || memcmp(again.buf, data, len) == 0);
		bbuf_release(&again);
		rel(m);
	}
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (8u << 20))
		return 0;
	for (uint32_t i = 0; i < meta_NOPS; i++) {
		const struct proto_op *op = &meta_ops[i];

		one(op->req_decode, op->req_release, op->req_enc, op->req_size, data,
		    (uint32_t)size);
		one(op->rep_decode, op->rep_release, op->rep_enc, op->rep_size, data,
		    (uint32_t)size);
	}
	return 0;
}
