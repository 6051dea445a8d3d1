/* The server side of the generated stubs (server.h): daemon only. */
#include <errno.h>

#include "common/log.h"
#include "net/conn.h"
#include "proto/server.h"

int proto_req_decode(struct svc_req *req, int (*dec)(const void *, uint32_t, void *), void *out,
		     const char *name)
{
	int rc = dec(req->body, req->hdr.body_len, out);

	if (!rc)
		return 0;
	log_warn("proto", "malformed %s request from '%s' (%u bytes): %s", name,
		 req->conn ? conn_peer(req->conn) : "?", req->hdr.body_len, strata_strerror(rc));
	svc_reply(req, rc);
	return rc;
}

void proto_reply_bulk(struct svc_req *req, int status, void (*enc)(struct wbuf *, const void *),
		      const void *rep, const void *bulk, uint64_t len, void (*done)(void *),
		      void *arg)
{
	struct wbuf w;

	if (!status && rep) {
		wbuf_init(&w, &req->reply);
		enc(&w, rep);
		status = w.err;
	}
	if (status) {
		/* A failed reply carries no body and no bulk. */
		req->reply.len = 0;
		if (done)
			done(arg);
		svc_reply(req, status);
		return;
	}
	svc_reply_bulk(req, 0, bulk, len, done, arg);
}

void proto_reply(struct svc_req *req, int status, void (*enc)(struct wbuf *, const void *),
		 const void *rep)
{
	proto_reply_bulk(req, status, enc, rep, NULL, 0, NULL, NULL);
}
