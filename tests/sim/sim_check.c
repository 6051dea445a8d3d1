/*
 * The history checker: see sim_check.h for the rules and why each is
 * sound (it never needs the order in which the system applied concurrent
 * operations, only the versions it reported and what clients saw).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_check.h"
#include "net/codec.h"
#include "strata/errors.h"

#define VAL_ZERO 0u
#define VAL_ABSENT UINT32_MAX
#define MAX_MSGS 8u

/* At version ver, a word held val; src: the op that told (0: no fact),
 * est: when it was told (the op's completion in the history's order). */
struct fact {
	uint32_t ver;
	uint32_t val;
	uint32_t src;
	uint32_t est;
};

/* The chunk's highest fact version, each time it grew. */
struct maxent {
	uint32_t est;
	uint32_t ver;
	uint32_t src;
};

struct hop {
	uint32_t client;
	enum chk_kind kind;
	uint32_t chunk, off, len;
	uint64_t inv_seq, comp_seq;
	uint64_t inv_us, comp_us;
	bool done;
	int status;
	uint64_t version;
	uint32_t length;
	uint32_t attempts;
	uint32_t target;	/* a read's replica */
	bool dup;
	uint32_t epoch;
	bool skip;		/* overlapped a removal: not checked */
};

/* What is known of a chunk: per word the current fact and the one it
 * replaced (a read is checked against the facts as they were when it was
 * invoked: cur if older than that, else prev, else none -- a word whose
 * fact changed twice meanwhile is not checked, which costs precision, not
 * soundness), and the history of the highest version. */
struct cchunk {
	struct fact *cur, *prev;
	struct maxent *maxlog;
	uint32_t nmax, capmax;
	uint32_t epoch;
	uint32_t removes_open;
	bool tainted;
	uint32_t *upd;		/* writes and truncates, in invocation order */
	uint32_t nupd, capupd;
};

static struct {
	struct chk_cfg cfg;
	uint32_t nwords;
	struct hop *ops;
	uint32_t nops, capops;
	uint64_t seq;
	struct cchunk *chunks;
	uint32_t counts[CHK_NPROPS];
	char *msgs[MAX_MSGS];
	uint32_t nmsgs;
	enum chk_prop first;
} g_ck;

static const char *const prop_names[CHK_NPROPS] = {
	[CHK_DURABILITY] = "durability",
	[CHK_MONOTONIC] = "monotonic-reads",
	[CHK_CONTENT] = "content",
	[CHK_AGREEMENT] = "replica-agreement",
	[CHK_FINAL] = "final-agreement",
	[CHK_HANG] = "hang",
	[CHK_CORRUPT] = "corrupt-word",
};

const char *chk_prop_name(enum chk_prop prop)
{
	return prop < CHK_NPROPS ? prop_names[prop] : "none";
}

/* ---- life cycle ---- */

void chk_reset(const struct chk_cfg *cfg)
{
	chk_release();
	g_ck.cfg = *cfg;
	g_ck.nwords = cfg->chunk_cap / 8;
	g_ck.first = CHK_NPROPS;
	g_ck.chunks = calloc(cfg->nchunks, sizeof(*g_ck.chunks));
	if (!g_ck.chunks)
		abort();
	for (uint32_t i = 0; i < cfg->nchunks; i++) {
		g_ck.chunks[i].cur = calloc(g_ck.nwords, sizeof(struct fact));
		g_ck.chunks[i].prev = calloc(g_ck.nwords, sizeof(struct fact));
		if (!g_ck.chunks[i].cur || !g_ck.chunks[i].prev)
			abort();
	}
}

void chk_release(void)
{
	free(g_ck.ops);
	for (uint32_t i = 0; g_ck.chunks && i < g_ck.cfg.nchunks; i++) {
		free(g_ck.chunks[i].cur);
		free(g_ck.chunks[i].prev);
		free(g_ck.chunks[i].maxlog);
		free(g_ck.chunks[i].upd);
	}
	free(g_ck.chunks);
	for (uint32_t i = 0; i < g_ck.nmsgs; i++)
		free(g_ck.msgs[i]);
	memset(&g_ck, 0, sizeof(g_ck));
}

