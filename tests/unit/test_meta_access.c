/*
 * Unit tests for the pure half of meta/access.h: the identity a token
 * acts as, the permission bits, the sticky bit, SETATTR's ownership rules
 * and the reach of path scopes over a chain of ancestors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "meta/access.h"

static struct acc_cred cred(uint32_t uid, uint32_t gid)
{
	struct acc_cred c = { .uid = uid, .ngids = 1, .gids = { gid } };

	return c;
}

static struct meta_inode ino(uint32_t mode, uint32_t uid, uint32_t gid)
{
	struct meta_inode in = { .ino = 7, .mode = mode, .uid = uid, .gid = gid };

	return in;
}

static void test_identity_of_a_token(void **state)
{
	struct token_claims t;
	struct acc_cred c;

	(void)state;
	token_claims_init(&t);
	t.uid = 1000;
	t.ngids = 2;
	t.gids[0] = 1000;
	t.gids[1] = 27;
	acc_cred_of(&c, &t, NULL);
	assert_int_equal(c.uid, 1000);
	assert_int_equal(c.ngids, 2);
	assert_true(acc_in_group(&c, 27));
	assert_false(acc_in_group(&c, 0));

	/* Root without "root" is nobody, and loses group 0. */
	t.uid = 0;
	t.gids[0] = 0;
	acc_cred_of(&c, &t, NULL);
	assert_int_equal(c.uid, TOKEN_NOBODY);
	assert_int_equal(c.ngids, 1);
	assert_false(acc_in_group(&c, 0));
	t.flags = TOKEN_F_ROOT;
	acc_cred_of(&c, &t, NULL);
	assert_int_equal(c.uid, 0);
	assert_true(acc_in_group(&c, 0));
	/* "squash" wins over everything. */
	t.uid = 1000;
	t.flags = TOKEN_F_SQUASH;
	acc_cred_of(&c, &t, NULL);
	assert_int_equal(c.uid, TOKEN_NOBODY);
	assert_false(acc_in_group(&c, 27));
}

/* A "caller" token acts for the request's caller (a multi-user mount):
 * its uid and gids, root squashed unless the token has "root"; a token
 * without "caller" ignores one. */
static void test_cred_of_caller(void **state)
{
	struct net_caller who = { .uid = 1001, .ngids = 2, .gids = { 1001, 50 } };
	struct token_claims t;
	struct acc_cred c;

	(void)state;
	token_claims_init(&t);
	t.uid = 1000;
	t.ngids = 1;
	t.gids[0] = 1000;
	acc_cred_of(&c, &t, &who);			/* no "caller": the token's */
	assert_int_equal(c.uid, 1000);
	assert_false(acc_in_group(&c, 50));
	t.flags = TOKEN_F_CALLER;
	acc_cred_of(&c, &t, &who);
	assert_int_equal(c.uid, 1001);
	assert_int_equal(c.ngids, 2);
	assert_true(acc_in_group(&c, 50));
	assert_false(acc_in_group(&c, 1000));
	acc_cred_of(&c, &t, NULL);			/* no caller: the token's */
	assert_int_equal(c.uid, 1000);
	who.uid = 0;
	who.gids[0] = 0;
	acc_cred_of(&c, &t, &who);			/* root is squashed */
	assert_int_equal(c.uid, TOKEN_NOBODY);
	assert_int_equal(c.ngids, 1);
	assert_false(acc_in_group(&c, 0));
	t.flags = TOKEN_F_CALLER | TOKEN_F_ROOT;
	acc_cred_of(&c, &t, &who);
	assert_int_equal(c.uid, 0);
	assert_true(acc_in_group(&c, 0));
	t.flags = TOKEN_F_CALLER | TOKEN_F_SQUASH;
	who.uid = 1001;
	acc_cred_of(&c, &t, &who);
	assert_int_equal(c.uid, TOKEN_NOBODY);
}

