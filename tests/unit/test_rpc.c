/*
 * Unit tests of connection pools and blocking calls (src/net/rpc.c)
 * against a server on loopback, each on its own reactor thread:
 * rpc_call_sync's body, bulk and status; the pool reconnecting after its
 * connection failed and after rpc_pool_reset; timeouts; a refused port; a
 * peer named by a host name; many threads calling at once over one pooled
 * connection. rpc_direct: calls written and answered on the holder's
 * thread, one holder at a time, many threads sharing a few of them
 * (rpc_lanes, falling back to the rpc_client when all are held), a
 * timeout, a peer that drops the connection mid-call, a direct call while
 * a call of the rpc_client is in flight. An rpc_client with lanes: its
 * blocking calls on the caller's thread, through its own thread once
 * every lane is held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "common/buf.h"
#include "net/codec.h"
#include "net/listener.h"
#include "net/rpc.h"
#include "strata/errors.h"
#include "net_test_util.h"

enum {
	T_ECHO = 120,	/* body and bulk back */
	T_FAIL,		/* status -ENOENT */
	T_DROP,		/* the server closes the connection instead of answering */
	T_SILENT,	/* held until the test releases it */
};

struct srv {
	struct conn_events ev;		/* first: the handler's ctx is the srv */
	struct reactor *r;
	struct listener *l;
	struct conn_handler h;
	int port;
	struct conn *silent_c;
	struct frame_hdr silent;
	struct latch silent_got;
};

struct fix {
	struct srv s;
	struct rpc_client *cl;
	char addr[64];
};

static void srv_on_request(void *ctx, struct conn *c, struct rpc_msg *m)
{
	struct srv *s = ctx;
	void *bulk;

	switch (m->hdr.opcode) {
	case T_ECHO:
		bulk = m->bulk;
		m->bulk = NULL;
		THREAD_CHECK(conn_reply(c, &m->hdr, 0, m->body, m->hdr.body_len, bulk,
					m->hdr.bulk_len, bulk ? abuf_free : NULL, bulk) == 0);
		break;
	case T_FAIL:
		THREAD_CHECK(conn_reply(c, &m->hdr, -ENOENT, NULL, 0, NULL, 0, NULL, NULL) == 0);
		break;
	case T_DROP:
		conn_close(c, "told to drop");
		break;
	case T_SILENT:
		conn_get(c);
		s->silent_c = c;
		s->silent = m->hdr;
		latch_add(&s->silent_got, 1);
		break;
	default:
		THREAD_CHECK(conn_reply(c, &m->hdr, STRATA_EBADOP, NULL, 0, NULL, 0, NULL, NULL) == 0);
	}
}

struct listen_task {
	struct srv *s;
	int rc;
};

static void listen_task(void *arg)
{
	struct listen_task *t = arg;

	t->rc = listener_new(&t->s->r, 1, "127.0.0.1:0", &t->s->h, &t->s->l);
}

