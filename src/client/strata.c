/*
 * libstrata: connection, namespace operations by path (meta service; each
 * resolves its path and calls the handle operation of namespace.c) and
 * file I/O (chunks on storage chains through the storage client).
 *
 * The meta service runs in the daemon at the mgmt address (the control
 * daemon of a cluster runs both).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rand.h"
#include "client_int.h"
#include "common/log.h"
#include "common/cluster_map.h"
#include "strata/locate.h"

#define PATH_MAX_LEN 4096
/* Lanes for meta calls (rpc_lanes): as many threads as a FUSE mount or a
 * benchmark calls from make their calls on their own threads; more fall
 * back to the meta rpc_client's thread. Each costs two descriptors, and a
 * connection per meta server it has called. Knob for tests:
 * STRATA_TEST_META_LANES=N (0: every call through that thread). */
#define META_LANES 16u

const char *strata_version(void)
{
	return STRATA_VERSION_STRING;
}

void strata_opts_init(struct strata_opts *o, size_t size)
{
	memset(o, 0, size);
	o->opts_size = size;
	o->timeout_ms = 10000;
	o->retry_ms = 30000;
	o->io_threads = 2;
	if (size >= offsetof(struct strata_opts, meta_cache_ms) + sizeof(o->meta_cache_ms))
		o->meta_cache_ms = -1;	/* the environment's */
}

struct sclient *cl_pick_sc(struct strata *s)
{
	uint32_t i = __atomic_fetch_add(&s->rr, 1, __ATOMIC_RELAXED);

	return s->sc[i % (uint32_t)s->nio];
}

void strata_disconnect(struct strata *s)
{
	if (!s)
		return;
	cl_cache_stop(s);
	for (int i = 0; i < s->nio; i++) {
		if (s->sc && s->sc[i])
			sclient_free(s->sc[i]);
		if (s->io_r && s->io_r[i]) {
			reactor_stop(s->io_r[i]);
			reactor_join(s->io_r[i]);
			reactor_free(s->io_r[i]);
		}
	}
	cl_cache_free(s);	/* after the I/O threads: no fill is left */
	mcache_free(s->mcache);
	rpc_client_free(s->rpc);
	net_cred_release(&s->cred);
	net_tls_put(s->tls);
	free(s->sc);
	free(s->io_r);
	free(s);
}

int cl_take_token(const char *given, struct net_cred *cred, bool *has)
{
	char *text = malloc(TOKEN_TEXT_MAX + 2);
	char err[256];
	int rc;

	*has = false;
	net_cred_init(cred);
	if (!text)
		return -ENOMEM;
	if (given)
		rc = snprintf(text, TOKEN_TEXT_MAX + 2, "%s", given) > TOKEN_TEXT_MAX ? -E2BIG : 0;
	else
		rc = strata_find_token(NULL, NULL, NULL, text, TOKEN_TEXT_MAX + 2);
	if (!rc && text[0]) {
		rc = net_cred_from_token(cred, text, err, sizeof(err));
		if (rc)
			log_error("client", "%s", err);
		*has = !rc;
	}
	free(text);
	return rc;
}

/* The CA the caller named (its own TLS context), "" for plain TCP, or
 * NULL: the process default ($STRATA_TLS_CA, net_tls_default). */
static int take_tls(struct strata *s, const char *ca)
{
	char err[512];
	int rc;

	if (!ca)
		return 0;
	s->has_tls = true;
	if (!ca[0])
		return 0;
	rc = net_tls_client_new(ca, err, sizeof(err), &s->tls);
	if (rc)
		log_error("client", "%s", err);
	return rc;
}

/* Most meta servers a client chooses among. */
#define META_PICK_MAX 64

/* $STRATA_META_NODE, a node id, or 0 (unset or not a number). */
static uint32_t meta_pin_from_env(void)
{
	const char *v = getenv("STRATA_META_NODE");
	char *end;
	unsigned long n;

	if (!v || !v[0])
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	return errno || *end || n > UINT32_MAX ? 0 : (uint32_t)n;
}

/*
 * Which meta server to call (mc_ctx's resolver, meta_client.h), from the
 * cached map's UP meta services: the one called now while the map lists
 * it UP; after it failed a call, the next one listed (a newer map asked
 * for); a first pick, or one for a server the map no longer lists UP,
 * spreads clients by their seed and a handle's threads by their slot.
 */
static int find_meta(void *arg, struct mc_pick *p)
{
	struct strata *s = arg;
	struct cm_service up[META_PICK_MAX];
	uint64_t version;
	uint32_t n, k;

	if (p->refused)
		sclient_refresh(s->sc[0]);
	else if (p->node && p->version == sclient_map_version(s->sc[0]))
		return 0;	/* nothing changed */
	n = sclient_services(s->sc[0], CM_SVC_META, up, META_PICK_MAX, &version);
	if (!n)
		return -ENOENT;	/* none listed: keep calling the last one */
	if (n > META_PICK_MAX)
		n = META_PICK_MAX;
	for (k = 0; k < n && up[k].node_id != p->node; k++)
		;
	if (k < n && p->refused) {
		k = (k + 1) % n;
	} else if (k == n) {
		k = (uint32_t)((s->meta_seed + p->slot) % n);	/* slots spread */
		for (uint32_t i = 0; s->meta_pin && i < n; i++)
			if (up[i].node_id == s->meta_pin)
				k = i;
	}
	if (strlen(up[k].addr) >= sizeof(p->addr))
		return -ENAMETOOLONG;
	memcpy(p->addr, up[k].addr, strlen(up[k].addr) + 1);
	p->node = up[k].node_id;
	p->version = version;
	return 0;
}

