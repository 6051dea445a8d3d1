/*
 * Unit tests of the reactor (src/net/reactor.c) on real loop threads:
 * timers fire in due order and a cancelled one never fires; posts from
 * other threads all run, on the loop, in each poster's order; deferred
 * tasks run after the batch that deferred them; reactor_call waits for its
 * task; offloaded work runs off the loop, and reactor_free still completes
 * every job; reactor_run_until drives a reactor with no thread from the
 * waiting thread until its condition holds. Every check waits for an
 * event; none sleeps and then looks.
 *
 * Includes reactor.c to reach the helper thread's state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "net/reactor.c"
#include "sync_util.h"

struct fix {
	struct reactor *r;
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(reactor_new("test", &f->r), 0);
	assert_int_equal(reactor_start(f->r), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	reactor_stop(f->r);
	reactor_join(f->r);
	reactor_free(f->r);
	free(f);
	assert_true(THREAD_CHECKS_PASSED());
	return 0;
}

/* ---- timers ---- */

#define NTIMERS 6

struct timer_case {
	struct reactor *r;
	struct reactor_timer t[NTIMERS + 1];
	uint64_t delay[NTIMERS + 1];
	int fired[NTIMERS + 1];
	int order[NTIMERS + 1];
	int nfired;
	bool off_thread;
	struct latch done;
};

struct timer_arg {
	struct timer_case *tc;
	int i;
};

static struct timer_arg targs[NTIMERS + 1];

static void on_timer(void *arg)
{
	struct timer_arg *a = arg;
	struct timer_case *tc = a->tc;

	if (!reactor_on_thread(tc->r))
		tc->off_thread = true;
	tc->fired[a->i]++;
	tc->order[tc->nfired++] = a->i;
	if (tc->nfired == NTIMERS)
		latch_add(&tc->done, 1);
}

/* On the loop: arms every timer, the extra one (index NTIMERS) earliest,
 * then cancels that one, and re-arms timer 0 to be the last. */
static void arm_timers(void *arg)
{
	struct timer_case *tc = arg;

	for (int i = 0; i <= NTIMERS; i++) {
		targs[i] = (struct timer_arg){ tc, i };
		reactor_timer_init(&tc->t[i], on_timer, &targs[i]);
		THREAD_CHECK(reactor_timer_arm(tc->r, &tc->t[i], tc->delay[i]) == 0);
		THREAD_CHECK(reactor_timer_armed(&tc->t[i]));
	}
	reactor_timer_cancel(tc->r, &tc->t[NTIMERS]);
	THREAD_CHECK(!reactor_timer_armed(&tc->t[NTIMERS]));
	THREAD_CHECK(reactor_timer_arm(tc->r, &tc->t[0], 90) == 0);
}

static void test_timers_in_order(void **state)
{
	struct fix *f = *state;
	struct timer_case tc = {
		.r = f->r,
		/* Armed out of order; 0 is re-armed to 90 ms; the extra one
		 * (cancelled) would have been first. */
		.delay = { 5, 60, 0, 40, 20, 75, 1 },
	};
	static const int want[NTIMERS] = { 2, 4, 3, 1, 5, 0 };

	latch_init(&tc.done);
	assert_int_equal(reactor_call(f->r, arm_timers, &tc), 0);
	assert_true(latch_wait(&tc.done, 1));
	/* The last timer has fired, so every earlier one has had its turn:
	 * the cancelled one would have fired first. */
	assert_int_equal(tc.nfired, NTIMERS);
	assert_memory_equal(tc.order, want, sizeof(want));
	assert_int_equal(tc.fired[NTIMERS], 0);
	for (int i = 0; i < NTIMERS; i++)
		assert_int_equal(tc.fired[i], 1);
	assert_false(tc.off_thread);
	latch_destroy(&tc.done);
}

/* ---- posts from other threads ---- */

#define POSTERS 4
#define POSTS 2000

struct post_case {
	struct reactor *r;
	int last[POSTERS];	/* the last sequence number seen per poster */
	int bad_order, off_thread, total;
	struct latch done;
};

