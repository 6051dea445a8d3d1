/*
 * Request ids in the namespace (ns.h, ns_request; docs/namespace.md,
 * "Request ids"), on the backend the environment names (meta_fx.h;
 * meson runs this file as test_meta_reqid and, over a throwaway
 * PostgreSQL, test_meta_reqid_pg): a call made again with its id has one
 * effect and gets the first answer; a failed call records nothing; ids
 * of different clients never meet; an expired id is applied again; and
 * handles racing one id apply it once. And the outcome's encoding
 * (meta/outcome.h).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "meta/outcome.h"
#include "meta_fx.h"

#define ROOT ns_any(NS_ROOT_INO)

static struct ns_reqid id_of(uint64_t client, uint64_t seq)
{
	return (struct ns_reqid){ client, seq };
}

static void same_layout(const struct file_layout *a, const struct file_layout *b)
{
	assert_int_equal(a->chunk_size, b->chunk_size);
	assert_int_equal(a->stripe, b->stripe);
	assert_int_equal(a->table_len, b->table_len);
	assert_int_equal(a->seed, b->seed);
}

/* Field by field: the structs have padding. */
static void same_inode(const struct meta_inode *a, const struct meta_inode *b)
{
	assert_int_equal(a->ino, b->ino);
	assert_int_equal(a->gen, b->gen);
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	assert_int_equal(a->nlink, b->nlink);
	assert_int_equal(a->size, b->size);
	assert_int_equal(a->atime_ns, b->atime_ns);
	assert_int_equal(a->mtime_ns, b->mtime_ns);
	assert_int_equal(a->ctime_ns, b->ctime_ns);
	assert_int_equal(a->parent, b->parent);
	same_layout(&a->layout, &b->layout);
}

static void same_trunc(const struct ns_trunc *a, const struct ns_trunc *b)
{
	assert_int_equal(a->partial, b->partial);
	assert_int_equal(a->chunk, b->chunk);
	assert_int_equal(a->len, b->len);
	assert_int_equal(a->gc_from, b->gc_from);
	assert_int_equal(a->gc_to, b->gc_to);
	same_layout(&a->layout, &b->layout);
}

/* Every non-idempotent call made twice with one id: one effect, the
 * first answer again (an O_EXCL create is not -EEXIST, an unlink or a
 * rename not -ENOENT, a truncate still names its partial chunk). */
