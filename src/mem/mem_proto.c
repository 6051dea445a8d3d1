/* Encoders and decoders of the mem protocol: see mem_proto.h. */
#include <errno.h>
#include <stdlib.h>

#include "mem_proto.h"
#include "net/frame.h"
#include "strata/errors.h"

_Static_assert(sizeof(struct mp_stats) == MP_NSTATS * sizeof(uint64_t), "mp_stats layout");

void mp_item_encode(struct wbuf *w, const struct mp_item *it)
{
	wb_u32(w, it->flags);
	wb_u64(w, it->arg);
	wb_bytes(w, it->key, it->klen);
}

static void item_read(struct rbuf *r, struct mp_item *it)
{
	it->flags = rb_u32(r);
	it->arg = rb_u64(r);
	it->klen = rb_bytes(r, &it->key, FRAME_MAX_BODY);
}

int mp_item_decode(const uint8_t *body, uint32_t len, struct mp_item *it)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	item_read(&r, it);
	return rb_finish(&r) ? STRATA_EBADMSG : 0;
}

void mp_batch_encode_hdr(struct wbuf *w, uint32_t n, uint64_t cap)
{
	wb_u32(w, n);
	wb_u64(w, cap);
}

int mp_batch_decode(const uint8_t *body, uint32_t len, struct mp_item **items, uint32_t *n,
		    uint64_t *cap)
{
	struct mp_item *v;
	struct rbuf r;
	uint32_t cnt;

	*items = NULL;
	rbuf_init(&r, body, len);
	cnt = rb_u32(&r);
	*cap = rb_u64(&r);
	/* An item takes at least 16 bytes: bound n before allocating. */
	if (r.err || cnt > MP_BATCH_MAX || (uint64_t)cnt * 16 > rb_left(&r))
		return STRATA_EBADMSG;
	v = calloc(cnt ? cnt : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < cnt && !r.err; i++)
		item_read(&r, &v[i]);
	if (rb_finish(&r)) {
		free(v);
		return STRATA_EBADMSG;
	}
	*items = v;
	*n = cnt;
	return 0;
}

int mp_results_decode(const uint8_t *body, uint32_t len, struct mp_result *res, uint32_t n)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	if (rb_u32(&r) != n || r.err)
		return STRATA_EBADMSG;
	for (uint32_t i = 0; i < n && !r.err; i++) {
		res[i].status = rb_i32(&r);
		res[i].len = rb_u64(&r);
	}
	return rb_finish(&r) ? STRATA_EBADMSG : 0;
}

void mp_stats_encode(struct wbuf *w, const struct mp_stats *s)
{
	const uint64_t *v = (const uint64_t *)s;

	for (int i = 0; i < MP_NSTATS; i++)
		wb_u64(w, v[i]);
}

int mp_stats_decode(const uint8_t *body, uint32_t len, struct mp_stats *s)
{
	uint64_t *v = (uint64_t *)s;
	struct rbuf r;

	rbuf_init(&r, body, len);
	for (int i = 0; i < MP_NSTATS; i++)
		v[i] = rb_u64(&r);
	return rb_finish(&r) ? STRATA_EBADMSG : 0;
}
