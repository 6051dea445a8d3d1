/*
 * The mem service: a DRAM pool of keyed objects (mem_pool.h) served over
 * the mem table's operations (src/proto/mem.h).
 *
 * Requests are served on the reactor that owns the connection (routes with
 * no owner): the pool is thread-safe and its critical sections are short,
 * so no request is handed between threads. A GET sends the object's bytes
 * straight from the pool under a lease that ends when the connection no
 * longer needs them, so a value being read is never evicted or freed under
 * its reader. A PUT keeps the request's bulk buffer as the object: the
 * value is received once and never copied.
 *
 * Configuration, section [mem] of the daemon's config:
 *   capacity            pool size (e.g. 512M, 8G); default 1G
 *   high_pct / low_pct  eviction watermarks in percent; default 90/80
 *   evict               false: a full pool refuses puts; default true
 *   spill               true: evicted objects are written to the storage
 *                       plane (through libstrata, mgmt at [mgmt] address)
 *                       and reloaded on a GET miss; default false
 *
 * Spill runs on its own thread because libstrata's file calls block; it
 * holds a lease on each evicted object until it is written.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/errors_int.h"
#include "common/log.h"
#include "mem_pool.h"
#include "mem_service.h"
#include "mgmt/announce.h"
#include "net/frame.h"
#include "net/reactor.h"
#include "net/auth.h"
#include "net/server.h"
#include "proto/mem.h"
#include "proto/server.h"
#include "strata/errors.h"
#include "strata/strata.h"

#define HUGE_MIN (2u << 20)
#define SPILL_DIR "/.mem-spill"

PROTO_SERVER(mem, MEM_OPS)

/* The pool takes what the wire carries: the same keys, the same flags. */
_Static_assert(MEM_KEY_MAX == MP_KEY_MAX, "mem key bounds differ");
_Static_assert(MEM_PUT_PIN == MP_PUT_PIN && MEM_PUT_NX == MP_PUT_NX, "mem put flags differ");

struct spill;

/* [mem] keys. */
struct mem_cfg {
	uint64_t capacity;
	int64_t high_pct, low_pct;
	bool evict, spill;
};

struct memsvc {
	struct service_env env;
	struct mem_pool *pool;
	struct spill *sp;
	struct announcer *ann;		/* lists this pool in the cluster map */
	uint64_t capacity;
	bool hugetlb_ok;
};

/* ---- spill to the storage plane ---- */

struct skey {
	struct skey *next;
	uint64_t len;
	uint32_t klen;
	char key[];
};

enum job_kind { JOB_SPILL, JOB_RELOAD };

struct job {
	struct job *next;
	enum job_kind kind;
	struct mem_obj *obj;		/* SPILL: leased */
	struct svc_req *req;		/* RELOAD: the GET waiting */
	struct mp_get rq;		/* RELOAD: its request (views into req) */
	struct memsvc *ms;
	int status;
};

struct spill {
	struct memsvc *ms;
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	pthread_cond_t drained;		/* queued_bytes went down */
	struct job *head, **tail;
	uint64_t queued_bytes;
	bool stop, started;
	struct strata *s;
	struct skey *keys[4096];	/* keys on the storage plane */
	uint64_t spilled, reloaded, dropped;
};

