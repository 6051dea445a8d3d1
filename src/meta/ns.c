/*
 * Namespace operations on top of the metadata store. No SQL here: every
 * access goes through struct meta_store_ops, one transaction per operation
 * (or one savepoint of a group's transaction: ns_group_begin).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/rand.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "meta/ns.h"
#include "meta/outcome.h"
#include "strata/errors.h"

#define COMP "meta-ns"
#define DEFAULT_RETRIES 20
/* Bound on the depth of a walk up the tree (rename subtree check). */
#define MAX_DEPTH 4096

#define ST(ns) ((ns)->store)
#define CALL(ns, op, ...) (ST(ns)->ops->op(ST(ns)->impl, __VA_ARGS__))

static void backoff(uint32_t attempt)
{
	/* 1, 2, 4 ... 32 ms plus up to 1 ms of jitter from the clock. */
	uint32_t ms = 1u << (attempt < 5 ? attempt : 5);
	struct timespec ts = { 0, (long)ms * 1000000 + (long)(now_ns() % 1000000) };

	nanosleep(&ts, NULL);
}

typedef int (*txn_fn)(struct ns *ns, void *arg);

/* Runs fn in the open group's transaction, in a savepoint when it writes:
 * kept if fn returns >= 0, undone otherwise (a read has nothing to undo).
 * A savepoint that cannot be set or undone fails the group (ns_group_end
 * then rolls it all back), and so does a lost serialization race (-EBUSY,
 * PostgreSQL): the database dooms the whole transaction then, not the
 * savepoint, so the group's calls are made again by its owner. */
static int run_in_group(struct ns *ns, bool write, txn_fn fn, void *arg)
{
	const struct meta_store_ops *ops = ST(ns)->ops;
	void *impl = ST(ns)->impl;
	int ret, err;

	if (ns->group_err)
		return ns->group_err;
	if (!write) {
		/* A read that lost a race (or whose statement failed) has
		 * aborted the transaction too, with nothing to undo. */
		ret = fn(ns, arg);
		if (ret == -EBUSY || ret == -EIO)
			ns->group_err = ret;
		return ret;
	}
	err = ops->sp_mark(impl);
	if (err)
		goto fail;
	ret = fn(ns, arg);
	if (ret == -EBUSY) {
		err = ret;
		goto fail;
	}
	err = ret >= 0 ? ops->sp_keep(impl) : ops->sp_undo(impl);
	if (err)
		goto fail;
	return ret;
fail:
	ns->group_err = err;
	return err;
}

int ns_group_begin(struct ns *ns)
{
	const struct meta_store_ops *ops = ST(ns)->ops;
	int err;

	if (!ops->sp_mark || !ops->sp_keep || !ops->sp_undo)
		return -EOPNOTSUPP;
	if (ns->group)
		return -EINVAL;
	for (uint32_t attempt = 0;; attempt++) {
		err = ops->begin(ST(ns)->impl, true);
		if (err != -EBUSY || attempt >= ns->max_retries)
			break;
		backoff(attempt);
	}
	if (err)
		return err;
	ns->group = true;
	ns->group_err = 0;
	return 0;
}

int ns_group_end(struct ns *ns, bool commit)
{
	const struct meta_store_ops *ops = ST(ns)->ops;
	int err = ns->group_err;

	if (!ns->group)
		return -EINVAL;
	ns->group = false;
	ns->group_err = 0;
	if (commit && !err)
		err = ops->commit(ST(ns)->impl);
	else if (!err)
		err = -ECANCELED;
	if (err)
		ops->rollback(ST(ns)->impl);
	return err == -ECANCELED && !commit ? 0 : err;
}

/* Runs fn in one transaction; commits if it returns >= 0 (its value is
 * returned), rolls back otherwise. -EBUSY restarts the whole transaction.
 * Inside a group (ns_group_begin), fn runs in the group's transaction. */
static int run_txn(struct ns *ns, bool write, txn_fn fn, void *arg)
{
	const struct meta_store_ops *ops = ST(ns)->ops;
	void *impl = ST(ns)->impl;
	int ret;

	if (ns->group)
		return run_in_group(ns, write, fn, arg);
	for (uint32_t attempt = 0;; attempt++) {
		ret = ops->begin(impl, write);
		if (ret == 0) {
			ret = fn(ns, arg);
			if (ret >= 0) {
				int err = ops->commit(impl);

				if (err)
					ret = err;
			}
			if (ret < 0)
				ops->rollback(impl);
		}
		if (ret != -EBUSY || attempt >= ns->max_retries)
			break;
		backoff(attempt);
	}
	if (ret == -EBUSY)
		log_warn(COMP, "database stayed locked through %u retries; the metadata store"
			 " is overloaded", ns->max_retries);
	return ret;
}

/* ---- request ids (ns.h, "Request ids") ---- */

void ns_request(struct ns *ns, struct ns_reqid id)
{
	ns->req = id;
}

/* The id set for the next deduplicated call, cleared: every such call
 * takes it first, whatever becomes of the call. */
static struct ns_reqid take_req(struct ns *ns)
{
	struct ns_reqid id = ns->req;

	ns->req.client = ns->req.seq = 0;
	return id;
}

/* A deduplicated call: fn with its outputs out and tr (each may be NULL). */
struct req_args {
	struct ns_reqid id;
	txn_fn fn;
	void *arg;
	struct meta_inode *out;
	struct ns_trunc *tr;
};

/* In the call's transaction: the recorded outcome of its id, or fn
 * applied and its outcome recorded with it. */
static int do_req(struct ns *ns, void *a)
{
	struct req_args *r = a;
	struct meta_inode in;
	struct ns_trunc tr;
	struct meta_req rec;
	int ret, err;

	err = CALL(ns, req_get, r->id.client, r->id.seq, &rec);
	if (!err) {
		err = ns_outcome_decode(&rec, &in, &tr);
		if (err)
			return err;
		if (r->out)
			*r->out = in;
		if (r->tr)
			*r->tr = tr;
		__atomic_add_fetch(&ns->replays, 1, __ATOMIC_RELAXED);	/* metrics read it */
		return rec.ret;
	}
	if (err != -ENOENT)
		return err;
	ret = r->fn(ns, r->arg);
	if (ret < 0)
		return ret;
	memset(&in, 0, sizeof(in));
	memset(&tr, 0, sizeof(tr));
	memset(&rec, 0, sizeof(rec));
	rec.client = r->id.client;
	rec.seq = r->id.seq;
	rec.at_ms = now_ns() / 1000000;
	rec.ret = ret;
	ns_outcome_encode(&rec, r->out ? r->out : &in, r->tr ? r->tr : &tr);
	err = CALL(ns, req_put, &rec);
	/* Recorded already (SQLite: by an earlier transaction this one did
	 * not see, impossible under its write lock): answer from it. */
	return err == -EEXIST ? -EBUSY : err ? err : ret;
}

/* Runs fn as a write transaction, under request id id when it has one
 * (client != 0). */
static int run_req(struct ns *ns, struct ns_reqid id, txn_fn fn, void *arg,
		   struct meta_inode *out, struct ns_trunc *tr)
{
	struct req_args r = { id, fn, arg, out, tr };

	if (!id.client)
		return run_txn(ns, true, fn, arg);
	return run_txn(ns, true, do_req, &r);
}

static int do_req_prune(struct ns *ns, void *a)
{
	const int64_t *bounds = a;

	return CALL(ns, req_prune, bounds[0], (uint32_t)bounds[1]);
}

int ns_request_prune(struct ns *ns, int64_t before_ms, uint32_t max)
{
	int64_t bounds[2] = { before_ms, max };

	return run_txn(ns, true, do_req_prune, bounds);
}

static bool is_dir(const struct meta_inode *in) { return S_ISDIR(in->mode); }
static bool is_reg(const struct meta_inode *in) { return S_ISREG(in->mode); }
static bool is_lnk(const struct meta_inode *in) { return S_ISLNK(in->mode); }