int strata_connect(const char *mgmt_addr, const struct strata_opts *opts, struct strata **out)
{
	struct strata *s;
	struct sclient_opts so;
	struct proto_void none = { 0 };
	struct mt_statfs st;
	char meta_addr[CM_ADDR_LEN];
	uint64_t deadline, now;
	int rc;

	if (!mgmt_addr || !out)
		return -EINVAL;
	if (strlen(mgmt_addr) >= sizeof(s->mgmt))
		return -ENAMETOOLONG;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	strata_opts_init(&s->o, sizeof(s->o));
	if (opts) {
		size_t n = opts->opts_size < sizeof(s->o) ? opts->opts_size : sizeof(s->o);

		memcpy(&s->o, opts, n);
		s->o.opts_size = sizeof(s->o);
		if (!s->o.timeout_ms)
			s->o.timeout_ms = 10000;
		if (!s->o.retry_ms)
			s->o.retry_ms = 30000;
		if (!s->o.io_threads || s->o.io_threads > 64)
			s->o.io_threads = 2;
	}
	s->o.token = NULL;	/* not kept: the caller's strings */
	s->o.tls_ca = NULL;
	s->o.cache_dir = NULL;
	snprintf(s->mgmt, sizeof(s->mgmt), "%s", mgmt_addr);
	rc = cl_take_token(opts && opts->opts_size > offsetof(struct strata_opts, token)
				   ? opts->token : NULL, &s->cred, &s->has_cred);
	if (!rc)
		rc = take_tls(s, opts && opts->opts_size > offsetof(struct strata_opts, tls_ca)
				     ? opts->tls_ca : NULL);
	if (!rc)
		rc = cl_cache_setup(s, opts);
	if (!rc)
		rc = cl_meta_cache_setup(s, opts);
	if (!rc)
		rc = rpc_client_new("strata-meta", s->o.timeout_ms, &s->rpc);
	if (!rc && s->has_cred)
		rc = rpc_pool_set_cred(rpc_client_pool(s->rpc), &s->cred);
	if (!rc && s->has_tls)
		rpc_pool_set_tls(rpc_client_pool(s->rpc), s->tls);
	if (!rc)	/* meta calls on the calling thread (meta_client.h) */
		rc = rpc_client_add_lanes(s->rpc, rpc_lanes_count("STRATA_TEST_META_LANES",
								   META_LANES));
	if (rc)
		goto fail;
	s->nio = (int)s->o.io_threads;
	s->io_r = calloc((size_t)s->nio, sizeof(*s->io_r));
	s->sc = calloc((size_t)s->nio, sizeof(*s->sc));
	if (!s->io_r || !s->sc) {
		rc = -ENOMEM;
		goto fail;
	}
	sclient_opts_init(&so, sizeof(so));
	so.timeout_ms = s->o.timeout_ms;
	so.retry_ms = s->o.retry_ms;
	so.cred = s->has_cred ? &s->cred : NULL;
	so.has_tls = s->has_tls;
	so.tls = s->tls;
	for (int i = 0; i < s->nio; i++) {
		rc = reactor_new("strata-io", &s->io_r[i]);
		if (!rc)
			rc = reactor_start(s->io_r[i]);
		if (!rc)
			rc = sclient_new(s->io_r[i], mgmt_addr, &so, &s->sc[i]);
		if (rc)
			goto fail;
	}
	deadline = reactor_now_ms() + s->o.retry_ms;
	rc = sclient_wait_map(s->sc[0], s->o.retry_ms);
	if (rc)
		goto fail;
	/* The namespace is wherever the map lists a meta service. */
	now = reactor_now_ms();
	rc = sclient_find_service(s->sc[0], CM_SVC_META, 0,
				  now < deadline ? (uint32_t)(deadline - now) : 0, meta_addr,
				  sizeof(meta_addr), NULL);
	if (rc == -ENOENT)
		rc = STRATA_EUNAVAIL;	/* no meta service in the cluster map */
	if (!rc)
		rc = mc_ctx_init(&s->mc, s->rpc, meta_addr, s->o.timeout_ms);
	if (rc)
		goto fail;
	s->mc.retry_ms = s->o.retry_ms;
	/* Not a secret, only a spread: clients of one host differ by pid and
	 * time, threads of one process by the handle's address. */
	s->meta_seed = splitmix64(now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)s);
	s->meta_pin = meta_pin_from_env();
	{
		const char *no = getenv("STRATA_TEST_NO_INLINE");

		s->inl_off = no && strcmp(no, "1") == 0;
	}
	s->mc.resolve = find_meta;
	s->mc.resolve_arg = s;
	/* It answers once its store is open. */
	while ((rc = MC_CALL(&s->mc, md_statfs, &none, &st)) != 0 && reactor_now_ms() < deadline)
		usleep(100 * 1000);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	strata_disconnect(s);
	return rc;
}

