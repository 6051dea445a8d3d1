/*
 * libstrata's calls to the meta service (meta_client.h): what the
 * generated stubs leave to do, copying strings out of replies.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "client/meta_client.h"
#include "common/clock.h"
#include "common/rand.h"
#include "net/reactor.h"

/* A random client id, never 0: getrandom, or (no entropy source) the
 * clock, the process and ctx's address mixed. */
static uint64_t new_client_id(const struct mc_ctx *ctx)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id))
		id = splitmix64((uint64_t)now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)ctx);
	return id ? id : 1;
}

int mc_ctx_init(struct mc_ctx *ctx, struct rpc_client *cl, const char *addr,
		uint32_t timeout_ms)
{
	int n = 0;

	memset(ctx, 0, sizeof(*ctx));
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->cl = cl;
	ctx->sync.timeout_ms = timeout_ms;
	ctx->sync.caller = true;	/* the calling thread's, if it has one */
	ctx->sync.notconn_unsent = true;	/* never sent: made again (mc_again) */
	ctx->client_id = new_client_id(ctx);
	for (uint32_t i = 0; i < MC_SLOTS; i++) {
		ctx->at[i].slot = i;
		n = snprintf(ctx->at[i].addr, sizeof(ctx->at[i].addr), "%s", addr ? addr : "");
	}
	return n < 0 || (size_t)n >= sizeof(ctx->at[0].addr) ? -ENAMETOOLONG : 0;
}

uint32_t mc_slot(void)
{
	static uint32_t next;
	static __thread uint32_t mine;	/* 0: not drawn yet; else slot + 1 */

	if (!mine)
		mine = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % MC_SLOTS + 1;
	return mine - 1;
}

bool mc_stamp(struct mc_ctx *ctx, struct mt_reqid *rid)
{
	if (!rid)
		return false;
	rid->client = ctx->client_id;
	rid->seq = __atomic_add_fetch(&ctx->seq, 1, __ATOMIC_RELAXED);
	return true;
}

/* Asks the resolver where slot is to call, from the state of ctx (failed:
 * the server called now failed a call), and records its answer. */
static void pick(struct mc_ctx *ctx, uint32_t slot, bool failed)
{
	struct mc_pick p;

	pthread_mutex_lock(&ctx->lock);
	p = ctx->at[slot];
	pthread_mutex_unlock(&ctx->lock);
	p.refused = failed;
	if (ctx->resolve(ctx->resolve_arg, &p) != 0 || !p.addr[0])
		return;
	p.refused = false;
	p.slot = slot;
	pthread_mutex_lock(&ctx->lock);
	ctx->at[slot] = p;
	pthread_mutex_unlock(&ctx->lock);
}

void mc_where(struct mc_ctx *ctx, uint32_t slot, char addr[64])
{
	slot %= MC_SLOTS;
	if (ctx->resolve)
		pick(ctx, slot, false);
	pthread_mutex_lock(&ctx->lock);
	memcpy(addr, ctx->at[slot].addr, sizeof(ctx->at[slot].addr));
	pthread_mutex_unlock(&ctx->lock);
}

uint64_t mc_deadline(const struct mc_ctx *ctx)
{
	return reactor_now_ms() + ctx->retry_ms;
}

/* Whether a call that failed with rc may have been delivered to a server
 * that then died, was cut off or stopped answering (so another may
 * answer it). */
