/*
 * What the fuzz targets of the operation tables share (fuzz_meta_proto.c,
 * fuzz_mem_proto.c): every request and reply decoder of a table, reached
 * through its descriptors (svc_ops[], src/proto/proto.h), on one input.
 *
 * Properties checked beyond "no crash, no sanitizer report":
 * - a decoder returns 0 or STRATA_EBADMSG, nothing else;
 * - a body that decodes re-encodes to the same bytes (the encoding is
 *   canonical: one byte string per message), so every string kept its
 *   bounds and every flag and count its range;
 * - what a decode allocated is released (LeakSanitizer sees the rest).
 */
#ifndef STRATA_FUZZ_PROTO_H
#define STRATA_FUZZ_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "net/codec.h"
#include "proto/proto.h"
#include "strata/errors.h"

#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

/* Decodes data with dec into a fresh message of size bytes; on success
 * checks that enc gives data back, then releases the message. */
static void fuzz_decoder(int (*dec)(const void *, uint32_t, void *), void (*rel)(void *),
			 void (*enc)(struct wbuf *, const void *), size_t size,
			 const uint8_t *data, uint32_t len)
{
	void *m = malloc(size);
	struct bbuf again;
	struct wbuf w;
	int rc;

	FUZZ_CHECK(m != NULL);
	rc = dec(data, len, m);
	FUZZ_CHECK(rc == 0 || rc == STRATA_EBADMSG);
	if (!rc) {
		bbuf_init(&again);
		wbuf_init(&w, &again);
		enc(&w, m);
		FUZZ_CHECK(w.err == 0);
		FUZZ_CHECK(again.len == len);
		FUZZ_CHECK(len == 0 || memcmp(again.buf, data, len) == 0);
		bbuf_release(&again);
		rel(m);
	}
	free(m);
}

/* Every decoder of the table ops[n] on data[len]. */
static void fuzz_table(const struct proto_op *ops, size_t n, const uint8_t *data, uint32_t len)
{
	for (size_t i = 0; i < n; i++) {
		fuzz_decoder(ops[i].req_decode, ops[i].req_release, ops[i].req_enc,
			     ops[i].req_size, data, len);
		fuzz_decoder(ops[i].rep_decode, ops[i].rep_release, ops[i].rep_enc,
			     ops[i].rep_size, data, len);
	}
}

#endif