/* ---- paths ---- */

/* Splits path into its parent's path (in parent[PATH_MAX_LEN]) and last
 * name. Returns 0, -EINVAL (not absolute, or "/" itself),
 * -ENAMETOOLONG. */
static int split_path(const char *path, char *parent, const char **name)
{
	size_t n;
	const char *slash;

	if (!path || path[0] != '/')
		return -EINVAL;
	n = strlen(path);
	if (n >= PATH_MAX_LEN)
		return -ENAMETOOLONG;
	memcpy(parent, path, n + 1);
	while (n > 1 && parent[n - 1] == '/')
		parent[--n] = '\0';
	if (n == 1)
		return -EINVAL;	/* the root has no parent entry */
	slash = strrchr(parent, '/');
	*name = path + (slash - parent) + 1;
	parent[slash - parent == 0 ? 1 : slash - parent] = '\0';
	if (strlen(parent + strlen(parent) + 1) > MD_NAME_MAX)
		return -ENAMETOOLONG;
	/* name points into path: cut trailing slashes there too. */
	return 0;
}

/* The inode path names (flags: MD_RESOLVE_*). */
static int resolve(struct strata *s, const char *path, uint32_t flags, struct mt_inode *out)
{
	struct mt_resolve rq = { .path = pstr_c(path), .flags = flags };

	return MC_CALL(&s->mc, md_resolve, &rq, out);
}

/* Resolves path's parent directory; *name gets the last component copied
 * into namebuf[MD_NAME_MAX + 1]. */
static int split_name(const char *path, char *pp, char *namebuf);

static int resolve_parent(struct strata *s, const char *path, struct mt_inode *parent,
			  char *namebuf)
{
	char pp[PATH_MAX_LEN];
	int rc = split_name(path, pp, namebuf);

	return rc ? rc : resolve(s, pp, MD_RESOLVE_FOLLOW, parent);
}

/* Splits path into its parent directory (into pp[PATH_MAX_LEN]) and its
 * last component (into namebuf[MD_NAME_MAX + 1]), as resolve_parent. */
static int split_name(const char *path, char *pp, char *namebuf)
{
	const char *name;
	size_t n;
	int rc = split_path(path, pp, &name);

	if (rc)
		return rc;
	n = strcspn(name, "/");
	if (n > MD_NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(namebuf, name, n);
	namebuf[n] = '\0';
	return 0;
}

/* The handle of inode in. Path calls act on what they resolved by number
 * alone: a path is looked up afresh by every call, and an inode removed
 * in between stays -ENOENT, as it was before generations. */
static struct mt_handle by_number(const struct mt_inode *in)
{
	struct mt_handle h = { in->ino, 0 };

	return h;
}

static int check_path(const char *path)
{
	if (!path || path[0] != '/')
		return -EINVAL;
	if (strlen(path) >= PATH_MAX_LEN)
		return -ENAMETOOLONG;
	return 0;
}

/* The handle of open file f. */
static struct mt_handle file_handle(const struct strata_file *f)
{
	struct mt_handle h = { f->ino, f->gen };

	return h;
}

/* ---- chunk I/O ---- */

/*
 * Reads of READ_PIECE or more are cut into pieces of READ_PIECE (aligned
 * to it in the file) as well as at chunk boundaries: the pieces go to
 * different replicas in parallel (any serving replica may answer a read)
 * and land straight in the caller's buffer. Writes are cut at chunk
 * boundaries only: every piece of a chunk enters at the same head.
 */
#define READ_PIECE (1024u * 1024u)

static uint64_t piece_size(const struct strata_file *f, enum sc_kind kind, uint64_t len)
{
	uint64_t cs = f->layout.chunk_size, ps = cs;

	if (kind == SC_READ && len >= 2 * READ_PIECE && cs > READ_PIECE)
		ps = READ_PIECE;
	/* A cached file's reads never cross a cache block. */
	if (kind == SC_READ && f->cache_ver && f->cache_bs < ps)
		ps = f->cache_bs;
	return ps;
}

uint32_t cl_npieces(const struct strata_file *f, enum sc_kind kind, uint64_t len, uint64_t off)
{
	uint64_t ps = piece_size(f, kind, len);

	if (len == 0)
		return 0;
	return (uint32_t)((off + len - 1) / ps - off / ps + 1);
}

uint32_t cl_split(struct strata_file *f, enum sc_kind kind, const struct sp_cap *cap,
		  uint8_t *buf, uint64_t len, uint64_t off, struct io_piece *pieces,
		  uint32_t max)
{
	uint64_t cs = f->layout.chunk_size, ps = piece_size(f, kind, len);
	uint32_t n = 0;

	while (len > 0 && n < max) {
		uint64_t idx = off / cs;
		uint32_t in = (uint32_t)(off % cs);
		uint64_t room = ps - off % ps;	/* ps divides cs: never crosses a chunk */
		uint32_t take = (uint32_t)(room < len ? room : len);
		struct sc_io *io = &pieces[n].io;

		memset(io, 0, sizeof(*io));
		io->kind = kind;
		io->ino = f->ino;
		io->idx = idx;
		io->cap = *cap;
		io->chain_idx = layout_chain_index(&f->layout, idx);
		io->offset = in;
		io->len = take;
		io->buf = buf;
		buf += take;
		off += take;
		len -= take;
		n++;
	}
	return n;
}

void cl_note_write(struct strata_file *f, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&f->lock);
	cl_inline_mark(f, off, len);
	if (off + len > f->size)
		f->size = off + len;
	f->dirty = true;
	pthread_mutex_unlock(&f->lock);
}