struct post_msg {
	struct post_case *pc;
	int poster, seq;
};

static void on_post(void *arg)
{
	struct post_msg *m = arg;
	struct post_case *pc = m->pc;

	/* Only the loop thread touches pc's counters: no lock needed. */
	if (!reactor_on_thread(pc->r))
		pc->off_thread++;
	if (m->seq != pc->last[m->poster] + 1)
		pc->bad_order++;
	pc->last[m->poster] = m->seq;
	if (++pc->total == POSTERS * POSTS)
		latch_add(&pc->done, 1);
	free(m);
}

struct poster {
	struct post_case *pc;
	int id;
	pthread_t th;
};

static void *poster_main(void *arg)
{
	struct poster *p = arg;

	for (int i = 1; i <= POSTS; i++) {
		struct post_msg *m = malloc(sizeof(*m));

		THREAD_CHECK(m != NULL);
		if (!m)
			break;
		*m = (struct post_msg){ p->pc, p->id, i };
		THREAD_CHECK(reactor_post(p->pc->r, on_post, m) == 0);
	}
	return NULL;
}

static void test_post_from_other_threads(void **state)
{
	struct fix *f = *state;
	struct post_case pc = { .r = f->r };
	struct poster p[POSTERS];

	latch_init(&pc.done);
	for (int i = 0; i < POSTERS; i++) {
		p[i] = (struct poster){ &pc, i, 0 };
		assert_int_equal(pthread_create(&p[i].th, NULL, poster_main, &p[i]), 0);
	}
	for (int i = 0; i < POSTERS; i++)
		pthread_join(p[i].th, NULL);
	assert_true(latch_wait(&pc.done, 1));
	assert_int_equal(pc.total, POSTERS * POSTS);
	assert_int_equal(pc.bad_order, 0);
	assert_int_equal(pc.off_thread, 0);
	for (int i = 0; i < POSTERS; i++)
		assert_int_equal(pc.last[i], POSTS);
	latch_destroy(&pc.done);
}

/* ---- defer ---- */

struct defer_case {
	struct reactor *r;
	char log[16];
	int n;
	bool off_thread;
	struct latch done;
};

static void rec(struct defer_case *dc, char c)
{
	if (!reactor_on_thread(dc->r))
		dc->off_thread = true;
	dc->log[dc->n++] = c;
}

static void defer_d2(void *arg)
{
	struct defer_case *dc = arg;

	rec(dc, 'e');
	latch_add(&dc->done, 1);
}

static void defer_d(void *arg)
{
	struct defer_case *dc = arg;

	rec(dc, 'd');
	/* Deferred from a deferred task: still before the next batch. */
	THREAD_CHECK(reactor_defer(dc->r, defer_d2, dc) == 0);
}

static void post_b(void *arg)
{
	rec(arg, 'b');
}

static void post_c(void *arg)
{
	rec(arg, 'c');
}

static void post_a(void *arg)
{
	struct defer_case *dc = arg;

	rec(dc, 'a');
	THREAD_CHECK(reactor_defer(dc->r, defer_d, dc) == 0);
	/* Posted now: the next batch, after the deferred tasks. */
	THREAD_CHECK(reactor_post(dc->r, post_c, dc) == 0);
}

/* On the loop: queues a and b as one batch. */
static void queue_batch(void *arg)
{
	struct defer_case *dc = arg;

	THREAD_CHECK(reactor_post(dc->r, post_a, dc) == 0);
	THREAD_CHECK(reactor_post(dc->r, post_b, dc) == 0);
}

static void test_defer_runs_after_the_batch(void **state)
{
	struct fix *f = *state;
	struct defer_case dc = { .r = f->r };

	latch_init(&dc.done);
	assert_int_equal(reactor_call(f->r, queue_batch, &dc), 0);
	assert_true(latch_wait(&dc.done, 1));
	/* c was posted before e ran; wait for it through the loop itself. */
	assert_int_equal(reactor_call(f->r, post_b, &dc), 0);
	assert_int_equal(dc.n, 6);
	assert_memory_equal(dc.log, "abdecb", 6);
	assert_false(dc.off_thread);
	latch_destroy(&dc.done);
}

