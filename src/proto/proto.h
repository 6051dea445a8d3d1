/*
 * The wire layer: every operation of every service is declared once, in a
 * table under src/proto/, and this header turns the table into C.
 *
 * A message is a list of fields, written as an X-macro:
 *
 *     #define SP_REF_FIELDS(X) \
 *             X(U32, chain_id) \
 *             X(U64, chain_ver) ...
 *     PROTO_MSG(sp_ref, SP_REF_FIELDS)          (in a header)
 *     PROTO_MSG_DEFINE(sp_ref, SP_REF_FIELDS)   (in one .c of src/proto/)
 *
 * which gives struct sp_ref and, with nothing written by hand:
 *     sp_ref_enc(w, m)        append the fields to a wbuf
 *     sp_ref_dec(r, m)        read them from an rbuf (errors sticky in r)
 *     sp_ref_decode(b, n, m)  a whole body: trailing bytes are an error
 *     sp_ref_encode(bb, m)    a whole body into a bbuf
 *     sp_ref_release(m)       frees what a decode allocated (arrays)
 *     sp_ref_MIN              the fewest bytes it encodes to
 *     sp_ref_VIEWS            1 if a decode leaves views into the body
 *                             (a STR or BYTES field, at any depth)
 *
 * Field kinds (little-endian, field by field, docs/protocol.md):
 *     U8 U16 U32 U64 I32 I64 (name)
 *     U8R U32R (name, max)        a scalar no larger than max
 *     FLAGS (name, known)         a u32 with no bit outside known
 *     STR (name, max)             u32 length, bytes, no NUL inside: a view
 *                                 (struct pstr) into the body, never copied
 *     BYTES (name, max)           u32 length, bytes: a view (struct pbytes)
 *     RAW (name, len)             exactly len bytes, no length: uint8_t
 *                                 name[len], copied (a MAC)
 *     OBJ (name, type)            a nested message
 *     ARR (name, type, max)       u32 count, then count nested messages:
 *                                 struct type *name plus uint32_t name_n;
 *                                 decoding bounds the count by max and by
 *                                 the bytes left before it allocates
 * A message with a cross-field rule uses PROTO_MSG_CHECKED: its decode
 * then also calls type_check(m), written next to the table.
 *
 * Decoders never read past the body, bound every length before allocating
 * and return 0 or STRATA_EBADMSG (-ENOMEM when an allocation fails). A
 * decoded view points into the body: it lives as long as the body does.
 *
 * Operations: a service's table lists OP(NAME, number, fn, req, rep) and
 * PROTO_OPS(svc, TABLE) declares, per operation,
 *     OP_NAME                          the opcode
 *     fn_call(pool, addr, req, call)   an asynchronous call (client side)
 *     fn_call_sync(cl, addr, req, sync, rep)   a blocking one
 *     fn_rep(msg, rep)                 decode a reply in a callback
 * and svc_ops[] (name, number, decoders) for logs and the fuzz target.
 * The server side (src/proto/server.h, daemon only) adds fn_req(req, in),
 * fn_reply(req, status, rep) and a handler table routed in one call.
 */
#ifndef STRATA_PROTO_PROTO_H
#define STRATA_PROTO_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/codec.h"
#include "net/conn.h"
#include "net/proto.h"
#include "net/rpc.h"
#include "strata/errors.h"

/* A string or byte range inside a message: (pointer, length), no NUL. */
struct pstr {
	const char *p;
	uint32_t len;
};

struct pbytes {
	const uint8_t *p;
	uint32_t len;
};

/* A view of a NUL-terminated C string (borrowed). */
static inline struct pstr pstr_c(const char *s)
{
	struct pstr v = { s, s ? (uint32_t)strlen(s) : 0 };

	return v;
}

/* Copies v into dst[cap] with a NUL; -ENAMETOOLONG when it does not fit. */
int pstr_copy(struct pstr v, char *dst, size_t cap);
/* Whether v equals the C string s. */
bool pstr_eq(struct pstr v, const char *s);

