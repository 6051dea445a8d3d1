/*
 * Namespace permissions: see access.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "meta/access.h"

#define COMP "meta"

/* ---- the pure half ---- */

void acc_cred_of(struct acc_cred *c, const struct token_claims *claims,
		 const struct net_caller *caller)
{
	uint32_t asked = claims->uid, ngids = claims->ngids;
	const uint32_t *gids = claims->gids;

	/* The caller counts only for a token that allows it (the server
	 * refuses the request otherwise; this is the second lock). */
	if (caller && (claims->flags & TOKEN_F_CALLER)) {
		asked = caller->uid;
		ngids = caller->ngids;
		gids = caller->gids;
	}
	memset(c, 0, sizeof(*c));
	c->uid = token_effective_uid(claims, caller ? asked : UINT32_MAX);
	/* A squashed root must not keep group 0 (or any group the token
	 * names for the identity it lost): nobody's group only. */
	if (c->uid == TOKEN_NOBODY && asked != TOKEN_NOBODY) {
		c->ngids = 1;
		c->gids[0] = TOKEN_NOBODY;
		return;
	}
	c->ngids = ngids < TOKEN_GIDS_MAX ? ngids : TOKEN_GIDS_MAX;
	memcpy(c->gids, gids, c->ngids * sizeof(c->gids[0]));
}

bool acc_in_group(const struct acc_cred *c, uint32_t gid)
{
	for (uint32_t i = 0; i < c->ngids; i++)
		if (c->gids[i] == gid)
			return true;
	return false;
}

int acc_check(const struct acc_cred *c, const struct meta_inode *in, unsigned want)
{
	unsigned bits;

	want &= ACC_R | ACC_W | ACC_X;
	if (c->uid == 0) {
		if (!(want & ACC_X) || S_ISDIR(in->mode) || (in->mode & 0111))
			return 0;
		return -EACCES;
	}
	if (in->uid == c->uid)
		bits = (in->mode >> 6) & 7;
	else if (acc_in_group(c, in->gid))
		bits = (in->mode >> 3) & 7;
	else
		bits = in->mode & 7;
	return (bits & want) == want ? 0 : -EACCES;
}

int acc_sticky(const struct acc_cred *c, const struct meta_inode *dir,
	       const struct meta_inode *victim)
{
	if (!(dir->mode & S_ISVTX) || c->uid == 0)
		return 0;
	if (c->uid == victim->uid || c->uid == dir->uid)
		return 0;
	return -EPERM;
}