static uint64_t fnv64(const void *k, size_t n)
{
	const uint8_t *p = k;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static struct skey **skey_slot(struct spill *sp, const void *key, size_t klen)
{
	struct skey **s = &sp->keys[fnv64(key, klen) % 4096];

	for (; *s; s = &(*s)->next) {
		if ((*s)->klen == klen && memcmp((*s)->key, key, klen) == 0)
			break;
	}
	return s;
}

/* Under sp->lock: forgets key's spilled copy. Returns true if it had one. */
static bool skey_drop(struct spill *sp, const void *key, size_t klen)
{
	struct skey **s = skey_slot(sp, key, klen), *k = *s;

	if (!k)
		return false;
	*s = k->next;
	free(k);
	return true;
}

static void spill_path(struct spill *sp, const void *key, size_t klen, char *out, size_t len)
{
	snprintf(out, len, SPILL_DIR "/n%u/%016llx", (unsigned)sp->ms->env.node_id,
		 (unsigned long long)fnv64(key, klen));
}

static void enqueue(struct spill *sp, struct job *j)
{
	pthread_mutex_lock(&sp->lock);
	j->next = NULL;
	*sp->tail = j;
	sp->tail = &j->next;
	pthread_cond_signal(&sp->cv);
	pthread_mutex_unlock(&sp->lock);
}

/* Under sp->lock: records key as spilled (or being spilled). */
static void skey_add(struct spill *sp, const struct mem_obj *o)
{
	struct skey **s = skey_slot(sp, o->key, o->klen);
	struct skey *k = *s ? *s : calloc(1, sizeof(*k) + o->klen);

	if (k && !*s) {
		k->klen = o->klen;
		memcpy(k->key, o->key, o->klen);
		*s = k;
	}
	if (k)
		k->len = o->len;
}

/* Pool callback (on the thread whose put evicted o, outside the pool
 * lock). The key is recorded as spilled at once: a GET queued behind the
 * spill reloads it once written. When too much waits to be written, the
 * evicting thread waits (backpressure) rather than drop data. */
static void on_evict(void *arg, struct mem_obj *o)
{
	struct spill *sp = arg;
	struct job *j = calloc(1, sizeof(*j));

	pthread_mutex_lock(&sp->lock);
	/* (Not on the spill thread itself: a reload's put evicts too.) */
	while (!sp->stop && sp->queued_bytes && sp->queued_bytes + o->len > sp->ms->capacity / 2 &&
	       !pthread_equal(pthread_self(), sp->th))
		pthread_cond_wait(&sp->drained, &sp->lock);
	if (!j || sp->stop) {
		sp->dropped++;
		pthread_mutex_unlock(&sp->lock);
		log_warn("mem", "evicted '%.*s' could not be spilled (%s): dropped", (int)o->klen,
			 o->key, j ? "shutting down" : "out of memory");
		free(j);
		mem_obj_release(o);
		return;
	}
	sp->queued_bytes += o->len;
	skey_add(sp, o);
	pthread_mutex_unlock(&sp->lock);
	j->kind = JOB_SPILL;
	j->obj = o;
	enqueue(sp, j);
}

static int do_spill(struct spill *sp, struct mem_obj *o)
{
	struct strata_file *f = NULL;
	char path[128];
	uint8_t hdr[4];
	ssize_t n;
	int rc;

	spill_path(sp, o->key, o->klen, path, sizeof(path));
	rc = strata_open(sp->s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0600, &f);
	if (rc)
		return rc;
	put_le32(hdr, o->klen);
	n = strata_pwrite(f, hdr, 4, 0);
	if (n == 4)
		n = strata_pwrite(f, o->key, o->klen, 4);
	if (n == o->klen && o->len)
		n = strata_pwrite(f, o->data, o->len, 4 + o->klen) == (ssize_t)o->len ? 0 : -EIO;
	rc = strata_close(f);
	return n < 0 ? (int)n : rc;
}

static int do_reload(struct spill *sp, struct pbytes key)
{
	struct strata_file *f = NULL;
	struct strata_stat st;
	char path[128];
	uint8_t hdr[4];
	void *data = NULL, *kbuf = NULL;
	uint64_t len;
	int rc;

	spill_path(sp, key.p, key.len, path, sizeof(path));
	rc = strata_open(sp->s, path, STRATA_O_RDONLY, 0, &f);
	if (rc)
		return rc;
	rc = strata_fstat(f, &st);
	if (rc)
		goto out;
	rc = -EIO;
	if (st.size < 4 + key.len || strata_pread(f, hdr, 4, 0) != 4 || get_le32(hdr) != key.len)
		goto out;
	kbuf = malloc(key.len);
	if (!kbuf || strata_pread(f, kbuf, key.len, 4) != key.len ||
	    memcmp(kbuf, key.p, key.len) != 0)
		goto out;
	len = st.size - 4 - key.len;
	data = abuf_alloc(len);
	if (!data) {
		rc = -ENOMEM;
		goto out;
	}
	if (len && strata_pread(f, data, len, 4 + key.len) != (ssize_t)len)
		goto out;
	/* Reloaded under no quota: its bytes were charged when they came. */
	rc = mem_pool_put(sp->ms->pool, key.p, key.len, data, len, MEM_PUT_NX, MEM_NO_QUOTA);
	if (rc == 0 || rc == -EEXIST) {
		data = NULL;
		rc = 0;
	}
out:
	abuf_free(data);
	free(kbuf);
	strata_close(f);
	return rc;
}

static void get_reply(struct memsvc *ms, struct svc_req *req, const struct mp_get *rq,
		      bool may_reload);

static void reload_done(void *arg)
{
	struct job *j = arg;

	if (j->status)
		mm_get_reply(j->req, j->status, NULL);
	else
		get_reply(j->ms, j->req, &j->rq, false);
	free(j);
}

static void *spill_main(void *arg)
{
	struct spill *sp = arg;
	struct strata_opts o;
	char dir[64];
	int rc;

	strata_opts_init(&o, sizeof(o));
	o.io_threads = 1;
	while (!sp->s) {
		rc = strata_connect(sp->ms->env.mgmt_addr, &o, &sp->s);
		pthread_mutex_lock(&sp->lock);
		if (sp->stop) {
			pthread_mutex_unlock(&sp->lock);
			break;
		}
		pthread_mutex_unlock(&sp->lock);
		if (rc)
			log_warn("mem", "spill: cannot reach the storage plane at '%s': %s (retrying)",
				 sp->ms->env.mgmt_addr, strata_strerror(rc));
	}
	if (sp->s) {
		strata_mkdir(sp->s, SPILL_DIR, 0755);
		snprintf(dir, sizeof(dir), SPILL_DIR "/n%u", (unsigned)sp->ms->env.node_id);
		strata_mkdir(sp->s, dir, 0755);
		log_info("mem", "spill: evicted objects go to '%s' on the storage plane", dir);
	}
	for (;;) {
		struct job *j;

		pthread_mutex_lock(&sp->lock);
		while (!sp->head && !sp->stop)
			pthread_cond_wait(&sp->cv, &sp->lock);
		j = sp->head;
		if (j) {
			sp->head = j->next;
			if (!sp->head)
				sp->tail = &sp->head;
		}
		pthread_mutex_unlock(&sp->lock);
		if (!j)
			break;
		if (j->kind == JOB_SPILL) {
			struct mem_obj *ob = j->obj;

			rc = sp->s && !sp->stop ? do_spill(sp, ob) : -ESHUTDOWN;
			pthread_mutex_lock(&sp->lock);
			sp->queued_bytes -= ob->len;
			pthread_cond_broadcast(&sp->drained);
			if (rc == 0) {
				sp->spilled++;
			} else {
				skey_drop(sp, ob->key, ob->klen);
				sp->dropped++;
			}
			pthread_mutex_unlock(&sp->lock);
			if (rc)
				log_warn("mem", "spill of '%.*s' failed: %s (dropped)", (int)ob->klen,
					 ob->key, strata_strerror(rc));
			mem_obj_release(ob);
			free(j);
		} else {
			j->status = sp->s && !sp->stop ? do_reload(sp, j->rq.key) : -ESHUTDOWN;
			pthread_mutex_lock(&sp->lock);
			if (j->status == 0) {
				skey_drop(sp, j->rq.key.p, j->rq.key.len);
				sp->reloaded++;
			}
			pthread_mutex_unlock(&sp->lock);
			if (reactor_post(svc_req_owner(j->req), reload_done, j))
				reload_done(j);
		}
	}
	return NULL;
}

/* ---- handlers (on the connection's reactor) ---- */

static void lease_end(void *arg)
{
	mem_obj_release(arg);
}

/* Whether key was spilled (or is being spilled), and its length. */
static bool spilled_len(struct memsvc *ms, struct pbytes key, uint64_t *len)
{
	struct skey *k;

	if (!ms->sp)
		return false;
	pthread_mutex_lock(&ms->sp->lock);
	k = *skey_slot(ms->sp, key.p, key.len);
	if (k && len)
		*len = k->len;
	pthread_mutex_unlock(&ms->sp->lock);
	return k != NULL;
}

/* rq's key lives in req->body; a reload keeps req and so the key. */
static void get_reply(struct memsvc *ms, struct svc_req *req, const struct mp_get *rq,
		      bool may_reload)
{
	struct mp_len rep;
	struct mem_obj *o;
	int rc = mem_pool_get(ms->pool, rq->key.p, rq->key.len, &o);

	if (rc == -ENOENT && may_reload && spilled_len(ms, rq->key, NULL)) {
		struct job *j = calloc(1, sizeof(*j));

		if (j) {
			j->kind = JOB_RELOAD;
			j->req = req;
			j->rq = *rq;
			j->ms = ms;
			enqueue(ms->sp, j);
			return;
		}
	}
	if (!rc && o->len > rq->cap) {
		mem_obj_release(o);
		rc = -ENOBUFS;
	}
	if (rc) {
		mm_get_reply(req, rc, NULL);
		return;
	}
	rep.len = o->len;
	mm_get_reply_bulk(req, 0, &rep, o->data, o->len, lease_end, o);
}

/*
 * Whether the caller may touch key: a client token reaches only the keys
 * of its mem scopes ("NS/..." for each {ns} of its claims), and may put
 * while the namespace's charge on this node stays within the scope's
 * capacity (*quota, when quota is not NULL); an admin token, daemons, and the peers of a daemon
 * without a key reach every key, under no quota. A refusal is -EACCES,
 * logged at debug only: it is the caller's answer, and a misconfigured
 * client must not flood the log.
 */
static int key_scope(struct svc_req *req, const void *key, size_t len, uint64_t *quota)
{
	const struct net_ident *id = svc_req_ident(req);
	const struct token_mem *m;
	uint64_t none;

	quota = quota ? quota : &none;
	*quota = MEM_NO_QUOTA;
	if (id->role != NET_ROLE_CLIENT || (id->claims.flags & TOKEN_F_ADMIN))
		return 0;
	m = token_mem_scope(&id->claims, key, len);
	if (m) {
		*quota = m->capacity;
		return 0;
	}
	log_debug("mem", "token %s: key outside its mem scopes", id->claims.id);
	return -EACCES;
}

/* The pool's limits on a key and value, then the caller's scopes. */
static int key_check(struct memsvc *ms, struct svc_req *req, struct pbytes key, uint64_t vlen,
		     uint64_t *quota)
{
	int rc = mem_pool_check(ms->pool, key.len, vlen);

	return rc ? rc : key_scope(req, key.p, key.len, quota);
}

static void op_get(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct mp_get rq;
	int rc;

	if (mm_get_req(req, &rq))
		return;
	rc = key_check(ms, req, rq.key, 0, NULL);
	if (rc)
		mm_get_reply(req, rc, NULL);
	else
		get_reply(ms, req, &rq, true);
}

static void forget_spilled(struct memsvc *ms, const void *key, size_t klen, bool *had)
{
	bool h = false;

	if (ms->sp) {
		pthread_mutex_lock(&ms->sp->lock);
		h = skey_drop(ms->sp, key, klen);
		pthread_mutex_unlock(&ms->sp->lock);
	}
	if (had)
		*had = h;
}

static int put_one(struct memsvc *ms, struct pbytes key, uint32_t flags, void *data,
		   uint64_t len, uint64_t quota)
{
	int rc;

	if (len >= HUGE_MIN)
		(void)madvise(data, align_up(len, STRATA_ALIGN), MADV_HUGEPAGE);
	rc = mem_pool_put(ms->pool, key.p, key.len, data, len, flags, quota);
	if (rc == 0)
		forget_spilled(ms, key.p, key.len, NULL);
	return rc;
}

static void op_put(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	void *data = req->bulk;
	struct mp_put rq;
	uint64_t quota;
	int rc;

	if (mm_put_req(req, &rq))
		return;
	rc = key_check(ms, req, rq.key, req->hdr.bulk_len, &quota);
	if (!rc && !data)
		data = abuf_alloc(0);
	if (!rc && !data)
		rc = -ENOMEM;
	if (!rc) {
		rc = put_one(ms, rq.key, rq.flags, data, req->hdr.bulk_len, quota);
		/* Stored, data is the pool's: the request must not free it. */
		if (rc == 0 && data == req->bulk)
			req->bulk = NULL;
		else if (rc && data != req->bulk)
			abuf_free(data);
	}
	mm_put_reply(req, rc, NULL);
}

/* A key counts as removed when the pool or the spill had it. */
static int remove_one(struct memsvc *ms, struct pbytes key)
{
	int rc = mem_pool_remove(ms->pool, key.p, key.len);
	bool had;

	forget_spilled(ms, key.p, key.len, &had);
	return had ? 0 : rc;
}

static void op_remove(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct mp_key rq;
	int rc;

	if (mm_remove_req(req, &rq))
		return;
	rc = key_check(ms, req, rq.key, 0, NULL);
	mm_remove_reply(req, rc ? rc : remove_one(ms, rq.key), NULL);
}

static void op_exists(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct mp_len rep = { 0 };
	struct mp_key rq;
	int rc;

	if (mm_exists_req(req, &rq))
		return;
	rc = key_check(ms, req, rq.key, 0, NULL);
	if (!rc)
		rc = mem_pool_exists(ms->pool, rq.key.p, rq.key.len, &rep.len);
	if (rc == -ENOENT && spilled_len(ms, rq.key, &rep.len))
		rc = 0;
	mm_exists_reply(req, rc, &rep);
}

static void op_pin(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct mp_pin rq;
	int rc;

	if (mm_pin_req(req, &rq))
		return;
	rc = key_check(ms, req, rq.key, 0, NULL);
	if (!rc)
		rc = mem_pool_pin(ms->pool, rq.key.p, rq.key.len, rq.pin != 0);
	mm_pin_reply(req, rc, NULL);
}

/* A listing copies each key while the pool lists them (under its lock)
 * into one buffer; the entries point into it once the listing is done,
 * since the buffer moves while it grows. */
struct list_ctx {
	struct bbuf keys;		/* back to back, in entry order */
	struct mp_list_ent *ents;
	uint32_t n, cap;
	uint64_t body;			/* the reply's size so far */
	bool truncated;
	int err;
};

static int list_one(void *arg, const char *key, size_t klen, uint64_t len)
{
	struct list_ctx *lc = arg;
	uint64_t size = mp_list_ent_MIN + klen;

	if (lc->body + size > FRAME_MAX_BODY) {
		lc->truncated = true;
		return 1;
	}
	if (lc->n == lc->cap) {
		uint32_t cap = lc->cap ? lc->cap * 2 : 64;
		void *v = realloc(lc->ents, cap * sizeof(*lc->ents));

		if (!v) {
			lc->err = -ENOMEM;
			return 1;
		}
		lc->ents = v;
		lc->cap = cap;
	}
	if (bbuf_append(&lc->keys, key, klen)) {
		lc->err = -ENOMEM;
		return 1;
	}
	lc->ents[lc->n].key.len = (uint32_t)klen;
	lc->ents[lc->n].len = len;
	lc->n++;
	lc->body += size;
	return 0;
}

static void op_list(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct list_ctx lc = { .body = mp_list_rep_MIN };
	struct mp_list_rep rep;
	struct mp_list rq;
	uint64_t off = 0;

	if (mm_list_req(req, &rq))
		return;
	/* A client lists inside one of its namespaces: "NS/..." */
	if (key_scope(req, rq.prefix.p, rq.prefix.len, NULL)) {
		mm_list_reply(req, -EACCES, NULL);
		return;
	}
	bbuf_init(&lc.keys);
	mem_pool_list(ms->pool, rq.prefix.p, rq.prefix.len, rq.max, list_one, &lc);
	for (uint32_t i = 0; i < lc.n; i++) {
		lc.ents[i].key.p = lc.keys.buf + off;
		off += lc.ents[i].key.len;
	}
	rep.ents = lc.ents;
	rep.ents_n = lc.n;
	/* max keys listed: there may be more */
	rep.truncated = lc.truncated || lc.n == rq.max;
	mm_list_reply(req, lc.err, &rep);
	free(lc.ents);
	bbuf_release(&lc.keys);
}

/* The reply of a batch of n items: every status 0 until set. */
static int results_init(struct mp_results *rep, uint32_t n)
{
	rep->results_n = n;
	rep->results = n ? calloc(n, sizeof(*rep->results)) : NULL;
	return n && !rep->results ? -ENOMEM : 0;
}

static void op_mput(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct mp_results rep = { 0 };
	const uint8_t *in = req->bulk;
	uint64_t off = 0;
	struct mp_mput rq;
	int rc;

	if (mm_mput_req(req, &rq))
		return;
	for (uint32_t i = 0; i < rq.items_n; i++)
		off += rq.items[i].len;
	/* The values are the bulk, no more and no less. */
	if (off != req->hdr.bulk_len) {
		log_warn("mem", "malformed MEM_MPUT request from '%s': its values take %llu bytes, "
			 "its bulk %llu", req->conn ? conn_peer(req->conn) : "?",
			 (unsigned long long)off, (unsigned long long)req->hdr.bulk_len);
		rc = STRATA_EBADMSG;
	} else {
		rc = results_init(&rep, rq.items_n);
	}
	off = 0;
	for (uint32_t i = 0; !rc && i < rq.items_n; i++) {
		const struct mp_put_item *it = &rq.items[i];
		struct mp_result *r = &rep.results[i];
		uint64_t quota;

		r->len = it->len;
		r->status = key_check(ms, req, it->key, it->len, &quota);
		if (!r->status)
			r->status = mem_pool_put_copy(ms->pool, it->key.p, it->key.len,
						      it->len ? in + off : NULL, it->len, it->flags,
						      quota);
		if (!r->status)
			forget_spilled(ms, it->key.p, it->key.len, NULL);
		off += it->len;
	}
	mm_mput_reply(req, rc, &rep);
	mp_results_release(&rep);
	mp_mput_release(&rq);
}

/* The values go out copied into one bulk: a value that would pass the
 * caller's cap gets -ENOBUFS (with its length) and the rest go on. */
static void op_mget(void *svc, struct svc_req *req)
{
	struct memsvc *ms = svc;
	struct mp_results rep = { 0 };
	struct mem_obj **objs = NULL;
	uint64_t cap, total = 0, off = 0;
	uint8_t *bulk = NULL;
	struct mp_mget rq;
	int rc;

	if (mm_mget_req(req, &rq))
		return;
	cap = rq.cap < FRAME_MAX_BULK ? rq.cap : FRAME_MAX_BULK;
	rc = results_init(&rep, rq.keys_n);
	if (!rc && rq.keys_n) {
		objs = calloc(rq.keys_n, sizeof(*objs));
		rc = objs ? 0 : -ENOMEM;
	}
	for (uint32_t i = 0; !rc && i < rq.keys_n; i++) {
		struct pbytes k = rq.keys[i].key;
		struct mp_result *r = &rep.results[i];

		r->status = key_check(ms, req, k, 0, NULL);
		if (!r->status)
			r->status = mem_pool_get(ms->pool, k.p, k.len, &objs[i]);
		if (r->status)
			continue;
		r->len = objs[i]->len;
		if (total + r->len > cap) {
			mem_obj_release(objs[i]);
			objs[i] = NULL;
			r->status = -ENOBUFS;
		} else {
			total += r->len;
		}
	}
	if (!rc) {
		bulk = abuf_alloc(total);
		rc = bulk ? 0 : -ENOMEM;
	}
	for (uint32_t i = 0; objs && i < rq.keys_n; i++) {
		if (!objs[i])
			continue;
		if (bulk) {
			memcpy(bulk + off, objs[i]->data, objs[i]->len);
			off += objs[i]->len;
		}
		mem_obj_release(objs[i]);
	}
	/* (On an error the reply frees bulk at once.) */
	mm_mget_reply_bulk(req, rc, &rep, bulk, total, abuf_free, bulk);
	free(objs);
	mp_results_release(&rep);
	mp_mget_release(&rq);
}

/* MREMOVE, MEXISTS: one question per key. (A batch exists does not see
 * spilled keys.) */
static int keys_batch(struct memsvc *ms, struct svc_req *req, const struct mp_keys *rq,
		      bool remove, struct mp_results *rep)
{
	int rc = results_init(rep, rq->keys_n);

	for (uint32_t i = 0; !rc && i < rq->keys_n; i++) {
		struct pbytes k = rq->keys[i].key;
		struct mp_result *r = &rep->results[i];

		r->status = key_check(ms, req, k, 0, NULL);
		if (!r->status && remove)
			r->status = remove_one(ms, k);
		else if (!r->status)
			r->status = mem_pool_exists(ms->pool, k.p, k.len, &r->len);
	}
	return rc;
}

static void op_mremove(void *svc, struct svc_req *req)
{
	struct mp_results rep = { 0 };
	struct mp_keys rq;

	if (mm_mremove_req(req, &rq))
		return;
	mm_mremove_reply(req, keys_batch(svc, req, &rq, true, &rep), &rep);
	mp_results_release(&rep);
	mp_keys_release(&rq);
}

static void op_mexists(void *svc, struct svc_req *req)
{
	struct mp_results rep = { 0 };
	struct mp_keys rq;

	if (mm_mexists_req(req, &rq))
		return;
	mm_mexists_reply(req, keys_batch(svc, req, &rq, false, &rep), &rep);
	mp_results_release(&rep);
	mp_keys_release(&rq);
}

/* The pool's counters as the wire has them, and (when over_quota is not
 * NULL) the puts refused for a namespace's quota. */
static void fill_stats(struct memsvc *ms, struct mp_stats *s, uint64_t *over_quota)
{
	struct mem_pool_stats ps;

	mem_pool_stats(ms->pool, &ps);
	memset(s, 0, sizeof(*s));
	s->capacity = ps.capacity;
	s->used = ps.used;
	s->objects = ps.objects;
	s->pinned = ps.pinned;
	s->leased = ps.leased;
	s->puts = ps.puts;
	s->gets = ps.gets;
	s->hits = ps.hits;
	s->misses = ps.misses;
	s->evictions = ps.evictions;
	s->evicted_bytes = ps.evicted_bytes;
	s->refused = ps.refused;
	if (over_quota)
		*over_quota = ps.over_quota;
	if (ms->sp) {
		pthread_mutex_lock(&ms->sp->lock);
		s->spilled = ms->sp->spilled;
		s->reloaded = ms->sp->reloaded;
		pthread_mutex_unlock(&ms->sp->lock);
	}
}

static void op_stats(void *svc, struct svc_req *req)
{
	struct proto_void none;
	struct mp_stats s;

	if (mm_stats_req(req, &none))
		return;
	fill_stats(svc, &s, NULL);
	mm_stats_reply(req, 0, &s);
}

/* ---- life cycle ---- */

static void spill_stop(struct spill *sp)
{
	if (!sp)
		return;
	if (sp->started) {
		pthread_mutex_lock(&sp->lock);
		sp->stop = true;
		pthread_cond_signal(&sp->cv);
		pthread_cond_broadcast(&sp->drained);
		pthread_mutex_unlock(&sp->lock);
		pthread_join(sp->th, NULL);
	}
	strata_disconnect(sp->s);
	for (int b = 0; b < 4096; b++) {
		while (sp->keys[b]) {
			struct skey *k = sp->keys[b];

			sp->keys[b] = k->next;
			free(k);
		}
	}
	pthread_cond_destroy(&sp->cv);
	pthread_cond_destroy(&sp->drained);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
}

static void mem_stop(void *svc)
{
	struct memsvc *ms = svc;

	/* The server is shut down: no request is in flight, and every
	 * connection (with its leases) is gone. */
	announce_stop(ms->ann);
	spill_stop(ms->sp);
	mem_pool_free(ms->pool);
	free(ms);
}

/* The watermarks must be in order, whether the service runs here or not. */
static int mem_check(const void *cfg, char *err, size_t errlen)
{
	const struct mem_cfg *c = cfg;

	if (c->low_pct >= c->high_pct) {
		snprintf(err, errlen, "key 'mem.low_pct' (%lld) must be below 'mem.high_pct' (%lld)",
			 (long long)c->low_pct, (long long)c->high_pct);
		return STRATA_ECONFIG;
	}
	return 0;
}

static int mem_start(const struct service_env *env, void **out)
{
	const struct mem_cfg *cfg = env->cfg;
	struct memsvc *ms = calloc(1, sizeof(*ms));
	struct mem_pool_opts o;
	int rc;

	if (!ms)
		return -ENOMEM;
	ms->env = *env;
	mem_pool_opts_init(&o, sizeof(o));
	o.capacity = ms->capacity = cfg->capacity;
	o.high_pct = (uint32_t)cfg->high_pct;
	o.low_pct = (uint32_t)cfg->low_pct;
	o.evict = cfg->evict;
	if (cfg->spill) {
		struct spill *sp = calloc(1, sizeof(*sp));

		if (!sp) {
			rc = -ENOMEM;
			goto fail;
		}
		sp->ms = ms;
		sp->tail = &sp->head;
		pthread_mutex_init(&sp->lock, NULL);
		pthread_cond_init(&sp->cv, NULL);
		pthread_cond_init(&sp->drained, NULL);
		ms->sp = sp;
		o.on_evict = on_evict;
		o.evict_arg = sp;
	}
	rc = mem_pool_new(&o, &ms->pool);
	if (rc) {
		log_error("mem", "cannot create a pool of %llu bytes (watermarks %u/%u%%): %s",
			  (unsigned long long)o.capacity, o.high_pct, o.low_pct,
			  strata_strerror(rc));
		goto fail;
	}
	if (ms->sp) {
		rc = -pthread_create(&ms->sp->th, NULL, spill_main, ms->sp);
		if (rc)
			goto fail;
		ms->sp->started = true;
	}
	/* No owner: each request is served on its connection's reactor. */
	mem_route(env->srv, NULL, &(const struct mem_handlers){
		.mm_put = op_put, .mm_get = op_get, .mm_remove = op_remove,
		.mm_exists = op_exists, .mm_pin = op_pin, .mm_list = op_list,
		.mm_mput = op_mput, .mm_mget = op_mget, .mm_mremove = op_mremove,
		.mm_mexists = op_mexists, .mm_stats = op_stats,
	}, ms);
	/* Clients and the composer find the pool through the map. A mgmt that
	 * cannot be reached only delays the entry (logged once). */
	rc = announce_start(env, CM_SVC_MEM, &ms->ann);
	if (rc) {
		log_error("mem", "cannot announce the mem service to mgmt '%s': %s",
			  env->mgmt_addr, strata_strerror(rc));
		goto fail;
	}
	log_info("mem", "pool of %llu MiB, LRU eviction %s (%u%% -> %u%%), spill %s",
		 (unsigned long long)(o.capacity >> 20), o.evict ? "on" : "off", o.high_pct,
		 o.low_pct, ms->sp ? "to the storage plane" : "off");
	*out = ms;
	return 0;
fail:
	spill_stop(ms->sp);
	mem_pool_free(ms->pool);
	free(ms);
	return rc;
}

/* status and /metrics name the namespaces with the most bytes, up to: */
#define NS_REPORT_MAX 32

/* "namespaces": {NS: {"used": BYTES, "objects": N}} */
static void ns_status(struct memsvc *ms, json_t *o, uint64_t over_quota)
{
	struct mem_ns_stat st[NS_REPORT_MAX];
	uint32_t n = mem_pool_ns_stats(ms->pool, st, NS_REPORT_MAX);
	json_t *all = json_object();

	for (uint32_t i = 0; i < n && i < NS_REPORT_MAX; i++)
		json_object_set_new(all, st[i].ns, json_pack("{s:I, s:I}", "used",
							     (json_int_t)st[i].used, "objects",
							     (json_int_t)st[i].objects));
	json_object_set_new(o, "namespaces", all);
	json_object_set_new(o, "namespaces_total", json_integer((json_int_t)n));
	json_object_set_new(o, "over_quota", json_integer((json_int_t)over_quota));
}

static void ns_metrics(struct memsvc *ms, struct bbuf *out)
{
	struct mem_ns_stat st[NS_REPORT_MAX];
	uint32_t n = mem_pool_ns_stats(ms->pool, st, NS_REPORT_MAX);

	metrics_put(out, "strata_mem_namespaces", "gauge", "namespaces holding bytes", (double)n);
	metrics_head(out, "strata_mem_ns_used_bytes", "gauge",
		     "bytes charged to a namespace (the 32 largest)");
	for (uint32_t i = 0; i < n && i < NS_REPORT_MAX; i++)
		metrics_series(out, "strata_mem_ns_used_bytes", "ns", st[i].ns, (double)st[i].used);
	metrics_head(out, "strata_mem_ns_objects", "gauge", "objects of a namespace");
	for (uint32_t i = 0; i < n && i < NS_REPORT_MAX; i++)
		metrics_series(out, "strata_mem_ns_objects", "ns", st[i].ns, (double)st[i].objects);
}

static void mem_status(void *svc, json_t *o)
{
	struct mp_stats s;
	uint64_t over_quota;

	fill_stats(svc, &s, &over_quota);
#define J(f) json_object_set_new(o, #f, json_integer((json_int_t)s.f))
	J(capacity);
	J(used);
	J(objects);
	J(pinned);
	J(leased);
	J(evictions);
	J(spilled);
	J(reloaded);
#undef J
	json_object_set_new(o, "eviction", json_string("lru"));
	ns_status(svc, o, over_quota);
}

static void mem_metrics(void *svc, struct bbuf *out)
{
	struct mp_stats s;
	uint64_t over_quota;

	fill_stats(svc, &s, &over_quota);
#define M(name, type, help, f) metrics_put(out, name, type, help, (double)s.f)
	M("strata_mem_capacity_bytes", "gauge", "pool capacity", capacity);
	M("strata_mem_used_bytes", "gauge", "pool bytes in use", used);
	M("strata_mem_objects", "gauge", "objects in the pool", objects);
	M("strata_mem_puts_total", "counter", "puts", puts);
	M("strata_mem_gets_total", "counter", "gets", gets);
	M("strata_mem_misses_total", "counter", "gets of absent keys", misses);
	M("strata_mem_evictions_total", "counter", "objects evicted", evictions);
	M("strata_mem_refused_total", "counter", "puts refused (pool full or over quota)",
	  refused);
	M("strata_mem_spilled_total", "counter", "objects spilled", spilled);
	M("strata_mem_reloaded_total", "counter", "objects reloaded from spill", reloaded);
#undef M
	metrics_put(out, "strata_mem_over_quota_total", "counter",
		    "puts refused: a namespace's quota", (double)over_quota);
	ns_metrics(svc, out);
}

#define K(name, type, field, def, min, max, help) \
	CFG_KEY(struct mem_cfg, "mem", name, type, field, def, min, max, help)
static const struct cfg_key mem_keys[] = {
	K("capacity", CFG_SIZE, capacity, "1G", 1048576, 0x7fffffffffffffffLL, "memory pool size"),
	K("high_pct", CFG_INT, high_pct, "90", 1, 100, "evict above this % of capacity"),
	K("low_pct", CFG_INT, low_pct, "80", 0, 99, "evict down to this % of capacity"),
	K("evict", CFG_BOOL, evict, "true", 0, 0, "LRU eviction (false: a full pool refuses puts)"),
	K("spill", CFG_BOOL, spill, "false", 0, 0,
	  "write evicted objects to the storage plane, reload on a miss"),
};
#undef K
static const struct cfg_schema mem_schema = CFG_SCHEMA(mem_keys);

const struct service_def mem_service = {
	.name = "mem",
	.schema = &mem_schema,
	.cfg_size = sizeof(struct mem_cfg),
	.check = mem_check,
	.start = mem_start,
	.stop = mem_stop,
	.status = mem_status,
	.metrics = mem_metrics,
};