struct sync_group {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t left;
	int err;
};

static void piece_done(struct sc_io *io)
{
	struct io_piece *p = (struct io_piece *)io;
	struct sync_group *g = p->owner;

	pthread_mutex_lock(&g->lock);
	if (io->status && !g->err)
		g->err = io->status;
	if (--g->left == 0)
		pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

void cl_file_cap_stale(struct strata_file *f)
{
	pthread_mutex_lock(&f->lock);
	f->cap_stale = true;
	pthread_mutex_unlock(&f->lock);
}

/* A meta call about f acts for the caller f was opened for, whichever
 * thread makes it: file_caller_enter, the call, file_caller_leave. */
struct caller_save {
	bool had;
	struct net_caller c;
};

static void file_caller_enter(const struct strata_file *f, struct caller_save *sv)
{
	const struct net_caller *cur = net_caller_current();

	sv->had = cur != NULL;
	if (cur)
		sv->c = *cur;
	net_caller_set(f->has_caller ? &f->caller : NULL);
}

static void file_caller_leave(const struct caller_save *sv)
{
	net_caller_set(sv->had ? &sv->c : NULL);
}

int cl_file_cap(struct strata_file *f, bool force, struct sp_cap *out)
{
	int64_t now = now_ns() / 1000000000;
	int acc = f->flags & 3;
	struct mt_open rq = {
		.h = file_handle(f),
		.flags = acc == STRATA_O_WRONLY ? MD_O_WRONLY :
			 acc == STRATA_O_RDWR ? MD_O_RDWR : MD_O_RDONLY,
	};
	struct mt_attr_rep rep;
	struct caller_save sv;
	struct cl_inl inl;
	bool renew;
	int rc;

	pthread_mutex_lock(&f->lock);
	/* A cluster without a key gives no caps (expiry 0): nothing to
	 * renew unless storage refused one. */
	renew = force || f->cap_stale || (f->cap.expiry && f->cap.expiry - now < CAP_REFRESH_S);
	*out = f->cap;
	pthread_mutex_unlock(&f->lock);
	if (!renew)
		return 0;
	/* Two threads may both renew: either cap serves. */
	/* The *_INL form: the file may have become inline again since (an
	 * older OPEN of it is refused); its bytes are not wanted here. */
	file_caller_enter(f, &sv);
	rc = cl_open_h(f->s, &rq, &rep, &inl);
	file_caller_leave(&sv);
	cl_inl_release(&inl);
	if (rc)
		return rc;
	pthread_mutex_lock(&f->lock);
	f->cap = rep.cap;
	f->cap_stale = false;
	*out = f->cap;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* Runs an I/O over chunks in parallel and waits, once. */
static int run_pieces_once(struct strata_file *f, enum sc_kind kind, const struct sp_cap *cap,
			   uint8_t *buf, uint64_t len, uint64_t off)
{
	struct io_piece local[8], *pieces = local;
	uint32_t n = cl_npieces(f, kind, len, off);
	struct sync_group g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

	if (n == 0)
		return 0;
	if (n > 8) {
		pieces = calloc(n, sizeof(*pieces));
		if (!pieces)
			return -ENOMEM;
	}
	n = cl_split(f, kind, cap, buf, len, off, pieces, n);
	g.left = n;
	for (uint32_t i = 0; i < n; i++) {
		pieces[i].owner = &g;
		pieces[i].io.cb = piece_done;
		cl_submit(f, &pieces[i]);
	}
	pthread_mutex_lock(&g.lock);
	while (g.left)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
	if (pieces != local)
		free(pieces);
	return g.err;
}

/* Runs an I/O with f's chunk capability; one storage refuses (expired
 * meanwhile, or none given at open) is renewed once and the I/O run
 * again: every piece is idempotent (a write writes the same bytes). */
int cl_run(struct strata_file *f, enum sc_kind kind, uint8_t *buf, uint64_t len, uint64_t off)
{
	struct sp_cap cap;
	int rc = cl_file_cap(f, false, &cap);

	if (!rc)
		rc = run_pieces_once(f, kind, &cap, buf, len, off);
	if (rc == -EACCES && !(rc = cl_file_cap(f, true, &cap)))
		rc = run_pieces_once(f, kind, &cap, buf, len, off);
	return rc;
}

int cl_cut(struct strata *s, uint64_t ino, const struct mt_trunc *tr, const struct sp_cap *cap)
{
	struct file_layout l;
	struct sc_io io = { 0 };
	int rc;

	if (!tr->partial)
		return 0;
	mt_layout_get(&tr->layout, &l);
	io.kind = SC_TRUNCATE;
	io.ino = ino;
	io.idx = tr->chunk;
	io.cap = *cap;
	io.chain_idx = layout_chain_index(&l, tr->chunk);
	io.len = tr->len;
	rc = sc_sync(cl_pick_sc(s), &io);
	return rc == -ENOENT ? 0 : rc;
}

/* ---- files ---- */

int cl_file_new(struct strata *s, const struct mt_inode *in, int flags,
		const struct mt_trunc *tr, const struct sp_cap *cap, struct cl_inl *inl,
		bool fresh, struct strata_file **out)
{
	struct cl_inl none = { 0 };
	struct strata_file *f;
	int rc = cl_cut(s, in->ino, tr, cap);

	if (!inl)
		inl = &none;
	if (rc) {
		cl_inl_release(inl);
		return rc;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		cl_inl_release(inl);
		return -ENOMEM;
	}
	f->s = s;
	f->ino = in->ino;
	f->gen = in->gen;
	mt_layout_get(&in->layout, &f->layout);
	f->flags = flags;
	f->size = in->size;
	f->cap = *cap;
	at_fill_stat(in, &f->open_st);
	if (net_caller_current()) {
		f->has_caller = true;
		f->caller = *net_caller_current();
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->wlock, NULL);
	rc = cl_inline_attach(f, inl, fresh);
	if (rc) {
		strata_close(f);
		return rc;
	}
	/* Bytes held inline are never cached: they came with the open. */
	if (!f->inl_on)
		cl_cache_file(f, in);
	*out = f;
	return 0;
}

int strata_set_caller(uint32_t uid, uint32_t ngids, const uint32_t *gids)
{
	struct net_caller c = { .uid = uid, .ngids = ngids };

	if (ngids > STRATA_CALLER_GIDS_MAX || ngids > TOKEN_GIDS_MAX || (ngids && !gids))
		return -EINVAL;
	if (ngids)
		memcpy(c.gids, gids, ngids * sizeof(*gids));
	net_caller_set(&c);
	return 0;
}

void strata_clear_caller(void)
{
	net_caller_set(NULL);
}


int strata_open(struct strata *s, const char *path, int flags, uint32_t mode,
		struct strata_file **out)
{
	struct mt_attr_rep rep;
	struct mt_open_path orq;
	struct mt_inode in;
	struct cl_inl inl = { 0 };
	char name[MD_NAME_MAX + 1], pp[PATH_MAX_LEN];
	int acc = flags & 3, rc;
	bool fresh;

	if (!s || !out || acc == 3)
		return -EINVAL;
	rc = check_path(path);
	if (rc)
		return rc;
	memset(&rep, 0, sizeof(rep));
	if (flags & STRATA_O_CREAT) {
		/* One round trip: the parent is resolved by meta
		 * (CREATE_PATH). */
		struct mt_create_path rq = {
			.mode = (mode & 07777) | S_IFREG, .uid = getuid(), .gid = getgid(),
			.flags = ((flags & STRATA_O_EXCL) ? MD_CREATE_EXCL : 0) |
				 ((flags & STRATA_O_TRUNC) ? MD_CREATE_TRUNC : 0),
		};

		rc = split_name(path, pp, name);
		if (rc == -EINVAL && strcmp(path, "/") != 0)
			return rc;
		if (rc == -EINVAL)
			return -EISDIR;
		if (rc)
			return rc;
		rq.dir = pstr_c(pp);
		rq.name = pstr_c(name);
		rc = cl_create_path(s, &rq, &rep, &inl);
		cl_meta_changed(s);
		in = rep.inode;
		fresh = !rc && (rep.created || (flags & STRATA_O_TRUNC));
		if (rc == -EISDIR || (rc == -EEXIST && !(flags & STRATA_O_EXCL))) {
			/* An existing entry that is not a plain file. */
			rc = resolve(s, path, MD_RESOLVE_FOLLOW, &in);
			if (!rc && S_ISDIR(in.mode))
				rc = -EISDIR;
		}
		if (rc < 0) {
			cl_inl_release(&inl);
			return rc;
		}
	} else {
		/* Always an OPEN, not only to truncate: meta checks the
		 * caller's permission to read or write the file there. One
		 * round trip: meta resolves the path (OPEN_PATH); a
		 * directory is refused there when opened for writing, here
		 * when for reading. */
		orq.path = pstr_c(path);
		orq.flags = acc == STRATA_O_WRONLY ? MD_O_WRONLY :
			    acc == STRATA_O_RDWR ? MD_O_RDWR : MD_O_RDONLY;
		if ((flags & STRATA_O_TRUNC) && acc != STRATA_O_RDONLY)
			orq.flags |= MD_O_TRUNC;
		rc = cl_open_path(s, &orq, &rep, &inl);
		if (orq.flags & MD_O_TRUNC)
			cl_meta_changed(s);
		if (rc)
			return rc;
		in = rep.inode;
		fresh = (orq.flags & MD_O_TRUNC) != 0;
		if (S_ISDIR(in.mode)) {
			cl_inl_release(&inl);
			return -EISDIR;
		}
	}
	return cl_file_new(s, &in, flags, &rep.trunc, &rep.cap, &inl, fresh, out);
}

int strata_fsync(struct strata_file *f)
{
	struct caller_save sv;
	struct mt_set_size rq;
	struct mt_inode in;
	uint64_t size;
	bool dirty, inl, done;
	int rc;

	if (!f)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	dirty = f->dirty;
	inl = f->inl_w;
	f->dirty = false;
	pthread_mutex_unlock(&f->lock);
	if (!dirty)
		return 0;
	if (inl) {
		/* The whole content, inline, in one meta call. */
		file_caller_enter(f, &sv);
		rc = cl_inline_publish(f, &done);
		file_caller_leave(&sv);
		if (rc || done)
			goto out;
	}
	pthread_mutex_lock(&f->lock);
	size = f->size;
	f->dirty = false;
	pthread_mutex_unlock(&f->lock);
	/* Chunk writes are on every replica when acknowledged; publishing the
	 * length makes them visible to new opens. */
	rq.h = file_handle(f);
	rq.size = size;
	rq.mtime_ns = now_ns();
	file_caller_enter(f, &sv);
	rc = MC_CALL(&f->s->mc, md_set_size, &rq, &in);
	/* Another handle published the file inline after our chunk writes:
	 * merge its bytes with ours, then publish the length again. */
	for (int i = 0; i < 4 && rc == -EMEDIUMTYPE; i++) {
		rc = cl_inline_merge(f);
		if (!rc)
			rc = MC_CALL(&f->s->mc, md_set_size, &rq, &in);
	}
	file_caller_leave(&sv);
	cl_meta_changed(f->s);
out:
	if (rc) {
		pthread_mutex_lock(&f->lock);
		f->dirty = true;
		pthread_mutex_unlock(&f->lock);
	}
	return rc;
}

int strata_close(struct strata_file *f)
{
	int rc;

	if (!f)
		return -EINVAL;
	rc = strata_fsync(f);
	cl_inline_free(f);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->wlock);
	free(f);
	return rc;
}

ssize_t strata_pread(struct strata_file *f, void *buf, size_t len, uint64_t off)
{
	uint64_t size;
	int rc;

	if (!f || (!buf && len))
		return -EINVAL;
	if ((f->flags & 3) == STRATA_O_WRONLY)
		return -EBADF;
	pthread_mutex_lock(&f->lock);
	size = f->size;
	pthread_mutex_unlock(&f->lock);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	if (cl_inline_read(f, buf, len, off))
		return (ssize_t)len;
	rc = cl_run(f, SC_READ, buf, len, off);
	return rc ? rc : (ssize_t)len;
}

ssize_t strata_pwrite(struct strata_file *f, const void *buf, size_t len, uint64_t off)
{
	int rc;

	if (!f || (!buf && len))
		return -EINVAL;
	if ((f->flags & 3) == STRATA_O_RDONLY)
		return -EBADF;
	if (len > SSIZE_MAX || off + len < off)
		return -EINVAL;
	rc = cl_inline_write(f, buf, len, off, (f->flags & STRATA_O_APPEND) != 0, &off);
	if (rc <= 0)
		return rc ? rc : (ssize_t)len;
	if (f->flags & STRATA_O_APPEND) {
		pthread_mutex_lock(&f->lock);
		off = f->size;
		pthread_mutex_unlock(&f->lock);
	}
	rc = cl_run(f, SC_WRITE, (uint8_t *)buf, len, off);
	if (rc)
		return rc;
	if (len)
		cl_note_write(f, off, len);
	return (ssize_t)len;
}

/* Sets the size of h (TRUNCATE), cutting the chunk that straddles it. */
static int do_truncate(struct strata *s, struct mt_handle h, uint64_t size)
{
	struct mt_truncate rq = { .h = h, .size = size };
	struct mt_attr_rep rep;
	int rc = MC_CALL(&s->mc, md_truncate, &rq, &rep);

	cl_meta_changed(s);
	if (rc == -EMEDIUMTYPE) {
		/* An inline file grown past the inline bound: chunks first. */
		struct mt_truncate again = { .h = h, .size = size };

		rc = cl_inline_convert(s, h);
		if (!rc)
			rc = MC_CALL(&s->mc, md_truncate, &again, &rep);
		cl_meta_changed(s);
	}
	return rc ? rc : cl_cut(s, h.ino, &rep.trunc, &rep.cap);
}

int strata_ftruncate(struct strata_file *f, uint64_t size)
{
	int rc;

	if (!f)
		return -EINVAL;
	if ((f->flags & 3) == STRATA_O_RDONLY)
		return -EBADF;
	rc = cl_inline_truncate(f, size);
	if (rc == 0)
		return strata_fsync(f);	/* published at once, as a TRUNCATE is */
	if (rc < 0)
		return rc;
	/* Publish our writes first so the truncation is ordered after them. */
	rc = strata_fsync(f);
	if (!rc)
		rc = do_truncate(f->s, file_handle(f), size);
	if (!rc) {
		pthread_mutex_lock(&f->lock);
		f->size = size;
		cl_inline_unmark(f, size);
		pthread_mutex_unlock(&f->lock);
	}
	return rc;
}

int strata_fstat(struct strata_file *f, struct strata_stat *st)
{
	struct caller_save sv;
	struct mt_ino rq;
	struct mt_inode in;
	int rc;

	if (!f || !st)
		return -EINVAL;
	rq.h = file_handle(f);
	file_caller_enter(f, &sv);
	rc = MC_CALL(&f->s->mc, md_getattr, &rq, &in);
	file_caller_leave(&sv);
	if (rc)
		return rc;
	pthread_mutex_lock(&f->lock);
	if (f->size > in.size)
		in.size = f->size;
	pthread_mutex_unlock(&f->lock);
	at_fill_stat(&in, st);
	return 0;
}

int strata_fstat_open(struct strata_file *f, struct strata_stat *st)
{
	if (!f || !st)
		return -EINVAL;
	*st = f->open_st;
	pthread_mutex_lock(&f->lock);
	if (f->size > st->size)
		st->size = f->size;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* stat and lstat: through the metadata cache when it is on. */
static int do_stat(struct strata *s, const char *path, struct strata_stat *st, uint32_t flags)
{
	enum mcache_kind kind = flags & MD_RESOLVE_FOLLOW ? MCACHE_PATH : MCACHE_LPATH;
	struct mt_inode in;
	uint64_t epoch;
	int rc = check_path(path);

	if (!s || !st)
		return -EINVAL;
	if (!rc && cl_meta_cached(s)) {
		size_t len = strlen(path);

		rc = mcache_get(s->mcache, kind, path, len, &in);
		if (rc == 1) {
			epoch = mcache_epoch(s->mcache);
			rc = resolve(s, path, flags, &in);
			mcache_put(s->mcache, kind, path, len, epoch, rc, &in);
		}
	} else if (!rc) {
		rc = resolve(s, path, flags, &in);
	}
	if (!rc)
		at_fill_stat(&in, st);
	return rc;
}

int strata_stat(struct strata *s, const char *path, struct strata_stat *st)
{
	return do_stat(s, path, st, MD_RESOLVE_FOLLOW);
}

int strata_lstat(struct strata *s, const char *path, struct strata_stat *st)
{
	return do_stat(s, path, st, 0);
}

/* ---- namespace ---- */

/* Resolves path's parent and runs fn on (parent, name); the root itself
 * has no parent entry and gets root_err. */
static int on_parent(struct strata *s, const char *path, int root_err,
		     int (*fn)(struct strata *s, struct mt_handle parent, const char *name,
			       uint32_t mode),
		     uint32_t mode)
{
	struct mt_inode parent;
	char name[MD_NAME_MAX + 1];
	int rc;

	if (!s)
		return -EINVAL;
	rc = resolve_parent(s, path, &parent, name);
	if (rc == -EINVAL && path && strcmp(path, "/") == 0)
		return root_err;
	if (rc)
		return rc;
	return fn(s, by_number(&parent), name, mode);
}

static int do_mkdir(struct strata *s, struct mt_handle parent, const char *name, uint32_t mode)
{
	struct mt_inode in;

	return at_mkdir(s, parent, name, mode, &in);
}

static int do_rmdir(struct strata *s, struct mt_handle parent, const char *name, uint32_t mode)
{
	(void)mode;
	return at_remove(s, parent, name, true);
}

int strata_mkdir(struct strata *s, const char *path, uint32_t mode)
{
	return on_parent(s, path, -EEXIST, do_mkdir, mode);
}

int strata_rmdir(struct strata *s, const char *path)
{
	return on_parent(s, path, -EBUSY, do_rmdir, 0);
}

int strata_unlink(struct strata *s, const char *path)
{
	char name[MD_NAME_MAX + 1], pp[PATH_MAX_LEN];
	struct proto_void none;
	struct mt_path_name rq;
	int rc;

	if (!s)
		return -EINVAL;
	rc = split_name(path, pp, name);
	if (rc == -EINVAL && path && strcmp(path, "/") == 0)
		return -EISDIR;
	if (rc)
		return rc;
	/* One round trip: meta resolves the parent (UNLINK_PATH). */
	rq.dir = pstr_c(pp);
	rq.name = pstr_c(name);
	rc = MC_CALL(&s->mc, md_unlink_path, &rq, &none);
	cl_meta_changed(s);
	return rc;
}

int strata_rename(struct strata *s, const char *from, const char *to, unsigned flags)
{
	struct mt_inode sp, dp;
	char sn[MD_NAME_MAX + 1], dn[MD_NAME_MAX + 1];
	int rc;

	if (!s || (flags & ~(STRATA_RENAME_NOREPLACE | STRATA_RENAME_EXCHANGE)))
		return -EINVAL;
	rc = resolve_parent(s, from, &sp, sn);
	if (!rc)
		rc = resolve_parent(s, to, &dp, dn);
	if (rc)
		return rc == -EINVAL && ((from && !strcmp(from, "/")) || (to && !strcmp(to, "/"))) ?
		       -EBUSY : rc;
	return at_rename(s, by_number(&sp), sn, by_number(&dp), dn, flags);
}

int strata_truncate(struct strata *s, const char *path, uint64_t size)
{
	struct mt_inode in;
	int rc = check_path(path);

	if (!s)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, path, MD_RESOLVE_FOLLOW, &in);
	if (!rc && S_ISDIR(in.mode))
		rc = -EISDIR;
	if (!rc)
		rc = do_truncate(s, by_number(&in), size);
	return rc;
}

int strata_symlink(struct strata *s, const char *target, const char *linkpath)
{
	struct mt_inode parent, in;
	char name[MD_NAME_MAX + 1];
	int rc;

	if (!s || !target)
		return -EINVAL;
	rc = resolve_parent(s, linkpath, &parent, name);
	if (rc)
		return rc;
	return at_symlink(s, by_number(&parent), name, target, &in);
}

static int do_mknod(struct strata *s, struct mt_handle parent, const char *name, uint32_t mode)
{
	struct mt_inode in;

	return at_mknod(s, parent, name, mode, &in);
}

int strata_mknod(struct strata *s, const char *path, uint32_t mode)
{
	return on_parent(s, path, -EEXIST, do_mknod, mode);
}

int strata_link(struct strata *s, const char *oldpath, const char *newpath)
{
	struct mt_inode src, parent, in;
	char name[MD_NAME_MAX + 1];
	int rc = check_path(oldpath);

	if (!s)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, oldpath, 0, &src);	/* link(2) does not follow */
	if (!rc)
		rc = resolve_parent(s, newpath, &parent, name);
	return rc ? rc : at_link(s, by_number(&src), by_number(&parent), name, &in);
}