static uint64_t div_up(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

int ns_name_check(const char *name, size_t len)
{
	if (!name)
		return -EINVAL;
	if (len > NS_NAME_MAX)
		return -ENAMETOOLONG;
	if (len == 0 || (len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	if (memchr(name, '/', len) || memchr(name, '\0', len))
		return -EINVAL;
	return 0;
}

static int name_check(const char *name)
{
	if (!name)
		return -EINVAL;
	return ns_name_check(name, strnlen(name, NS_NAME_MAX + 1));
}

static int table_len_get(struct ns *ns, uint32_t *out)
{
	int64_t v;
	int err = CALL(ns, counter_get, "table_len", &v);

	if (!err)
		*out = (uint32_t)v;
	return err;
}

/* The layout a new file in a directory with layout dir receives (seed aside):
 * zero table_len/stripe follow the current chain table of length cur. */
static void layout_resolve(const struct file_layout *dir, uint32_t cur, struct file_layout *out)
{
	uint32_t tl = dir->table_len;

	if (!tl || (cur && tl > cur))
		tl = cur;
	out->chunk_size = dir->chunk_size;
	out->table_len = tl;
	if (dir->stripe)
		out->stripe = dir->stripe < tl ? dir->stripe : tl;
	else
		out->stripe = tl < NS_STRIPE_DEFAULT_MAX ? tl : NS_STRIPE_DEFAULT_MAX;
	if (out->stripe > LAYOUT_MAX_STRIPE)
		out->stripe = LAYOUT_MAX_STRIPE;
	out->seed = 0;
}

void ns_set_space(struct ns *ns, bool tight, bool (*make_room)(void *arg), void *arg)
{
	ns->tight = tight;
	ns->make_room = make_room;
	ns->room_arg = arg;
}

void ns_set_full_chains(struct ns *ns, const uint64_t *bits, uint32_t table_len,
			uint32_t nfull)
{
	ns->full = bits;
	ns->full_len = bits ? table_len : 0;
	ns->nfull = bits ? nfull : 0;
}

static bool chain_full(const struct ns *ns, uint32_t idx)
{
	return ns->full[idx / 64] >> (idx % 64) & 1;
}

/* Whether every chain of l is free of full members. */
static bool layout_has_room(const struct ns *ns, const struct file_layout *l)
{
	for (uint32_t i = 0; i < l->stripe; i++)
		if (chain_full(ns, layout_chain_index(l, i)))
			return false;
	return true;
}

/* ns_set_full_chains: another seed for l (a new file's), whose chains all
 * have room; fewer chains when no seed tried finds as many; one chain with
 * room, found directly, at worst. */
#define PLACE_SEEDS 64
static void place_around_full(const struct ns *ns, struct file_layout *l)
{
	uint32_t room, start;
	struct file_layout t = *l;

	if (!ns->nfull || ns->full_len != l->table_len || ns->nfull >= l->table_len ||
	    layout_has_room(ns, l))
		return;
	room = l->table_len - ns->nfull;
	if (t.stripe > room)
		t.stripe = room;
	for (; t.stripe > 1; t.stripe /= 2) {
		t.seed = l->seed;
		for (int k = 0; k < PLACE_SEEDS; k++) {
			t.seed = splitmix64(t.seed ^ 0x66756c6cull);
			if (layout_has_room(ns, &t)) {
				*l = t;
				return;
			}
		}
	}
	/* One chain: the first with room from a point the file picks. */
	start = (uint32_t)(l->seed % l->table_len);
	for (uint32_t k = 0; k < l->table_len; k++) {
		uint32_t idx = (start + k) % l->table_len;

		if (!chain_full(ns, idx) &&
		    layout_for_chain(l->table_len, idx, l->chunk_size, &t) == 0) {
			*l = t;
			return;
		}
	}
}

/* Reads an inode for output: directory layouts are reported resolved. */
static int inode_out(struct ns *ns, const struct meta_inode *in, struct meta_inode *out)
{
	uint32_t cur;
	int err;

	if (!out)
		return 0;
	*out = *in;
	if (!is_dir(in))
		return 0;
	err = table_len_get(ns, &cur);
	if (!err)
		layout_resolve(&in->layout, cur, &out->layout);
	return err;
}

/* Whether in is the inode r names (gen 0: any generation). */
static bool gen_ok(struct ns_ref r, const struct meta_inode *in)
{
	return !r.gen || r.gen == in->gen;
}

/* Loads the inode r names: -ENOENT when its number is free and r takes
 * any generation, -ESTALE when r names a generation that is not there. */
static int load(struct ns *ns, struct ns_ref r, struct meta_inode *out)
{
	int err = CALL(ns, get_inode, r.ino, out);

	if ((err == -ENOENT && r.gen) || (!err && !gen_ok(r, out)))
		return -ESTALE;
	return err;
}

/* Loads directory r: as load(), or -ENOTDIR. */
static int get_dir(struct ns *ns, struct ns_ref r, struct meta_inode *out)
{
	int err = load(ns, r, out);

	if (!err && !is_dir(out))
		err = -ENOTDIR;
	return err;
}

/* 1 if dir has no entries, 0 if it has, or an error. */
static int stop_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	(void)arg; (void)name; (void)ino; (void)type;
	return 1;
}

static int dir_empty(struct ns *ns, uint64_t dir)
{
	int ret = CALL(ns, list_dentries, dir, NULL, 1, stop_cb, NULL);

	if (ret < 0)
		return ret;
	return ret == 0;
}

/* ---- quota accounting ---- */

/*
 * Quotas (docs/namespace.md, "Quotas"). A quota root's row holds its
 * limits and the usage of the tree below it: bytes of regular files and
 * inodes, the root itself not counted. Every operation that changes usage
 * charges each quota root on the parent chain of the directory where the
 * change happens, in its own transaction, so usage never drifts from the
 * tree; an increase that would pass a limit fails the operation with
 * -EDQUOT, and the rollback undoes what was charged before it.
 */

/* Above this many entries a subtree walk reads a directory in pages. */
#define USAGE_PAGE 128u

/* Whether any quota exists: a namespace without one walks no chain. */
static int quotas_exist(struct ns *ns, bool *out)
{
	int64_t n;
	int err = CALL(ns, counter_get, "quotas", &n);

	*out = !err && n > 0;
	return err;
}

/* Applies signed deltas to q; -EDQUOT when an increase passes a limit
 * (reaching it exactly is allowed). */
static int quota_apply(struct meta_quota *q, int64_t bytes, int64_t inodes)
{
	uint64_t b = q->bytes + (uint64_t)bytes, i = q->inodes + (uint64_t)inodes;

	if (bytes > 0 && q->max_bytes && (b > q->max_bytes || b < q->bytes))
		return -EDQUOT;
	if (inodes > 0 && q->max_inodes && (i > q->max_inodes || i < q->inodes))
		return -EDQUOT;
	/* Usage below zero would be a bookkeeping bug: keep 0, say so. */
	if ((bytes < 0 && b > q->bytes) || (inodes < 0 && i > q->inodes)) {
		log_error(COMP, "quota of directory %llu would fall below zero; kept at 0",
			  (unsigned long long)q->ino);
		if (bytes < 0 && b > q->bytes)
			b = 0;
		if (inodes < 0 && i > q->inodes)
			i = 0;
	}
	q->bytes = b;
	q->inodes = i;
	return 0;
}

/*
 * Charges (bytes, inodes) to every quota root from directory dir up to the
 * root, dir included, stopping at stop (not charged; 0: go to the root).
 */
static int quota_charge(struct ns *ns, uint64_t dir, uint64_t stop, int64_t bytes,
			int64_t inodes)
{
	struct meta_inode in;
	struct meta_quota q;
	bool any;
	int err;

	if (!bytes && !inodes)
		return 0;
	err = quotas_exist(ns, &any);
	if (err || !any)
		return err;
	for (int depth = 0; depth < MAX_DEPTH; depth++) {
		if (dir == stop)
			return 0;
		err = CALL(ns, get_quota, dir, &q);
		if (!err) {
			err = quota_apply(&q, bytes, inodes);
			if (!err)
				err = CALL(ns, put_quota, &q);
		}
		if (err && err != -ENOENT)
			return err;
		if (dir == NS_ROOT_INO)
			return 0;
		err = CALL(ns, get_inode, dir, &in);
		if (err)
			return err == -ENOENT ? -EIO : err;
		dir = in.parent;
	}
	log_error(COMP, "directory %llu is deeper than %d levels or in a cycle",
		  (unsigned long long)dir, MAX_DEPTH);
	return -EIO;
}

/* Drops the quota of directory ino, if it has one (the directory goes). */
static int quota_forget(struct ns *ns, uint64_t ino)
{
	bool any;
	int err = quotas_exist(ns, &any);

	if (err || !any)
		return err;
	err = CALL(ns, del_quota, ino);
	if (err == -ENOENT)
		return 0;
	return err ? err : CALL(ns, counter_add, "quotas", -1);
}

struct usage_page {
	uint64_t ino[USAGE_PAGE];
	uint32_t type[USAGE_PAGE];
	uint32_t n;
	char last[NS_NAME_MAX + 1];
};

static int usage_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct usage_page *pg = arg;

	pg->ino[pg->n] = ino;
	pg->type[pg->n] = type;
	pg->n++;
	snprintf(pg->last, sizeof(pg->last), "%s", name);
	return 0;
}

/*
 * Adds the usage of the tree below directory dir (dir excluded) to *bytes
 * and *inodes, walking it. A page of entries is copied out before any of
 * them is read: the listing's statement cannot run nested in itself.
 */
static int subtree_usage(struct ns *ns, uint64_t dir, uint64_t *bytes, uint64_t *inodes)
{
	struct usage_page *pg = malloc(sizeof(*pg));
	uint64_t *stack = NULL;
	size_t n = 0, cap = 0;
	struct meta_inode in;
	int err = 0;

	if (!pg)
		return -ENOMEM;
	for (uint64_t d = dir;; d = stack[--n]) {
		pg->last[0] = '\0';
		do {
			pg->n = 0;
			err = CALL(ns, list_dentries, d, pg->last, USAGE_PAGE, usage_cb, pg);
			if (err < 0)
				goto out;
			err = 0;
			for (uint32_t i = 0; i < pg->n; i++) {
				(*inodes)++;
				if (S_ISREG(pg->type[i])) {
					err = CALL(ns, get_inode, pg->ino[i], &in);
					if (err)
						goto out;
					*bytes += in.size;
				} else if (S_ISDIR(pg->type[i])) {
					if (n == cap) {
						size_t c = cap ? 2 * cap : 64;
						uint64_t *p = realloc(stack, c * sizeof(*p));

						if (!p) {
							err = -ENOMEM;
							goto out;
						}
						stack = p;
						cap = c;
					}
					stack[n++] = pg->ino[i];
				}
			}
		} while (pg->n == USAGE_PAGE);
		if (!n)
			break;
	}
out:
	if (err == -ENOENT)
		err = -EIO;	/* an entry whose inode is gone */
	free(stack);
	free(pg);
	return err;
}

/* What inode in holds against a quota: a file its size, every inode 1;
 * a directory its whole tree too (read from its own quota if it has one,
 * else walked). */
static int inode_usage(struct ns *ns, const struct meta_inode *in, uint64_t *bytes,
		       uint64_t *inodes)
{
	struct meta_quota q;
	int err;

	*bytes = is_reg(in) ? in->size : 0;
	*inodes = 1;
	if (!is_dir(in))
		return 0;
	err = CALL(ns, get_quota, in->ino, &q);
	if (!err) {
		*bytes += q.bytes;
		*inodes += q.inodes;
		return 0;
	}
	return err == -ENOENT ? subtree_usage(ns, in->ino, bytes, inodes) : err;
}

/* The directories from dir up to the root (malloc'd into *out, dir first,
 * the root last). Returns the count or an error. */
static int chain_of(struct ns *ns, uint64_t dir, uint64_t **out)
{
	uint64_t *a = malloc(MAX_DEPTH * sizeof(*a));
	struct meta_inode in;
	int n = 0, err;

	if (!a)
		return -ENOMEM;
	while (n < MAX_DEPTH) {
		a[n++] = dir;
		if (dir == NS_ROOT_INO) {
			*out = a;
			return n;
		}
		err = CALL(ns, get_inode, dir, &in);
		if (err) {
			free(a);
			return err == -ENOENT ? -EIO : err;
		}
		dir = in.parent;
	}
	free(a);
	return -EIO;
}

/* The deepest directory both a and b lie under (or are). */
static int common_ancestor(struct ns *ns, uint64_t a, uint64_t b, uint64_t *out)
{
	uint64_t *ca, *cb;
	int na, nb, i, j;

	if (a == b) {
		*out = a;
		return 0;
	}
	na = chain_of(ns, a, &ca);
	if (na < 0)
		return na;
	nb = chain_of(ns, b, &cb);
	if (nb < 0) {
		free(ca);
		return nb;
	}
	for (i = na - 1, j = nb - 1; i >= 0 && j >= 0 && ca[i] == cb[j]; i--, j--)
		;
	*out = ca[i + 1];
	free(ca);
	free(cb);
	return 0;
}

/* Whether a quota root lies on the chain from dir up to stop (excluded). */
static int chain_has_quota(struct ns *ns, uint64_t dir, uint64_t stop, bool *out)
{
	struct meta_inode in;
	struct meta_quota q;
	int err;

	*out = false;
	for (int depth = 0; depth < MAX_DEPTH && dir != stop; depth++) {
		err = CALL(ns, get_quota, dir, &q);
		if (!err) {
			*out = true;
			return 0;
		}
		if (err != -ENOENT)
			return err;
		if (dir == NS_ROOT_INO)
			return 0;
		err = CALL(ns, get_inode, dir, &in);
		if (err)
			return err == -ENOENT ? -EIO : err;
		dir = in.parent;
	}
	return 0;
}

/* Whether directories a and b charge the same quota roots (none lies
 * between either and their common ancestor, *top when top is not NULL):
 * a rename between them moves no usage, and a file may have names in both
 * only then, so that its usage is charged to one set of roots whichever
 * name it is reached by. */
static int same_quota_domain(struct ns *ns, uint64_t a, uint64_t b, uint64_t *top, bool *out)
{
	uint64_t t = a;
	bool any, qa = false, qb = false;
	int err = 0;

	*out = true;
	if (a != b && !(err = quotas_exist(ns, &any)) && any) {
		err = common_ancestor(ns, a, b, &t);
		if (!err)
			err = chain_has_quota(ns, a, t, &qa);
		if (!err)
			err = chain_has_quota(ns, b, t, &qb);
		if (!err)
			*out = !qa && !qb;
	}
	if (top)
		*top = t;
	return err;
}

/*
 * A rename moves src from directory from to directory to (and, for an
 * exchange, dst from to to from). Quota roots above both are not charged
 * (the common ancestor and up). Every decrease comes first, so a move
 * within a full quota root's tree never fails on the way.
 */
static int quota_move(struct ns *ns, uint64_t from, uint64_t to, const struct meta_inode *src,
		      const struct meta_inode *dst)
{
	uint64_t top, sb = 0, si = 0, db = 0, di = 0;
	bool same;
	int err = same_quota_domain(ns, from, to, &top, &same);

	if (err || same)
		return err;
	err = inode_usage(ns, src, &sb, &si);
	if (!err && dst)
		err = inode_usage(ns, dst, &db, &di);
	if (!err)
		err = quota_charge(ns, from, top, -(int64_t)sb, -(int64_t)si);
	if (!err && dst)
		err = quota_charge(ns, to, top, -(int64_t)db, -(int64_t)di);
	if (!err)
		err = quota_charge(ns, to, top, (int64_t)sb, (int64_t)si);
	if (!err && dst)
		err = quota_charge(ns, from, top, (int64_t)db, (int64_t)di);
	return err;
}

/* Deletes an inode whose last entry is gone; queues a file's chunks. */
/* The nearest quota root at or above dir (the root when none): where a
 * file with several names is charged once the name in its parent goes
 * (every name lies in one quota domain, same_quota_domain()). */
static int quota_domain(struct ns *ns, uint64_t dir, uint64_t *out)
{
	struct meta_inode in;
	struct meta_quota q;
	bool any;
	int err = quotas_exist(ns, &any);

	*out = NS_ROOT_INO;
	if (err || !any)
		return err;
	for (int depth = 0; depth < MAX_DEPTH && dir != NS_ROOT_INO; depth++) {
		err = CALL(ns, get_quota, dir, &q);
		if (!err) {
			*out = dir;
			return 0;
		}
		if (err != -ENOENT)
			return err;
		err = CALL(ns, get_inode, dir, &in);
		if (err)
			return err == -ENOENT ? -EIO : err;
		dir = in.parent;
	}
	return 0;
}

/* Reads the inline bytes of in into buf (cap bytes; NULL, 0: only the
 * length): their length, or -ENOENT when in is not an inline file. Only
 * a regular file of 1..NS_INLINE_MAX bytes may be one. */
static int inline_get(struct ns *ns, const struct meta_inode *in, uint8_t *buf, size_t cap)
{
	if (!is_reg(in) || in->size == 0 || in->size > NS_INLINE_MAX)
		return -ENOENT;
	return CALL(ns, get_inline, in->ino, buf, cap);
}

static int drop_inode(struct ns *ns, const struct meta_inode *in)
{
	/* An inline file has no chunks to queue: a chunk 0 a conversion cut
	 * short by a crash may have left is the orphan reconciler's once
	 * the inode is gone. */
	int inl = inline_get(ns, in, NULL, 0);
	int err = inl < 0 && inl != -ENOENT ? inl : CALL(ns, del_inode, in->ino);

	if (!err)
		err = CALL(ns, counter_add, "inodes", -1);
	if (!err && is_dir(in))
		err = quota_forget(ns, in->ino);
	if (!err && is_reg(in) && in->size && inl < 0) {
		err = CALL(ns, counter_add, "bytes", -(int64_t)in->size);
		if (!err)
			err = CALL(ns, gc_push, in->ino, 0, div_up(in->size, in->layout.chunk_size),
				   &in->layout);
	}
	return err;
}

/* The name of non-directory in in directory dir is gone (the caller
 * deleted the entry): the inode goes with its last name (its usage
 * leaves dir's quota roots), else it loses a link. */
static int drop_link(struct ns *ns, uint64_t dir, struct meta_inode *in, int64_t now)
{
	int err;

	if (in->nlink <= 1 || is_dir(in)) {
		err = quota_charge(ns, dir, 0, is_reg(in) ? -(int64_t)in->size : 0, -1);
		return err ? err : drop_inode(ns, in);
	}
	in->nlink--;
	in->ctime_ns = now;
	if (in->parent == dir) {
		err = quota_domain(ns, dir, &in->parent);
		if (err)
			return err;
	}
	return CALL(ns, put_inode, in);
}

static void touch_dir(struct meta_inode *dir, int64_t now)
{
	dir->mtime_ns = now;
	dir->ctime_ns = now;
}

/* ---- init ---- */

struct init_args {
	uint32_t table_len;
};

static int do_init(struct ns *ns, void *a)
{
	struct init_args *args = a;
	struct meta_inode root;
	int64_t now;
	int err;

	if (args->table_len) {
		err = CALL(ns, counter_set, "table_len", args->table_len);
		if (err)
			return err;
	}
	err = CALL(ns, get_inode, NS_ROOT_INO, &root);
	if (err != -ENOENT)
		return err;
	now = now_ns();
	memset(&root, 0, sizeof(root));
	root.ino = NS_ROOT_INO;
	root.gen = NS_ROOT_GEN;
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.parent = NS_ROOT_INO;
	root.atime_ns = root.mtime_ns = root.ctime_ns = now;
	root.layout.chunk_size = NS_CHUNK_SIZE_DEFAULT;
	err = CALL(ns, put_inode, &root);
	if (!err)
		err = CALL(ns, counter_add, "inodes", 1);
	if (!err)
		log_info(COMP, "created the root directory of a new namespace");
	return err;
}

int ns_init(struct ns *ns, struct meta_store *store, uint32_t table_len)
{
	struct init_args a = { table_len };

	ns->store = store;
	ns->max_retries = DEFAULT_RETRIES;
	ns->group = false;
	ns->group_err = 0;
	ns->full = NULL;
	ns->full_len = ns->nfull = 0;
	ns->tight = false;
	ns->make_room = NULL;
	ns->room_arg = NULL;
	if (!store || !store->ops)
		return -EINVAL;
	return run_txn(ns, true, do_init, &a);
}

void ns_release(struct ns *ns)
{
	ns->store = NULL;
}

int ns_set_table_len(struct ns *ns, uint32_t table_len)
{
	struct init_args a = { table_len };

	if (!table_len)
		return -EINVAL;
	return run_txn(ns, true, do_init, &a);
}

/* ---- lookup, getattr ---- */

struct lookup_args {
	struct ns_ref parent, ino;
	const char *name;
	struct meta_inode *out;
};

static int do_lookup(struct ns *ns, void *a)
{
	struct lookup_args *args = a;
	struct meta_inode dir, in;
	uint64_t ino;
	int err = get_dir(ns, args->parent, &dir);

	if (err)
		return err;
	if (!strcmp(args->name, "."))
		ino = dir.ino;
	else if (!strcmp(args->name, ".."))
		ino = dir.parent;
	else if ((err = CALL(ns, get_dentry, dir.ino, args->name, &ino, NULL)))
		return err;
	err = CALL(ns, get_inode, ino, &in);
	if (err == -ENOENT) {
		log_error(COMP, "entry '%s' in directory %llu names missing inode %llu",
			  args->name, (unsigned long long)dir.ino, (unsigned long long)ino);
		err = -EIO;
	}
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_lookup(struct ns *ns, struct ns_ref parent, const char *name, struct meta_inode *out)
{
	struct lookup_args a = { .parent = parent, .name = name, .out = out };
	size_t len;

	if (!name)
		return -EINVAL;
	len = strnlen(name, NS_NAME_MAX + 1);
	if (len > NS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!len || strchr(name, '/'))
		return -EINVAL;
	return run_txn(ns, false, do_lookup, &a);
}

static int do_getattr(struct ns *ns, void *a)
{
	struct lookup_args *args = a;
	struct meta_inode in;
	int err = load(ns, args->ino, &in);

	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_getattr(struct ns *ns, struct ns_ref ino, struct meta_inode *out)
{
	struct lookup_args a = { .ino = ino, .out = out };

	return run_txn(ns, false, do_getattr, &a);
}

/* ---- create, mkdir, symlink ---- */

struct create_args {
	struct ns_ref parent;
	const char *name;
	uint32_t mode, uid, gid;
	bool exclusive;
	const char *target;
	struct meta_inode *out;
};

static int do_create(struct ns *ns, void *a)
{
	struct create_args *args = a;
	struct meta_inode dir, in;
	uint32_t type = args->mode & S_IFMT, cur;
	uint64_t ino;
	int64_t now;
	int err = get_dir(ns, args->parent, &dir);

	if (err)
		return err;
	err = CALL(ns, get_dentry, dir.ino, args->name, &ino, NULL);
	if (!err) {
		if (type != S_IFREG || args->exclusive)
			return -EEXIST;
		err = CALL(ns, get_inode, ino, &in);
		if (err)
			return err == -ENOENT ? -EIO : err;
		if (is_dir(&in))
			return -EISDIR;
		if (!is_reg(&in))
			return -EEXIST;
		err = inode_out(ns, &in, args->out);
		return err ? err : 0;
	}
	if (err != -ENOENT)
		return err;
	err = quota_charge(ns, dir.ino, 0, 0, 1);
	if (err)
		return err;

	err = table_len_get(ns, &cur);
	if (err)
		return err;
	now = now_ns();
	memset(&in, 0, sizeof(in));
	in.mode = args->mode;
	in.uid = args->uid;
	in.gid = args->gid;
	in.parent = dir.ino;
	in.atime_ns = in.mtime_ns = in.ctime_ns = now;
	if (type == S_IFREG) {
		layout_resolve(&dir.layout, cur, &in.layout);
		if (!in.layout.table_len) {
			log_warn(COMP, "cannot create file '%s': no chain table yet; register"
				 " storage targets first", args->name);
			return STRATA_EUNAVAIL;
		}
		in.nlink = 1;
	} else if (type == S_IFDIR) {
		in.layout = dir.layout;
		in.layout.seed = 0;
		in.nlink = 2;
	} else if (type == S_IFLNK) {
		in.nlink = 1;
		in.size = strlen(args->target);
	} else {
		in.nlink = 1;	/* a fifo or a socket: a name, no data */
	}
	/* A new inode on a tight disk: refused, so that removals keep the
	 * room left (ns_set_space). */
	if (ns->tight)
		return -ENOSPC;
	err = CALL(ns, alloc_ino, &in.ino, &in.gen);
	if (err)
		return err;
	if (type == S_IFREG) {
		in.layout.seed = splitmix64(in.ino ^ 0x5354524154415345ull);
		place_around_full(ns, &in.layout);
	}
	err = CALL(ns, put_inode, &in);
	if (!err && type == S_IFLNK)
		err = CALL(ns, put_link, in.ino, args->target, in.size);
	if (!err)
		err = CALL(ns, put_dentry, dir.ino, args->name, in.ino, type);
	if (!err)
		err = CALL(ns, counter_add, "inodes", 1);
	if (err)
		return err;
	touch_dir(&dir, now);
	if (type == S_IFDIR)
		dir.nlink++;
	err = CALL(ns, put_inode, &dir);
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err ? err : 1;
}

int ns_create(struct ns *ns, struct ns_ref parent, const char *name, uint32_t mode,
	      uint32_t uid, uint32_t gid, bool exclusive, struct meta_inode *out)
{
	struct create_args a = { parent, name, S_IFREG | (mode & 07777), uid, gid,
				 exclusive, NULL, out };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);

	return err ? err : run_req(ns, id, do_create, &a, out, NULL);
}

int ns_mkdir(struct ns *ns, struct ns_ref parent, const char *name, uint32_t mode,
	     uint32_t uid, uint32_t gid, struct meta_inode *out)
{
	struct create_args a = { parent, name, S_IFDIR | (mode & 07777), uid, gid,
				 true, NULL, out };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);

	if (!err)
		err = run_req(ns, id, do_create, &a, out, NULL);
	return err < 0 ? err : 0;
}

int ns_symlink(struct ns *ns, struct ns_ref parent, const char *name, const char *target,
	       uint32_t uid, uint32_t gid, struct meta_inode *out)
{
	struct create_args a = { parent, name, S_IFLNK | 0777, uid, gid, true, target, out };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);
	size_t len;

	if (err)
		return err;
	if (!target)
		return -EINVAL;
	len = strnlen(target, NS_PATH_MAX);
	if (!len)
		return -ENOENT;
	if (len >= NS_PATH_MAX)
		return -ENAMETOOLONG;
	err = run_req(ns, id, do_create, &a, out, NULL);
	return err < 0 ? err : 0;
}