static void unlisten_task(void *arg)
{
	struct srv *s = arg;

	listener_free(s->l);
	s->l = NULL;
	if (s->silent_c) {
		conn_put(s->silent_c);
		s->silent_c = NULL;
	}
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct listen_task t;

	assert_non_null(f);
	conn_events_init(&f->s.ev);
	latch_init(&f->s.silent_got);
	f->s.h = (struct conn_handler){ .on_request = srv_on_request, .on_accept = conn_events_on_accept,
					.on_close = conn_events_on_close, .ctx = &f->s, .node_id = 1 };
	assert_int_equal(reactor_new("srv", &f->s.r), 0);
	assert_int_equal(reactor_start(f->s.r), 0);
	t = (struct listen_task){ .s = &f->s };
	assert_int_equal(reactor_call(f->s.r, listen_task, &t), 0);
	assert_int_equal(t.rc, 0);
	f->s.port = listener_port(f->s.l);
	snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%d", f->s.port);
	assert_int_equal(rpc_client_new("cli", 5000, &f->cl), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	/* The client's connections close first; the server sees each go. */
	rpc_client_free(f->cl);
	assert_int_equal(reactor_call(f->s.r, unlisten_task, &f->s), 0);
	assert_true(conn_events_all_closed(&f->s.ev));
	reactor_stop(f->s.r);
	reactor_join(f->s.r);
	reactor_free(f->s.r);
	conn_events_destroy(&f->s.ev);
	latch_destroy(&f->s.silent_got);
	free(f);
	assert_true(THREAD_CHECKS_PASSED());
	return 0;
}

static int call_op(struct fix *f, const char *addr, uint16_t op, uint32_t timeout_ms)
{
	struct rpc_sync_args a = { .op = op, .timeout_ms = timeout_ms };
	struct rpc_result res;
	int rc = rpc_call_sync(f->cl, addr, &a, &res);

	assert_int_equal(rc, res.status);
	rpc_result_release(&res);
	return rc;
}

static void test_call_sync_body_bulk_status(void **state)
{
	struct fix *f = *state;
	static const char body[] = "the body of a request";
	size_t n = 300000;
	uint8_t *bulk = malloc(n), *dst = malloc(n);
	struct rpc_sync_args a = { .op = T_ECHO, .body = body, .body_len = sizeof(body),
				   .bulk = bulk, .bulk_len = n, .bulk_dst = dst, .bulk_cap = n };
	struct rpc_result res;

	assert_non_null(bulk);
	assert_non_null(dst);
	for (size_t i = 0; i < n; i++)
		bulk[i] = (uint8_t)(i ^ (i >> 8));
	assert_int_equal(rpc_call_sync(f->cl, f->addr, &a, &res), 0);
	assert_int_equal(res.status, 0);
	assert_int_equal(res.hdr.opcode, T_ECHO);
	assert_int_equal(res.body.len, sizeof(body));
	assert_memory_equal(res.body.buf, body, sizeof(body));
	assert_int_equal(res.bulk_len, n);
	assert_memory_equal(dst, bulk, n);
	rpc_result_release(&res);
	/* A status travels back as the call's result. */
	assert_int_equal(call_op(f, f->addr, T_FAIL, 0), -ENOENT);
	assert_int_equal(call_op(f, f->addr, 127, 0), STRATA_EBADOP);
	free(bulk);
	free(dst);
}

static void test_pool_reconnects_after_a_failure(void **state)
{
	struct fix *f = *state;

	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
	/* The server drops the connection: that call fails (its callback
	 * runs once the client has seen the close) ... */
	assert_int_equal(call_op(f, f->addr, T_DROP, 0), -ECONNRESET);
	/* ... and the next one reconnects. */
	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 2);
	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 2);	/* pooled: no new one */
}

struct reset_task {
	struct rpc_client *cl;
	const char *addr;
};

static void reset_on_loop(void *arg)
{
	struct reset_task *t = arg;

	rpc_pool_reset(rpc_client_pool(t->cl), t->addr);
}

static void test_pool_reset(void **state)
{
	struct fix *f = *state;
	struct reset_task t = { f->cl, f->addr };

	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(reactor_call(rpc_client_reactor(f->cl), reset_on_loop, &t), 0);
	/* The server sees the old one go and a new one come. */
	assert_true(latch_wait(&f->s.ev.closed, 1));
	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 2);
	/* Resetting an address never called is a no-op. */
	t.addr = "127.0.0.1:1";
	assert_int_equal(reactor_call(rpc_client_reactor(f->cl), reset_on_loop, &t), 0);
}

static void release_silent(void *arg)
{
	struct srv *s = arg;

	THREAD_CHECK(conn_reply(s->silent_c, &s->silent, 0, NULL, 0, NULL, 0, NULL, NULL) == 0);
	conn_put(s->silent_c);
	s->silent_c = NULL;
}

static void test_timeout(void **state)
{
	struct fix *f = *state;

	assert_int_equal(call_op(f, f->addr, T_SILENT, 50), -ETIMEDOUT);
	assert_true(latch_wait(&f->s.silent_got, 1));
	assert_int_equal(reactor_call(f->s.r, release_silent, &f->s), 0);
	/* The late answer is dropped; the pooled connection goes on. */
	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
}

static void test_refused_and_malformed_addresses(void **state)
{
	struct fix *f = *state;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	char addr[64];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* A port that was just free and has no listener. */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	close(fd);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sin.sin_port));
	assert_int_equal(call_op(f, addr, T_ECHO, 0), -ECONNREFUSED);
	assert_int_equal(call_op(f, "no-port", T_ECHO, 0), -EINVAL);
	assert_int_equal(call_op(f, "127.0.0.1:70000", T_ECHO, 0), -EINVAL);
	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
}