static void test_permission_bits(void **state)
{
	struct acc_cred owner = cred(1000, 1000), member = cred(2000, 1000);
	struct acc_cred other = cred(3000, 3000), root = cred(0, 0);
	struct meta_inode f = ino(S_IFREG | 0640, 1000, 1000);
	struct meta_inode d = ino(S_IFDIR | 0750, 1000, 1000);

	(void)state;
	assert_int_equal(acc_check(&owner, &f, ACC_R | ACC_W), 0);
	assert_int_equal(acc_check(&member, &f, ACC_R), 0);
	assert_int_equal(acc_check(&member, &f, ACC_W), -EACCES);
	assert_int_equal(acc_check(&other, &f, ACC_R), -EACCES);
	/* The first class that matches decides, even when it has less. */
	f.mode = S_IFREG | 0047;
	assert_int_equal(acc_check(&owner, &f, ACC_R), -EACCES);
	assert_int_equal(acc_check(&other, &f, ACC_R | ACC_W), 0);
	/* Root: r and w always, x on directories, on files when anyone has it. */
	f.mode = S_IFREG | 0;
	assert_int_equal(acc_check(&root, &f, ACC_R | ACC_W), 0);
	assert_int_equal(acc_check(&root, &f, ACC_X), -EACCES);
	f.mode = S_IFREG | 0001;
	assert_int_equal(acc_check(&root, &f, ACC_X), 0);
	d.mode = S_IFDIR;
	assert_int_equal(acc_check(&root, &d, ACC_X | ACC_W), 0);
	d.mode = S_IFDIR | 0750;
	assert_int_equal(acc_check(&member, &d, ACC_X), 0);
	assert_int_equal(acc_check(&member, &d, ACC_W | ACC_X), -EACCES);
	assert_int_equal(acc_check(&other, &d, ACC_X), -EACCES);
	assert_int_equal(acc_check(&other, &d, 0), 0);
}

static void test_sticky(void **state)
{
	struct meta_inode dir = ino(S_IFDIR | 01777, 0, 0);
	struct meta_inode mine = ino(S_IFREG | 0644, 1000, 1000);
	struct acc_cred me = cred(1000, 1000), them = cred(2000, 2000), root = cred(0, 0);

	(void)state;
	assert_int_equal(acc_sticky(&me, &dir, &mine), 0);
	assert_int_equal(acc_sticky(&them, &dir, &mine), -EPERM);
	assert_int_equal(acc_sticky(&root, &dir, &mine), 0);
	dir.uid = 2000;		/* the directory's owner may */
	assert_int_equal(acc_sticky(&them, &dir, &mine), 0);
	dir.uid = 0;
	dir.mode = S_IFDIR | 0777;
	assert_int_equal(acc_sticky(&them, &dir, &mine), 0);
}

/* protected_hardlinks: a non-owner names only what they may read and
 * write, never a setuid or setgid-executable file. */
static void test_link(void **state)
{
	struct meta_inode secret = ino(S_IFREG | 0600, 0, 0);
	struct meta_inode shared = ino(S_IFREG | 0666, 0, 0);
	struct meta_inode suid = ino(S_IFREG | 04777, 0, 0);
	struct meta_inode sgid = ino(S_IFREG | 02777, 0, 0);
	struct meta_inode fifo = ino(S_IFIFO | 0666, 0, 0);
	struct acc_cred me = cred(1000, 1000), root = cred(0, 0);

	(void)state;
	assert_int_equal(acc_link(&me, &secret), -EPERM);
	assert_int_equal(acc_link(&root, &secret), 0);
	assert_int_equal(acc_link(&me, &shared), 0);
	assert_int_equal(acc_link(&me, &suid), -EPERM);
	assert_int_equal(acc_link(&me, &sgid), -EPERM);
	sgid.mode = S_IFREG | 02767;	/* setgid without group x: a lock file */
	assert_int_equal(acc_link(&me, &sgid), 0);
	assert_int_equal(acc_link(&me, &fifo), -EPERM);
	secret.uid = 1000;		/* the owner may */
	assert_int_equal(acc_link(&me, &secret), 0);
}

