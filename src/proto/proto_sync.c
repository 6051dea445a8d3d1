/* Blocking calls over the tables (proto.h): for programs with a thread to
 * block (the CLI, tools, the synchronous client API); the services and
 * the simulation use only the asynchronous stubs. */
#include <errno.h>

#include "proto/mgmt.h"
#include "proto/proto.h"

int proto_call_sync(struct rpc_client *cl, const char *addr, uint16_t op,
		    void (*enc)(struct wbuf *, const void *), const void *req,
		    struct proto_sync *s,
		    int (*dec)(const void *, uint32_t, void *), void *rep)
{
	struct rpc_result res = { 0 };
	struct bbuf b;
	struct wbuf w;
	int rc;

	bbuf_init(&s->body);
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
	if (!rc) {
		/* The reply's views point into its body: the caller keeps it. */
		s->body = res.body;
		bbuf_init(&res.body);
		rc = dec(s->body.buf, (uint32_t)s->body.len, rep);
		if (rc)
			bbuf_release(&s->body);
	}
	rpc_result_release(&res);
	return rc;
}

int cmap_fetch_sync(struct rpc_client *cl, const char *addr, uint32_t timeout_ms,
		    struct cluster_map *out)
{
	struct mg_since rq = { 0 };	/* since 0: always the whole map */
	struct proto_sync s = { .timeout_ms = timeout_ms };
	struct mg_map rep;
	int rc;

	cm_init(out);
	rc = mg_get_map_call_sync(cl, addr, &rq, &s, &rep);
	if (rc)
		return rc;
	rc = rep.maps_n ? cmap_from_wire(&rep.maps[0], out) : STRATA_EBADMSG;
	mg_map_release(&rep);
	bbuf_release(&s.body);
	return rc;
}
