/*
 * Field-by-field little-endian codec for message bodies. No packed structs
 * on the wire: every field is written and read with a fixed-width helper.
 *
 * Encoder: struct wbuf appends to a caller-owned struct bbuf; the first
 * failure (ENOMEM) is sticky in w->err and later puts are no-ops.
 * Decoder: struct rbuf reads from a borrowed byte range; reading past the
 * end or an over-long string sets the sticky w->err = STRATA_EBADMSG and
 * returns zeros, so a decoder can read every field and check err once.
 */
#ifndef STRATA_NET_CODEC_H
#define STRATA_NET_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "strata/errors.h"

static inline void put_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}
static inline uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

struct wbuf {
	struct bbuf *b;
	int err;
};

static inline void wbuf_init(struct wbuf *w, struct bbuf *b) { w->b = b; w->err = 0; }
void wb_u8(struct wbuf *w, uint8_t v);
void wb_u16(struct wbuf *w, uint16_t v);
void wb_u32(struct wbuf *w, uint32_t v);
void wb_u64(struct wbuf *w, uint64_t v);
static inline void wb_i32(struct wbuf *w, int32_t v) { wb_u32(w, (uint32_t)v); }
static inline void wb_i64(struct wbuf *w, int64_t v) { wb_u64(w, (uint64_t)v); }
/* Raw bytes, no length prefix. */
void wb_raw(struct wbuf *w, const void *p, size_t len);
/* u32 length prefix then bytes. */
void wb_bytes(struct wbuf *w, const void *p, uint32_t len);
/* NUL-terminated C string as wb_bytes (without the NUL). */
void wb_str(struct wbuf *w, const char *s);

struct rbuf {
	const uint8_t *p;
	size_t len;
	size_t off;
	int err;
};

static inline void rbuf_init(struct rbuf *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->err = 0;
}
static inline size_t rb_left(const struct rbuf *r) { return r->len - r->off; }
uint8_t rb_u8(struct rbuf *r);
uint16_t rb_u16(struct rbuf *r);
uint32_t rb_u32(struct rbuf *r);
uint64_t rb_u64(struct rbuf *r);
static inline int32_t rb_i32(struct rbuf *r) { return (int32_t)rb_u32(r); }
static inline int64_t rb_i64(struct rbuf *r) { return (int64_t)rb_u64(r); }
/* Copies len raw bytes into dst (zeros and sets err when short). */
void rb_raw(struct rbuf *r, void *dst, size_t len);
/* Length-prefixed bytes, borrowed from the buffer: *out points into it.
 * Fails (err) if the length exceeds max or the remaining bytes. */
uint32_t rb_bytes(struct rbuf *r, const uint8_t **out, uint32_t max);
/* Length-prefixed string copied into dst[dstlen] with a NUL; fails if it
 * does not fit, or holds a NUL byte. */
void rb_str(struct rbuf *r, char *dst, size_t dstlen);
/* Sets err unless every byte was consumed (trailing garbage is an error). */
static inline int rb_finish(struct rbuf *r)
{
	if (!r->err && r->off != r->len)
		r->err = STRATA_EBADMSG;
	return r->err;
}

#endif
