/*
 * Unit tests of framed connections (src/net/conn.c) over socketpairs, on
 * a real reactor thread: framing (a frame arriving a byte at a time),
 * pipelining with replies out of order, bulk received into the caller's
 * buffer, timeouts (and the late reply that must not land), a malformed
 * frame closing only its own connection, name resolution that never
 * blocks the loop, and calls that never left reported as such. Every check waits for the event it expects.
 *
 * Includes conn.c to reach its statics: the lookup function (replaced by
 * one the test controls) and the pieces conn_connect is made of (to start
 * a client over one end of a socketpair).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "net/conn.c"
#include "net/listener.h"
#include "net_test_util.h"

enum {
	T_ECHO = 120,	/* reply at once: the request's body and bulk */
	T_HOLD,		/* held until HOLD_N have come, then answered last first */
	T_SILENT,	/* held until the test releases it */
};

#define MAXHELD 64
#define HOLD_N 16

/* The server side: every accepted connection of a test shares it. Only
 * the loop thread touches it, except through latches. */
struct srv {
	struct conn_events ev;		/* first: the handler's ctx is the srv */
	struct conn *held_c[MAXHELD];
	struct frame_hdr held[MAXHELD];
	uint32_t held_body[MAXHELD];
	int nheld;
	uint32_t seen[MAXHELD];		/* request bodies in arrival order */
	int nseen;
	struct conn *silent_c;
	struct frame_hdr silent;
	struct latch requests;
};

/* One call's outcome, filled by its callback on the loop. */
struct res {
	int status;
	bool done;
	uint32_t body;
	uint32_t body_len;
	uint64_t bulk_len;
	void *bulk;
	int order;
};

struct fix {
	struct reactor *r;
	struct srv srv;
	struct conn_handler h;
	struct conn *client;	/* the test's reference */
	int completions;
	struct latch done;	/* raised by every call's callback */
};

static uint32_t body_u32(const struct rpc_msg *m)
{
	return m->hdr.body_len >= 4 ? get_le32(m->body) : UINT32_MAX;
}

static void srv_reply_u32(struct conn *c, const struct frame_hdr *req, int status, uint32_t v,
			  const void *bulk, uint64_t bulk_len)
{
	uint8_t b[4];

	put_le32(b, v);
	THREAD_CHECK(conn_reply(c, req, status, b, sizeof(b), bulk, bulk_len,
				bulk ? abuf_free : NULL, (void *)bulk) == 0);
}

static void srv_on_request(void *ctx, struct conn *c, struct rpc_msg *m)
{
	struct srv *s = ctx;
	uint32_t v = body_u32(m);

	if (s->nseen < MAXHELD)
		s->seen[s->nseen++] = v;
	switch (m->hdr.opcode) {
	case T_ECHO: {
		void *bulk = m->bulk;

		m->bulk = NULL;		/* ours now; freed once sent */
		srv_reply_u32(c, &m->hdr, 0, v, bulk, m->hdr.bulk_len);
		break;
	}
	case T_HOLD:
		conn_get(c);
		s->held_c[s->nheld] = c;
		s->held[s->nheld] = m->hdr;
		s->held_body[s->nheld] = v;
		if (++s->nheld == HOLD_N) {
			for (int i = HOLD_N - 1; i >= 0; i--) {
				srv_reply_u32(s->held_c[i], &s->held[i], 0, s->held_body[i], NULL, 0);
				conn_put(s->held_c[i]);
			}
			s->nheld = 0;
		}
		break;
	case T_SILENT:
		conn_get(c);
		s->silent_c = c;
		s->silent = m->hdr;
		break;
	default:
		THREAD_CHECK(conn_reply(c, &m->hdr, STRATA_EBADOP, NULL, 0, NULL, 0, NULL, NULL) == 0);
	}
	latch_add(&s->requests, 1);
}

/* ---- running things on the loop ---- */

/* A client conn over fd, as conn_connect leaves one once its connect is
 * done: HELLO first, then the calls. Loop thread. */
static int client_over_fd(struct reactor *r, int fd, uint32_t timeout_ms, struct conn **out)
{
	struct conn *c;
	int rc = set_sock_opts(fd);

	if (!rc)
		rc = conn_alloc(r, fd, NULL, &c);
	if (rc)
		return rc;
	snprintf(c->peer, sizeof(c->peer), "socketpair fd %d", fd);
	rc = reactor_watch_add(r, &c->watch, fd, EPOLLIN, conn_on_event, c);
	if (rc) {
		conn_destroy(c);
		return rc;
	}
	return conn_start_client(c, NULL, NULL, timeout_ms, out);
}

