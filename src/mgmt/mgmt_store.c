/*
 * mgmt's store: the backend a spec names, and the calls that go to it
 * (mgmt_store.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pg_conn.h"
#include "mgmt/mgmt_store.h"

struct mgmt_store {
	const struct mgmt_store_ops *ops;
	void *impl;
};

static int wrap(int rc, const struct mgmt_store_ops *ops, void *impl, struct mgmt_store **out)
{
	struct mgmt_store *s;

	if (rc)
		return rc;
	s = malloc(sizeof(*s));
	if (!s) {
		ops->close(impl);
		return -ENOMEM;
	}
	s->ops = ops;
	s->impl = impl;
	*out = s;
	return 0;
}

int mgmt_store_open_pg(const char *conninfo, const char *passfile, struct mgmt_store **out)
{
	const struct mgmt_store_ops *ops = NULL;
	void *impl = NULL;

	int rc = mgmt_store_pg_open(conninfo, passfile, &ops, &impl);

	*out = NULL;
	return wrap(rc, ops, impl, out);
}

int mgmt_store_open(const char *spec, struct mgmt_store **out)
{
	const struct mgmt_store_ops *ops = NULL;
	void *impl = NULL;

	int rc;

	*out = NULL;
	if (pg_conn_is_uri(spec))
		return mgmt_store_open_pg(spec, NULL, out);
	rc = mgmt_store_sqlite_open(spec, &ops, &impl);
	return wrap(rc, ops, impl, out);
}

int mgmt_store_check_spec(const char *spec, const char *passfile, char *err, size_t errlen)
{
	return pg_conn_check_store_keys("mgmt", spec, passfile, NULL,
					"leave it empty for the embedded SQLite database, or give"
					" a postgresql:// URI", "", err, errlen);
}

void mgmt_store_close(struct mgmt_store *s)
{
	if (!s)
		return;
	s->ops->close(s->impl);
	free(s);
}

int mgmt_store_save(struct mgmt_store *s, const struct cluster_map *m)
{
	return s->ops->save(s->impl, m);
}

int mgmt_store_load(struct mgmt_store *s, struct cluster_map *out)
{
	return s->ops->load(s->impl, out);
}

int mgmt_store_get_incarnation(struct mgmt_store *s, uint32_t node, uint64_t *inc)
{
	return s->ops->get_incarnation(s->impl, node, inc);
}

int mgmt_store_set_incarnation(struct mgmt_store *s, uint32_t node, uint64_t inc)
{
	return s->ops->set_incarnation(s->impl, node, inc);
}

int mgmt_store_set_removed(struct mgmt_store *s, uint32_t node, int64_t when)
{
	return s->ops->set_removed(s->impl, node, when);
}

int mgmt_store_get_removed(struct mgmt_store *s, uint32_t node, int64_t *when)
{
	return s->ops->get_removed(s->impl, node, when);
}

int mgmt_store_token_add(struct mgmt_store *s, const struct mgmt_token *t, const char *claims)
{
	return s->ops->token_add(s->impl, t, claims);
}

int mgmt_store_token_revoke(struct mgmt_store *s, const char *id, int64_t when)
{
	return s->ops->token_revoke(s->impl, id, when);
}

int mgmt_store_token_revoke_offline(struct mgmt_store *s, const char *id, int64_t exp,
				    int64_t when)
{
	return s->ops->token_revoke_offline(s->impl, id, exp, when);
}

int mgmt_store_token_list(struct mgmt_store *s, uint32_t max, struct mgmt_token **out,
			  uint32_t *n, uint32_t *total)
{
	return s->ops->token_list(s->impl, max, out, n, total);
}

int mgmt_store_revoked(struct mgmt_store *s, int64_t now, struct cluster_map *m)
{
	return s->ops->revoked(s->impl, now, m);
}

bool mgmt_store_shared(const struct mgmt_store *s)
{
	return s->ops->lease != NULL;
}

int mgmt_store_lease(struct mgmt_store *s, const char *holder, const char *addr,
		     uint32_t ttl_ms, struct mgmt_lease *out)
{
	size_t hl = holder ? strlen(holder) : 0, al = addr ? strlen(addr) : 0;

	memset(out, 0, sizeof(*out));
	if (!hl || hl > 128 || !al || al >= sizeof(out->addr) || !ttl_ms)
		return -EINVAL;
	if (!s->ops->lease) {
		out->leader = true;
		out->term = 1;
		memcpy(out->addr, addr, al + 1);
		out->left_ms = ttl_ms;
		return 0;
	}
	return s->ops->lease(s->impl, holder, addr, ttl_ms, out);
}

int mgmt_store_resign(struct mgmt_store *s, const char *holder)
{
	return s->ops->resign ? s->ops->resign(s->impl, holder) : 0;
}

void mgmt_store_fence(struct mgmt_store *s, uint64_t term)
{
	if (s->ops->fence)
		s->ops->fence(s->impl, term);
}

/* ---- copying ---- */