/* The message every operation without a request or reply body uses. */
struct proto_void {
	char unused;		/* C has no empty struct; not on the wire */
};
enum { proto_void_MIN = 0, proto_void_VIEWS = 0 };
static inline void proto_void_enc(struct wbuf *w, const struct proto_void *m) { (void)w; (void)m; }
static inline void proto_void_dec(struct rbuf *r, struct proto_void *m) { (void)r; (void)m; }
static inline void proto_void_release(struct proto_void *m) { (void)m; }
int proto_void_decode(const void *body, uint32_t len, struct proto_void *out);
int proto_void_encode(struct bbuf *b, const struct proto_void *m);
void proto_void_enc_any(struct wbuf *w, const void *m);
int proto_void_decode_any(const void *body, uint32_t len, void *out);
void proto_void_release_any(void *m);

/* ---- the runtime the generated code calls ---- */

void proto_enc_str(struct wbuf *w, struct pstr v, uint32_t max);
void proto_enc_bytes(struct wbuf *w, struct pbytes v, uint32_t max);
void proto_dec_str(struct rbuf *r, struct pstr *out, uint32_t max);
void proto_dec_bytes(struct rbuf *r, struct pbytes *out, uint32_t max);
/* Reads an array count (<= max, and count * min_size <= bytes left) and
 * allocates count zeroed elements of size elem: NULL when count is 0 or on
 * error (r->err set). */
void *proto_dec_arr(struct rbuf *r, uint32_t *n, uint32_t max, size_t elem, size_t min_size);
/* Sets w->err when an array to encode holds more than max elements. */
bool proto_enc_arr(struct wbuf *w, uint32_t n, uint32_t max);
/* A decode's result once the body was read: 0, STRATA_EBADMSG or -ENOMEM. */
int proto_dec_finish(struct rbuf *r);

/* ---- field kinds ---- */

#define PF_DECL(kind, name, ...) PK_##kind##_DECL(name, ##__VA_ARGS__)
#define PF_MIN(kind, name, ...) + PK_##kind##_MIN(name, ##__VA_ARGS__)
#define PF_ENC(kind, name, ...) PK_##kind##_ENC(name, ##__VA_ARGS__)
#define PF_DEC(kind, name, ...) PK_##kind##_DEC(name, ##__VA_ARGS__)
#define PF_REL(kind, name, ...) PK_##kind##_REL(name, ##__VA_ARGS__)
#define PF_VIEWS(kind, name, ...) | PK_##kind##_VIEWS(name, ##__VA_ARGS__)

/* Whether a kind leaves views into the body: only strings and bytes do
 * (and messages holding them). */
#define PK_U8_VIEWS(n) 0
#define PK_U16_VIEWS(n) 0
#define PK_U32_VIEWS(n) 0
#define PK_U64_VIEWS(n) 0
#define PK_I32_VIEWS(n) 0
#define PK_I64_VIEWS(n) 0
#define PK_U8R_VIEWS(n, max) 0
#define PK_U32R_VIEWS(n, max) 0
#define PK_FLAGS_VIEWS(n, known) 0
#define PK_STR_VIEWS(n, max) 1
#define PK_BYTES_VIEWS(n, max) 1
#define PK_RAW_VIEWS(n, len) 0
#define PK_OBJ_VIEWS(n, type) type##_VIEWS
#define PK_ARR_VIEWS(n, type, max) type##_VIEWS