struct pair_task {
	struct fix *f;
	int sfd, cfd;		/* cfd < 0: the test keeps the client end raw */
	struct conn *client;
	int rc;
};

static void pair_start(void *arg)
{
	struct pair_task *t = arg;
	struct conn *sc;

	t->rc = conn_accept(t->f->r, t->sfd, &t->f->h, &sc);
	if (!t->rc && t->cfd >= 0)
		t->rc = client_over_fd(t->f->r, t->cfd, 5000, &t->client);
}

/* A socketpair: the server end accepted on the loop, the client end a conn
 * (returned) or, with raw, left to the test (in *raw, blocking). */
static struct conn *new_pair(struct fix *f, int *raw)
{
	struct pair_task t = { .f = f };
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	t.sfd = sv[0];
	t.cfd = raw ? -1 : sv[1];
	assert_int_equal(reactor_call(f->r, pair_start, &t), 0);
	assert_int_equal(t.rc, 0);
	if (raw)
		*raw = sv[1];
	return t.client;
}

static void on_result(void *arg, int status, struct rpc_msg *resp);

struct call_task {
	struct fix *f;
	struct conn *c;
	uint16_t op;
	uint32_t v;
	const void *bulk;
	uint64_t bulk_len;
	void *dst;
	uint64_t cap;
	uint32_t timeout_ms;
	uint32_t flags;
	struct res *res;
	int rc;
};

static void call_start(void *arg)
{
	struct call_task *t = arg;
	uint8_t b[4];
	struct rpc_call_args a = {
		.op = t->op, .body = b, .body_len = 4, .bulk = t->bulk, .bulk_len = t->bulk_len,
		.bulk_dst = t->dst, .bulk_cap = t->cap, .timeout_ms = t->timeout_ms,
		.flags = t->flags, .cb = on_result, .arg = t->res,
	};

	put_le32(b, t->v);
	t->res->order = -1;
	t->rc = conn_call(t->c, &a);
}

static struct fix *g_fix;	/* for on_result: one test at a time */

static void on_result(void *arg, int status, struct rpc_msg *resp)
{
	struct res *r = arg;
	struct fix *f = g_fix;

	THREAD_CHECK(!r->done);
	r->done = true;
	r->status = status;
	r->order = f->completions++;
	if (resp) {
		r->body_len = resp->hdr.body_len;
		r->body = body_u32(resp);
		r->bulk_len = resp->hdr.bulk_len;
		r->bulk = resp->bulk;
	}
	latch_add(&f->done, 1);
}

/* Sends one call from the loop; the result arrives in *res. */
static void call(struct fix *f, struct conn *c, uint16_t op, uint32_t v, struct res *res)
{
	struct call_task t = { .f = f, .c = c, .op = op, .v = v, .res = res };

	assert_int_equal(reactor_call(f->r, call_start, &t), 0);
	assert_int_equal(t.rc, 0);
}

static void call_bulk(struct fix *f, struct conn *c, const void *bulk, uint64_t len, void *dst,
		      uint64_t cap, struct res *res)
{
	struct call_task t = { .f = f, .c = c, .op = T_ECHO, .v = 7, .bulk = bulk,
			       .bulk_len = len, .dst = dst, .cap = cap, .res = res };

	assert_int_equal(reactor_call(f->r, call_start, &t), 0);
	assert_int_equal(t.rc, 0);
}

/* Waits for n more completions than *seen, then moves *seen on. */
static void wait_done(struct fix *f, int *seen, int n)
{
	*seen += n;
	assert_true(latch_wait(&f->done, *seen));
}

static void echo_ok(struct fix *f, struct conn *c, int *seen)
{
	struct res r = { 0 };

	call(f, c, T_ECHO, 4242, &r);
	wait_done(f, seen, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.body, 4242);
}

struct conn_task {
	struct conn *c;
	bool open;
};

static void close_and_put(void *arg)
{
	struct conn_task *t = arg;

	conn_close(t->c, "test done");
	conn_put(t->c);
}