static void test_setattr(void **state)
{
	struct meta_inode f = ino(S_IFREG | 0644, 1000, 1000), to = { 0 };
	struct acc_cred owner = { .uid = 1000, .ngids = 2, .gids = { 1000, 27 } };
	struct acc_cred other = cred(2000, 2000), root = cred(0, 0);
	uint32_t mode;

	(void)state;
	to.mode = mode = 0600;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_MODE, &to, &mode), 0);
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_MODE, &to, &mode), -EPERM);
	assert_int_equal(acc_setattr(&root, &f, NS_ATTR_MODE, &to, &mode), 0);
	/* chown: root only, unless nothing changes. */
	to.uid = 2000;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_UID, &to, NULL), -EPERM);
	assert_int_equal(acc_setattr(&root, &f, NS_ATTR_UID, &to, NULL), 0);
	to.uid = 1000;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_UID, &to, NULL), 0);
	/* chgrp: the owner, to a group it is in. */
	to.gid = 27;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_GID, &to, NULL), 0);
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_GID, &to, NULL), -EPERM);
	to.gid = 5;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_GID, &to, NULL), -EPERM);
	/* Times: given ones need the owner; "now" also w. */
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_MTIME, &to, NULL), -EPERM);
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_MTIME_NOW, &to, NULL), -EACCES);
	f.mode = S_IFREG | 0666;
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_MTIME_NOW, &to, NULL), 0);
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_SIZE, &to, NULL), 0);
	f.mode = S_IFREG | 0644;
	/* Size: w, the owner's bits too. */
	assert_int_equal(acc_setattr(&other, &f, NS_ATTR_SIZE, &to, NULL), -EACCES);
	f.mode = S_IFREG | 0444;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_SIZE, &to, NULL), -EACCES);
	/* setgid on a file of a group the caller is not in is dropped. */
	f.gid = 5;
	mode = 02755;
	assert_int_equal(acc_setattr(&owner, &f, NS_ATTR_MODE, &to, &mode), 0);
	assert_int_equal(mode, 0755);
	mode = 02755;
	assert_int_equal(acc_setattr(&root, &f, NS_ATTR_MODE, &to, &mode), 0);
	assert_int_equal(mode, 02755);
}

static void test_reach(void **state)
{
	/* The tree: 1 (root) -> 2 (/t1) -> 3 (/t1/a) -> 4 (/t1/a/f);
	 * 1 -> 5 (/t2) -> 6 (/t2/g). */
	static struct acc_scope sc[2];
	uint64_t root[] = { 1 }, t1[] = { 2, 1 }, a[] = { 3, 2, 1 }, f[] = { 4, 3, 2, 1 };
	uint64_t t2[] = { 5, 1 }, g[] = { 6, 5, 1 };

	(void)state;
	memset(sc, 0, sizeof(sc));
	/* rw:/t1/a */
	sc[0].ino[0] = 1;
	sc[0].ino[1] = 2;
	sc[0].ino[2] = 3;
	sc[0].n = 3;
	sc[0].complete = true;
	sc[0].write = true;
	assert_int_equal(acc_reach_of(sc, 1, f, 4), ACC_WRITE);
	assert_int_equal(acc_reach_of(sc, 1, a, 3), ACC_WRITE);
	assert_int_equal(acc_reach_of(sc, 1, t1, 2), ACC_PASS);
	assert_int_equal(acc_reach_of(sc, 1, root, 1), ACC_PASS);
	assert_int_equal(acc_reach_of(sc, 1, t2, 2), ACC_NONE);
	assert_int_equal(acc_reach_of(sc, 1, g, 3), ACC_NONE);
	/* r:/t2 next to it: the widest scope wins per inode. */
	sc[1].ino[0] = 1;
	sc[1].ino[1] = 5;
	sc[1].n = 2;
	sc[1].complete = true;
	assert_int_equal(acc_reach_of(sc, 2, g, 3), ACC_READ);
	assert_int_equal(acc_reach_of(sc, 2, f, 4), ACC_WRITE);
	/* A scope whose prefix is not there (yet): its existing part is
	 * passable, nothing is readable. */
	sc[0].n = 2;
	sc[0].complete = false;
	assert_int_equal(acc_reach_of(sc, 1, t1, 2), ACC_PASS);
	assert_int_equal(acc_reach_of(sc, 1, a, 3), ACC_NONE);
	/* No scope at all: the root only, to pass. */
	assert_int_equal(acc_reach_of(sc, 0, root, 1), ACC_PASS);
	assert_int_equal(acc_reach_of(sc, 0, t1, 2), ACC_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity_of_a_token),
		cmocka_unit_test(test_cred_of_caller),
		cmocka_unit_test(test_permission_bits),
		cmocka_unit_test(test_sticky),
		cmocka_unit_test(test_link),
		cmocka_unit_test(test_setattr),
		cmocka_unit_test(test_reach),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