/* ---- violations ---- */

void chk_violation(enum chk_prop prop, const char *fmt, ...)
{
	char body[1024], *m;
	va_list ap;
	uint64_t now = sim_now_us();

	if (g_ck.first == CHK_NPROPS)
		g_ck.first = prop;
	g_ck.counts[prop]++;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	sim_trace("CHECK: VIOLATION %s: %s", prop_names[prop], body);
	if (g_ck.nmsgs == MAX_MSGS)
		return;
	m = malloc(strlen(body) + 64);
	if (!m)
		return;
	snprintf(m, strlen(body) + 64, "[%llu.%06llu] %s: %s", (unsigned long long)(now / 1000000),
		 (unsigned long long)(now % 1000000), prop_names[prop], body);
	g_ck.msgs[g_ck.nmsgs++] = m;
}

uint32_t chk_count(enum chk_prop prop)
{
	return g_ck.counts[prop];
}

uint32_t chk_total(void)
{
	uint32_t n = 0;

	for (int i = 0; i < CHK_NPROPS; i++)
		n += g_ck.counts[i];
	return n;
}

enum chk_prop chk_first(void)
{
	return g_ck.first;
}

void chk_print(FILE *out, uint32_t max)
{
	for (uint32_t i = 0; i < g_ck.nmsgs && i < max; i++)
		fprintf(out, "  %s\n", g_ck.msgs[i]);
}

const char *chk_first_msg(void)
{
	return g_ck.nmsgs ? g_ck.msgs[0] : "";
}

/* ---- operations ---- */

static const char *kind_name(enum chk_kind k)
{
	switch (k) {
	case CHK_WRITE: return "write";
	case CHK_TRUNCATE: return "truncate";
	case CHK_REMOVE: return "remove";
	default: return "read";
	}
}

uint32_t chk_wid(uint32_t op)
{
	return op + 1;
}

void chk_fill(uint32_t op, uint8_t *buf, uint32_t off, uint32_t len)
{
	for (uint32_t k = 0; k + 8 <= len; k += 8) {
		uint64_t w = ((uint64_t)((off + k) / 8 + 1) << 32) | chk_wid(op);

		for (int b = 0; b < 8; b++)
			buf[k + b] = (uint8_t)(w >> (8 * b));
	}
}

uint32_t chk_invoke(uint32_t client, enum chk_kind kind, uint32_t chunk, uint32_t off,
		    uint32_t len)
{
	struct cchunk *c = &g_ck.chunks[chunk];
	struct hop *o;

	if (g_ck.nops == g_ck.capops) {
		uint32_t cap = g_ck.capops ? g_ck.capops * 2 : 256;
		struct hop *v = realloc(g_ck.ops, cap * sizeof(*v));

		if (!v)
			abort();
		g_ck.ops = v;
		g_ck.capops = cap;
	}
	o = &g_ck.ops[g_ck.nops];
	memset(o, 0, sizeof(*o));
	o->client = client;
	o->kind = kind;
	o->chunk = chunk;
	o->off = off;
	o->len = len;
	o->inv_seq = ++g_ck.seq;
	o->inv_us = sim_now_us();
	if (kind == CHK_REMOVE) {
		/* A new lifetime: what was known is about the old one. */
		c->epoch++;
		c->removes_open++;
		memset(c->cur, 0, g_ck.nwords * sizeof(*c->cur));
		memset(c->prev, 0, g_ck.nwords * sizeof(*c->prev));
		c->nmax = 0;
	}
	o->epoch = c->epoch;
	o->skip = c->removes_open > (kind == CHK_REMOVE ? 1u : 0u) || c->tainted;
	if (kind == CHK_WRITE || kind == CHK_TRUNCATE) {
		if (c->nupd == c->capupd) {
			uint32_t cap = c->capupd ? c->capupd * 2 : 64;
			uint32_t *v = realloc(c->upd, cap * sizeof(*v));

			if (!v)
				abort();
			c->upd = v;
			c->capupd = cap;
		}
		c->upd[c->nupd++] = g_ck.nops;
	}
	sim_trace("CHECK: op #%u %s chunk %u off %u len %u invoked", g_ck.nops, kind_name(kind),
		  chunk, off, len);
	return g_ck.nops++;
}