static void test_replay_each_call(void **state)
{
	struct fx *f = *state;
	struct meta_inode a, b, at;
	struct ns_trunc t1, t2;
	struct ns_statfs sf1, sf2;
	uint64_t c = 0xc0ffee, fino;

	ns_request(&f->ns, id_of(c, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "f", 0644, 1, 2, true, &a), 1);
	ns_request(&f->ns, id_of(c, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "f", 0644, 1, 2, true, &b), 1);
	same_inode(&a, &b);
	assert_int_equal(f->ns.replays, 1);
	/* Without the id, the same create is what it always was. */
	assert_int_equal(ns_create(&f->ns, ROOT, "f", 0644, 1, 2, true, NULL), -EEXIST);

	ns_request(&f->ns, id_of(c, 2));
	assert_int_equal(ns_mkdir(&f->ns, ROOT, "d", 0755, 0, 0, &a), 0);
	ns_request(&f->ns, id_of(c, 2));
	assert_int_equal(ns_mkdir(&f->ns, ROOT, "d", 0755, 0, 0, &b), 0);
	assert_int_equal(a.ino, b.ino);
	assert_int_equal(a.gen, b.gen);

	ns_request(&f->ns, id_of(c, 3));
	assert_int_equal(ns_symlink(&f->ns, ROOT, "l", "f", 0, 0, &a), 0);
	ns_request(&f->ns, id_of(c, 3));
	assert_int_equal(ns_symlink(&f->ns, ROOT, "l", "f", 0, 0, &b), 0);
	assert_int_equal(a.ino, b.ino);

	ns_request(&f->ns, id_of(c, 4));
	assert_int_equal(ns_mknod(&f->ns, ROOT, "p", S_IFIFO | 0600, 0, 0, &a), 0);
	ns_request(&f->ns, id_of(c, 4));
	assert_int_equal(ns_mknod(&f->ns, ROOT, "p", S_IFIFO | 0600, 0, 0, &b), 0);
	assert_int_equal(a.ino, b.ino);

	assert_int_equal(ns_lookup(&f->ns, ROOT, "f", &at), 0);
	fino = at.ino;
	ns_request(&f->ns, id_of(c, 5));
	assert_int_equal(ns_link(&f->ns, ns_any(at.ino), ROOT, "f2", &a), 0);
	ns_request(&f->ns, id_of(c, 5));
	assert_int_equal(ns_link(&f->ns, ns_any(at.ino), ROOT, "f2", &b), 0);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(b.nlink, 2);
	assert_int_equal(ns_getattr(&f->ns, ns_any(at.ino), &at), 0);
	assert_int_equal(at.nlink, 2);

	ns_request(&f->ns, id_of(c, 6));
	assert_int_equal(ns_rename(&f->ns, ROOT, "f2", ROOT, "g", 0), 0);
	ns_request(&f->ns, id_of(c, 6));
	assert_int_equal(ns_rename(&f->ns, ROOT, "f2", ROOT, "g", 0), 0);
	assert_int_equal(ns_lookup(&f->ns, ROOT, "g", NULL), 0);
	assert_int_equal(ns_lookup(&f->ns, ROOT, "f2", NULL), -ENOENT);

	ns_request(&f->ns, id_of(c, 7));
	assert_int_equal(ns_unlink(&f->ns, ROOT, "g"), 0);
	ns_request(&f->ns, id_of(c, 7));
	assert_int_equal(ns_unlink(&f->ns, ROOT, "g"), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(at.ino), &at), 0);
	assert_int_equal(at.nlink, 1);

	ns_request(&f->ns, id_of(c, 8));
	assert_int_equal(ns_rmdir(&f->ns, ROOT, "d"), 0);
	ns_request(&f->ns, id_of(c, 8));
	assert_int_equal(ns_rmdir(&f->ns, ROOT, "d"), 0);

	/* A truncate that leaves a partial chunk says so again. */
	assert_int_equal(ns_set_size(&f->ns, ns_any(at.ino), 10u << 20, 0, NULL), 0);
	ns_request(&f->ns, id_of(c, 9));
	assert_int_equal(ns_truncate(&f->ns, ns_any(at.ino), 5u << 20 | 17, &t1), 0);
	assert_true(t1.partial);
	ns_request(&f->ns, id_of(c, 9));
	assert_int_equal(ns_truncate(&f->ns, ns_any(at.ino), 5u << 20 | 17, &t2), 0);
	same_trunc(&t1, &t2);
	/* Without the id, a second truncate has nothing left to cut. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(at.ino), 5u << 20 | 17, &t2), 0);
	assert_false(t2.partial);

	memset(&at, 0, sizeof(at));
	at.size = 3;
	ns_request(&f->ns, id_of(c, 10));
	assert_int_equal(ns_setattr(&f->ns, ns_any(fino), NS_ATTR_SIZE, &at, &a, &t1), 0);
	ns_request(&f->ns, id_of(c, 10));
	assert_int_equal(ns_setattr(&f->ns, ns_any(fino), NS_ATTR_SIZE, &at, &b, &t2), 0);
	same_inode(&a, &b);
	same_trunc(&t1, &t2);
	assert_true(t2.partial);
	assert_int_equal(f->ns.replays, 10);

	/* The totals saw each call once: root, f, l, p. */
	assert_int_equal(ns_statfs(&f->ns, &sf1), 0);
	assert_int_equal(sf1.inodes, 4);
	ns_request(&f->ns, id_of(c, 2));
	assert_int_equal(ns_mkdir(&f->ns, ROOT, "d", 0755, 0, 0, &b), 0);
	assert_int_equal(ns_statfs(&f->ns, &sf2), 0);
	assert_int_equal(sf2.inodes, 4);	/* the replay made nothing */
}