#define PK_U8_DECL(n) uint8_t n;
#define PK_U8_MIN(n) 1
#define PK_U8_ENC(n) wb_u8(w, m->n);
#define PK_U8_DEC(n) m->n = rb_u8(r);
#define PK_U8_REL(n)
#define PK_U16_DECL(n) uint16_t n;
#define PK_U16_MIN(n) 2
#define PK_U16_ENC(n) wb_u16(w, m->n);
#define PK_U16_DEC(n) m->n = rb_u16(r);
#define PK_U16_REL(n)
#define PK_U32_DECL(n) uint32_t n;
#define PK_U32_MIN(n) 4
#define PK_U32_ENC(n) wb_u32(w, m->n);
#define PK_U32_DEC(n) m->n = rb_u32(r);
#define PK_U32_REL(n)
#define PK_U64_DECL(n) uint64_t n;
#define PK_U64_MIN(n) 8
#define PK_U64_ENC(n) wb_u64(w, m->n);
#define PK_U64_DEC(n) m->n = rb_u64(r);
#define PK_U64_REL(n)
#define PK_I32_DECL(n) int32_t n;
#define PK_I32_MIN(n) 4
#define PK_I32_ENC(n) wb_i32(w, m->n);
#define PK_I32_DEC(n) m->n = rb_i32(r);
#define PK_I32_REL(n)
#define PK_I64_DECL(n) int64_t n;
#define PK_I64_MIN(n) 8
#define PK_I64_ENC(n) wb_i64(w, m->n);
#define PK_I64_DEC(n) m->n = rb_i64(r);
#define PK_I64_REL(n)

#define PK_U8R_DECL(n, max) uint8_t n;
#define PK_U8R_MIN(n, max) 1
#define PK_U8R_ENC(n, max) wb_u8(w, m->n);
#define PK_U8R_DEC(n, max) \
	if ((m->n = rb_u8(r)) > (max) && !r->err) \
		r->err = STRATA_EBADMSG;
#define PK_U8R_REL(n, max)
#define PK_U32R_DECL(n, max) uint32_t n;
#define PK_U32R_MIN(n, max) 4
#define PK_U32R_ENC(n, max) wb_u32(w, m->n);
#define PK_U32R_DEC(n, max) \
	if ((m->n = rb_u32(r)) > (max) && !r->err) \
		r->err = STRATA_EBADMSG;
#define PK_U32R_REL(n, max)
#define PK_FLAGS_DECL(n, known) uint32_t n;
#define PK_FLAGS_MIN(n, known) 4
#define PK_FLAGS_ENC(n, known) wb_u32(w, m->n);
#define PK_FLAGS_DEC(n, known) \
	if (((m->n = rb_u32(r)) & ~(uint32_t)(known)) && !r->err) \
		r->err = STRATA_EBADMSG;
#define PK_FLAGS_REL(n, known)

#define PK_STR_DECL(n, max) struct pstr n;
#define PK_STR_MIN(n, max) 4
#define PK_STR_ENC(n, max) proto_enc_str(w, m->n, (max));
#define PK_STR_DEC(n, max) proto_dec_str(r, &m->n, (max));
#define PK_STR_REL(n, max)
#define PK_BYTES_DECL(n, max) struct pbytes n;
#define PK_BYTES_MIN(n, max) 4
#define PK_BYTES_ENC(n, max) proto_enc_bytes(w, m->n, (max));
#define PK_BYTES_DEC(n, max) proto_dec_bytes(r, &m->n, (max));
#define PK_BYTES_REL(n, max)
#define PK_RAW_DECL(n, len) uint8_t n[len];
#define PK_RAW_MIN(n, len) (len)
#define PK_RAW_ENC(n, len) wb_raw(w, m->n, (len));
#define PK_RAW_DEC(n, len) rb_raw(r, m->n, (len));
#define PK_RAW_REL(n, len)

#define PK_OBJ_DECL(n, type) struct type n;
#define PK_OBJ_MIN(n, type) type##_MIN
#define PK_OBJ_ENC(n, type) type##_enc(w, &m->n);
#define PK_OBJ_DEC(n, type) type##_dec(r, &m->n);
#define PK_OBJ_REL(n, type) type##_release(&m->n);