void chk_mark_unsure(uint32_t op)
{
	struct hop *o = &g_ck.ops[op];

	o->dup = true;
	if (o->kind == CHK_REMOVE)
		g_ck.chunks[o->chunk].tainted = true;
}

void chk_served_by(uint32_t op, uint32_t target)
{
	g_ck.ops[op].target = target;
}

uint32_t chk_open_ops(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < g_ck.nops; i++)
		n += !g_ck.ops[i].done;
	return n;
}

/* Applied exactly once, at its version? Else it may have been applied
 * at any version, any time after its invocation. */
static bool sure(const struct hop *o)
{
	return o->done && o->status == 0 && o->attempts == 0 && !o->dup;
}

/* Could o have been applied at a version in (lo, hi], as seen by read r? */
static bool possible(const struct hop *o, uint64_t lo, uint64_t hi, const struct hop *r)
{
	if (o->inv_seq > r->comp_seq)
		return false;
	if (!sure(o))
		return true;
	return o->version > lo && o->version <= hi;
}

static void describe(char *buf, size_t len, uint32_t val)
{
	if (val == VAL_ABSENT)
		snprintf(buf, len, "absent (past the end)");
	else if (val == VAL_ZERO)
		snprintf(buf, len, "zeros");
	else
		snprintf(buf, len, "bytes of op #%u", val - 1);
}

static void describe_src(char *buf, size_t len, uint32_t src)
{
	const struct hop *o = &g_ck.ops[src - 1];

	char by[32] = "";

	if (o->kind == CHK_READ)
		snprintf(by, sizeof(by), " from target %u", o->target);
	snprintf(buf, len, "%s #%u (%s%s, v%llu, at %llu.%06llu)", kind_name(o->kind), src - 1,
		 o->kind == CHK_READ ? "completed" : "acknowledged", by, (unsigned long long)o->version,
		 (unsigned long long)(o->comp_us / 1000000),
		 (unsigned long long)(o->comp_us % 1000000));
}

/* What a read needs to explain zeros and absent words: computed once per
 * read, on its first such word. */
struct explain {
	bool ready;
	bool unsure_trunc;		/* any truncate that may apply anywhere */
	uint64_t best_trunc;		/* highest sure truncate version <= vR */
	uint32_t unsure_trunc_minlen;	/* shortest truncate that may apply anywhere */
	uint64_t *best_abs;		/* [i]: highest sure truncate to <= 8i */
	uint32_t unsure_w_maxoff;	/* writes that may apply anywhere: largest offset */
	uint64_t *best_wz;		/* [i]: highest sure write starting past word i */
};