ssize_t strata_readlink(struct strata *s, const char *path, char *buf, size_t len)
{
	struct mt_inode in;
	int rc = check_path(path);

	if (!s || !buf || !len)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, path, 0, &in);
	if (rc)
		return rc;
	return mc_readlink(&s->mc, by_number(&in), buf, len);
}

int strata_setattr(struct strata *s, const char *path, unsigned mask, const struct strata_stat *st)
{
	struct mt_inode in;
	int rc = check_path(path);

	if (!s || !st)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, path, MD_RESOLVE_FOLLOW, &in);
	return rc ? rc : at_setattr(s, by_number(&in), mask, st, NULL);
}

/* ---- directories ---- */

#define DIR_PAGE 256

struct strata_dir {
	struct strata *s;
	struct mt_handle h;
	char cookie[MD_NAME_MAX + 1];
	bool eof;
	struct strata_dirent ents[DIR_PAGE];
	uint32_t n, pos;
};

int strata_opendir(struct strata *s, const char *path, struct strata_dir **out)
{
	struct mt_inode in;
	struct strata_dir *d;
	int rc = check_path(path);

	if (!s || !out)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, path, MD_RESOLVE_FOLLOW, &in);
	if (rc)
		return rc;
	if (!S_ISDIR(in.mode))
		return -ENOTDIR;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->s = s;
	d->h = by_number(&in);
	*out = d;
	return 0;
}