static void read_open(void *arg)
{
	struct conn_task *t = arg;

	t->open = conn_is_open(t->c);
}

static bool is_open(struct fix *f, struct conn *c)
{
	struct conn_task t = { .c = c };

	assert_int_equal(reactor_call(f->r, read_open, &t), 0);
	return t.open;
}

static void put_conn(struct fix *f, struct conn *c)
{
	struct conn_task t = { .c = c };

	assert_int_equal(reactor_call(f->r, close_and_put, &t), 0);
}

/* ---- fixture ---- */

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	latch_init(&f->done);
	latch_init(&f->srv.requests);
	conn_events_init(&f->srv.ev);
	f->h = (struct conn_handler){ .on_request = srv_on_request, .on_accept = conn_events_on_accept,
				      .on_close = conn_events_on_close, .ctx = &f->srv, .node_id = 1 };
	assert_int_equal(reactor_new("conn", &f->r), 0);
	assert_int_equal(reactor_start(f->r), 0);
	g_fix = f;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	/* Server ends close when their peers do (the tests close theirs);
	 * wait for every one so nothing is left to leak. */
	assert_true(conn_events_all_closed(&f->srv.ev));
	reactor_stop(f->r);
	reactor_join(f->r);
	reactor_free(f->r);
	latch_destroy(&f->done);
	latch_destroy(&f->srv.requests);
	conn_events_destroy(&f->srv.ev);
	free(f);
	g_fix = NULL;
	assert_true(THREAD_CHECKS_PASSED());
	return 0;
}

/* ---- tests ---- */

static void test_pipelined_replies_out_of_order(void **state)
{
	struct fix *f = *state;
	struct conn *c = new_pair(f, NULL);
	struct res r[HOLD_N] = { { 0 } };
	int seen = 0;

	/* All sent before any answer: the server holds them until the last
	 * has come, then answers the last first. */
	for (uint32_t i = 0; i < HOLD_N; i++)
		call(f, c, T_HOLD, 1000 + i, &r[i]);
	wait_done(f, &seen, HOLD_N);
	for (int i = 0; i < HOLD_N; i++) {
		assert_int_equal(r[i].status, 0);
		assert_int_equal(r[i].body, 1000 + i);	/* matched by request id */
		assert_int_equal(r[i].order, HOLD_N - 1 - i);
		assert_int_equal(f->srv.seen[i], 1000 + i);	/* sent in order */
	}
	put_conn(f, c);
}

/* Writes all of buf to a blocking fd, one byte per write(2). */
static void write_bytewise(int fd, const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		assert_int_equal(write(fd, buf + i, 1), 1);
}

