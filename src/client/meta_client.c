/*
 * libstrata's calls to the meta service (meta_client.h): what the
 * generated stubs leave to do, copying strings out of replies.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/meta_client.h"

int mc_ctx_init(struct mc_ctx *ctx, struct rpc_client *cl, const char *addr,
		uint32_t timeout_ms)
{
	int n;

	memset(ctx, 0, sizeof(*ctx));
	ctx->cl = cl;
	ctx->sync.timeout_ms = timeout_ms;
	n = snprintf(ctx->addr, sizeof(ctx->addr), "%s", addr ? addr : "");
	return n < 0 || (size_t)n >= sizeof(ctx->addr) ? -ENAMETOOLONG : 0;
}

/* The call settings of ctx, keeping the reply body in body. */
static struct proto_sync keeping(const struct mc_ctx *ctx, struct bbuf *body)
{
	struct proto_sync s = ctx->sync;

	s.body = body;
	return s;
}

int mc_readlink(const struct mc_ctx *ctx, struct mt_handle h, char *buf, size_t cap)
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
	rc = md_readlink_call_sync(ctx->cl, ctx->addr, &rq, &s, &rep);
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

int mc_readdir(const struct mc_ctx *ctx, struct mt_handle dir, const char *cookie, uint32_t max,
	       mc_dirent_fn cb, void *arg, char *next_cookie, size_t cap, bool *eof)
{
	struct mt_readdir rq = { .dir = dir, .cookie = pstr_c(cookie), .max = max };
	char name[MD_NAME_MAX + 1];
	struct mt_readdir_rep rep;
	struct proto_sync s;
	struct bbuf body;
	uint32_t taken = 0;
	bool stopped;
	int rc;

	if (!cb || max < 1 || max > MD_READDIR_MAX || (next_cookie && cap <= MD_NAME_MAX))
		return -EINVAL;
	bbuf_init(&body);
	s = keeping(ctx, &body);
	rc = md_readdir_call_sync(ctx->cl, ctx->addr, &rq, &s, &rep);
	if (rc)
		goto out;
	for (; taken < rep.ents_n; taken++) {
		const struct mt_dirent *e = &rep.ents[taken];

		(void)pstr_copy(e->name, name, sizeof(name));
		if (cb(arg, name, e->ino, e->type))
			break;
	}
	/* A callback that stopped resumes the listing at the entry it did
	 * not take. */
	stopped = taken < rep.ents_n;
	if (next_cookie)
		(void)pstr_copy(!stopped ? rep.next_cookie : taken ? rep.ents[taken - 1].name :
				rq.cookie, next_cookie, cap);
	if (eof)
		*eof = !stopped && rep.eof;
	rc = (int)taken;
	mt_readdir_rep_release(&rep);
out:
	bbuf_release(&body);
	return rc;
}