/* ---- call ---- */

struct call_case {
	struct reactor *r;
	int value;
	bool on_loop, nested_inline;
};

static void call_inner(void *arg)
{
	struct call_case *cc = arg;

	cc->value++;
}

static void call_outer(void *arg)
{
	struct call_case *cc = arg;

	cc->on_loop = reactor_on_thread(cc->r);
	cc->value = 41;
	/* From the loop thread itself: runs in place, no deadlock. */
	THREAD_CHECK(reactor_call(cc->r, call_inner, cc) == 0);
	cc->nested_inline = cc->value == 42;
}

static void test_call_waits_for_its_task(void **state)
{
	struct fix *f = *state;
	struct call_case cc = { .r = f->r };

	assert_false(reactor_on_thread(f->r));
	assert_int_equal(reactor_call(f->r, call_outer, &cc), 0);
	/* Returned: the task has run, and its writes are visible here. */
	assert_true(cc.on_loop);
	assert_true(cc.nested_inline);
	assert_int_equal(cc.value, 42);
}

static void test_call_without_a_loop_runs_in_place(void **state)
{
	struct reactor *r;
	struct call_case cc;

	(void)state;
	assert_int_equal(reactor_new("idle", &r), 0);
	cc = (struct call_case){ .r = r };
	assert_int_equal(reactor_call(r, call_inner, &cc), 0);
	assert_int_equal(cc.value, 1);
	reactor_free(r);
}

/* ---- run_until ---- */

struct until_case {
	struct reactor *r;
	struct reactor_timer t;
	pthread_t waiter;
	int posted, fired;
	bool posted_on_waiter, fired_on_waiter, on_thread;
};

static void until_posted(void *arg)
{
	struct until_case *u = arg;

	u->posted++;
	u->posted_on_waiter = pthread_equal(pthread_self(), u->waiter);
	u->on_thread = reactor_on_thread(u->r);
}

static void until_fired(void *arg)
{
	struct until_case *u = arg;

	u->fired++;
	u->fired_on_waiter = pthread_equal(pthread_self(), u->waiter);
}

static void *until_poster(void *arg)
{
	struct until_case *u = arg;

	THREAD_CHECK(reactor_post(u->r, until_posted, u) == 0);
	return NULL;
}

static bool until_posted_done(void *arg) { return ((struct until_case *)arg)->posted > 0; }
static bool until_fired_done(void *arg) { return ((struct until_case *)arg)->fired > 0; }

static void test_run_until_on_the_waiting_thread(void **state)
{
	struct until_case u = { .waiter = pthread_self() };
	pthread_t th;

	(void)state;
	assert_int_equal(reactor_new("until", &u.r), 0);
	/* A post from another thread wakes the waiter and runs on it. */
	assert_int_equal(pthread_create(&th, NULL, until_poster, &u), 0);
	assert_int_equal(reactor_run_until(u.r, until_posted_done, &u), 0);
	pthread_join(th, NULL);
	assert_int_equal(u.posted, 1);
	assert_true(u.posted_on_waiter);
	assert_true(u.on_thread);
	assert_false(reactor_on_thread(u.r));
	/* A timer fires inside the wait. */
	reactor_timer_init(&u.t, until_fired, &u);
	assert_int_equal(reactor_timer_arm(u.r, &u.t, 20), 0);
	assert_int_equal(reactor_run_until(u.r, until_fired_done, &u), 0);
	assert_int_equal(u.fired, 1);
	assert_true(u.fired_on_waiter);
	/* NULL: one batch without waiting. */
	assert_int_equal(reactor_run_until(u.r, NULL, NULL), 0);
	reactor_free(u.r);
	assert_true(THREAD_CHECKS_PASSED());
}

/* ---- offload ---- */