static void read_exact(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* A request frame: header, body (u32 v), bulk. */
static size_t make_frame(uint8_t *out, uint16_t op, uint64_t id, uint32_t v, const void *bulk,
			 uint32_t bulk_len)
{
	struct frame_hdr h = { .magic = FRAME_MAGIC, .version = STRATA_PROTO_VERSION, .opcode = op,
			       .req_id = id, .body_len = 4, .bulk_len = bulk_len };

	frame_hdr_encode(&h, out);
	put_le32(out + FRAME_HDR_LEN, v);
	if (bulk_len)
		memcpy(out + FRAME_HDR_LEN + 4, bulk, bulk_len);
	return FRAME_HDR_LEN + 4 + bulk_len;
}

/* HELLO without a credential (net/auth.h): the header fields, a nonce,
 * kind NONE, an empty signed part. */
#define HELLO_BODY_LEN (12 + AUTH_NONCE_LEN + 1 + 4)

static size_t make_hello(uint8_t *out, uint64_t id)
{
	struct frame_hdr h = { .magic = FRAME_MAGIC, .version = STRATA_PROTO_VERSION,
			       .opcode = OP_HELLO, .req_id = id, .body_len = HELLO_BODY_LEN };
	uint8_t *b = out + FRAME_HDR_LEN;

	frame_hdr_encode(&h, out);
	memset(b, 0, HELLO_BODY_LEN);
	put_le32(b, FRAME_MAGIC);
	put_le16(b + 4, STRATA_PROTO_VERSION);
	put_le16(b + 6, ROLE_CLIENT);
	put_le32(b + 8, 0);
	return FRAME_HDR_LEN + HELLO_BODY_LEN;
}

/* Reads one response frame from a raw fd; returns its header, body into
 * body (cap bytes at most) and bulk into bulk. */
static struct frame_hdr read_frame(int fd, uint8_t *body, size_t cap, uint8_t *bulk, size_t bcap)
{
	uint8_t hb[FRAME_HDR_LEN];
	struct frame_hdr h;
	const char *why = NULL;

	read_exact(fd, hb, sizeof(hb));
	assert_int_equal(frame_hdr_decode(hb, &h, &why), 0);
	assert_true(h.body_len <= cap && h.bulk_len <= bcap);
	read_exact(fd, body, h.body_len);
	read_exact(fd, bulk, (size_t)h.bulk_len);
	return h;
}

static void test_frames_arriving_a_byte_at_a_time(void **state)
{
	struct fix *f = *state;
	uint8_t out[2 * FRAME_HDR_LEN + 64 + 300], body[64], bulk[300], pat[300];
	struct frame_hdr h;
	size_t n;
	int raw;

	new_pair(f, &raw);
	for (size_t i = 0; i < sizeof(pat); i++)
		pat[i] = (uint8_t)(i * 7 + 1);
	/* HELLO and a request with bulk, written one byte per write: the
	 * server reassembles header, body and bulk across reads. */
	n = make_hello(out, 1);
	n += make_frame(out + n, T_ECHO, 77, 31337, pat, sizeof(pat));
	write_bytewise(raw, out, n);
	h = read_frame(raw, body, sizeof(body), bulk, sizeof(bulk));
	assert_int_equal(h.opcode, OP_HELLO);
	assert_true(h.flags & FRAME_F_RESPONSE);
	assert_int_equal(h.req_id, 1);
	assert_int_equal(h.status, 0);
	h = read_frame(raw, body, sizeof(body), bulk, sizeof(bulk));
	assert_int_equal(h.opcode, T_ECHO);
	assert_int_equal(h.req_id, 77);
	assert_int_equal(h.body_len, 4);
	assert_int_equal(get_le32(body), 31337);
	assert_int_equal(h.bulk_len, sizeof(pat));
	assert_memory_equal(bulk, pat, sizeof(pat));
	close(raw);
}

static void test_bulk_lands_in_the_callers_buffer(void **state)
{
	struct fix *f = *state;
	struct conn *c = new_pair(f, NULL);
	/* Below, at and above the size read straight into the buffer. */
	static const size_t sizes[] = { 0, 100, DIRECT_BULK_MIN - 1, DIRECT_BULK_MIN,
					(1u << 20) + 3, 5u << 20 };
	size_t max = 5u << 20;
	uint8_t *src = malloc(max), *dst = malloc(max + 1);
	int seen = 0;

	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < max; i++)
		src[i] = (uint8_t)(i * 31 + (i >> 12));
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct res r = { 0 };

		memset(dst, 0xee, max + 1);
		call_bulk(f, c, src, sizes[k], dst, max, &r);
		wait_done(f, &seen, 1);
		assert_int_equal(r.status, 0);
		assert_int_equal(r.bulk_len, sizes[k]);
		assert_ptr_equal(r.bulk, dst);	/* the caller's buffer itself */
		assert_memory_equal(dst, src, sizes[k]);
		assert_int_equal(dst[sizes[k]], 0xee);	/* and not a byte past it */
	}
	{
		/* More bulk than the caller has room for: that call fails, the
		 * bytes are dropped, and the connection goes on. */
		struct res r = { 0 };

		memset(dst, 0xee, 1000);
		call_bulk(f, c, src, 1000, dst, 999, &r);
		wait_done(f, &seen, 1);
		assert_int_equal(r.status, STRATA_EBADMSG);
		assert_int_equal(dst[0], 0xee);
		echo_ok(f, c, &seen);
	}
	put_conn(f, c);
	free(src);
	free(dst);
}

struct silent_task {
	struct srv *s;
	uint8_t *bulk;
	size_t len;
};

/* On the loop: answers the held T_SILENT request, late, with bulk. */
static void release_silent(void *arg)
{
	struct silent_task *t = arg;
	struct srv *s = t->s;

	srv_reply_u32(s->silent_c, &s->silent, 0, 99, t->bulk, t->len);
	conn_put(s->silent_c);
	s->silent_c = NULL;
}