static int count_row(void *arg, uint32_t node, uint64_t v)
{
	(void)node;
	(void)v;
	++*(uint32_t *)arg;
	return 0;
}

static int copy_inc(void *arg, uint32_t node, uint64_t inc)
{
	struct mgmt_store *to = arg;

	return mgmt_store_set_incarnation(to, node, inc);
}

static int copy_removed(void *arg, uint32_t node, int64_t at)
{
	struct mgmt_store *to = arg;

	return mgmt_store_set_removed(to, node, at);
}

/* A token as its registry row: added, then revoked at its time. */
static int copy_token(void *arg, const struct mgmt_token *t, const char *claims)
{
	struct mgmt_store *to = arg;
	int rc = mgmt_store_token_add(to, t, claims);

	if (!rc && t->revoked)
		rc = mgmt_store_token_revoke(to, t->id, t->revoked);
	return rc;
}

static int empty(struct mgmt_store *s)
{
	struct mgmt_token *ts = NULL;
	struct cluster_map m;
	uint32_t n = 0, total = 0, incs = 0;
	int rc = mgmt_store_load(s, &m);

	if (rc)
		return rc;
	if (m.version || m.nnodes)
		rc = -ENOTEMPTY;
	cm_release(&m);
	if (!rc)
		rc = mgmt_store_token_list(s, 1, &ts, &n, &total);
	free(ts);
	if (!rc && total)
		rc = -ENOTEMPTY;
	if (!rc)
		rc = s->ops->each_incarnation(s->impl, count_row, &incs);
	return rc ? rc : incs ? -ENOTEMPTY : 0;
}

static int count_at(void *arg, uint32_t node, int64_t at)
{
	return count_row(arg, node, (uint64_t)at);
}

static int count_token(void *arg, const struct mgmt_token *t, const char *claims)
{
	(void)t;
	(void)claims;
	++*(uint32_t *)arg;
	return 0;
}

int mgmt_store_copy(struct mgmt_store *from, struct mgmt_store *to, struct mgmt_copy_stats *st)
{
	struct cluster_map m;
	int rc;

	memset(st, 0, sizeof(*st));
	if ((rc = empty(to)))
		return rc;
	if ((rc = mgmt_store_load(from, &m)))
		return rc;
	st->version = m.version;
	st->nodes = m.nnodes;
	st->targets = m.ntargets;
	st->chains = m.nchains;
	if (!(rc = from->ops->each_incarnation(from->impl, copy_inc, to)) &&
	    !(rc = from->ops->each_removed(from->impl, copy_removed, to)) &&
	    !(rc = from->ops->each_token(from->impl, copy_token, to)) &&
	    !(rc = to->ops->each_incarnation(to->impl, count_row, &st->incarnations)) &&
	    !(rc = to->ops->each_removed(to->impl, count_at, &st->removed)) &&
	    !(rc = to->ops->each_token(to->impl, count_token, &st->tokens)))
		rc = mgmt_store_save(to, &m);	/* last: the copy is whole */
	cm_release(&m);
	return rc;
}
