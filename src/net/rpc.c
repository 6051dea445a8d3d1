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

static void sync_done(void *arg, int status, struct rpc_msg *resp)
{
	struct sync_call *s = arg;

	s->res->status = status;
	if (resp) {
		s->res->hdr = resp->hdr;
		if (bbuf_append(&s->res->body, resp->body, resp->hdr.body_len))
			s->res->status = -ENOMEM;
		s->res->bulk_len = resp->hdr.bulk_len;
	}
	pthread_mutex_lock(&s->lock);
	s->done = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void sync_start(void *arg)
{
	struct sync_call *s = arg;
	struct rpc_call_args ca = {
		.op = s->a->op, .body = s->a->body, .body_len = s->a->body_len,
		.bulk = s->a->bulk, .bulk_len = s->a->bulk_len,
		.bulk_dst = s->a->bulk_dst, .bulk_cap = s->a->bulk_cap,
		.timeout_ms = s->a->timeout_ms, .flags = s->a->flags, .cb = sync_done, .arg = s,
	};
	int rc = rpc_pool_call(s->cl->pool, s->addr, &ca);

	if (rc)
		sync_done(s, rc, NULL);
}

int rpc_call_sync(struct rpc_client *cl, const char *addr, const struct rpc_sync_args *a,
		  struct rpc_result *res)
{
	struct sync_call s = { .cl = cl, .addr = addr, .a = a, .res = res };
	int rc;

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
	if (reactor_now_ms() - d->left_ms >= DIRECT_IDLE_MS)
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
