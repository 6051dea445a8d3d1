/* Blocking calls over the tables (proto.h): for programs with a thread to
 * block (the CLI, tools, the synchronous client API); the services and
 * the simulation use only the asynchronous stubs. */
#include <errno.h>
#include <string.h>

#include "net/mgmt_addrs.h"

#include "net/auth.h"
#include "net/conn.h"
#include "net/frame.h"
#include "proto/mgmt.h"
#include "proto/proto.h"

int proto_call_sync(struct rpc_client *cl, const char *addr, uint16_t op,
		    void (*enc)(struct wbuf *, const void *), const void *req,
		    const struct proto_sync *s,
		    int (*dec)(const void *, uint32_t, void *), void *rep, bool views)
{
	const struct net_caller *caller = s->caller ? net_caller_current() : NULL;
	struct rpc_result res = { 0 };
	struct bbuf b;
	struct wbuf w;
	int rc;

	if (views && !s->body)
		return -EINVAL;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	if (caller)
		net_caller_encode(&w, caller);
	enc(&w, req);
	rc = w.err;
	if (!rc) {
		struct rpc_sync_args a = {
			.op = op, .body = b.buf, .body_len = (uint32_t)b.len, .bulk = s->bulk,
			.bulk_len = s->bulk_len, .bulk_dst = s->bulk_dst, .bulk_cap = s->bulk_cap,
			.timeout_ms = s->timeout_ms,
			.flags = (caller ? FRAME_F_CALLER : 0) |
				 (s->notconn_unsent ? CONN_CALL_F_NOTCONN_UNSENT : 0),
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

static int fetch_one(struct rpc_client *cl, const char *addr, uint32_t timeout_ms,
		     struct cluster_map *out)
{
	/* No version is UINT64_MAX: mgmt sends the whole map, also the empty
	 * one of version 0 (since 0 got nothing back from a cluster where no
	 * node had registered yet). */
	struct mg_since rq = { UINT64_MAX };
	struct bbuf body;
	struct proto_sync s = { .timeout_ms = timeout_ms, .body = &body };
	struct mg_map rep;
	int rc;

	cm_init(out);
	bbuf_init(&body);
	rc = mg_get_map_call_sync(cl, addr, &rq, &s, &rep);
	if (!rc) {
		rc = rep.maps_n ? cmap_from_wire(&rep.maps[0], out) : STRATA_EBADMSG;
		mg_map_release(&rep);
	}
	bbuf_release(&body);
	return rc;
}

int cmap_fetch_sync(struct rpc_client *cl, const char *addr, uint32_t timeout_ms,
		    struct cluster_map *out)
{
	struct mgmt_addrs a;
	int rc;

	if (!strchr(addr, ','))
		return fetch_one(cl, addr, timeout_ms, out);
	if (mgmt_addrs_init(&a, addr)) {
		cm_init(out);
		return -EINVAL;
	}
	/* Any mgmt answers (followers from the database, or they name the
	 * leader): from the address drawn for reads, the first that does. */
	for (uint32_t i = 0;; i++) {
		const char *at = mgmt_addrs_read(&a);

		rc = fetch_one(cl, at, timeout_ms, out);
		if (!rc || i + 1 == a.n || !mgmt_addrs_retry_elsewhere(rc))
			return rc;
		cm_release(out);
		if (!mgmt_addrs_read_failed(&a, at, rc, NULL))
			return rc;
	}
}