static int collect(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct strata_dir *d = arg;
	struct strata_dirent *e = &d->ents[d->n++];

	snprintf(e->name, sizeof(e->name), "%s", name);
	e->ino = ino;
	e->mode = type;
	return 0;
}

int strata_readdir(struct strata_dir *d, struct strata_dirent *ent)
{
	if (!d || !ent)
		return -EINVAL;
	if (d->pos == d->n) {
		int rc;

		if (d->eof)
			return 0;
		d->n = 0;
		d->pos = 0;
		rc = mc_readdir(&d->s->mc, d->h, d->cookie, DIR_PAGE, collect, d, d->cookie,
				sizeof(d->cookie), &d->eof);
		if (rc < 0)
			return rc;
		if (d->n == 0)
			return 0;
	}
	*ent = d->ents[d->pos++];
	return 1;
}

void strata_closedir(struct strata_dir *d)
{
	free(d);
}

int strata_statfs(struct strata *s, struct strata_statfs *st)
{
	struct proto_void none = { 0 };
	struct mt_statfs ns;
	int rc;

	if (!s || !st)
		return -EINVAL;
	rc = MC_CALL(&s->mc, md_statfs, &none, &ns);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->files = ns.inodes;
	st->used = ns.bytes;
	st->chains = ns.table_len;
	sclient_map_summary(s->sc[0], &st->nodes, &st->targets, &st->replication, &st->capacity);
	return 0;
}

