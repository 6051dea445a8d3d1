#include <errno.h>

#include "codec.h"
#include "strata/errors.h"

_Static_assert(STRATA_EBADMSG != 0, "codec error must be nonzero");

static uint8_t *wb_room(struct wbuf *w, size_t n)
{
	uint8_t *p;

	/* Nothing to write for n == 0; buf may still be NULL, and NULL + 0 is
	 * undefined. */
	if (w->err || n == 0)
		return NULL;
	if (bbuf_reserve(w->b, n)) {
		w->err = -ENOMEM;
		return NULL;
	}
	p = w->b->buf + w->b->len;
	w->b->len += n;
	return p;
}

void wb_u8(struct wbuf *w, uint8_t v)
{
	uint8_t *p = wb_room(w, 1);

	if (p)
		*p = v;
}

void wb_u16(struct wbuf *w, uint16_t v)
{
	uint8_t *p = wb_room(w, 2);

	if (p)
		put_le16(p, v);
}

void wb_u32(struct wbuf *w, uint32_t v)
{
	uint8_t *p = wb_room(w, 4);

	if (p)
		put_le32(p, v);
}

void wb_u64(struct wbuf *w, uint64_t v)
{
	uint8_t *p = wb_room(w, 8);

	if (p)
		put_le64(p, v);
}

void wb_raw(struct wbuf *w, const void *src, size_t len)
{
	uint8_t *p = wb_room(w, len);

	if (p && len)
		memcpy(p, src, len);
}

void wb_bytes(struct wbuf *w, const void *p, uint32_t len)
{
	wb_u32(w, len);
	wb_raw(w, p, len);
}

void wb_str(struct wbuf *w, const char *s)
{
	size_t n = strlen(s);

	if (n > UINT32_MAX) {
		w->err = -EINVAL;
		return;
	}
	wb_bytes(w, s, (uint32_t)n);
}

static const uint8_t *rb_take(struct rbuf *r, size_t n)
{
	const uint8_t *p;

	if (r->err)
		return NULL;
	if (n > r->len - r->off) {
		r->err = STRATA_EBADMSG;
		return NULL;
	}
	/* An empty rbuf may have p == NULL: a zero-length take yields NULL. */
	if (!r->p)
		return NULL;
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint8_t rb_u8(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 1);

	return p ? *p : 0;
}

uint16_t rb_u16(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 2);

	return p ? get_le16(p) : 0;
}

uint32_t rb_u32(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 4);

	return p ? get_le32(p) : 0;
}

uint64_t rb_u64(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 8);

	return p ? get_le64(p) : 0;
}

void rb_raw(struct rbuf *r, void *dst, size_t len)
{
	const uint8_t *p = rb_take(r, len);

	if (p)
		memcpy(dst, p, len);
	else if (len)
		memset(dst, 0, len);
}

uint32_t rb_bytes(struct rbuf *r, const uint8_t **out, uint32_t max)
{
	uint32_t n = rb_u32(r);
	const uint8_t *p;

	*out = NULL;
	if (r->err)
		return 0;
	if (n > max) {
		r->err = STRATA_EBADMSG;
		return 0;
	}
	p = rb_take(r, n);
	if (!p)
		return 0;
	*out = p;
	return n;
}

void rb_str(struct rbuf *r, char *dst, size_t dstlen)
{
	const uint8_t *p;
	uint32_t n = rb_bytes(r, &p, dstlen ? (uint32_t)(dstlen - 1) : 0);

	if (dstlen)
		dst[0] = '\0';
	if (r->err || !dstlen)
		return;
	if (n && memchr(p, 0, n)) {
		r->err = STRATA_EBADMSG;
		return;
	}
	if (n)
		memcpy(dst, p, n);
	dst[n] = '\0';
}