static void test_timeout_and_the_late_reply(void **state)
{
	struct fix *f = *state;
	struct conn *c = new_pair(f, NULL);
	struct call_task t = { .f = f, .c = c, .op = T_SILENT, .v = 5, .cap = 4096,
			       .timeout_ms = 30 };
	struct silent_task st = { .s = &f->srv, .len = 4096 };
	uint8_t *buf = malloc(4096);
	struct res r = { 0 };
	int seen = 0, reqs;

	assert_non_null(buf);
	memset(buf, 0xaa, 4096);
	t.dst = buf;
	t.res = &r;
	reqs = latch_get(&f->srv.requests);
	assert_int_equal(reactor_call(f->r, call_start, &t), 0);
	assert_int_equal(t.rc, 0);
	wait_done(f, &seen, 1);
	assert_int_equal(r.status, -ETIMEDOUT);
	assert_true(is_open(f, c));	/* a timeout closes nothing */
	/* The server got it; its answer comes after the timeout, with bulk
	 * for a buffer the caller has taken back. */
	assert_true(latch_wait(&f->srv.requests, reqs + 1));
	st.bulk = abuf_alloc(4096);
	assert_non_null(st.bulk);
	memset(st.bulk, 0x55, 4096);
	assert_int_equal(reactor_call(f->r, release_silent, &st), 0);
	/* Calls after it complete, so the late reply has been read past. */
	echo_ok(f, c, &seen);
	assert_int_equal(latch_get(&f->done), seen);	/* no second callback */
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(buf[i], 0xaa);
	put_conn(f, c);
	free(buf);
}

static void test_malformed_frame_closes_only_its_connection(void **state)
{
	struct fix *f = *state;
	struct conn *good = new_pair(f, NULL);
	uint8_t frame[2 * FRAME_HDR_LEN + HELLO_BODY_LEN], junk;
	struct net_stats before, after;
	int seen = 0;

	echo_ok(f, good, &seen);
	for (int k = 0; k < 4; k++) {
		struct frame_hdr h = { .magic = FRAME_MAGIC, .version = STRATA_PROTO_VERSION,
				       .opcode = T_ECHO, .req_id = 2 };
		size_t n = make_hello(frame, 1);
		int raw, closed = latch_get(&f->srv.ev.closed);

		switch (k) {
		case 0:		/* bad magic */
			h.magic = 0x12345678;
			break;
		case 1:		/* a bulk longer than any allowed */
			h.bulk_len = FRAME_MAX_BULK + 1;
			break;
		case 2:		/* reserved bits set */
			h.reserved = 1;
			break;
		case 3:		/* a request before HELLO */
			n = 0;
			break;
		}
		frame_hdr_encode(&h, frame + n);
		n += FRAME_HDR_LEN;
		net_stats_get(&before);
		new_pair(f, &raw);
		assert_int_equal(write(raw, frame, n), (ssize_t)n);
		/* That connection closes, with the bad frame counted ... */
		assert_true(latch_wait(&f->srv.ev.closed, closed + 1));
		net_stats_get(&after);
		assert_int_equal(after.bad_frames, before.bad_frames + 1);
		/* ... the peer sees it closed (HELLO answered first, if sent) ... */
		if (k != 3) {
			uint8_t body[64], bulk[1];

			read_frame(raw, body, sizeof(body), bulk, 0);
		}
		assert_int_equal(read(raw, &junk, 1), 0);
		close(raw);
		/* ... and the other connection goes on. */
		assert_true(is_open(f, good));
		echo_ok(f, good, &seen);
	}
	put_conn(f, good);
}

/* ---- resolution off the loop ---- */

struct fake_resolver {
	int port;			/* answers 127.0.0.1:port ... */
	int fail;			/* ... or this error */
	pthread_t thread;		/* where it ran */
	struct latch entered, release;
};

static struct fake_resolver *g_fake;

static int fake_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct fake_resolver *fr = g_fake;
	char lit[32];

	(void)addr;
	fr->thread = pthread_self();
	latch_add(&fr->entered, 1);
	/* Blocks as a slow DNS server would, until the test lets it go. */
	if (!latch_wait(&fr->release, 1))
		return -ETIMEDOUT;
	if (fr->fail)
		return fr->fail;
	snprintf(lit, sizeof(lit), "127.0.0.1:%d", fr->port);
	return addr_parse_numeric(lit, ss, sl);
}

struct listen_task {
	struct fix *f;
	const char *addr;
	struct listener *l;
	int rc;
};

