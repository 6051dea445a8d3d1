/* Connection pools per reactor thread, and blocking calls. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "rpc.h"
#include "strata/errors.h"

struct pool_ent {
	struct pool_ent *next;
	char addr[64];
	struct conn *c;
};

struct rpc_pool {
	struct reactor *r;
	uint32_t timeout_ms;
	struct pool_ent *ents;
	bool has_cred;
	struct net_cred cred;
	bool has_tls;
	struct net_tls *tls;	/* a reference; NULL with has_tls: plain TCP */
};

int rpc_pool_new(struct reactor *r, uint32_t timeout_ms, struct rpc_pool **out)
{
	struct rpc_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->r = r;
	p->timeout_ms = timeout_ms;
	*out = p;
	return 0;
}

void rpc_pool_free(struct rpc_pool *p)
{
	if (!p)
		return;
	while (p->ents) {
		struct pool_ent *e = p->ents;

		p->ents = e->next;
		if (e->c) {
			conn_close(e->c, "pool closed");
			conn_put(e->c);
		}
		free(e);
	}
	net_cred_release(&p->cred);
	net_tls_put(p->tls);
	free(p);
}

void rpc_pool_set_tls(struct rpc_pool *p, struct net_tls *tls)
{
	if (tls)
		net_tls_get(tls);
	net_tls_put(p->tls);
	p->tls = tls;
	p->has_tls = true;
}

int rpc_pool_set_cred(struct rpc_pool *p, const struct net_cred *cred)
{
	struct net_cred copy;
	int rc = net_cred_copy(&copy, cred);

	if (rc)
		return rc;
	net_cred_release(&p->cred);
	p->cred = copy;
	p->has_cred = true;
	return 0;
}

static struct pool_ent *pool_find(struct rpc_pool *p, const char *addr)
{
	for (struct pool_ent *e = p->ents; e; e = e->next) {
		if (strcmp(e->addr, addr) == 0)
			return e;
	}
	return NULL;
}

void rpc_pool_reset(struct rpc_pool *p, const char *addr)
{
	struct pool_ent *e = pool_find(p, addr);

	if (e && e->c) {
		conn_close(e->c, "reset by caller");
		conn_put(e->c);
		e->c = NULL;
	}
}

int rpc_pool_call(struct rpc_pool *p, const char *addr, const struct rpc_call_args *a)
{
	struct pool_ent *e = pool_find(p, addr);
	int rc;

	if (strlen(addr) >= sizeof(e->addr))
		return -EINVAL;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
		e->next = p->ents;
		p->ents = e;
	}
	if (e->c && !conn_is_open(e->c)) {
		conn_put(e->c);
		e->c = NULL;
	}
	if (!e->c) {
		rc = conn_connect(p->r, addr, NULL, p->has_cred ? &p->cred : net_cred_default(),
				  p->has_tls ? p->tls : net_tls_default(), p->timeout_ms, &e->c);
		if (rc) {
			e->c = NULL;
			return rc;
		}
	}
	return conn_call(e->c, a);
}

/* ---- rpc_client ---- */

struct rpc_client {
	struct reactor *r;
	struct rpc_pool *pool;
	struct rpc_lanes *lanes;	/* NULL: every call through r */
};

static void free_pool_task(void *arg)
{
	rpc_pool_free(arg);
}

/* A reactor, not started, with a pool on it (rpc_client, rpc_direct). */
static int loop_pool_new(const char *name, uint32_t timeout_ms, struct reactor **r,
			 struct rpc_pool **p)
{
	int rc = reactor_new(name, r);

	if (rc)
		return rc;
	rc = rpc_pool_new(*r, timeout_ms, p);
	if (rc) {
		reactor_free(*r);
		*r = NULL;
	}
	return rc;
}

int rpc_client_new(const char *name, uint32_t timeout_ms, struct rpc_client **out)
{
	struct rpc_client *cl = calloc(1, sizeof(*cl));
	int rc;

	if (!cl)
		return -ENOMEM;
	rc = loop_pool_new(name, timeout_ms, &cl->r, &cl->pool);
	if (rc)
		goto fail;
	rc = reactor_start(cl->r);
	if (rc)
		goto fail;
	*out = cl;
	return 0;
fail:
	rpc_pool_free(cl->pool);
	reactor_free(cl->r);
	free(cl);
	return rc;
}

