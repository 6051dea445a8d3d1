/*
 * The server side of the operation tables (daemon only: libstrata never
 * includes this). PROTO_SERVER(svc, TABLE) declares, per operation fn,
 *     fn_req(req, in)              decode the request body into in; on a
 *                                  malformed body it answers
 *                                  STRATA_EBADMSG itself, logs why and
 *                                  returns nonzero (the handler returns)
 *     fn_reply(req, status, rep)   encode rep and answer (rep may be NULL
 *                                  when status is nonzero)
 *     fn_reply_bulk(req, status, rep, bulk, len, done, arg)
 * and struct svc_handlers, one svc_handler_fn per operation, with
 * svc_route(server, owner, handlers, svc) routing every one that is set.
 */
#ifndef STRATA_PROTO_SERVER_H
#define STRATA_PROTO_SERVER_H

#include "net/server.h"
#include "proto/proto.h"

/* Decodes req's body with dec into out; on failure answers STRATA_EBADMSG
 * (or -ENOMEM), logs the operation and peer, and returns nonzero. */
int proto_req_decode(struct svc_req *req, int (*dec)(const void *, uint32_t, void *), void *out,
		     const char *name);
void proto_reply(struct svc_req *req, int status, void (*enc)(struct wbuf *, const void *),
		 const void *rep);
void proto_reply_bulk(struct svc_req *req, int status, void (*enc)(struct wbuf *, const void *),
		      const void *rep, const void *bulk, uint64_t len, void (*done)(void *),
		      void *arg);

/* Generated in each service's .c file: a service need not use them all. */
#define PS_FN static inline __attribute__((unused))
#define PS_STUBS(NAME, num, fn, req, rep, access) \
	PS_FN int fn##_req(struct svc_req *r_, struct req *out) \
	{ \
		return proto_req_decode(r_, req##_decode_any, out, #NAME); \
	} \
	PS_FN void fn##_reply(struct svc_req *r_, int status, const struct rep *m) \
	{ \
		proto_reply(r_, status, rep##_enc_any, m); \
	} \
	PS_FN void fn##_reply_bulk(struct svc_req *r_, int status, const struct rep *m, \
				   const void *bulk, uint64_t len, void (*done)(void *), \
				   void *arg) \
	{ \
		proto_reply_bulk(r_, status, rep##_enc_any, m, bulk, len, done, arg); \
	}
#define PS_HANDLER(NAME, num, fn, req, rep, access) svc_handler_fn fn;
#define PS_ROUTE(NAME, num, fn, req, rep, access) \
	if (h_->fn) \
		rpc_server_route(s_, OP_##NAME, owner_, h_->fn, svc_, SVC_##access);

#define PROTO_SERVER(svc, OPS) \
	OPS(PS_STUBS) \
	struct svc##_handlers { OPS(PS_HANDLER) }; \
	PS_FN void svc##_route(struct rpc_server *s_, struct reactor *owner_, \
			       const struct svc##_handlers *h_, void *svc_) \
	{ \
		OPS(PS_ROUTE) \
	}

#endif