static void explain_prepare(struct explain *x, const struct cchunk *c, const struct hop *r)
{
	uint32_t W = g_ck.nwords;

	x->ready = true;
	x->unsure_trunc_minlen = UINT32_MAX;
	x->best_abs = calloc(W + 1, sizeof(*x->best_abs));
	x->best_wz = calloc(W + 1, sizeof(*x->best_wz));
	if (!x->best_abs || !x->best_wz)
		abort();
	for (uint32_t k = 0; k < c->nupd; k++) {
		const struct hop *o = &g_ck.ops[c->upd[k]];
		bool s = sure(o);

		if (o->inv_seq > r->comp_seq || (s && o->version > r->version))
			continue;
		if (o->kind == CHK_TRUNCATE) {
			uint32_t w = o->len / 8 < W ? o->len / 8 : W;

			if (!s) {
				x->unsure_trunc = true;
				if (o->len < x->unsure_trunc_minlen)
					x->unsure_trunc_minlen = o->len;
				continue;
			}
			if (o->version > x->best_trunc)
				x->best_trunc = o->version;
			if (o->version > x->best_abs[w])
				x->best_abs[w] = o->version;
		} else {
			uint32_t w = o->off / 8 < W ? o->off / 8 : W;

			if (!s) {
				if (o->off > x->unsure_w_maxoff)
					x->unsure_w_maxoff = o->off;
				continue;
			}
			/* Zeros at words below w: index w - 1 and down. */
			if (w && o->version > x->best_wz[w - 1])
				x->best_wz[w - 1] = o->version;
		}
	}
	for (uint32_t i = 1; i <= W; i++) {
		if (x->best_abs[i - 1] > x->best_abs[i])
			x->best_abs[i] = x->best_abs[i - 1];
	}
	for (uint32_t i = W; i-- > 0;) {
		if (x->best_wz[i + 1] > x->best_wz[i])
			x->best_wz[i] = x->best_wz[i + 1];
	}
}

static void explain_release(struct explain *x)
{
	free(x->best_abs);
	free(x->best_wz);
}

/* Can value v at word i of read r follow fact f? */
static bool explained(struct explain *x, const struct cchunk *c, const struct hop *r, uint32_t i,
		      uint32_t v, const struct fact *f)
{
	if (v != VAL_ZERO && v != VAL_ABSENT) {
		const struct hop *p = &g_ck.ops[v - 1];

		return p->kind == CHK_WRITE && p->chunk == r->chunk && p->off <= 8 * i &&
		       8 * i < p->off + p->len && possible(p, f->ver, r->version, r);
	}
	if (!x->ready)
		explain_prepare(x, c, r);
	if (v == VAL_ABSENT)
		return (x->unsure_trunc && 8ull * i >= x->unsure_trunc_minlen) ||
		       x->best_abs[i] > f->ver;
	if (x->unsure_trunc || x->best_trunc > f->ver)
		return true;
	return f->val == VAL_ABSENT && (8ull * i < x->unsure_w_maxoff || x->best_wz[i] > f->ver);
}

static uint32_t word_at(const uint8_t *data, uint32_t nread, uint32_t i, bool *corrupt)
{
	uint64_t w;

	if (8ull * i + 8 > nread)
		return VAL_ABSENT;
	w = get_le64(data + 8 * i);
	if (w == 0)
		return VAL_ZERO;
	if ((w >> 32) != (uint64_t)i + 1 || (uint32_t)w == 0 || (uint32_t)w > g_ck.nops)
		*corrupt = true;
	return (uint32_t)w;
}

/* The fact of word i as it stood when a read was invoked (at seq inv),
 * or NULL: unknown then, or replaced twice since. */
static const struct fact *fact_at(const struct cchunk *c, uint32_t i, uint64_t inv)
{
	if (c->cur[i].src && c->cur[i].est < inv)
		return &c->cur[i];
	if (c->prev[i].src && c->prev[i].est < inv)
		return &c->prev[i];
	return NULL;
}

/* The chunk's highest fact version when a read was invoked, or NULL. */
static const struct maxent *max_at(const struct cchunk *c, uint64_t inv)
{
	uint32_t lo = 0, hi = c->nmax;

	/* The log grows with est: find its last entry before inv. */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (c->maxlog[mid].est < inv)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &c->maxlog[lo - 1] : NULL;
}

/* Learns that word i held val at version ver (told by op src, at seq
 * est); conflict: an earlier fact of that version said otherwise. */
static void learn(struct cchunk *c, uint32_t i, uint64_t ver, uint32_t val, uint32_t src,
		  uint32_t est, bool *conflict)
{
	struct fact *f = &c->cur[i];

	if (f->src && f->ver == ver && f->val != val)
		*conflict = true;
	if (!f->src || ver > f->ver) {
		c->prev[i] = *f;
		f->ver = (uint32_t)ver;
		f->val = val;
		f->src = src;
		f->est = est;
	}
}