int ns_mknod(struct ns *ns, struct ns_ref parent, const char *name, uint32_t mode,
	     uint32_t uid, uint32_t gid, struct meta_inode *out)
{
	struct create_args a = { parent, name, mode & (S_IFMT | 07777), uid, gid,
				 true, NULL, out };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);

	if (err)
		return err;
	if ((mode & S_IFMT) == S_IFCHR || (mode & S_IFMT) == S_IFBLK)
		return -EPERM;
	if ((mode & S_IFMT) != S_IFIFO && (mode & S_IFMT) != S_IFSOCK)
		return -EINVAL;
	err = run_req(ns, id, do_create, &a, out, NULL);
	return err < 0 ? err : 0;
}

struct link_args {
	struct ns_ref ino, parent;
	const char *name;
	struct meta_inode *out;
};

static int do_link(struct ns *ns, void *a)
{
	struct link_args *args = a;
	struct meta_inode dir, in;
	uint64_t have;
	bool same;
	int64_t now;
	int err = get_dir(ns, args->parent, &dir);

	if (!err)
		err = load(ns, args->ino, &in);
	if (err)
		return err;
	if (is_dir(&in))
		return -EPERM;
	if (in.nlink >= NS_LINK_MAX)
		return -EMLINK;
	err = CALL(ns, get_dentry, dir.ino, args->name, &have, NULL);
	if (!err)
		return -EEXIST;
	if (err != -ENOENT)
		return err;
	err = same_quota_domain(ns, in.parent, dir.ino, NULL, &same);
	if (err)
		return err;
	if (!same)
		return -EXDEV;
	if (ns->tight)
		return -ENOSPC;	/* a new name on a tight disk (ns_set_space) */
	now = now_ns();
	in.nlink++;
	in.ctime_ns = now;
	err = CALL(ns, put_dentry, dir.ino, args->name, in.ino, in.mode & S_IFMT);
	if (!err)
		err = CALL(ns, put_inode, &in);
	if (err)
		return err;
	touch_dir(&dir, now);
	err = CALL(ns, put_inode, &dir);
	return err ? err : inode_out(ns, &in, args->out);
}