/* A call that fails records nothing (it changed nothing): the retry runs
 * afresh. An id given to a call refused before its transaction does not
 * reach the next call. */
static void test_failure_not_recorded(void **state)
{
	struct fx *f = *state;
	uint64_t c = 77;

	ns_request(&f->ns, id_of(c, 1));
	assert_int_equal(ns_unlink(&f->ns, ROOT, "x"), -ENOENT);
	assert_int_equal(ns_create(&f->ns, ROOT, "x", 0644, 0, 0, true, NULL), 1);
	ns_request(&f->ns, id_of(c, 1));
	assert_int_equal(ns_unlink(&f->ns, ROOT, "x"), 0);

	ns_request(&f->ns, id_of(c, 2));
	assert_int_equal(ns_create(&f->ns, ROOT, "a/b", 0644, 0, 0, true, NULL), -EINVAL);
	/* Taken by the refused call: this create has no id. */
	assert_int_equal(ns_create(&f->ns, ROOT, "y", 0644, 0, 0, true, NULL), 1);
	ns_request(&f->ns, id_of(c, 2));
	assert_int_equal(ns_create(&f->ns, ROOT, "y", 0644, 0, 0, true, NULL), -EEXIST);
	assert_int_equal(f->ns.replays, 0);
}

/* Two clients with the same sequence number are two requests. */
static void test_clients_apart(void **state)
{
	struct fx *f = *state;
	struct meta_inode a, b;

	ns_request(&f->ns, id_of(1, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "one", 0644, 0, 0, true, &a), 1);
	ns_request(&f->ns, id_of(2, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "two", 0644, 0, 0, true, &b), 1);
	assert_int_not_equal(a.ino, b.ino);
	ns_request(&f->ns, id_of(2, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "two", 0644, 0, 0, true, &a), 1);
	assert_int_equal(a.ino, b.ino);
	/* Client 3's seq 1 is not client 2's, so this one is applied. */
	ns_request(&f->ns, id_of(3, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "two", 0644, 0, 0, true, NULL), -EEXIST);
	/* The largest ids the wire can carry are kept as they are. */
	ns_request(&f->ns, id_of(UINT64_MAX, UINT64_MAX));
	assert_int_equal(ns_create(&f->ns, ROOT, "max", 0644, 0, 0, true, &a), 1);
	ns_request(&f->ns, id_of(UINT64_MAX, UINT64_MAX));
	assert_int_equal(ns_create(&f->ns, ROOT, "max", 0644, 0, 0, true, &b), 1);
	assert_int_equal(a.ino, b.ino);
}

/* Records expire: pruned, an id is applied again; records newer than the
 * cut stay. */
static void test_expiry(void **state)
{
	struct fx *f = *state;
	struct meta_inode a, b;
	int64_t now = now_ns() / 1000000;

	ns_request(&f->ns, id_of(9, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "e", 0644, 0, 0, true, &a), 1);
	ns_request(&f->ns, id_of(9, 2));
	assert_int_equal(ns_create(&f->ns, ROOT, "k", 0644, 0, 0, true, NULL), 1);
	assert_int_equal(ns_unlink(&f->ns, ROOT, "e"), 0);
	/* Nothing is older than an hour ago. */
	assert_int_equal(ns_request_prune(&f->ns, now - 3600 * 1000, 100), 0);
	/* Everything is older than a minute from now, pruned a batch at a time. */
	assert_int_equal(ns_request_prune(&f->ns, now + 60000, 1), 1);
	assert_int_equal(ns_request_prune(&f->ns, now + 60000, 100), 1);
	assert_int_equal(ns_request_prune(&f->ns, now + 60000, 100), 0);
	ns_request(&f->ns, id_of(9, 1));
	assert_int_equal(ns_create(&f->ns, ROOT, "e", 0644, 0, 0, true, &b), 1);
	assert_int_not_equal(a.ino, b.ino);	/* a new file: applied again */
	ns_request(&f->ns, id_of(9, 2));
	assert_int_equal(ns_create(&f->ns, ROOT, "k", 0644, 0, 0, true, NULL), -EEXIST);
	assert_int_equal(f->ns.replays, 0);
}