static void listen_start(void *arg)
{
	struct listen_task *t = arg;

	t->rc = listener_new(&t->f->r, 1, t->addr, &t->f->h, &t->l);
}

static void listen_free(void *arg)
{
	listener_free(arg);
}

struct connect_task {
	struct fix *f;
	const char *addr;
	struct conn *c;
	int rc;
	pthread_t loop;
};

static void connect_start_task(void *arg)
{
	struct connect_task *t = arg;

	t->loop = pthread_self();
	t->rc = conn_connect(t->f->r, t->addr, NULL, NULL, NULL, 5000, &t->c);
}

static struct listener *listen_on(struct fix *f, const char *addr)
{
	struct listen_task t = { .f = f, .addr = addr };

	assert_int_equal(reactor_call(f->r, listen_start, &t), 0);
	assert_int_equal(t.rc, 0);
	return t.l;
}

static struct connect_task connect_to(struct fix *f, const char *addr)
{
	struct connect_task t = { .f = f, .addr = addr };

	assert_int_equal(reactor_call(f->r, connect_start_task, &t), 0);
	assert_int_equal(t.rc, 0);
	return t;
}

static void test_connect_to_a_name(void **state)
{
	struct fix *f = *state;
	struct listener *l = listen_on(f, "127.0.0.1:0");
	struct listen_task lt = { .f = f, .addr = "localhost:0" };
	struct connect_task t;
	char addr[64];
	int seen = 0;

	/* A real lookup of localhost, done on the reactor's helper thread. */
	snprintf(addr, sizeof(addr), "localhost:%d", listener_port(l));
	t = connect_to(f, addr);
	echo_ok(f, t.c, &seen);
	put_conn(f, t.c);
	/* A listener may be given a name at start-up, but never on a loop
	 * thread, where the lookup would block the loop. */
	assert_int_equal(reactor_call(f->r, listen_start, &lt), 0);
	assert_int_equal(lt.rc, -EDEADLK);
	assert_int_equal(reactor_call(f->r, listen_free, l), 0);
}

static void noop(void *arg)
{
	*(int *)arg = 1;
}

static void test_resolution_never_blocks_the_loop(void **state)
{
	struct fix *f = *state;
	struct listener *l = listen_on(f, "127.0.0.1:0");
	/* Static: the helper thread may still read it after a failed test
	 * returns, until the fixture frees the reactor. */
	static struct fake_resolver fr;
	struct call_task quick, patient;
	struct res rq = { 0 }, rp = { 0 };
	struct connect_task t;
	int seen = 0, ran = 0;

	fr = (struct fake_resolver){ .port = listener_port(l) };
	latch_init(&fr.entered);
	latch_init(&fr.release);
	g_fake = &fr;
	conn_resolve_fn = fake_resolve;
	t = connect_to(f, "storage-7.example:1");
	/* Queued while the name is looked up: one call with a short
	 * timeout, one with a long one. */
	quick = (struct call_task){ .f = f, .c = t.c, .op = T_ECHO, .v = 1, .timeout_ms = 50,
				    .res = &rq };
	patient = (struct call_task){ .f = f, .c = t.c, .op = T_ECHO, .v = 2, .timeout_ms = 10000,
				      .res = &rp };
	assert_int_equal(reactor_call(f->r, call_start, &quick), 0);
	assert_int_equal(reactor_call(f->r, call_start, &patient), 0);
	assert_true(latch_wait(&fr.entered, 1));
	/* The lookup is stuck, and the loop is not: it runs tasks and
	 * fires the short call's timer, which fails it now. */
	assert_int_equal(reactor_call(f->r, noop, &ran), 0);
	assert_int_equal(ran, 1);
	wait_done(f, &seen, 1);
	assert_int_equal(rq.status, -ETIMEDOUT);
	assert_false(rp.done);
	assert_false(pthread_equal(fr.thread, t.loop));
	/* The answer comes: the connection is made, the other call goes. */
	latch_add(&fr.release, 1);
	wait_done(f, &seen, 1);
	assert_int_equal(rp.status, 0);
	assert_int_equal(rp.body, 2);
	put_conn(f, t.c);
	conn_resolve_fn = addr_resolve;
	assert_int_equal(reactor_call(f->r, listen_free, l), 0);
	latch_destroy(&fr.entered);
	latch_destroy(&fr.release);
}