int ns_link(struct ns *ns, struct ns_ref ino, struct ns_ref parent, const char *name,
	    struct meta_inode *out)
{
	struct link_args a = { ino, parent, name, out };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);

	return err ? err : run_req(ns, id, do_link, &a, out, NULL);
}

struct readlink_args {
	struct ns_ref ino;
	char *buf;
	size_t cap;
};

static int do_readlink(struct ns *ns, void *a)
{
	struct readlink_args *args = a;
	struct meta_inode in;
	int err = load(ns, args->ino, &in);

	if (err)
		return err;
	if (!is_lnk(&in))
		return -EINVAL;
	return CALL(ns, get_link, in.ino, args->buf, args->cap);
}

int ns_readlink(struct ns *ns, struct ns_ref ino, char *buf, size_t cap)
{
	struct readlink_args a = { ino, buf, cap };

	return run_txn(ns, false, do_readlink, &a);
}

/* ---- unlink, rmdir ---- */

struct remove_args {
	struct ns_ref parent;
	const char *name;
	bool dir;
};

static int do_remove(struct ns *ns, void *a)
{
	struct remove_args *args = a;
	struct meta_inode dir, in;
	uint64_t ino;
	int err = get_dir(ns, args->parent, &dir);

	if (err)
		return err;
	err = CALL(ns, get_dentry, dir.ino, args->name, &ino, NULL);
	if (err)
		return err;
	err = CALL(ns, get_inode, ino, &in);
	if (err)
		return err == -ENOENT ? -EIO : err;
	if (args->dir && !is_dir(&in))
		return -ENOTDIR;
	if (!args->dir && is_dir(&in))
		return -EISDIR;
	if (args->dir) {
		err = dir_empty(ns, in.ino);
		if (err <= 0)
			return err < 0 ? err : -ENOTEMPTY;
		dir.nlink--;
	}
	err = CALL(ns, del_dentry, dir.ino, args->name);
	if (!err)
		err = drop_link(ns, dir.ino, &in, now_ns());
	if (err)
		return err;
	touch_dir(&dir, now_ns());
	return CALL(ns, put_inode, &dir);
}

/* A removal, tried once more when it failed for space and the reserve
 * was given back for it (ns_set_space). */
static int run_removal(struct ns *ns, struct ns_reqid id, struct remove_args *a)
{
	int err = run_req(ns, id, do_remove, a, NULL, NULL);

	if (err == -ENOSPC && ns->make_room && ns->make_room(ns->room_arg))
		err = run_req(ns, id, do_remove, a, NULL, NULL);
	return err;
}

int ns_unlink(struct ns *ns, struct ns_ref parent, const char *name)
{
	struct remove_args a = { parent, name, false };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);

	return err ? err : run_removal(ns, id, &a);
}