static void learn_max(struct cchunk *c, uint64_t ver, uint32_t src, uint32_t est)
{
	if (c->nmax && ver <= c->maxlog[c->nmax - 1].ver)
		return;
	if (c->nmax == c->capmax) {
		uint32_t cap = c->capmax ? c->capmax * 2 : 64;
		struct maxent *v = realloc(c->maxlog, cap * sizeof(*v));

		if (!v)
			abort();
		c->maxlog = v;
		c->capmax = cap;
	}
	c->maxlog[c->nmax].est = est;
	c->maxlog[c->nmax].ver = (uint32_t)ver;
	c->maxlog[c->nmax].src = src;
	c->nmax++;
}

/* Checks read r against the facts as they stood when it was invoked and
 * learns what it saw, in one pass over its words. */
static void check_read(struct hop *r, const uint8_t *data, uint32_t nread)
{
	struct cchunk *c = &g_ck.chunks[r->chunk];
	const struct maxent *mx = max_at(c, r->inv_seq);
	uint32_t src = (uint32_t)(r - g_ck.ops) + 1, est = (uint32_t)r->comp_seq;
	struct explain x = { 0 };
	struct fact same_f = { 0 }, bad_f = { 0 };
	char a[160], b[160];
	uint32_t bad = 0, first_bad = 0, same_ver = 0, first_same = 0;
	bool corrupt = false, conflict = false, older = mx && r->version < mx->ver;

	if (nread % 8 || nread > g_ck.cfg.chunk_cap) {
		chk_violation(CHK_CORRUPT, "read #%u of chunk %u got %u bytes", src - 1, r->chunk, nread);
		return;
	}
	if (older) {
		describe_src(a, sizeof(a), mx->src);
		chk_violation(g_ck.ops[mx->src - 1].kind == CHK_READ ? CHK_MONOTONIC : CHK_DURABILITY,
			      "read #%u of chunk %u (client %u) from target %u returned v%llu, older than %s, before it was invoked",
			      src - 1, r->chunk, r->client, r->target, (unsigned long long)r->version, a);
	}
	for (uint32_t i = 0; i < g_ck.nwords; i++) {
		const struct fact *fp = fact_at(c, i, r->inv_seq);
		struct fact f = fp ? *fp : (struct fact){ 0 };
		uint32_t v = word_at(data, nread, i, &corrupt);

		if (corrupt) {
			chk_violation(CHK_CORRUPT, "read #%u of chunk %u: word %u holds bytes that belong elsewhere",
				      src - 1, r->chunk, i);
			break;
		}
		learn(c, i, r->version, v, src, est, &conflict);
		if (older || !f.src || v == f.val)
			continue;
		if (f.ver == r->version) {
			if (!same_ver++) {
				first_same = i;
				same_f = f;
			}
			continue;
		}
		if (!explained(&x, c, r, i, v, &f) && !bad++) {
			first_bad = i;
			bad_f = f;
		}
	}
	learn_max(c, r->version, src, est);
	if (same_ver) {
		describe(a, sizeof(a), word_at(data, nread, first_same, &corrupt));
		describe_src(b, sizeof(b), same_f.src);
		chk_violation(CHK_AGREEMENT,
			      "read #%u of chunk %u from target %u at v%llu: word %u (offset %u) holds %s, but %s showed other bytes at the same version (%u words differ)",
			      src - 1, r->chunk, r->target, (unsigned long long)r->version,
			      first_same, first_same * 8, a, b, same_ver);
	} else if (bad) {
		char c2[64];

		describe(a, sizeof(a), word_at(data, nread, first_bad, &corrupt));
		describe(c2, sizeof(c2), bad_f.val);
		describe_src(b, sizeof(b), bad_f.src);
		chk_violation(g_ck.ops[bad_f.src - 1].kind == CHK_READ ? CHK_CONTENT : CHK_DURABILITY,
			      "read #%u of chunk %u (client %u) from target %u at v%llu: word %u (offset %u) holds %s, but %s had %s there at v%llu, and no operation that may have applied since explains it (%u words)",
			      src - 1, r->chunk, r->client, r->target,
			      (unsigned long long)r->version, first_bad, first_bad * 8, a, b, c2,
			      (unsigned long long)bad_f.ver, bad);
	}
	explain_release(&x);
}

