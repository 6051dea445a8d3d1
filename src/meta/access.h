/*
 * Who may do what in the namespace (docs/security.md, "Namespace
 * permissions"): POSIX permission bits checked with a client token's
 * identity, and the token's path scopes.
 *
 * Daemons and the peers of a server without a key are trusted: every
 * check passes for them. A client (NET_ROLE_CLIENT) acts as
 * token_effective_uid(claims, UINT32_MAX) with the token's gids, or, when
 * the request names a caller (a "caller" token: net/auth.h), as
 * token_effective_uid(claims, caller uid) with the caller's gids; a
 * squashed identity (root without "root", or "squash") has the gid
 * nobody (65534) only, so group 0 does not come back through the gids.
 * uid 0 that is kept bypasses the permission bits, as root does, but not
 * the scopes.
 *
 * The first half is pure (struct acc_cred, the bit checks, the scope
 * arithmetic) and unit tested on its own; struct acc_ctx ties them to a
 * namespace and a request.
 *
 * Every function returns 0 when allowed, else the error POSIX gives:
 * -EACCES (permission bits, scopes), -EPERM (ownership: chmod, chown,
 * utimes to a given time, a sticky directory's entries).
 */
#ifndef STRATA_META_ACCESS_H
#define STRATA_META_ACCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/token.h"
#include "meta/ns.h"
#include "net/auth.h"

/* Permission bits to check, as in access(2). */
#define ACC_R 4u
#define ACC_W 2u
#define ACC_X 1u

/* The deepest path acc_ctx follows: a path of NS_PATH_MAX bytes has at
 * most this many components. */
#define ACC_DEPTH_MAX (NS_PATH_MAX / 2)
/* The root and the components of a scope's prefix. */
#define ACC_SCOPE_DEPTH (TOKEN_PATH_MAX / 2 + 2)

struct acc_cred {
	uint32_t uid;
	uint32_t ngids;
	uint32_t gids[TOKEN_GIDS_MAX];
};

/* The identity a client token acts as, for caller (NULL: none; see the
 * top of this file). */
void acc_cred_of(struct acc_cred *c, const struct token_claims *claims,
		 const struct net_caller *caller);
bool acc_in_group(const struct acc_cred *c, uint32_t gid);
/* want (ACC_*) on in: the owner's, the group's or the others' bits, the
 * first class c belongs to, as POSIX. Root passes r and w always, x on a
 * directory always and on a file when anyone has x. */
int acc_check(const struct acc_cred *c, const struct meta_inode *in, unsigned want);
/* Removing or renaming victim's entry in dir: with dir's sticky bit set,
 * only victim's owner, dir's owner or root may (-EPERM). The w and x on
 * dir are acc_check's. */
int acc_sticky(const struct acc_cred *c, const struct meta_inode *dir,
	       const struct meta_inode *victim);
/* A new name (hard link) for in, as Linux's protected_hardlinks: root and
 * the owner may; anyone else only for a regular file that is neither
 * setuid nor setgid-executable and that they may read and write (-EPERM),
 * so nobody gains a name for a file that a later chown -R of their own
 * tree would hand them. */
int acc_link(const struct acc_cred *c, const struct meta_inode *in);
/*
 * SETATTR of in with mask (NS_ATTR_*) and the values in to:
 *   mode    the owner or root (-EPERM); a non-root caller setting the
 *           setgid bit of a file whose group it is not in loses the bit
 *           (*mode is updated, as Linux does)
 *   uid     root only, unless it stays the same (-EPERM)
 *   gid     root, or the owner to a group it is in (-EPERM)
 *   times   given times: the owner or root (-EPERM); "now": also anyone
 *           with w (-EACCES)
 *   size    w (-EACCES)
 * mode points at to's mode, or NULL when mask has no NS_ATTR_MODE.
 */
int acc_setattr(const struct acc_cred *c, const struct meta_inode *in, uint32_t mask,
		const struct meta_inode *to, uint32_t *mode);

/* How far a token's scopes reach an inode. */
enum acc_reach {
	ACC_NONE = 0,	/* outside every scope */
	ACC_PASS = 1,	/* the root or an ancestor of a scope: lookup, getattr */
	ACC_READ = 2,	/* in an "r" scope */
	ACC_WRITE = 3,	/* in an "rw" scope */
};

/* A scope's prefix as inode numbers, the root first. complete: every
 * component exists (and none is a symlink), so ino[n - 1] is the scope's
 * own directory; else only ino[0..n) exist and are all ancestors. */
struct acc_scope {
	uint64_t ino[ACC_SCOPE_DEPTH];
	uint32_t n;
	bool complete;
	bool write;
};

/* The reach of the inode whose ancestors (itself first, the root last)
 * are chain[0..nchain) under scopes sc[0..nsc): the widest any gives. */
enum acc_reach acc_reach_of(const struct acc_scope *sc, uint32_t nsc, const uint64_t *chain,
			    uint32_t nchain);

/*
 * One request's view: set up with acc_ctx_init(), freed with
 * acc_ctx_release(). Scopes are resolved to inode numbers on first use,
 * and each inode's reach is found by walking its parents (ns_ancestors),
 * so a check costs one read transaction per scope component (at most 16
 * scopes) plus one for the inode's path, both O(depth) point reads.
 * Nothing is cached across requests: a rename or rmdir changes what a
 * scope names, and the service runs requests one at a time on one thread,
 * so the answer holds until the operation that follows it. A token with
 * the scope "/" skips all of it.
 */
struct acc_ctx {
	struct ns *ns;
	bool trusted;			/* a daemon or an open peer */
	struct acc_cred cred;
	const struct token_claims *claims;
	enum acc_reach all;		/* what a "/" scope gives everything */
	struct acc_scope *sc;		/* resolved, malloc'd; NULL: not yet */
	uint32_t nsc;
	uint64_t *chain;		/* ACC_DEPTH_MAX ancestors, malloc'd */
	uint32_t nchain;		/* of the last inode acc_reach walked */
};

/* id: the request's caller (svc_req_ident). */
void acc_ctx_init(struct acc_ctx *a, struct ns *ns, const struct net_ident *id,
		  const struct net_caller *caller);
void acc_ctx_release(struct acc_ctx *a);
/* Fills *out with in's reach (ACC_WRITE for the trusted). 0 or an error
 * of the namespace. */
int acc_reach(struct acc_ctx *a, const struct meta_inode *in, enum acc_reach *out);
/* in must be reached at least as need says (-EACCES) and grant want
 * (ACC_*, 0: none) to the caller. */
int acc_need(struct acc_ctx *a, const struct meta_inode *in, enum acc_reach need, unsigned want);
/* After a path walk that ended at in and searched dirs[0..n) (search
 * permission already checked on each): in and every directory searched
 * must be reached at least ACC_PASS, so a symlink or ".." cannot carry a
 * walk through a directory the scopes hide. */
int acc_walked(struct acc_ctx *a, const struct meta_inode *in, const uint64_t *dirs,
	       uint32_t n);

#endif
