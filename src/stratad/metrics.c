#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "metrics.h"
#include "common/service.h"
#include "net/http_listen.h"

struct metrics_server {
	struct MHD_Daemon *d;
	metrics_collect_fn collect;
	void *ctx;
};


static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **req_cls)
{
	struct metrics_server *m = cls;
	struct MHD_Response *resp;
	struct bbuf out;
	enum MHD_Result ret;
	unsigned code = MHD_HTTP_OK;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)req_cls;
	bbuf_init(&out);
	if (strcmp(method, "GET") != 0) {
		bbuf_append(&out, "method not allowed\n", 19);
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics") != 0) {
		bbuf_append(&out, "not found: try /metrics\n", 24);
		code = MHD_HTTP_NOT_FOUND;
	} else {
		m->collect(m->ctx, &out);
	}
	resp = MHD_create_response_from_buffer(out.len, out.buf, MHD_RESPMEM_MUST_COPY);
	bbuf_release(&out);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	ret = MHD_queue_response(conn, code, resp);
	MHD_destroy_response(resp);
	return ret;
}

int metrics_start(const char *addr, metrics_collect_fn collect, void *ctx,
		  struct metrics_server **out)
{
	struct metrics_server *m = calloc(1, sizeof(*m));
	int port;

	if (!m)
		return -ENOMEM;
	m->collect = collect;
	m->ctx = ctx;
	/* At start-up, on the main thread: a blocking lookup is fine. */
	port = http_listen(addr, MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 10, on_http,
			   NULL, m, &m->d);
	if (port < 0) {
		free(m);
		return port;
	}
	*out = m;
	return port;
}

void metrics_stop(struct metrics_server *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	free(m);
}