void rpc_client_free(struct rpc_client *cl)
{
	if (!cl)
		return;
	/* Close connections on the loop thread, then stop it. */
	reactor_post(cl->r, free_pool_task, cl->pool);
	reactor_stop(cl->r);
	reactor_join(cl->r);
	reactor_free(cl->r);
	rpc_lanes_free(cl->lanes);
	free(cl);
}

struct reactor *rpc_client_reactor(struct rpc_client *cl) { return cl->r; }
struct rpc_pool *rpc_client_pool(struct rpc_client *cl) { return cl->pool; }

void rpc_result_release(struct rpc_result *res)
{
	bbuf_release(&res->body);
}

struct sync_call {
	struct rpc_client *cl;
	const char *addr;
	const struct rpc_sync_args *a;
	struct rpc_result *res;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

/* A blocking call's outcome into res (rpc_call_sync, rpc_direct_call_sync). */
static void result_fill(struct rpc_result *res, int status, const struct rpc_msg *resp)
{
	res->status = status;
	if (resp) {
		res->hdr = resp->hdr;
		if (bbuf_append(&res->body, resp->body, resp->hdr.body_len))
			res->status = -ENOMEM;
		res->bulk_len = resp->hdr.bulk_len;
	}
}

/* The pool call of a blocking call, answered to cb(arg). */
static struct rpc_call_args call_args(const struct rpc_sync_args *a, rpc_cb cb, void *arg)
{
	struct rpc_call_args ca = {
		.op = a->op, .body = a->body, .body_len = a->body_len,
		.bulk = a->bulk, .bulk_len = a->bulk_len,
		.bulk_dst = a->bulk_dst, .bulk_cap = a->bulk_cap,
		.timeout_ms = a->timeout_ms, .flags = a->flags, .cb = cb, .arg = arg,
	};