int strata_set_layout(struct strata *s, const char *dir, const struct strata_layout *l)
{
	struct mt_set_layout rq = { 0 };
	struct proto_void none = { 0 };
	struct mt_inode in;
	int rc = check_path(dir);

	if (!s || !l)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, dir, MD_RESOLVE_FOLLOW, &in);
	if (rc)
		return rc;
	rq.dir = by_number(&in);
	rq.layout.chunk_size = l->chunk_size ? l->chunk_size : in.layout.chunk_size;
	rq.layout.stripe = l->stripe;
	rc = MC_CALL(&s->mc, md_set_layout, &rq, &none);
	cl_meta_changed(s);
	return rc;
}

int strata_get_layout(struct strata *s, const char *path, struct strata_layout *l)
{
	struct mt_layout fl;
	struct mt_inode in;
	struct mt_ino rq;
	int rc = check_path(path);

	if (!s || !l)
		return -EINVAL;
	if (!rc)
		rc = resolve(s, path, MD_RESOLVE_FOLLOW, &in);
	if (!rc) {
		rq.h = by_number(&in);
		rc = MC_CALL(&s->mc, md_get_layout, &rq, &fl);
	}
	if (rc)
		return rc;
	l->chunk_size = fl.chunk_size;
	l->stripe = fl.stripe;
	return 0;
}