int ns_rmdir(struct ns *ns, struct ns_ref parent, const char *name)
{
	struct remove_args a = { parent, name, true };
	struct ns_reqid id = take_req(ns);
	int err = name_check(name);

	return err ? err : run_removal(ns, id, &a);
}

/* ---- rename ---- */

struct rename_args {
	struct ns_ref sp, dp;
	const char *sn, *dn;
	unsigned flags;
};

/* 1 if anc is ino or one of its ancestors, 0 if not, or an error. */
static int is_ancestor(struct ns *ns, uint64_t anc, uint64_t ino)
{
	struct meta_inode in;

	for (int depth = 0; depth < MAX_DEPTH; depth++) {
		int err;

		if (ino == anc)
			return 1;
		if (ino == NS_ROOT_INO)
			return 0;
		err = CALL(ns, get_inode, ino, &in);
		if (err)
			return err == -ENOENT ? -EIO : err;
		ino = in.parent;
	}
	log_error(COMP, "directory %llu is deeper than %d levels or in a cycle",
		  (unsigned long long)ino, MAX_DEPTH);
	return -EIO;
}

/* Moves directory-ness accounting when dir-type inode in leaves `from`
 * for `to` (both loaded; may be the same object). */
static void move_nlink(const struct meta_inode *in, struct meta_inode *from,
		       struct meta_inode *to)
{
	if (is_dir(in) && from != to) {
		from->nlink--;
		to->nlink++;
	}
}

static int do_rename(struct ns *ns, void *a)
{
	struct rename_args *args = a;
	struct meta_inode spd, dpd_own, *dpd, src, dst;
	bool have_dst, same = args->sp.ino == args->dp.ino;
	uint64_t sino, dino;
	int64_t now;
	int err;

	err = get_dir(ns, args->sp, &spd);
	if (!err && !same)
		err = get_dir(ns, args->dp, &dpd_own);
	if (!err && same && !gen_ok(args->dp, &spd))
		err = -ESTALE;
	if (err)
		return err;
	dpd = same ? &spd : &dpd_own;

	err = CALL(ns, get_dentry, spd.ino, args->sn, &sino, NULL);
	if (!err)
		err = CALL(ns, get_inode, sino, &src);
	if (err)
		return err;
	if (same && !strcmp(args->sn, args->dn))
		return 0; /* to itself: nothing to do, whatever the flags */
	err = CALL(ns, get_dentry, dpd->ino, args->dn, &dino, NULL);
	if (err && err != -ENOENT)
		return err;
	have_dst = !err;
	if (have_dst) {
		err = CALL(ns, get_inode, dino, &dst);
		if (err)
			return err == -ENOENT ? -EIO : err;
	}
	if ((args->flags & NS_RENAME_NOREPLACE) && have_dst)
		return -EEXIST;
	if ((args->flags & NS_RENAME_EXCHANGE) && !have_dst)
		return -ENOENT;

	/* A directory may not move below itself. */
	if (is_dir(&src) && !same) {
		err = is_ancestor(ns, src.ino, dpd->ino);
		if (err)
			return err < 0 ? err : -EINVAL;
	}
	if ((args->flags & NS_RENAME_EXCHANGE) && is_dir(&dst) && !same) {
		err = is_ancestor(ns, dst.ino, spd.ino);
		if (err)
			return err < 0 ? err : -EINVAL;
	}

	/* A file with other names stays in their quota domain. */
	if (!same && ((!is_dir(&src) && src.nlink > 1) ||
		      (have_dst && (args->flags & NS_RENAME_EXCHANGE) && !is_dir(&dst) &&
		       dst.nlink > 1))) {
		bool ok;

		err = same_quota_domain(ns, spd.ino, dpd->ino, NULL, &ok);
		if (err)
			return err;
		if (!ok)
			return -EXDEV;
	}

	now = now_ns();
	if (args->flags & NS_RENAME_EXCHANGE) {
		err = quota_move(ns, spd.ino, dpd->ino, &src, &dst);
		if (!err)
			err = CALL(ns, del_dentry, spd.ino, args->sn);
		if (!err)
			err = CALL(ns, del_dentry, dpd->ino, args->dn);
		if (!err)
			err = CALL(ns, put_dentry, spd.ino, args->sn, dst.ino, dst.mode & S_IFMT);
		if (!err)
			err = CALL(ns, put_dentry, dpd->ino, args->dn, src.ino, src.mode & S_IFMT);
		if (err)
			return err;
		move_nlink(&src, &spd, dpd);
		move_nlink(&dst, dpd, &spd);
		dst.parent = spd.ino;
		dst.ctime_ns = now;
		err = CALL(ns, put_inode, &dst);
		if (err)
			return err;
		goto finish;
	}

	if (have_dst) {
		if (is_dir(&src) && !is_dir(&dst))
			return -ENOTDIR;
		if (!is_dir(&src) && is_dir(&dst))
			return -EISDIR;
		if (is_dir(&dst)) {
			err = dir_empty(ns, dst.ino);
			if (err <= 0)
				return err < 0 ? err : -ENOTEMPTY;
			dpd->nlink--;
		}
		/* The replaced entry's usage is freed first: a file replacing
		 * one of its size fits a full quota. A name of the source
		 * itself (a hard link) is only a name: rename does nothing. */
		if (dst.ino == src.ino)
			return 0;
		err = CALL(ns, del_dentry, dpd->ino, args->dn);
		if (!err)
			err = drop_link(ns, dpd->ino, &dst, now);
		if (err)
			return err;
	}
	err = quota_move(ns, spd.ino, dpd->ino, &src, NULL);
	if (!err)
		err = CALL(ns, del_dentry, spd.ino, args->sn);
	if (!err)
		err = CALL(ns, put_dentry, dpd->ino, args->dn, src.ino, src.mode & S_IFMT);
	if (err)
		return err;
	move_nlink(&src, &spd, dpd);
finish:
	src.parent = dpd->ino;
	src.ctime_ns = now;
	touch_dir(&spd, now);
	touch_dir(dpd, now);
	err = CALL(ns, put_inode, &src);
	if (!err)
		err = CALL(ns, put_inode, &spd);
	if (!err && !same)
		err = CALL(ns, put_inode, dpd);
	return err;
}

int ns_rename(struct ns *ns, struct ns_ref src_parent, const char *src_name,
	      struct ns_ref dst_parent, const char *dst_name, unsigned flags)
{
	struct rename_args a = { src_parent, dst_parent, src_name, dst_name, flags };
	struct ns_reqid id = take_req(ns);
	int err;

	if (flags & ~(NS_RENAME_NOREPLACE | NS_RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & NS_RENAME_NOREPLACE) && (flags & NS_RENAME_EXCHANGE))
		return -EINVAL;
	err = name_check(src_name);
	if (!err)
		err = name_check(dst_name);
	return err ? err : run_req(ns, id, do_rename, &a, NULL, NULL);
}

/* ---- sizes, truncate, setattr, open ---- */

/* Sets the size of file in (loaded, modified in place) to exactly size. */
/* Moves the file's size (and its quota and byte counts) to size. */
static int resize(struct ns *ns, struct meta_inode *in, uint64_t size)
{
	int err = 0;

	if (size != in->size) {
		err = quota_charge(ns, in->parent, 0, (int64_t)size - (int64_t)in->size, 0);
		if (!err)
			err = CALL(ns, counter_add, "bytes", (int64_t)size - (int64_t)in->size);
	}
	if (!err)
		in->size = size;
	return err;
}

/* truncate_inode of an inline file (ns.h, "Inline data"): 1 when in was
 * one (its bytes cut, extended or dropped), 0 when not, or an error. */
static int truncate_inline(struct ns *ns, struct meta_inode *in, uint64_t size,
			   struct ns_trunc *tr)
{
	uint8_t *buf;
	int n, err;

	if (inline_get(ns, in, NULL, 0) < 0)
		return 0;
	if (size > NS_INLINE_MAX)
		return -EMEDIUMTYPE;
	if (size == 0) {
		/* A conversion cut short by a crash may have left chunk 0. */
		err = CALL(ns, del_inline, in->ino);
		if (!err)
			err = CALL(ns, gc_push, in->ino, 0, 1, &in->layout);
		if (!err && tr) {
			tr->gc_from = 0;
			tr->gc_to = 1;
		}
		return err ? err : 1;
	}
	buf = calloc(1, NS_INLINE_MAX);
	if (!buf)
		return -ENOMEM;
	n = CALL(ns, get_inline, in->ino, buf, NS_INLINE_MAX);
	err = n < 0 ? n : CALL(ns, put_inline, in->ino, buf, (size_t)size);
	free(buf);
	return err ? err : 1;
}

static int truncate_inode(struct ns *ns, struct meta_inode *in, uint64_t size,
			  struct ns_trunc *tr)
{
	uint64_t cs = in->layout.chunk_size, old = in->size;
	int err;

	if (is_dir(in))
		return -EISDIR;
	if (!is_reg(in))
		return -EINVAL;
	if (tr) {
		memset(tr, 0, sizeof(*tr));
		tr->layout = in->layout;
	}
	err = truncate_inline(ns, in, size, tr);
	if (err < 0)
		return err;
	if (err == 0 && size < old) {
		uint64_t from = div_up(size, cs), to = div_up(old, cs);

		if (to > from) {
			err = CALL(ns, gc_push, in->ino, from, to, &in->layout);
			if (err)
				return err;
		}
		if (tr) {
			tr->gc_from = from;
			tr->gc_to = to;
			tr->partial = size % cs != 0;
			tr->chunk = tr->partial ? size / cs : 0;
			tr->len = (uint32_t)(size % cs);
		}
	}
	if (size != old) {
		err = quota_charge(ns, in->parent, 0, (int64_t)size - (int64_t)old, 0);
		if (!err)
			err = CALL(ns, counter_add, "bytes", (int64_t)size - (int64_t)old);
		if (err)
			return err;
	}
	in->size = size;
	in->mtime_ns = in->ctime_ns = now_ns();
	return 0;
}

