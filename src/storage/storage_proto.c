#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "net/frame.h"
#include "net/proto.h"
#include "net/rpc.h"
#include "storage_proto.h"
#include "strata/errors.h"

void sp_ref_encode(struct wbuf *w, const struct sp_ref *r)
{
	wb_u32(w, r->chain_id);
	wb_u64(w, r->chain_ver);
	wb_u32(w, r->target_id);
	wb_u64(w, r->ino);
	wb_u64(w, r->idx);
}

void sp_ref_decode(struct rbuf *r, struct sp_ref *out)
{
	out->chain_id = rb_u32(r);
	out->chain_ver = rb_u64(r);
	out->target_id = rb_u32(r);
	out->ino = rb_u64(r);
	out->idx = rb_u64(r);
}

void sp_update_encode(struct wbuf *w, const struct sp_update *u)
{
	sp_ref_encode(w, &u->ref);
	wb_u8(w, u->forwarded);
	wb_u32(w, u->offset);
	wb_u32(w, u->len);
	wb_u32(w, u->crc);
	wb_u64(w, u->version);
	wb_u64(w, u->base);
}

int sp_update_decode(const void *body, uint32_t len, struct sp_update *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	sp_ref_decode(&r, &out->ref);
	out->forwarded = rb_u8(&r);
	out->offset = rb_u32(&r);
	out->len = rb_u32(&r);
	out->crc = rb_u32(&r);
	out->version = rb_u64(&r);
	out->base = rb_u64(&r);
	if (rb_finish(&r) || out->forwarded > SP_FWD_FULL || (uint64_t)out->offset + out->len > FRAME_MAX_BULK)
		return STRATA_EBADMSG;
	return 0;
}

void sp_read_encode(struct wbuf *w, const struct sp_read *rd)
{
	sp_ref_encode(w, &rd->ref);
	wb_u32(w, rd->offset);
	wb_u32(w, rd->len);
	wb_u32(w, rd->flags);
}

int sp_read_decode(const void *body, uint32_t len, struct sp_read *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	sp_ref_decode(&r, &out->ref);
	out->offset = rb_u32(&r);
	out->len = rb_u32(&r);
	out->flags = rb_u32(&r);
	if (rb_finish(&r) || out->len > FRAME_MAX_BULK || (out->flags & ~SP_READ_REPAIR))
		return STRATA_EBADMSG;
	return 0;
}

void sp_batch_encode(struct wbuf *w, uint32_t target_id, const struct sp_batch_item *items,
		     uint32_t n)
{
	wb_u32(w, target_id);
	wb_u32(w, n);
	for (uint32_t i = 0; i < n; i++) {
		wb_u32(w, items[i].chain_id);
		wb_u64(w, items[i].chain_ver);
		wb_u64(w, items[i].ino);
		wb_u64(w, items[i].idx);
		wb_u32(w, items[i].offset);
		wb_u32(w, items[i].len);
	}
}

int sp_batch_decode(const void *body, uint32_t len, uint32_t *target_id,
		    struct sp_batch_item **items, uint32_t *n)
{
	struct rbuf r;
	struct sp_batch_item *v;
	uint64_t total = 0;
	uint32_t cnt;

	*items = NULL;
	*n = 0;
	rbuf_init(&r, body, len);
	*target_id = rb_u32(&r);
	cnt = rb_u32(&r);
	/* 36 bytes per item: bound the count by what the body can hold. */
	if (r.err || cnt == 0 || cnt > SP_BATCH_MAX || (uint64_t)cnt * 36 != rb_left(&r))
		return STRATA_EBADMSG;
	v = calloc(cnt, sizeof(*v));
	if (!v)
		return -12; /* -ENOMEM */
	for (uint32_t i = 0; i < cnt; i++) {
		v[i].chain_id = rb_u32(&r);
		v[i].chain_ver = rb_u64(&r);
		v[i].ino = rb_u64(&r);
		v[i].idx = rb_u64(&r);
		v[i].offset = rb_u32(&r);
		v[i].len = rb_u32(&r);
		total += v[i].len;
	}
	if (rb_finish(&r) || total > FRAME_MAX_BULK) {
		free(v);
		return STRATA_EBADMSG;
	}
	*items = v;
	*n = cnt;
	return 0;
}

static void on_verify_answer(void *arg, int status, struct rpc_msg *resp)
{
	(void)arg;
	(void)resp;
	if (status == STRATA_EINTEGRITY)
		log_warn("storage", "a target confirmed that its copy is damaged; it will be repaired");
	else if (status)
		log_info("storage", "asking a target to verify its copy failed: %s",
			 strata_strerror(status));
}

int sp_ask_verify(struct rpc_pool *pool, const char *addr, const struct sp_read *rd,
		  uint32_t timeout_ms)
{
	uint8_t body[64];
	struct bbuf b = { body, 0, sizeof(body) };
	struct rpc_call_args a = { .op = OP_CHUNK_VERIFY, .cb = on_verify_answer };
	struct wbuf w;

	wbuf_init(&w, &b);
	sp_read_encode(&w, rd);
	if (w.err || b.buf != body)
		return w.err ? w.err : -EMSGSIZE;
	a.body = b.buf;
	a.body_len = (uint32_t)b.len;
	a.timeout_ms = timeout_ms;
	return rpc_pool_call(pool, addr, &a);
}