static void test_failed_or_abandoned_resolution(void **state)
{
	struct fix *f = *state;
	static struct fake_resolver fr;	/* outlives the test: see above */
	struct connect_task t;
	struct res r1 = { 0 }, r2 = { 0 };
	int seen = 0;

	fr = (struct fake_resolver){ .fail = -EHOSTUNREACH };
	latch_init(&fr.entered);
	latch_init(&fr.release);
	g_fake = &fr;
	conn_resolve_fn = fake_resolve;
	/* A name that does not resolve fails the calls queued on it. */
	t = connect_to(f, "nowhere.example:1");
	call(f, t.c, T_ECHO, 1, &r1);
	latch_add(&fr.release, 1);
	wait_done(f, &seen, 1);
	assert_int_equal(r1.status, -EHOSTUNREACH);
	assert_false(is_open(f, t.c));
	put_conn(f, t.c);
	/* Closed while its name is looked up: the calls fail at once, and
	 * the answer, when it comes, finds nothing to connect (and frees
	 * the connection: ASan would see a leak). */
	latch_destroy(&fr.release);
	latch_init(&fr.release);
	fr.fail = 0;
	fr.port = 1;
	t = connect_to(f, "slow.example:1");
	call(f, t.c, T_ECHO, 2, &r2);
	assert_true(latch_wait(&fr.entered, 2));
	put_conn(f, t.c);
	wait_done(f, &seen, 1);
	assert_int_equal(r2.status, -ECONNRESET);
	latch_add(&fr.release, 1);
	/* The lookup still ends, and its end runs on the loop; the
	 * fixture's reactor_free waits for it. */
	conn_resolve_fn = addr_resolve;
}

struct raw_server_task {
	struct fix *f;
	int fd;
	struct conn *c;
	int rc;
};

static void raw_server_start(void *arg)
{
	struct raw_server_task *t = arg;

	t->rc = client_over_fd(t->f->r, t->fd, 5000, &t->c);
}

/* Calls held for a HELLO that is never answered, then the server end
 * closes: no byte of them left, so those made with
 * CONN_CALL_F_NOTCONN_UNSENT fail with -ENOTCONN (the caller may make
 * them again elsewhere), the others with -ECONNRESET as before; one that
 * times out while held is -ENOTCONN too. */
static void test_calls_never_sent_fail_notconn(void **state)
{
	struct fix *f = *state;
	struct raw_server_task t = { .f = f };
	struct res flagged = { 0 }, plain = { 0 }, timed = { 0 };
	struct call_task ct;
	uint8_t hb[FRAME_HDR_LEN];
	int sv[2], seen = 0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	t.fd = sv[0];
	assert_int_equal(reactor_call(f->r, raw_server_start, &t), 0);
	assert_int_equal(t.rc, 0);
	read_exact(sv[1], hb, sizeof(hb));	/* the HELLO's header: not answered */
	ct = (struct call_task){ .f = f, .c = t.c, .op = T_ECHO, .v = 1, .res = &timed,
				 .timeout_ms = 30, .flags = CONN_CALL_F_NOTCONN_UNSENT };
	assert_int_equal(reactor_call(f->r, call_start, &ct), 0);
	assert_int_equal(ct.rc, 0);
	wait_done(f, &seen, 1);
	assert_int_equal(timed.status, -ENOTCONN);
	ct = (struct call_task){ .f = f, .c = t.c, .op = T_ECHO, .v = 2, .res = &flagged,
				 .flags = CONN_CALL_F_NOTCONN_UNSENT };
	assert_int_equal(reactor_call(f->r, call_start, &ct), 0);
	assert_int_equal(ct.rc, 0);
	call(f, t.c, T_ECHO, 3, &plain);
	close(sv[1]);
	wait_done(f, &seen, 2);
	assert_int_equal(flagged.status, -ENOTCONN);
	assert_int_equal(plain.status, -ECONNRESET);
	put_conn(f, t.c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pipelined_replies_out_of_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frames_arriving_a_byte_at_a_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bulk_lands_in_the_callers_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_and_the_late_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_frame_closes_only_its_connection, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_connect_to_a_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolution_never_blocks_the_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_or_abandoned_resolution, setup, teardown),
		cmocka_unit_test_setup_teardown(test_calls_never_sent_fail_notconn, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