static bool lost_in_flight(int rc)
{
	return rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EPIPE || rc == -ECONNABORTED ||
	       rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

bool mc_again(struct mc_ctx *ctx, uint32_t slot, int rc, bool safe, uint64_t deadline_ms,
	      uint32_t *attempt)
{
	uint32_t was, now;

	/* Refused, or failed before a byte of it left: never delivered.
	 * Lost in flight: made again only where a second delivery is
	 * harmless (a request id, or an idempotent operation). */
	if (rc != -ECONNREFUSED && rc != -ENOTCONN && !(safe && lost_in_flight(rc)))
		return false;
	if (reactor_now_ms() >= deadline_ms)
		return false;
	if (!ctx->resolve) {
		usleep(100 * 1000);
		return true;
	}
	slot %= MC_SLOTS;
	pthread_mutex_lock(&ctx->lock);
	was = ctx->at[slot].node;
	pthread_mutex_unlock(&ctx->lock);
	pick(ctx, slot, true);
	pthread_mutex_lock(&ctx->lock);
	now = ctx->at[slot].node;
	pthread_mutex_unlock(&ctx->lock);
	/* Another server at once, the first time; then at a bounded pace,
	 * so that servers that all fail are not called in a tight loop. */
	if (now == was || (*attempt)++ > 0)
		usleep(100 * 1000);
	return true;
}

/* The call settings of ctx, keeping the reply body in body. */
static struct proto_sync keeping(struct mc_ctx *ctx, struct bbuf *body)
{
	struct proto_sync s = ctx->sync;

	s.body = body;
	return s;
}

int mc_readlink(struct mc_ctx *ctx, struct mt_handle h, char *buf, size_t cap)
{
	struct mt_ino rq = { .h = h };
	struct mt_target rep;
	struct proto_sync s;
	struct bbuf body;
	int rc;

	if (!buf || !cap)
		return -EINVAL;
	bbuf_init(&body);
	s = keeping(ctx, &body);
	rc = MC_CALL_WITH(ctx, md_readlink, &rq, &s, &rep);
	if (!rc) {
		size_t n = rep.target.len < cap - 1 ? rep.target.len : cap - 1;

		if (n)
			memcpy(buf, rep.target.p, n);
		buf[n] = '\0';
		rc = (int)rep.target.len;
	}
	bbuf_release(&body);
	return rc;
}

/* READDIR (pcb NULL) and READDIRPLUS (cb NULL). */
static int list(struct mc_ctx *ctx, struct mt_handle dir, const char *cookie, uint32_t max,
		mc_dirent_fn cb, mc_direntplus_fn pcb, void *arg, char *next_cookie, size_t cap,
		bool *eof)
{
	struct mt_readdir rq = { .dir = dir, .cookie = pstr_c(cookie), .max = max };
	char name[MD_NAME_MAX + 1];
	union {
		struct mt_readdir_rep r;
		struct mt_readdirplus_rep p;
	} rep;
	struct pstr next;
	struct proto_sync s;
	struct bbuf body;
	uint32_t taken = 0, n;
	bool stopped, end;
	int rc;

	if ((!cb && !pcb) || max < 1 || max > MD_READDIR_MAX ||
	    (next_cookie && cap <= MD_NAME_MAX))
		return -EINVAL;
	bbuf_init(&body);
	s = keeping(ctx, &body);
	rc = pcb ? MC_CALL_WITH(ctx, md_readdirplus, &rq, &s, &rep.p) :
	     MC_CALL_WITH(ctx, md_readdir, &rq, &s, &rep.r);
	if (rc)
		goto out;
	n = pcb ? rep.p.ents_n : rep.r.ents_n;
	for (; taken < n; taken++) {
		if (pcb) {
			(void)pstr_copy(rep.p.ents[taken].name, name, sizeof(name));
			if (pcb(arg, name, &rep.p.ents[taken].inode))
				break;
		} else {
			const struct mt_dirent *e = &rep.r.ents[taken];

			(void)pstr_copy(e->name, name, sizeof(name));
			if (cb(arg, name, e->ino, e->type))
				break;
		}
	}
	/* A callback that stopped resumes the listing at the entry it did
	 * not take. */
	stopped = taken < n;
	next = pcb ? rep.p.next_cookie : rep.r.next_cookie;
	end = pcb ? rep.p.eof : rep.r.eof;
	if (stopped)
		next = !taken ? rq.cookie : pcb ? rep.p.ents[taken - 1].name :
		       rep.r.ents[taken - 1].name;
	if (next_cookie) {
		/* Through name: next may point into the caller's cookie, which
		 * may be next_cookie itself. */
		(void)pstr_copy(next, name, sizeof(name));
		memcpy(next_cookie, name, strlen(name) + 1);
	}
	if (eof)
		*eof = !stopped && end;
	rc = (int)taken;
	if (pcb)
		mt_readdirplus_rep_release(&rep.p);
	else
		mt_readdir_rep_release(&rep.r);
out:
	bbuf_release(&body);
	return rc;
}

int mc_readdir(struct mc_ctx *ctx, struct mt_handle dir, const char *cookie, uint32_t max,
	       mc_dirent_fn cb, void *arg, char *next_cookie, size_t cap, bool *eof)
{
	if (!cb)
		return -EINVAL;
	return list(ctx, dir, cookie, max, cb, NULL, arg, next_cookie, cap, eof);
}

int mc_readdirplus(struct mc_ctx *ctx, struct mt_handle dir, const char *cookie,
		   uint32_t max, mc_direntplus_fn cb, void *arg, char *next_cookie, size_t cap,
		   bool *eof)
{
	if (!cb)
		return -EINVAL;
	return list(ctx, dir, cookie, max, NULL, cb, arg, next_cookie, cap, eof);
}