	return ca;
}

static void sync_done(void *arg, int status, struct rpc_msg *resp)
{
	struct sync_call *s = arg;

	result_fill(s->res, status, resp);
	pthread_mutex_lock(&s->lock);
	s->done = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void sync_start(void *arg)
{
	struct sync_call *s = arg;
	struct rpc_call_args ca = call_args(s->a, sync_done, s);
	int rc = rpc_pool_call(s->cl->pool, s->addr, &ca);

	if (rc)
		sync_done(s, rc, NULL);
}

int rpc_call_sync(struct rpc_client *cl, const char *addr, const struct rpc_sync_args *a,
		  struct rpc_result *res)
{
	struct sync_call s = { .cl = cl, .addr = addr, .a = a, .res = res };
	struct rpc_direct *d = rpc_lanes_hold(cl->lanes);
	int rc;

	if (d) {
		rc = rpc_direct_call_sync(d, addr, a, res);
		rpc_direct_release(d);
		return rc;
	}
	memset(res, 0, sizeof(*res));
	bbuf_init(&res->body);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	rc = reactor_post(cl->r, sync_start, &s);
	if (rc) {
		res->status = rc;
		goto out;
	}
	pthread_mutex_lock(&s.lock);
	while (!s.done)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
out:
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return res->status;
}

/* ---- rpc_direct ---- */

struct rpc_direct {
	struct reactor *r;
	struct rpc_pool *pool;
	int held;		/* 1 while a thread holds it (atomic) */
	uint64_t left_ms;	/* when the last holder gave it back */
	uint32_t idle_ms;	/* DIRECT_IDLE_MS, or 0: look at every hold */
};

/* Held again within this long, d skips its look at what happened in
 * between (a syscall): a peer that closed a connection so recently is a
 * race any pool has. */
#define DIRECT_IDLE_MS 1

int rpc_direct_new(const char *name, uint32_t timeout_ms, struct rpc_direct **out)
{
	struct rpc_direct *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	rc = loop_pool_new(name, timeout_ms, &d->r, &d->pool);
	if (rc) {
		free(d);
		return rc;
	}
	d->idle_ms = DIRECT_IDLE_MS;
	*out = d;
	return 0;
}

void rpc_direct_free(struct rpc_direct *d)
{
	if (!d)
		return;
	/* Nobody drives the loop now: this thread is its owner. */
	rpc_pool_free(d->pool);
	reactor_free(d->r);
	free(d);
}

struct rpc_pool *rpc_direct_pool(struct rpc_direct *d) { return d->pool; }

bool rpc_direct_try_hold(struct rpc_direct *d)
{
	int free_ = 0;

	if (!__atomic_compare_exchange_n(&d->held, &free_, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return false;
	if (reactor_now_ms() - d->left_ms >= d->idle_ms)
		reactor_run_until(d->r, NULL, NULL);
	return true;
}

void rpc_direct_release(struct rpc_direct *d)
{
	d->left_ms = reactor_now_ms();
	__atomic_store_n(&d->held, 0, __ATOMIC_RELEASE);
}

int rpc_direct_wait(struct rpc_direct *d, bool (*done)(void *arg), void *arg)
{
	return reactor_run_until(d->r, done, arg);
}

struct direct_call {
	struct rpc_result *res;
	bool done;
};

static void direct_done(void *arg, int status, struct rpc_msg *resp)
{
	struct direct_call *c = arg;

	result_fill(c->res, status, resp);
	c->done = true;
}

static bool direct_call_done(void *arg)
{
	return ((struct direct_call *)arg)->done;
}

int rpc_direct_call_sync(struct rpc_direct *d, const char *addr, const struct rpc_sync_args *a,
			 struct rpc_result *res)
{
	struct direct_call c = { .res = res };
	struct rpc_call_args ca = call_args(a, direct_done, &c);
	int rc;

	memset(res, 0, sizeof(*res));
	bbuf_init(&res->body);
	rc = rpc_pool_call(d->pool, addr, &ca);
	if (rc)
		direct_done(&c, rc, NULL);
	else
		rpc_direct_wait(d, direct_call_done, &c);	/* its timeout ends it */
	return res->status;
}

/* ---- rpc_lanes ---- */

struct rpc_lanes {
	uint32_t n;
	struct rpc_direct *d[];
};

int rpc_lanes_new(const char *name, uint32_t n, const struct rpc_pool *like,
		  struct rpc_lanes **out)
{
	struct rpc_lanes *l;
	int rc = 0;

	if (n > RPC_LANES_MAX)
		n = RPC_LANES_MAX;
	l = calloc(1, sizeof(*l) + n * sizeof(l->d[0]));
	if (!l)
		return -ENOMEM;
	while (!rc && l->n < n) {
		struct rpc_pool *p;

		rc = rpc_direct_new(name, like->timeout_ms, &l->d[l->n]);
		if (rc)
			break;
		p = l->d[l->n++]->pool;
		if (like->has_cred)
			rc = rpc_pool_set_cred(p, &like->cred);
		if (like->has_tls)
			rpc_pool_set_tls(p, like->tls);
	}
	if (rc) {
		rpc_lanes_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void rpc_lanes_free(struct rpc_lanes *l)
{
	if (!l)
		return;
	for (uint32_t i = 0; i < l->n; i++)
		rpc_direct_free(l->d[i]);
	free(l);
}

unsigned rpc_thread_slot(void)
{
	static unsigned next;
	static __thread unsigned mine = UINT32_MAX;

	if (mine == UINT32_MAX)
		mine = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
	return mine;
}

struct rpc_direct *rpc_lanes_hold(struct rpc_lanes *l)
{
	uint32_t start;

	if (!l || !l->n)
		return NULL;
	start = rpc_thread_slot() % l->n;
	for (uint32_t i = 0; i < l->n; i++) {
		struct rpc_direct *d = l->d[(start + i) % l->n];

		if (rpc_direct_try_hold(d))
			return d;
	}
	return NULL;
}

uint32_t rpc_lanes_count(const char *env, uint32_t n)
{
	const char *v = env ? getenv(env) : NULL;

	if (v && *v) {
		char *end;
		long k;

		errno = 0;
		k = strtol(v, &end, 10);
		if (!errno && *end == '\0' && k >= 0)
			n = k > (long)RPC_LANES_MAX ? RPC_LANES_MAX : (uint32_t)k;
	}
	return n > RPC_LANES_MAX ? RPC_LANES_MAX : n;
}

int rpc_client_add_lanes(struct rpc_client *cl, uint32_t n)
{
	int rc = n ? rpc_lanes_new("strata-lane", n, cl->pool, &cl->lanes) : 0;

	/* cl's thread notices a peer's close at once; so does a lane, by
	 * looking at every hold (a syscall): a call made right after
	 * another, the second of a path operation, is not written to a
	 * connection whose server has just died (an -ECONNRESET that
	 * mc_again could not retry) but reconnects, or finds it refused. */
	for (uint32_t i = 0; !rc && cl->lanes && i < cl->lanes->n; i++)
		cl->lanes->d[i]->idle_ms = 0;
	return rc;
}