int acc_link(const struct acc_cred *c, const struct meta_inode *in)
{
	if (c->uid == 0 || c->uid == in->uid)
		return 0;
	if (!S_ISREG(in->mode) || (in->mode & S_ISUID) ||
	    (in->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		return -EPERM;
	return acc_check(c, in, ACC_R | ACC_W) ? -EPERM : 0;
}

int acc_setattr(const struct acc_cred *c, const struct meta_inode *in, uint32_t mask,
		const struct meta_inode *to, uint32_t *mode)
{
	bool root = c->uid == 0, owner = root || c->uid == in->uid;
	int rc;

	if ((mask & NS_ATTR_MODE) && !owner)
		return -EPERM;
	if ((mask & NS_ATTR_UID) && !root && to->uid != in->uid)
		return -EPERM;
	if ((mask & NS_ATTR_GID) && !root &&
	    (!owner || (to->gid != in->gid && !acc_in_group(c, to->gid))))
		return -EPERM;
	if ((mask & (NS_ATTR_ATIME | NS_ATTR_MTIME)) && !owner)
		return -EPERM;
	if ((mask & (NS_ATTR_ATIME_NOW | NS_ATTR_MTIME_NOW)) && !owner) {
		rc = acc_check(c, in, ACC_W);
		if (rc)
			return rc;
	}
	if (mask & NS_ATTR_SIZE) {
		rc = acc_check(c, in, ACC_W);
		if (rc)
			return rc;
	}
	/* The group the file will have: a chown in the same call counts. */
	if (mode && !root && !S_ISDIR(in->mode) && (*mode & S_ISGID) &&
	    !acc_in_group(c, (mask & NS_ATTR_GID) ? to->gid : in->gid))
		*mode &= ~(uint32_t)S_ISGID;
	return 0;
}

static bool chain_has(const uint64_t *chain, uint32_t n, uint64_t ino)
{
	for (uint32_t i = 0; i < n; i++)
		if (chain[i] == ino)
			return true;
	return false;
}

enum acc_reach acc_reach_of(const struct acc_scope *sc, uint32_t nsc, const uint64_t *chain,
			    uint32_t nchain)
{
	enum acc_reach best = ACC_NONE;

	if (!nchain)
		return ACC_NONE;
	for (uint32_t i = 0; i < nsc; i++) {
		const struct acc_scope *s = &sc[i];
		uint32_t pass = s->complete && s->n ? s->n - 1 : s->n;

		if (s->complete && s->n && chain_has(chain, nchain, s->ino[s->n - 1])) {
			enum acc_reach r = s->write ? ACC_WRITE : ACC_READ;

			if (r > best)
				best = r;
		} else if (best < ACC_PASS && chain_has(s->ino, pass, chain[0])) {
			best = ACC_PASS;
		}
	}
	/* The root is always traversable, whatever the scopes. */
	if (best < ACC_PASS && nchain == 1 && chain[0] == NS_ROOT_INO)
		best = ACC_PASS;
	return best;
}

/* ---- a request's view ---- */

void acc_ctx_init(struct acc_ctx *a, struct ns *ns, const struct net_ident *id,
		  const struct net_caller *caller)
{
	memset(a, 0, sizeof(*a));
	a->ns = ns;
	a->trusted = !id || id->role != NET_ROLE_CLIENT;
	if (a->trusted)
		return;
	a->claims = &id->claims;
	acc_cred_of(&a->cred, a->claims, caller);
	for (uint32_t i = 0; i < a->claims->npaths; i++) {
		const struct token_path *p = &a->claims->paths[i];

		if (!strcmp(p->prefix, "/")) {
			enum acc_reach r = p->write ? ACC_WRITE : ACC_READ;

			if (r > a->all)
				a->all = r;
		}
	}
}

void acc_ctx_release(struct acc_ctx *a)
{
	free(a->sc);
	free(a->chain);
	a->sc = NULL;
	a->chain = NULL;
}

/*
 * Resolves prefix component by component from the root. A symlink ends
 * it: a scope names a directory, and following a link would let whoever
 * may write the link's directory move the scope elsewhere.
 */
static int scope_resolve(struct acc_ctx *a, const struct token_path *p, struct acc_scope *s)
{
	const char *c = p->prefix;
	char name[NS_NAME_MAX + 1];
	struct meta_inode in;
	uint64_t cur = NS_ROOT_INO;
	int rc;

	s->write = p->write;
	s->ino[0] = NS_ROOT_INO;
	s->n = 1;
	for (;;) {
		size_t len;

		while (*c == '/')
			c++;
		if (!*c)
			break;
		len = strcspn(c, "/");
		if (len > NS_NAME_MAX || s->n == ACC_SCOPE_DEPTH)
			return 0;
		memcpy(name, c, len);
		name[len] = '\0';
		c += len;
		rc = ns_lookup(a->ns, ns_any(cur), name, &in);
		if (rc == -ENOENT || rc == -ENOTDIR || rc == -EINVAL)
			return 0;		/* not there (yet): ancestors only */
		if (rc)
			return rc;
		if (S_ISLNK(in.mode))
			return 0;
		cur = in.ino;
		s->ino[s->n++] = cur;
	}
	s->complete = true;
	return 0;
}

static int scopes_load(struct acc_ctx *a)
{
	uint32_t n = a->claims->npaths;
	int rc;

	if (a->sc)
		return 0;
	a->sc = calloc(n ? n : 1, sizeof(*a->sc));
	if (!a->sc)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		rc = scope_resolve(a, &a->claims->paths[i], &a->sc[i]);
		if (rc) {
			free(a->sc);
			a->sc = NULL;
			return rc;
		}
	}
	a->nsc = n;
	return 0;
}

static int reach_ino(struct acc_ctx *a, uint64_t ino, enum acc_reach *out)
{
	int rc;

	if (a->trusted || a->all == ACC_WRITE) {
		*out = ACC_WRITE;
		return 0;
	}
	rc = scopes_load(a);
	if (!rc && !a->chain) {
		a->chain = malloc(ACC_DEPTH_MAX * sizeof(*a->chain));
		if (!a->chain)
			rc = -ENOMEM;
	}
	a->nchain = 0;
	if (!rc)
		rc = ns_ancestors(a->ns, ns_any(ino), a->chain, ACC_DEPTH_MAX);
	if (rc < 0)
		return rc;
	a->nchain = (uint32_t)rc;
	*out = acc_reach_of(a->sc, a->nsc, a->chain, a->nchain);
	if (*out < a->all)
		*out = a->all;
	return 0;
}

int acc_reach(struct acc_ctx *a, const struct meta_inode *in, enum acc_reach *out)
{
	return reach_ino(a, in->ino, out);
}

int acc_need(struct acc_ctx *a, const struct meta_inode *in, enum acc_reach need, unsigned want)
{
	enum acc_reach r;
	int rc;

	if (a->trusted)
		return 0;
	if (need != ACC_NONE) {
		rc = acc_reach(a, in, &r);
		if (rc)
			return rc;
		if (r < need)
			return -EACCES;
	}
	return want ? acc_check(&a->cred, in, want) : 0;
}

int acc_walked(struct acc_ctx *a, const struct meta_inode *in, const uint64_t *dirs,
	       uint32_t n)
{
	enum acc_reach r;
	uint64_t *off;
	uint32_t noff = 0;
	int rc;

	/* A "/" scope reaches every directory. */
	if (a->trusted || a->all != ACC_NONE)
		return 0;
	rc = reach_ino(a, in->ino, &r);
	if (rc)
		return rc;
	if (r < ACC_PASS)
		return -EACCES;
	/* The ancestors of an inode that is reached are reached too (an
	 * ancestor of a scope or of a scope's inode): only the directories
	 * off in's own path need a walk of their own. Copied out first, as
	 * each walk reuses a->chain. */
	off = malloc((n ? n : 1) * sizeof(*off));
	if (!off)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (!chain_has(a->chain, a->nchain, dirs[i]) && !chain_has(off, noff, dirs[i]))
			off[noff++] = dirs[i];
	for (uint32_t i = 0; i < noff && !rc; i++) {
		rc = reach_ino(a, off[i], &r);
		if (!rc && r < ACC_PASS)
			rc = -EACCES;
	}
	free(off);
	return rc;
}