struct attr_args {
	struct ns_ref ino;
	uint32_t mask;
	const struct meta_inode *attrs;
	uint64_t size;
	int64_t mtime;
	int flags;
	struct meta_inode *out;
	struct ns_trunc *tr;
	struct ns_inline *inl;	/* open: the inline bytes, or NULL */
	const uint8_t *data;	/* publish: the bytes (size of them) */
	uint32_t crc;		/* uninline: of the bytes written; publish: guard */
	bool guarded;		/* publish: only if crc is the content's */
};

static int do_setattr(struct ns *ns, void *a)
{
	struct attr_args *args = a;
	const struct meta_inode *at = args->attrs;
	struct meta_inode in;
	int64_t now = now_ns();
	int err = load(ns, args->ino, &in);

	if (err)
		return err;
	if (args->mask & NS_ATTR_SIZE) {
		err = truncate_inode(ns, &in, at->size, args->tr);
		if (err)
			return err;
	}
	if (args->mask & NS_ATTR_MODE)
		in.mode = (in.mode & S_IFMT) | (at->mode & 07777);
	if (args->mask & NS_ATTR_UID)
		in.uid = at->uid;
	if (args->mask & NS_ATTR_GID)
		in.gid = at->gid;
	if (args->mask & NS_ATTR_ATIME)
		in.atime_ns = at->atime_ns;
	if (args->mask & NS_ATTR_ATIME_NOW)
		in.atime_ns = now;
	if (args->mask & NS_ATTR_MTIME)
		in.mtime_ns = at->mtime_ns;
	if (args->mask & NS_ATTR_MTIME_NOW)
		in.mtime_ns = now;
	in.ctime_ns = now;
	err = CALL(ns, put_inode, &in);
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_setattr(struct ns *ns, struct ns_ref ino, uint32_t mask, const struct meta_inode *attrs,
	       struct meta_inode *out, struct ns_trunc *tr)
{
	struct attr_args a = { .ino = ino, .mask = mask, .attrs = attrs, .out = out, .tr = tr };
	struct ns_reqid id = take_req(ns);

	if (!attrs || (mask & ~0xffu))
		return -EINVAL;
	return run_req(ns, id, do_setattr, &a, out, tr);
}

/* Loads r, which must be a regular file (-EISDIR, -EINVAL). */
static int load_file(struct ns *ns, struct ns_ref r, struct meta_inode *in)
{
	int err = load(ns, r, in);

	if (err)
		return err;
	if (is_dir(in))
		return -EISDIR;
	return is_reg(in) ? 0 : -EINVAL;
}

static int do_set_size(struct ns *ns, void *a)
{
	struct attr_args *args = a;
	struct meta_inode in;
	int err = load_file(ns, args->ino, &in);

	if (err)
		return err;
	if (inline_get(ns, &in, NULL, 0) >= 0) {
		/* A writer of chunks closes a file another handle published
		 * inline meanwhile: dropping those bytes would lose them. The
		 * writer merges (reads them, writes them around its own ranges
		 * as chunk 0, converts the file) and calls again. */
		return -EMEDIUMTYPE;
	}
	if (args->size > in.size) {
		err = quota_charge(ns, in.parent, 0, (int64_t)(args->size - in.size), 0);
		if (!err)
			err = CALL(ns, counter_add, "bytes", (int64_t)(args->size - in.size));
		if (err)
			return err;
		in.size = args->size;
	}
	if (args->mtime > 0)
		in.mtime_ns = args->mtime;
	in.ctime_ns = now_ns();
	err = CALL(ns, put_inode, &in);
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_set_size(struct ns *ns, struct ns_ref ino, uint64_t size, int64_t mtime_ns,
		struct meta_inode *out)
{
	struct attr_args a = { .ino = ino, .size = size, .mtime = mtime_ns, .out = out };

	if (size > INT64_MAX)
		return -EFBIG;
	return run_txn(ns, true, do_set_size, &a);
}

static int do_truncate(struct ns *ns, void *a)
{
	struct attr_args *args = a;
	struct meta_inode in;
	int err = load(ns, args->ino, &in);

	if (!err)
		err = truncate_inode(ns, &in, args->size, args->tr);
	if (!err)
		err = CALL(ns, put_inode, &in);
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_truncate(struct ns *ns, struct ns_ref ino, uint64_t size, struct ns_trunc *tr)
{
	struct attr_args a = { .ino = ino, .size = size, .tr = tr };
	struct ns_reqid id = take_req(ns);

	if (size > INT64_MAX)
		return -EFBIG;
	return run_req(ns, id, do_truncate, &a, NULL, tr);
}

static int do_open(struct ns *ns, void *a)
{
	struct attr_args *args = a;
	bool wr = (args->flags & O_ACCMODE) != O_RDONLY;
	struct meta_inode in;
	int err = load(ns, args->ino, &in);

	if (err)
		return err;
	if (is_lnk(&in))
		return -ELOOP;
	if (is_dir(&in) && (wr || (args->flags & O_TRUNC)))
		return -EISDIR;
	if (args->tr)
		memset(args->tr, 0, sizeof(*args->tr));
	if (wr && (args->flags & O_TRUNC) && in.size) {
		err = truncate_inode(ns, &in, 0, args->tr);
		if (!err)
			err = CALL(ns, put_inode, &in);
		if (err)
			return err;
	}
	if (args->inl) {
		int n = inline_get(ns, &in, args->inl->buf, NS_INLINE_MAX);

		if (n < 0 && n != -ENOENT)
			return n;
		if (n > (int)NS_INLINE_MAX || (n >= 0 && (uint64_t)n != in.size)) {
			log_error(COMP, "file %llu: inline data of %d bytes, size %llu: the"
				  " store is inconsistent", (unsigned long long)in.ino, n,
				  (unsigned long long)in.size);
			return -EIO;
		}
		args->inl->has = n >= 0;
		args->inl->len = n >= 0 ? (uint32_t)n : 0;
	}
	return inode_out(ns, &in, args->out);
}

int ns_open(struct ns *ns, struct ns_ref ino, int flags, struct meta_inode *out,
	    struct ns_trunc *tr)
{
	return ns_open_inline(ns, ino, flags, out, tr, NULL);
}

int ns_open_inline(struct ns *ns, struct ns_ref ino, int flags, struct meta_inode *out,
		   struct ns_trunc *tr, struct ns_inline *inl)
{
	struct attr_args a = { .ino = ino, .flags = flags, .out = out, .tr = tr, .inl = inl };
	bool write = (flags & O_ACCMODE) != O_RDONLY && (flags & O_TRUNC);

	if (inl) {
		inl->has = false;
		inl->len = 0;
	}
	return run_txn(ns, write, do_open, &a);
}

static int do_publish(struct ns *ns, void *a)
{
	struct attr_args *args = a;
	struct meta_inode in;
	int err = load_file(ns, args->ino, &in);

	if (err)
		return err;
	if (in.size && inline_get(ns, &in, NULL, 0) < 0)
		return -ENOTEMPTY;	/* chunked content: not ours to replace */
	if (args->guarded) {
		uint32_t crc = 0;

		if (in.size) {
			uint8_t *buf = malloc(NS_INLINE_MAX);
			int n;

			if (!buf)
				return -ENOMEM;
			n = CALL(ns, get_inline, in.ino, buf, NS_INLINE_MAX);
			if (n >= 0)
				crc = crc32c(0, buf, (size_t)n);
			free(buf);
			if (n < 0)
				return n;
		}
		if (crc != args->crc)
			return -EAGAIN;	/* another handle published meanwhile */
	}
	err = args->size ? CALL(ns, put_inline, in.ino, args->data, (size_t)args->size) :
			   CALL(ns, del_inline, in.ino);
	if (!err)
		err = resize(ns, &in, args->size);
	if (err)
		return err;
	in.mtime_ns = args->mtime > 0 ? args->mtime : now_ns();
	in.ctime_ns = now_ns();
	err = CALL(ns, put_inode, &in);
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_publish_inline_if(struct ns *ns, struct ns_ref ino, const uint8_t *data, uint32_t len,
			 const uint32_t *guard, int64_t mtime_ns, struct meta_inode *out)
{
	struct attr_args a = { .ino = ino, .size = len, .mtime = mtime_ns, .out = out,
			       .data = data, .crc = guard ? *guard : 0, .guarded = guard != NULL };

	if (len > NS_INLINE_MAX || (len && !data))
		return -EINVAL;
	return run_txn(ns, true, do_publish, &a);
}

int ns_publish_inline(struct ns *ns, struct ns_ref ino, const uint8_t *data, uint32_t len,
		      int64_t mtime_ns, struct meta_inode *out)
{
	return ns_publish_inline_if(ns, ino, data, len, NULL, mtime_ns, out);
}

static int do_uninline(struct ns *ns, void *a)
{
	struct attr_args *args = a;
	struct meta_inode in;
	uint8_t *buf;
	int n, err = load(ns, args->ino, &in);

	if (err)
		return err;
	if (inline_get(ns, &in, NULL, 0) < 0)
		return inode_out(ns, &in, args->out);	/* converted already */
	buf = malloc(NS_INLINE_MAX);
	if (!buf)
		return -ENOMEM;
	n = CALL(ns, get_inline, in.ino, buf, NS_INLINE_MAX);
	if (n < 0)
		err = n;
	else if ((uint64_t)n != args->size || crc32c(0, buf, (size_t)n) != args->crc)
		err = -EAGAIN;	/* rewritten since the caller read it */
	free(buf);
	if (!err)
		err = CALL(ns, del_inline, in.ino);
	if (!err)
		err = inode_out(ns, &in, args->out);
	return err;
}

int ns_uninline(struct ns *ns, struct ns_ref ino, uint32_t len, uint32_t crc,
		struct meta_inode *out)
{
	struct attr_args a = { .ino = ino, .size = len, .crc = crc, .out = out };

	return run_txn(ns, true, do_uninline, &a);
}

/* ---- readdir ---- */

struct rd_entry {
	uint64_t ino;
	uint32_t type;
	char name[NS_NAME_MAX + 1];
	struct meta_inode in;	/* readdirplus only */
};

struct readdir_args {
	struct ns_ref dir;
	const char *cookie;
	uint32_t max;
	bool plus;
	struct rd_entry *ents;
	uint32_t n;
};

static int rd_collect(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct readdir_args *args = arg;
	struct rd_entry *e = &args->ents[args->n++];

	e->ino = ino;
	e->type = type;
	memcpy(e->name, name, strlen(name) + 1);
	return 0;
}

static int do_readdir(struct ns *ns, void *a)
{
	struct readdir_args *args = a;
	struct meta_inode dir, in;
	int err = get_dir(ns, args->dir, &dir);

	args->n = 0;
	if (err)
		return err;
	err = CALL(ns, list_dentries, dir.ino, args->cookie, args->max, rd_collect, args);
	for (uint32_t i = 0; err >= 0 && args->plus && i < args->n; i++) {
		struct rd_entry *e = &args->ents[i];

		err = CALL(ns, get_inode, e->ino, &in);
		if (err == -ENOENT) {
			log_error(COMP, "entry '%s' in directory %llu names missing inode %llu",
				  e->name, (unsigned long long)dir.ino, (unsigned long long)e->ino);
			err = -EIO;
		}
		if (!err)
			err = inode_out(ns, &in, &e->in);
	}
	return err < 0 ? err : 0;
}

/* ns_readdir and ns_readdirplus: one of cb and pcb is set. */
static int readdir_any(struct ns *ns, struct readdir_args *a, ns_readdir_cb cb,
		       ns_readdirplus_cb pcb, void *arg)
{
	int err;
	uint32_t i;

	if (a->cookie && strnlen(a->cookie, NS_NAME_MAX + 1) > NS_NAME_MAX)
		return -ENAMETOOLONG;
	if (a->max > NS_READDIR_MAX)
		a->max = NS_READDIR_MAX;
	if (!a->max)
		return 0;
	/* Entries are copied out and the transaction closed before the
	 * callback runs: a retried transaction never calls it twice, and the
	 * callback may block without holding a snapshot open. */
	a->ents = malloc(sizeof(*a->ents) * a->max);
	if (!a->ents)
		return -ENOMEM;
	err = run_txn(ns, false, do_readdir, a);
	if (err)
		goto out;
	for (i = 0; i < a->n; i++) {
		const struct rd_entry *e = &a->ents[i];

		if (pcb ? pcb(arg, e->name, &e->in) : cb(arg, e->name, e->ino, e->type))
			break;
	}
	err = (int)i;
out:
	free(a->ents);
	return err;
}

int ns_readdir(struct ns *ns, struct ns_ref dir, const char *cookie, uint32_t max,
	       ns_readdir_cb cb, void *arg)
{
	struct readdir_args a = { .dir = dir, .cookie = cookie, .max = max };

	if (!cb)
		return -EINVAL;
	return readdir_any(ns, &a, cb, NULL, arg);
}

int ns_readdirplus(struct ns *ns, struct ns_ref dir, const char *cookie, uint32_t max,
		   ns_readdirplus_cb cb, void *arg)
{
	struct readdir_args a = { .dir = dir, .cookie = cookie, .max = max, .plus = true };

	if (!cb)
		return -EINVAL;
	return readdir_any(ns, &a, NULL, cb, arg);
}

/* ---- layout, statfs ---- */

struct layout_args {
	struct ns_ref dir;
	const struct file_layout *l;
};

static int do_set_layout(struct ns *ns, void *a)
{
	struct layout_args *args = a;
	const struct file_layout *l = args->l;
	struct meta_inode dir;
	uint32_t cur, tl;
	int err = get_dir(ns, args->dir, &dir);

	if (!err)
		err = table_len_get(ns, &cur);
	if (err)
		return err;
	if (l->table_len && cur && l->table_len > cur)
		return -EINVAL;
	tl = l->table_len ? l->table_len : cur;
	if (l->stripe > LAYOUT_MAX_STRIPE || (l->stripe && tl && l->stripe > tl))
		return -EINVAL;
	dir.layout.chunk_size = l->chunk_size;
	dir.layout.stripe = l->stripe;
	dir.layout.table_len = l->table_len;
	dir.layout.seed = 0;
	dir.ctime_ns = now_ns();
	return CALL(ns, put_inode, &dir);
}

int ns_set_layout(struct ns *ns, struct ns_ref dir, const struct file_layout *layout)
{
	struct layout_args a = { dir, layout };
	uint32_t cs;

	if (!layout)
		return -EINVAL;
	cs = layout->chunk_size;
	if (cs < NS_CHUNK_SIZE_MIN || cs > NS_CHUNK_SIZE_MAX || (cs & (cs - 1)))
		return -EINVAL;
	return run_txn(ns, true, do_set_layout, &a);
}

static int do_statfs(struct ns *ns, void *a)
{
	struct ns_statfs *out = a;
	int64_t inodes, bytes;
	int err = CALL(ns, counter_get, "inodes", &inodes);

	if (!err)
		err = CALL(ns, counter_get, "bytes", &bytes);
	if (!err)
		err = table_len_get(ns, &out->table_len);
	if (!err) {
		out->inodes = (uint64_t)inodes;
		out->bytes = (uint64_t)bytes;
	}
	return err;
}

int ns_statfs(struct ns *ns, struct ns_statfs *out)
{
	memset(out, 0, sizeof(*out));
	return run_txn(ns, false, do_statfs, out);
}

/* ---- path resolution ---- */

struct resolve_args {
	const char *path;
	unsigned flags;
	struct meta_inode *out;
	char *buf; /* 2 * NS_PATH_MAX: the rest of the path being walked */
	char *link;
	ns_walk_cb walk;	/* may be NULL */
	void *walk_arg;
};

/*
 * Walks args->path. The unresolved rest lives in buf; a symlink replaces
 * the component it was found at by its target, prepended to the rest.
 */
static int do_resolve(struct ns *ns, void *a)
{
	struct resolve_args *args = a;
	const size_t cap = 2 * NS_PATH_MAX;
	struct meta_inode cur, next;
	char *rest = args->buf, name[NS_NAME_MAX + 1];
	int links = 0, err;
	size_t len;

	len = strlen(args->path);
	memcpy(rest, args->path, len + 1);
	err = CALL(ns, get_inode, NS_ROOT_INO, &cur);
	if (err)
		return err;
	while (*rest) {
		const char *p = rest;
		size_t n;
		uint64_t ino;
		bool last;

		if (*p == '/') {
			while (*p == '/')
				p++;
			memmove(rest, p, strlen(p) + 1);
			continue;
		}
		n = strcspn(rest, "/");
		if (n > NS_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, rest, n);
		name[n] = '\0';
		memmove(rest, rest + n, strlen(rest + n) + 1);
		last = rest[strspn(rest, "/")] == '\0';
		if (!is_dir(&cur))
			return -ENOTDIR;
		/* Every component, "." and ".." too, searches cur. */
		if (args->walk && (err = args->walk(args->walk_arg, &cur)))
			return err;
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, ".."))
			ino = cur.parent;
		else if ((err = CALL(ns, get_dentry, cur.ino, name, &ino, NULL)))
			return err;
		err = CALL(ns, get_inode, ino, &next);
		if (err)
			return err == -ENOENT ? -EIO : err;
		if (is_lnk(&next) && (!last || (args->flags & NS_RESOLVE_FOLLOW) ||
				      rest[0] == '/')) {
			size_t rl = strlen(rest);
			int tl;

			if (++links > NS_SYMLOOP_MAX)
				return -ELOOP;
			tl = CALL(ns, get_link, next.ino, args->link, NS_PATH_MAX);
			if (tl < 0)
				return tl;
			if ((size_t)tl >= NS_PATH_MAX || (size_t)tl + rl + 2 > cap)
				return -ENAMETOOLONG;
			/* target + "/" + rest; no '/' added when nothing follows,
			 * so a link to a file does not become "file/". */
			if (rl) {
				memmove(rest + tl + 1, rest, rl + 1);
				rest[tl] = '/';
			} else {
				rest[tl] = '\0';
			}
			memcpy(rest, args->link, (size_t)tl);
			if (args->link[0] == '/') {
				err = CALL(ns, get_inode, NS_ROOT_INO, &cur);
				if (err)
					return err;
			}
			continue;
		}
		cur = next;
		/* "file/" names a directory that is not there. */
		if (last && rest[0] == '/' && !is_dir(&cur))
			return -ENOTDIR;
	}
	return inode_out(ns, &cur, args->out);
}

int ns_resolve(struct ns *ns, const char *path, unsigned flags, struct meta_inode *out)
{
	return ns_resolve_walk(ns, path, flags, NULL, NULL, out);
}

int ns_resolve_walk(struct ns *ns, const char *path, unsigned flags, ns_walk_cb walk,
		    void *arg, struct meta_inode *out)
{
	struct resolve_args a = { .path = path, .flags = flags, .out = out, .walk = walk,
				  .walk_arg = arg };
	int err;

	if (!path || path[0] != '/')
		return -EINVAL;
	if (strnlen(path, NS_PATH_MAX) >= NS_PATH_MAX)
		return -ENAMETOOLONG;
	a.buf = malloc(2 * NS_PATH_MAX + NS_PATH_MAX);
	if (!a.buf)
		return -ENOMEM;
	a.link = a.buf + 2 * NS_PATH_MAX;
	err = run_txn(ns, false, do_resolve, &a);
	free(a.buf);
	return err;
}

struct ancestors_args {
	struct ns_ref ino;
	uint64_t *out;
	uint32_t cap;
};

static int do_ancestors(struct ns *ns, void *a)
{
	struct ancestors_args *args = a;
	struct meta_inode in;
	uint32_t n = 0;
	int err = load(ns, args->ino, &in);

	while (!err) {
		if (n == args->cap)
			return -ENAMETOOLONG;
		args->out[n++] = in.ino;
		if (in.ino == NS_ROOT_INO || in.parent == in.ino)
			return (int)n;
		err = CALL(ns, get_inode, in.parent, &in);
		/* A parent that is gone is a broken namespace, not a miss. */
		if (err == -ENOENT)
			err = -EIO;
	}
	return err;
}

int ns_ancestors(struct ns *ns, struct ns_ref ino, uint64_t *out, uint32_t cap)
{
	struct ancestors_args a = { ino, out, cap };

	if (!out || !cap)
		return -EINVAL;
	return run_txn(ns, false, do_ancestors, &a);
}

/* ---- GC ---- */

struct gc_args {
	uint64_t ino;
	struct meta_gc_item *out;
	uint32_t n;
};

static int do_gc_next(struct ns *ns, void *a)
{
	struct gc_args *args = a;

	return CALL(ns, gc_pop, args->ino, args->out, args->n);
}

int ns_gc_next(struct ns *ns, uint64_t ino, struct meta_gc_item *out, uint32_t n)
{
	struct gc_args a = { ino, out, n };

	if (!n)
		return 0;
	if (!out)
		return -EINVAL;
	return run_txn(ns, false, do_gc_next, &a);
}

static int do_gc_done(struct ns *ns, void *a)
{
	const struct meta_gc_item *item = a;

	return CALL(ns, gc_ack, item->id);
}

int ns_gc_done(struct ns *ns, const struct meta_gc_item *item)
{
	if (!item)
		return -EINVAL;
	return run_txn(ns, true, do_gc_done, (void *)item);
}

/* ---- orphaned chunks ---- */

struct orphan_args {
	uint64_t ino, idx;
	int state;
	const struct file_layout *layout;
};

/* Whether a queued GC item of ino covers idx. */
static int gc_covers(struct ns *ns, uint64_t ino, uint64_t idx)
{
	struct meta_gc_item items[16];
	int n = CALL(ns, gc_pop, ino, items, 16);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		if (idx >= items[i].from && idx < items[i].to)
			return 1;
	}
	/* More than 16 items of one file: count it covered, the GC worker
	 * gets there first. */
	return n == 16;
}

/* Inside a transaction: ns_chunk_span's answer. */
static int chunk_span(struct ns *ns, uint64_t ino, uint64_t *nchunks)
{
	struct meta_inode in;
	uint64_t hi_ino, hi_gen;
	int err = CALL(ns, get_inode, ino, &in);

	*nchunks = 0;
	if (err == -ENOENT) {
		err = CALL(ns, alloc_peek, &hi_ino, &hi_gen);
		if (err)
			return err;
		return ino > hi_ino ? NS_CHUNK_FOREIGN : NS_CHUNK_NO_INODE;
	}
	if (err)
		return err;
	if (in.layout.chunk_size)
		*nchunks = div_up(in.size, in.layout.chunk_size);
	return NS_CHUNK_OWNED;
}

static int do_chunk_state(struct ns *ns, void *a)
{
	struct orphan_args *args = a;
	uint64_t n;
	int st = chunk_span(ns, args->ino, &n), covered;

	if (st < 0 || st == NS_CHUNK_FOREIGN || (st == NS_CHUNK_OWNED && args->idx < n))
		return st;
	covered = gc_covers(ns, args->ino, args->idx);
	if (covered)
		return covered < 0 ? covered : NS_CHUNK_OWNED;
	return st == NS_CHUNK_OWNED ? NS_CHUNK_BEYOND : NS_CHUNK_NO_INODE;
}

int ns_chunk_state(struct ns *ns, uint64_t ino, uint64_t idx)
{
	struct orphan_args a = { ino, idx, 0, NULL };

	return run_txn(ns, false, do_chunk_state, &a);
}

struct span_args {
	uint64_t ino;
	uint64_t *nchunks;
};

static int do_chunk_span(struct ns *ns, void *a)
{
	struct span_args *args = a;

	return chunk_span(ns, args->ino, args->nchunks);
}

int ns_chunk_span(struct ns *ns, uint64_t ino, uint64_t *nchunks)
{
	struct span_args a = { ino, nchunks };

	if (!nchunks)
		return -EINVAL;
	return run_txn(ns, false, do_chunk_span, &a);
}

static int do_chunk_reclaim(struct ns *ns, void *a)
{
	struct orphan_args *args = a;
	struct meta_inode in;
	int err = do_chunk_state(ns, a);

	if (err < 0 || err != args->state)
		return err < 0 ? err : 0;
	if (args->state == NS_CHUNK_BEYOND) {
		err = CALL(ns, get_inode, args->ino, &in);
		if (err)
			return err;
		err = CALL(ns, gc_push, args->ino, args->idx, args->idx + 1, &in.layout);
	} else {
		err = CALL(ns, gc_push, args->ino, args->idx, args->idx + 1, args->layout);
	}
	return err ? err : 1;
}

int ns_chunk_reclaim(struct ns *ns, uint64_t ino, uint64_t idx, int state,
		     const struct file_layout *layout)
{
	struct orphan_args a = { ino, idx, state, layout };

	if ((state != NS_CHUNK_NO_INODE && state != NS_CHUNK_BEYOND) ||
	    (state == NS_CHUNK_NO_INODE && (!layout || layout_check(layout))))
		return -EINVAL;
	return run_txn(ns, true, do_chunk_reclaim, &a);
}

static int do_gc_claim(struct ns *ns, void *a)
{
	bool *held = a;
	int err = CALL(ns, gc_claim, held);

	return err ? err : *held ? 1 : 0;
}

int ns_gc_claim(struct ns *ns)
{
	bool held = false;

	return run_txn(ns, false, do_gc_claim, &held);
}

/* ---- quotas ---- */

struct quota_args {
	struct ns_ref dir;
	uint64_t max_bytes, max_inodes;
	struct meta_quota *out;
	uint32_t max;
	char *buf;
	size_t cap;
};

static int do_quota_set(struct ns *ns, void *a)
{
	struct quota_args *args = a;
	struct meta_quota *q = args->out;
	struct meta_inode dir;
	int err = get_dir(ns, args->dir, &dir);

	if (err)
		return err;
	err = CALL(ns, get_quota, dir.ino, q);
	if (err && err != -ENOENT)
		return err;
	if (!args->max_bytes && !args->max_inodes) {
		if (err == -ENOENT) {
			memset(q, 0, sizeof(*q));
			q->ino = dir.ino;
			return 0;
		}
		err = CALL(ns, del_quota, dir.ino);
		if (!err)
			err = CALL(ns, counter_add, "quotas", -1);
		if (!err)
			q->max_bytes = q->max_inodes = 0;
		return err;
	}
	if (err == -ENOENT) {
		/* A new quota root: its usage is counted once, here; from now
		 * on every change under it is charged as it happens. */
		memset(q, 0, sizeof(*q));
		q->ino = dir.ino;
		err = subtree_usage(ns, dir.ino, &q->bytes, &q->inodes);
		if (!err)
			err = CALL(ns, counter_add, "quotas", 1);
		if (err)
			return err;
	}
	q->max_bytes = args->max_bytes;
	q->max_inodes = args->max_inodes;
	return CALL(ns, put_quota, q);
}

int ns_quota_set(struct ns *ns, struct ns_ref dir, uint64_t max_bytes, uint64_t max_inodes,
		 struct meta_quota *out)
{
	struct meta_quota q;
	struct quota_args a = { .dir = dir, .max_bytes = max_bytes, .max_inodes = max_inodes,
				.out = out ? out : &q };

	if (max_bytes > INT64_MAX || max_inodes > INT64_MAX)
		return -EINVAL;
	return run_txn(ns, true, do_quota_set, &a);
}

static int do_quota_get(struct ns *ns, void *a)
{
	struct quota_args *args = a;
	struct meta_inode dir;
	int err = get_dir(ns, args->dir, &dir);

	if (!err)
		err = CALL(ns, get_quota, dir.ino, args->out);
	return err == -ENOENT ? -ENODATA : err;
}

int ns_quota_get(struct ns *ns, struct ns_ref dir, struct meta_quota *out)
{
	struct quota_args a = { .dir = dir, .out = out };

	if (!out)
		return -EINVAL;
	return run_txn(ns, false, do_quota_get, &a);
}

static int do_quota_list(struct ns *ns, void *a)
{
	struct quota_args *args = a;

	return CALL(ns, list_quotas, args->dir.ino, args->out, args->max);
}

int ns_quota_list(struct ns *ns, uint64_t after, struct meta_quota *out, uint32_t max)
{
	struct quota_args a = { .dir = ns_any(after), .out = out, .max = max };

	if (!max)
		return 0;
	if (!out)
		return -EINVAL;
	return run_txn(ns, false, do_quota_list, &a);
}

/* Builds the path right to left at the end of buf, then moves it to the
 * front. */
static int do_path(struct ns *ns, void *a)
{
	struct quota_args *args = a;
	char name[NS_NAME_MAX + 1];
	struct meta_inode in;
	size_t at = args->cap - 1;
	int err = load(ns, args->dir, &in);

	if (err)
		return err;
	args->buf[at] = '\0';
	for (int depth = 0; in.ino != NS_ROOT_INO; depth++) {
		size_t len;

		if (depth == MAX_DEPTH)
			return -EIO;
		err = CALL(ns, get_name, in.parent, in.ino, name, sizeof(name));
		if (err)
			return err == -ENOENT ? -EIO : err;
		len = strlen(name);
		if (len + 1 > at)
			return -ENAMETOOLONG;
		at -= len;
		memcpy(args->buf + at, name, len);
		args->buf[--at] = '/';
		err = CALL(ns, get_inode, in.parent, &in);
		if (err)
			return err == -ENOENT ? -EIO : err;
	}
	if (at == args->cap - 1)
		args->buf[--at] = '/';
	memmove(args->buf, args->buf + at, args->cap - at);
	return (int)(args->cap - 1 - at);
}

int ns_path(struct ns *ns, struct ns_ref ino, char *buf, size_t cap)
{
	struct quota_args a = { .dir = ino, .buf = buf, .cap = cap };

	if (!buf || cap < 2)
		return -EINVAL;
	return run_txn(ns, false, do_path, &a);
}