/* An outcome round trips field by field; one of another length or
 * version (a later build's) is refused, not misread. */
static void test_outcome_codec(void **state)
{
	struct meta_inode in = { .ino = 5, .gen = 6, .mode = S_IFREG | 0640, .uid = 7, .gid = 8,
				 .nlink = 2, .size = 1ull << 40, .atime_ns = -1,
				 .mtime_ns = INT64_MAX, .ctime_ns = 3, .parent = 1,
				 .layout = { 1u << 22, 4, 8, UINT64_MAX } }, got_in;
	struct ns_trunc tr = { .partial = true, .chunk = 9, .len = 17, .gc_from = 10,
			       .gc_to = 12, .layout = { 1u << 20, 1, 2, 3 } }, got_tr;
	struct meta_req r;

	(void)state;
	memset(&r, 0, sizeof(r));
	ns_outcome_encode(&r, &in, &tr);
	assert_true(r.len > 0 && r.len <= META_REQ_OUT_MAX);
	assert_int_equal(ns_outcome_decode(&r, &got_in, &got_tr), 0);
	same_inode(&in, &got_in);
	same_trunc(&tr, &got_tr);
	r.out[0] = 2;
	assert_int_equal(ns_outcome_decode(&r, &got_in, &got_tr), -EIO);
	r.out[0] = 1;
	r.len--;
	assert_int_equal(ns_outcome_decode(&r, &got_in, &got_tr), -EIO);
	r.len = 0;
	assert_int_equal(ns_outcome_decode(&r, &got_in, &got_tr), -EIO);
}

#define RACERS 4
#define ROUNDS 20

struct racer {
	const char *db;
	pthread_barrier_t *go;
	int created, errors;
	uint64_t inos[ROUNDS];
};

/* One server's handle: each round, the same id as every other racer. */
static void *race(void *arg)
{
	struct racer *r = arg;
	struct meta_store st;
	struct ns ns;

	if (store_open(r->db, &st) || ns_init(&ns, &st, 0)) {
		r->errors++;
		return NULL;
	}
	for (int i = 0; i < ROUNDS; i++) {
		struct meta_inode in;
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "r%d", i);
		pthread_barrier_wait(r->go);
		ns_request(&ns, id_of(42, (uint64_t)i + 1));
		rc = ns_create(&ns, ROOT, name, 0644, 0, 0, true, &in);
		if (rc == 1)
			r->inos[i] = in.ino;
		else
			r->errors++;
	}
	ns_release(&ns);
	meta_store_close(&st);
	return NULL;
}

/* Handles racing one id (a retry reaching a second server while the
 * first still works on the call): one file, the same answer to all. */
static void test_race_one_id(void **state)
{
	struct fx *f = *state;
	struct racer r[RACERS];
	pthread_t t[RACERS];
	pthread_barrier_t go;
	struct ns_statfs sf;

	pthread_barrier_init(&go, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ .db = f->db, .go = &go };
		assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACERS; i++) {
		assert_int_equal(r[i].errors, 0);
		for (int k = 0; k < ROUNDS; k++)
			assert_int_equal(r[i].inos[k], r[0].inos[k]);
	}
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.inodes, 1 + ROUNDS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_replay_each_call, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_failure_not_recorded, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_clients_apart, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_expiry, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_race_one_id, fx_setup, fx_teardown),
		cmocka_unit_test(test_outcome_codec),
	};

	fx_backend_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