#define PK_ARR_DECL(n, type, max) struct type *n; uint32_t n##_n;
#define PK_ARR_MIN(n, type, max) 4
#define PK_ARR_ENC(n, type, max) \
	if (proto_enc_arr(w, m->n##_n, (max))) \
		for (uint32_t i_ = 0; i_ < m->n##_n; i_++) \
			type##_enc(w, &m->n[i_]);
#define PK_ARR_DEC(n, type, max) \
	m->n = proto_dec_arr(r, &m->n##_n, (max), sizeof(struct type), type##_MIN); \
	for (uint32_t i_ = 0; m->n && i_ < m->n##_n && !r->err; i_++) \
		type##_dec(r, &m->n[i_]);
#define PK_ARR_REL(n, type, max) \
	if (m->n) { \
		for (uint32_t i_ = 0; i_ < m->n##_n; i_++) \
			type##_release(&m->n[i_]); \
		free(m->n); \
		m->n = NULL; \
	}

/* ---- messages ---- */

#define PROTO_MSG(type, FIELDS) \
	struct type { FIELDS(PF_DECL) }; \
	enum { type##_MIN = 0 FIELDS(PF_MIN), type##_VIEWS = 0 FIELDS(PF_VIEWS) }; \
	void type##_enc(struct wbuf *w, const struct type *m); \
	void type##_dec(struct rbuf *r, struct type *m); \
	void type##_release(struct type *m); \
	int type##_decode(const void *body, uint32_t len, struct type *out); \
	int type##_encode(struct bbuf *b, const struct type *m); \
	void type##_enc_any(struct wbuf *w, const void *m); \
	int type##_decode_any(const void *body, uint32_t len, void *out); \
	void type##_release_any(void *m);

/* As PROTO_MSG; the decode also calls int type##_check(const struct type *)
 * (0 or STRATA_EBADMSG), written by hand in src/proto/. */
#define PROTO_MSG_CHECKED(type, FIELDS) \
	PROTO_MSG(type, FIELDS) \
	int type##_check(const struct type *m);

#define PROTO_MSG_BODY_(type, FIELDS, CHECK) \
	void type##_enc(struct wbuf *w, const struct type *m) \
	{ \
		(void)w; (void)m; \
		FIELDS(PF_ENC) \
	} \
	void type##_dec(struct rbuf *r, struct type *m) \
	{ \
		memset(m, 0, sizeof(*m)); \
		FIELDS(PF_DEC) \
		if (!r->err && CHECK(m)) \
			r->err = STRATA_EBADMSG; \
	} \
	void type##_release(struct type *m) \
	{ \
		(void)m; \
		FIELDS(PF_REL) \
	} \
	int type##_decode(const void *body, uint32_t len, struct type *out) \
	{ \
		struct rbuf r; \
		int rc; \
		rbuf_init(&r, body, len); \
		type##_dec(&r, out); \
		rc = proto_dec_finish(&r); \
		if (rc) \
			type##_release(out); \
		return rc; \
	} \
	int type##_encode(struct bbuf *b, const struct type *m) \
	{ \
		struct wbuf w; \
		wbuf_init(&w, b); \
		type##_enc(&w, m); \
		return w.err; \
	} \
	void type##_enc_any(struct wbuf *w, const void *m) { type##_enc(w, m); } \
	int type##_decode_any(const void *body, uint32_t len, void *out) \
	{ \
		return type##_decode(body, len, out); \
	} \
	void type##_release_any(void *m) { type##_release(m); }

#define PROTO_NO_CHECK_(m) 0
#define PROTO_MSG_DEFINE(type, FIELDS) PROTO_MSG_BODY_(type, FIELDS, PROTO_NO_CHECK_)
#define PROTO_MSG_DEFINE_CHECKED(type, FIELDS) PROTO_MSG_BODY_(type, FIELDS, type##_check)

/* ---- operations ---- */

/* One operation of a table, for logs and the fuzz target. */
struct proto_op {
	uint16_t op;
	const char *name;
	size_t req_size, rep_size;
	int (*req_decode)(const void *body, uint32_t len, void *out);
	void (*req_release)(void *m);
	void (*req_enc)(struct wbuf *w, const void *m);
	int (*rep_decode)(const void *body, uint32_t len, void *out);
	void (*rep_release)(void *m);
	void (*rep_enc)(struct wbuf *w, const void *m);
};

/* How to call: the body comes from the request message; the rest is as
 * struct rpc_call_args (conn.h): bulk sent after it, a reply's bulk
 * received into bulk_dst, the callback run exactly once. */
struct proto_call {
	const void *bulk;
	uint64_t bulk_len;
	void *bulk_dst;
	uint64_t bulk_cap;
	uint32_t timeout_ms;
	rpc_cb cb;
	void *arg;
};

/* A blocking call: bulk as above. The decoded reply's views (strings,
 * bytes) point into body, which the call fills: release it (bbuf_release)
 * once done with the reply, also after an error (then it is empty). */
struct proto_sync {
	const void *bulk;
	uint64_t bulk_len;
	void *bulk_dst;
	uint64_t bulk_cap;
	uint32_t timeout_ms;
	uint64_t *bulk_got;	/* may be NULL: bytes placed in bulk_dst */
	/* Where the reply body is kept, for a reply whose views point into
	 * it (rep_VIEWS): an initialized bbuf, emptied first, that the
	 * caller releases once it is done with the reply. May be NULL for
	 * replies without views; a call whose reply has views fails with
	 * -EINVAL without it (the views would dangle). */
	struct bbuf *body;
	/* The call acts for the calling thread's caller, when it has one
	 * (net_caller_current, net/auth.h): meta's calls from libstrata. */
	bool caller;
	/* A call none of whose bytes left fails with -ENOTCONN, so that the
	 * caller may make it again elsewhere (CONN_CALL_F_NOTCONN_UNSENT,
	 * net/conn.h): libstrata's meta calls. */
	bool notconn_unsent;
};

int proto_call(struct rpc_pool *p, const char *addr, uint16_t op,
	       void (*enc)(struct wbuf *, const void *), const void *req,
	       const struct proto_call *c);
/* Returns the transport error or the reply's status; on 0 the reply body
 * is decoded into rep with dec (release it with the message's release);
 * a body that does not decode gives STRATA_EBADMSG. views: the reply
 * message has views, so s->body must keep the body. */
int proto_call_sync(struct rpc_client *cl, const char *addr, uint16_t op,
		    void (*enc)(struct wbuf *, const void *), const void *req,
		    const struct proto_sync *s,
		    int (*dec)(const void *, uint32_t, void *), void *rep, bool views);

#define PO_ENUM(NAME, num, fn, req, rep, access) OP_##NAME = (num),
#define PO_STUBS(NAME, num, fn, req, rep, access) \
	static inline int fn##_call(struct rpc_pool *p, const char *addr, const struct req *rq, \
				    const struct proto_call *c) \
	{ \
		return proto_call(p, addr, OP_##NAME, req##_enc_any, rq, c); \
	} \
	static inline int fn##_call_sync(struct rpc_client *cl, const char *addr, \
					 const struct req *rq, const struct proto_sync *s, \
					 struct rep *out) \
	{ \
		return proto_call_sync(cl, addr, OP_##NAME, req##_enc_any, rq, s, \
				       rep##_decode_any, out, rep##_VIEWS); \
	} \
	static inline int fn##_rep(const struct rpc_msg *msg, struct rep *out) \
	{ \
		return rep##_decode(msg->body, msg->hdr.body_len, out); \
	}
#define PO_DESC(NAME, num, fn, req, rep, access) \
	{ OP_##NAME, #NAME, sizeof(struct req), sizeof(struct rep), req##_decode_any, \
	  req##_release_any, req##_enc_any, rep##_decode_any, rep##_release_any, \
	  rep##_enc_any },
#define PO_COUNT(NAME, num, fn, req, rep, access) + 1

/* In a header: the opcodes, stubs and descriptor table of service svc. */
#define PROTO_OPS(svc, OPS) \
	enum svc##_op { OPS(PO_ENUM) }; \
	OPS(PO_STUBS) \
	enum { svc##_NOPS = 0 OPS(PO_COUNT) }; \
	extern const struct proto_op svc##_ops[svc##_NOPS];

/* In one .c of src/proto/. */
#define PROTO_OPS_DEFINE(svc, OPS) \
	const struct proto_op svc##_ops[svc##_NOPS] = { OPS(PO_DESC) };

/* The descriptor of op in any table, or NULL (for logs). */
const struct proto_op *proto_op_find(uint16_t op);

#endif