static void test_peer_named_by_a_host_name(void **state)
{
	struct fix *f = *state;
	char addr[64];

	snprintf(addr, sizeof(addr), "localhost:%d", f->s.port);
	assert_int_equal(call_op(f, addr, T_ECHO, 0), 0);
	assert_int_equal(call_op(f, addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
}

#define CALLERS 4
#define CALLS 200

struct caller {
	struct fix *f;
	int id, failures;
	pthread_t th;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;

	for (int i = 0; i < CALLS; i++) {
		uint8_t body[8];
		struct rpc_sync_args a = { .op = T_ECHO, .body = body, .body_len = 8 };
		struct rpc_result res;

		put_le32(body, (uint32_t)c->id);
		put_le32(body + 4, (uint32_t)i);
		if (rpc_call_sync(c->f->cl, c->f->addr, &a, &res) != 0 || res.body.len != 8 ||
		    memcmp(res.body.buf, body, 8) != 0)
			c->failures++;
		rpc_result_release(&res);
	}
	return NULL;
}

static void test_many_threads_one_connection(void **state)
{
	struct fix *f = *state;
	struct caller c[CALLERS];

	for (int i = 0; i < CALLERS; i++) {
		c[i] = (struct caller){ .f = f, .id = i };
		assert_int_equal(pthread_create(&c[i].th, NULL, caller_main, &c[i]), 0);
	}
	for (int i = 0; i < CALLERS; i++) {
		pthread_join(c[i].th, NULL);
		assert_int_equal(c[i].failures, 0);
	}
	/* Every call went over the one pooled connection. */
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
}

/* ---- rpc_direct ---- */

struct dcall {
	bool done, on_caller;
	int status;
	pthread_t caller;
	uint8_t body[16];
	uint32_t body_len;
};

static void dcall_cb(void *arg, int status, struct rpc_msg *resp)
{
	struct dcall *d = arg;

	d->status = status;
	d->on_caller = pthread_equal(pthread_self(), d->caller);
	if (resp && resp->hdr.body_len <= sizeof(d->body)) {
		memcpy(d->body, resp->body, resp->hdr.body_len);
		d->body_len = resp->hdr.body_len;
	}
	d->done = true;
}

static bool dcall_done(void *arg)
{
	return ((struct dcall *)arg)->done;
}

/* One call over d (held by the caller); returns its status. */
static int direct_call(struct rpc_direct *d, const char *addr, uint16_t op, const void *body,
		       uint32_t body_len, uint32_t timeout_ms, struct dcall *out)
{
	struct rpc_call_args a = { .op = op, .body = body, .body_len = body_len,
				   .timeout_ms = timeout_ms, .cb = dcall_cb, .arg = out };
	int rc;

	*out = (struct dcall){ .caller = pthread_self() };
	rc = rpc_pool_call(rpc_direct_pool(d), addr, &a);
	if (rc)
		return rc;
	if (rpc_direct_wait(d, dcall_done, out) != 0)
		return -EIO;
	return out->status;
}

static void test_direct_call_on_the_callers_thread(void **state)
{
	struct fix *f = *state;
	struct rpc_direct *d;
	struct dcall dc;

	assert_int_equal(rpc_direct_new("direct", 5000, &d), 0);
	assert_true(rpc_direct_try_hold(d));
	/* One holder at a time. */
	assert_false(rpc_direct_try_hold(d));
	for (int i = 0; i < 3; i++) {
		assert_int_equal(direct_call(d, f->addr, T_ECHO, "abc", 3, 0, &dc), 0);
		assert_true(dc.on_caller);
		assert_int_equal(dc.body_len, 3);
		assert_memory_equal(dc.body, "abc", 3);
	}
	assert_int_equal(direct_call(d, f->addr, T_FAIL, NULL, 0, 0, &dc), -ENOENT);
	rpc_direct_release(d);
	assert_true(rpc_direct_try_hold(d));
	assert_int_equal(direct_call(d, f->addr, T_ECHO, NULL, 0, 0, &dc), 0);
	rpc_direct_release(d);
	rpc_direct_free(d);
	/* Every call over one connection. */
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
}

static void test_direct_timeout_and_drop(void **state)
{
	struct fix *f = *state;
	struct rpc_direct *d;
	struct dcall dc;

	assert_int_equal(rpc_direct_new("direct", 5000, &d), 0);
	assert_true(rpc_direct_try_hold(d));
	/* The timeout runs on the holder's own loop. */
	assert_int_equal(direct_call(d, f->addr, T_SILENT, NULL, 0, 50, &dc), -ETIMEDOUT);
	assert_true(dc.on_caller);
	assert_true(latch_wait(&f->s.silent_got, 1));
	assert_int_equal(reactor_call(f->s.r, release_silent, &f->s), 0);
	assert_int_equal(direct_call(d, f->addr, T_ECHO, NULL, 0, 0, &dc), 0);
	/* A peer that goes away in the middle of a call: an error at once
	 * (not the 5 s timeout), and the next call reconnects. */
	assert_int_equal(direct_call(d, f->addr, T_DROP, NULL, 0, 0, &dc), -ECONNRESET);
	assert_int_equal(direct_call(d, f->addr, T_ECHO, NULL, 0, 0, &dc), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 2);
	rpc_direct_release(d);
	rpc_direct_free(d);
}

static void silent_done(void *arg, int status, struct rpc_msg *resp)
{
	(void)resp;
	latch_add(arg, status == 0 ? 1 : 100);
}

struct silent_task {
	struct fix *f;
	struct latch *done;
};

static void silent_on_client(void *arg)
{
	struct silent_task *t = arg;
	struct rpc_call_args a = { .op = T_SILENT, .cb = silent_done, .arg = t->done };

	THREAD_CHECK(rpc_pool_call(rpc_client_pool(t->f->cl), t->f->addr, &a) == 0);
}

static void test_direct_while_an_async_call_is_in_flight(void **state)
{
	struct fix *f = *state;
	struct latch done;
	struct silent_task t = { f, &done };
	struct rpc_direct *d;
	struct dcall dc;

	latch_init(&done);
	/* A call of the client's reactor thread that the server holds. */
	assert_int_equal(reactor_call(rpc_client_reactor(f->cl), silent_on_client, &t), 0);
	assert_true(latch_wait(&f->s.silent_got, 1));
	assert_int_equal(rpc_direct_new("direct", 5000, &d), 0);
	assert_true(rpc_direct_try_hold(d));
	assert_int_equal(direct_call(d, f->addr, T_ECHO, "x", 1, 0, &dc), 0);
	rpc_direct_release(d);
	assert_int_equal(latch_get(&done), 0);
	assert_int_equal(reactor_call(f->s.r, release_silent, &f->s), 0);
	assert_true(latch_wait(&done, 1));
	assert_int_equal(latch_get(&done), 1);
	rpc_direct_free(d);
	latch_destroy(&done);
}

#define LANES 2

struct lane_caller {
	struct fix *f;
	struct rpc_lanes *lanes;
	int id, failures, direct, fallback;
	pthread_t th;
};

static void *lane_caller_main(void *arg)
{
	struct lane_caller *c = arg;

	for (int i = 0; i < CALLS; i++) {
		uint8_t body[8];
		struct rpc_direct *d = rpc_lanes_hold(c->lanes);

		put_le32(body, (uint32_t)c->id);
		put_le32(body + 4, (uint32_t)i);
		if (d) {
			struct dcall dc;

			if (direct_call(d, c->f->addr, T_ECHO, body, 8, 0, &dc) != 0 ||
			    dc.body_len != 8 || memcmp(dc.body, body, 8) != 0 || !dc.on_caller)
				c->failures++;
			rpc_direct_release(d);
			c->direct++;
		} else {
			struct rpc_sync_args a = { .op = T_ECHO, .body = body, .body_len = 8 };
			struct rpc_result res;

			if (rpc_call_sync(c->f->cl, c->f->addr, &a, &res) != 0 || res.body.len != 8 ||
			    memcmp(res.body.buf, body, 8) != 0)
				c->failures++;
			rpc_result_release(&res);
			c->fallback++;
		}
	}
	return NULL;
}

static void test_direct_many_threads_few_lanes(void **state)
{
	struct fix *f = *state;
	struct rpc_direct *held[LANES];
	struct rpc_lanes *lanes;
	struct lane_caller c[CALLERS * 2];
	int direct = 0;

	assert_int_equal(rpc_lanes_new("lane", LANES, rpc_client_pool(f->cl), &lanes), 0);
	/* Each lane to one holder; none left, then one again. */
	for (int i = 0; i < LANES; i++) {
		held[i] = rpc_lanes_hold(lanes);
		assert_non_null(held[i]);
		for (int k = 0; k < i; k++)
			assert_ptr_not_equal(held[i], held[k]);
	}
	assert_null(rpc_lanes_hold(lanes));
	rpc_direct_release(held[0]);
	assert_ptr_equal(rpc_lanes_hold(lanes), held[0]);
	for (int i = 0; i < LANES; i++)
		rpc_direct_release(held[i]);
	for (int i = 0; i < CALLERS * 2; i++) {
		c[i] = (struct lane_caller){ .f = f, .lanes = lanes, .id = i };
		assert_int_equal(pthread_create(&c[i].th, NULL, lane_caller_main, &c[i]), 0);
	}
	for (int i = 0; i < CALLERS * 2; i++) {
		pthread_join(c[i].th, NULL);
		assert_int_equal(c[i].failures, 0);
		assert_int_equal(c[i].direct + c[i].fallback, CALLS);
		direct += c[i].direct;
	}
	assert_true(direct > 0);
	rpc_lanes_free(lanes);
	/* A connection per lane used, and the client's one at most. */
	assert_true(latch_get(&f->s.ev.accepted) <= LANES + 1);
}

static void test_direct_call_sync(void **state)
{
	struct fix *f = *state;
	static const char body[] = "direct";
	struct rpc_sync_args a = { .op = T_ECHO, .body = body, .body_len = sizeof(body) };
	struct rpc_lanes *lanes;
	struct rpc_result res;
	struct rpc_direct *d;

	assert_int_equal(rpc_lanes_new("lane", 1, rpc_client_pool(f->cl), &lanes), 0);
	d = rpc_lanes_hold(lanes);
	assert_non_null(d);
	assert_int_equal(rpc_direct_call_sync(d, f->addr, &a, &res), 0);
	assert_int_equal(res.hdr.opcode, T_ECHO);
	assert_int_equal(res.body.len, sizeof(body));
	assert_memory_equal(res.body.buf, body, sizeof(body));
	rpc_result_release(&res);
	a = (struct rpc_sync_args){ .op = T_FAIL };
	assert_int_equal(rpc_direct_call_sync(d, f->addr, &a, &res), -ENOENT);
	assert_int_equal(res.status, -ENOENT);
	rpc_result_release(&res);
	a = (struct rpc_sync_args){ .op = T_SILENT, .timeout_ms = 50 };
	assert_int_equal(rpc_direct_call_sync(d, f->addr, &a, &res), -ETIMEDOUT);
	rpc_result_release(&res);
	assert_true(latch_wait(&f->s.silent_got, 1));
	assert_int_equal(reactor_call(f->s.r, release_silent, &f->s), 0);
	/* An address that does not parse fails at once, with nothing kept. */
	a = (struct rpc_sync_args){ .op = T_ECHO };
	assert_int_equal(rpc_direct_call_sync(d, "no port", &a, &res), -EINVAL);
	assert_int_equal(res.body.len, 0);
	rpc_result_release(&res);
	rpc_direct_release(d);
	rpc_lanes_free(lanes);
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
}

struct silent_caller {
	struct fix *f;
	int rc;
	pthread_t th;
};

static void *silent_caller_main(void *arg)
{
	struct silent_caller *c = arg;
	struct rpc_sync_args a = { .op = T_SILENT };
	struct rpc_result res;

	c->rc = rpc_call_sync(c->f->cl, c->f->addr, &a, &res);
	rpc_result_release(&res);
	return NULL;
}

static void test_client_with_lanes(void **state)
{
	struct fix *f = *state;
	struct silent_caller sc = { .f = f, .rc = 1 };

	assert_int_equal(rpc_client_add_lanes(f->cl, 1), 0);
	/* A call that the server holds, on the one lane: its own connection. */
	assert_int_equal(pthread_create(&sc.th, NULL, silent_caller_main, &sc), 0);
	assert_true(latch_wait(&f->s.silent_got, 1));
	assert_int_equal(latch_get(&f->s.ev.accepted), 1);
	/* Meanwhile this thread finds the lane held: through the client's
	 * thread, over a second connection. */
	assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(latch_get(&f->s.ev.accepted), 2);
	assert_int_equal(reactor_call(f->s.r, release_silent, &f->s), 0);
	pthread_join(sc.th, NULL);
	assert_int_equal(sc.rc, 0);
	/* The lane is free again: calls go over its connection, status and
	 * all, and no third one is opened. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(call_op(f, f->addr, T_ECHO, 0), 0);
	assert_int_equal(call_op(f, f->addr, T_FAIL, 0), -ENOENT);
	assert_int_equal(latch_get(&f->s.ev.accepted), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_call_sync_body_bulk_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_reconnects_after_a_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_and_malformed_addresses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_named_by_a_host_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_threads_one_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_call_on_the_callers_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_timeout_and_drop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_while_an_async_call_is_in_flight, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_direct_many_threads_few_lanes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_call_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_with_lanes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