/* An acknowledged update: what it tells of its version. */
static void learn_update(struct hop *o)
{
	struct cchunk *c = &g_ck.chunks[o->chunk];
	uint32_t src = (uint32_t)(o - g_ck.ops) + 1, est = (uint32_t)o->comp_seq;
	bool conflict = false;
	uint32_t W = g_ck.nwords;

	if (o->kind == CHK_WRITE) {
		for (uint32_t i = o->off / 8; i < (o->off + o->len) / 8 && i < W; i++)
			learn(c, i, o->version, src, src, est, &conflict);
		for (uint32_t i = (o->length + 7) / 8; i < W; i++)
			learn(c, i, o->version, VAL_ABSENT, src, est, &conflict);
	} else {
		for (uint32_t i = o->len / 8; i < W; i++)
			learn(c, i, o->version, VAL_ABSENT, src, est, &conflict);
	}
	learn_max(c, o->version, src, est);
	/* (A read at the same version as a fact reports it itself.) */
	if (conflict)
		chk_violation(CHK_AGREEMENT,
			      "%s #%u of chunk %u was acknowledged with v%llu, but a read or update already showed other bytes at v%llu",
			      kind_name(o->kind), src - 1, o->chunk, (unsigned long long)o->version,
			      (unsigned long long)o->version);
}

void chk_complete(uint32_t op, int status, uint64_t version, uint32_t length, uint32_t attempts,
		  const uint8_t *data, uint32_t nread)
{
	struct hop *o = &g_ck.ops[op];
	struct cchunk *c = &g_ck.chunks[o->chunk];

	o->done = true;
	o->status = status;
	o->version = version;
	o->length = length;
	o->attempts = attempts;
	o->comp_seq = ++g_ck.seq;
	o->comp_us = sim_now_us();
	sim_trace("CHECK: op #%u %s chunk %u -> %s v%llu len %u (%u retries)", op, kind_name(o->kind),
		  o->chunk, status ? strata_strerror(status) : "ok", (unsigned long long)version,
		  o->kind == CHK_READ ? nread : length, attempts);
	if (o->comp_us - o->inv_us > g_ck.cfg.budget_us)
		chk_violation(CHK_HANG, "%s #%u of chunk %u took %llu ms (budget %llu ms)",
			      kind_name(o->kind), op, o->chunk,
			      (unsigned long long)((o->comp_us - o->inv_us) / 1000),
			      (unsigned long long)(g_ck.cfg.budget_us / 1000));
	if (o->kind == CHK_REMOVE) {
		c->removes_open--;
		if (!sure(o))
			c->tainted = true;
	}
	if (!status && !o->skip && !c->tainted && !c->removes_open && o->epoch == c->epoch &&
	    o->kind != CHK_REMOVE) {
		if (o->kind == CHK_READ)
			check_read(o, data, nread);
		else
			learn_update(o);
	}
}

void chk_hangs(uint64_t now_us)
{
	for (uint32_t i = 0; i < g_ck.nops; i++) {
		const struct hop *o = &g_ck.ops[i];

		if (!o->done && now_us - o->inv_us > g_ck.cfg.budget_us)
			chk_violation(CHK_HANG, "%s #%u of chunk %u never completed (invoked at %llu.%06llu)",
				      kind_name(o->kind), i, o->chunk,
				      (unsigned long long)(o->inv_us / 1000000),
				      (unsigned long long)(o->inv_us % 1000000));
	}
}