struct job {
	struct reactor *r;
	pthread_t loop;
	int id;
	bool work_ran, work_on_loop, done_on_loop;
	int done_runs;
	struct latch *started;	/* job 0 of the free test: tells it began */
	struct latch *done;
	int *order;
	int *norder;
};

static void job_work(void *arg)
{
	struct job *j = arg;

	j->work_ran = true;
	j->work_on_loop = pthread_equal(pthread_self(), j->loop);
	if (j->started) {
		struct helper *h = &j->r->helper;

		/* Hold the helper until reactor_free stops it. */
		latch_add(j->started, 1);
		pthread_mutex_lock(&h->lock);
		while (!h->stopping)
			pthread_cond_wait(&h->cond, &h->lock);
		pthread_mutex_unlock(&h->lock);
	}
}

static void job_done(void *arg)
{
	struct job *j = arg;

	j->done_on_loop = j->r->running ? reactor_on_thread(j->r) : true;
	j->done_runs++;
	j->order[(*j->norder)++] = j->id;
	latch_add(j->done, 1);
}

static void get_loop_tid(void *arg)
{
	*(pthread_t *)arg = pthread_self();
}

static void test_offload_runs_off_the_loop(void **state)
{
	struct fix *f = *state;
	struct job j[8];
	struct latch done;
	pthread_t loop;
	int order[8], norder = 0;

	latch_init(&done);
	assert_int_equal(reactor_call(f->r, get_loop_tid, &loop), 0);
	for (int i = 0; i < 8; i++) {
		j[i] = (struct job){ .r = f->r, .loop = loop, .id = i, .done = &done,
				     .order = order, .norder = &norder };
		assert_int_equal(reactor_offload(f->r, job_work, job_done, &j[i]), 0);
	}
	assert_true(latch_wait(&done, 8));
	for (int i = 0; i < 8; i++) {
		assert_true(j[i].work_ran);
		assert_false(j[i].work_on_loop);
		assert_true(j[i].done_on_loop);
		assert_int_equal(j[i].done_runs, 1);
		assert_int_equal(order[i], i);
	}
	latch_destroy(&done);
}

static void test_free_completes_queued_jobs(void **state)
{
	struct reactor *r;
	struct latch started, done;
	struct job j[3];
	pthread_t loop;
	int order[3], norder = 0;

	(void)state;
	latch_init(&started);
	latch_init(&done);
	assert_int_equal(reactor_new("jobs", &r), 0);
	assert_int_equal(reactor_start(r), 0);
	assert_int_equal(reactor_call(r, get_loop_tid, &loop), 0);
	for (int i = 0; i < 3; i++) {
		j[i] = (struct job){ .r = r, .loop = loop, .id = i, .done = &done,
				     .order = order, .norder = &norder };
	}
	j[0].started = &started;
	for (int i = 0; i < 3; i++)
		assert_int_equal(reactor_offload(r, job_work, job_done, &j[i]), 0);
	assert_true(latch_wait(&started, 1));
	reactor_stop(r);
	reactor_join(r);
	/* Job 0 is in its work; 1 and 2 wait behind it. Freeing lets 0
	 * finish, skips the work of 1 and 2, and runs every done. */
	reactor_free(r);
	assert_int_equal(latch_get(&done), 3);
	assert_true(j[0].work_ran);
	assert_false(j[1].work_ran);
	assert_false(j[2].work_ran);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(j[i].done_runs, 1);
		assert_int_equal(order[i], i);
	}
	assert_true(THREAD_CHECKS_PASSED());
	latch_destroy(&started);
	latch_destroy(&done);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_timers_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_post_from_other_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_defer_runs_after_the_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_call_waits_for_its_task, setup, teardown),
		cmocka_unit_test(test_call_without_a_loop_runs_in_place),
		cmocka_unit_test(test_run_until_on_the_waiting_thread),
		cmocka_unit_test_setup_teardown(test_offload_runs_off_the_loop, setup, teardown),
		cmocka_unit_test(test_free_completes_queued_jobs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
