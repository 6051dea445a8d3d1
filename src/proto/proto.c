/* The runtime of the generated codecs and stubs (proto.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

int pstr_copy(struct pstr v, char *dst, size_t cap)
{
	if (!cap || v.len >= cap) {
		if (cap)
			dst[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (v.len)
		memcpy(dst, v.p, v.len);
	dst[v.len] = '\0';
	return 0;
}

bool pstr_eq(struct pstr v, const char *s)
{
	size_t n = strlen(s);

	return n == v.len && (n == 0 || memcmp(v.p, s, n) == 0);
}

void proto_enc_str(struct wbuf *w, struct pstr v, uint32_t max)
{
	if (v.len > max || (v.len && !v.p)) {
		if (!w->err)
			w->err = -ENAMETOOLONG;
		return;
	}
	wb_bytes(w, v.p, v.len);
}

void proto_enc_bytes(struct wbuf *w, struct pbytes v, uint32_t max)
{
	if (v.len > max || (v.len && !v.p)) {
		if (!w->err)
			w->err = -E2BIG;
		return;
	}
	wb_bytes(w, v.p, v.len);
}

void proto_dec_str(struct rbuf *r, struct pstr *out, uint32_t max)
{
	const uint8_t *p;
	uint32_t n = rb_bytes(r, &p, max);

	out->p = (const char *)p;
	out->len = r->err ? 0 : n;
	if (!r->err && n && memchr(p, 0, n)) {
		r->err = STRATA_EBADMSG;
		out->len = 0;
	}
}

void proto_dec_bytes(struct rbuf *r, struct pbytes *out, uint32_t max)
{
	out->len = rb_bytes(r, &out->p, max);
	if (r->err)
		out->len = 0;
}

void *proto_dec_arr(struct rbuf *r, uint32_t *n, uint32_t max, size_t elem, size_t min_size)
{
	uint32_t c = rb_u32(r);
	void *v;

	*n = 0;
	if (r->err)
		return NULL;
	if (c > max || (uint64_t)c * (min_size ? min_size : 1) > rb_left(r)) {
		r->err = STRATA_EBADMSG;
		return NULL;
	}
	if (!c)
		return NULL;
	v = calloc(c, elem);
	if (!v) {
		r->err = -ENOMEM;
		return NULL;
	}
	*n = c;
	return v;
}

bool proto_enc_arr(struct wbuf *w, uint32_t n, uint32_t max)
{
	if (n > max) {
		if (!w->err)
			w->err = -E2BIG;
		return false;
	}
	wb_u32(w, n);
	return true;
}

int proto_dec_finish(struct rbuf *r)
{
	if (rb_finish(r))
		return r->err == -ENOMEM ? -ENOMEM : STRATA_EBADMSG;
	return 0;
}

int proto_void_decode(const void *body, uint32_t len, struct proto_void *out)
{
	(void)body;
	memset(out, 0, sizeof(*out));
	return len ? STRATA_EBADMSG : 0;
}

int proto_void_encode(struct bbuf *b, const struct proto_void *m)
{
	(void)b;
	(void)m;
	return 0;
}

void proto_void_enc_any(struct wbuf *w, const void *m)
{
	(void)w;
	(void)m;
}

int proto_void_decode_any(const void *body, uint32_t len, void *out)
{
	return proto_void_decode(body, len, out);
}

void proto_void_release_any(void *m)
{
	(void)m;
}

int proto_call(struct rpc_pool *p, const char *addr, uint16_t op,
	       void (*enc)(struct wbuf *, const void *), const void *req,
	       const struct proto_call *c)
{
	struct bbuf b;
	struct wbuf w;
	struct rpc_call_args a = {
		.op = op, .bulk = c->bulk, .bulk_len = c->bulk_len, .bulk_dst = c->bulk_dst,
		.bulk_cap = c->bulk_cap, .timeout_ms = c->timeout_ms, .cb = c->cb, .arg = c->arg,
	};
	int rc;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	enc(&w, req);
	rc = w.err;
	if (!rc) {
		a.body = b.buf;
		a.body_len = (uint32_t)b.len;
		rc = rpc_pool_call(p, addr, &a);
	}
	bbuf_release(&b);
	return rc;
}

int proto_call_sync(struct rpc_client *cl, const char *addr, uint16_t op,
		    void (*enc)(struct wbuf *, const void *), const void *req,
		    const struct proto_sync *s,
		    int (*dec)(const void *, uint32_t, void *), void *rep, bool views)
{
	struct rpc_result res = { 0 };
	struct bbuf b;
	struct wbuf w;
	int rc;

	if (views && !s->body)
		return -EINVAL;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	enc(&w, req);
	rc = w.err;
	if (!rc) {
		struct rpc_sync_args a = {
			.op = op, .body = b.buf, .body_len = (uint32_t)b.len, .bulk = s->bulk,
			.bulk_len = s->bulk_len, .bulk_dst = s->bulk_dst, .bulk_cap = s->bulk_cap,
			.timeout_ms = s->timeout_ms,
		};

		rc = rpc_call_sync(cl, addr, &a, &res);
		if (s->bulk_got)
			*s->bulk_got = rc ? 0 : res.bulk_len;
	}
	bbuf_release(&b);
	if (!rc)
		rc = dec(res.body.buf, (uint32_t)res.body.len, rep);
	if (!rc && s->body) {
		/* The views of rep point into this body: it goes to the caller. */
		bbuf_release(s->body);
		*s->body = res.body;
		bbuf_init(&res.body);
	}
	rpc_result_release(&res);
	return rc;
}
