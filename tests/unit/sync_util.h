/*
 * Waiting for events in unit tests that run real threads: a counter that
 * one thread raises and another waits on. A test waits for the event it
 * expects, never sleeps and then looks; the timeout only turns a hang into
 * a failure.
 */
#ifndef STRATA_TESTS_SYNC_UTIL_H
#define STRATA_TESTS_SYNC_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#define LATCH_TIMEOUT_MS 20000

struct latch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int count;
};

static inline void latch_init(struct latch *l)
{
	pthread_condattr_t a;

	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &a);
	pthread_condattr_destroy(&a);
	l->count = 0;
}

static inline void latch_destroy(struct latch *l)
{
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
}

/* Raises the count by n and wakes the waiters. Any thread. */
static inline void latch_add(struct latch *l, int n)
{
	pthread_mutex_lock(&l->lock);
	l->count += n;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static inline int latch_get(struct latch *l)
{
	int v;

	pthread_mutex_lock(&l->lock);
	v = l->count;
	pthread_mutex_unlock(&l->lock);
	return v;
}

/* Waits until the count reaches target. Returns false after
 * LATCH_TIMEOUT_MS (the test then fails: something never happened). */
static inline bool latch_wait(struct latch *l, int target)
{
	struct timespec ts;
	bool ok = true;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += LATCH_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&l->lock);
	while (l->count < target && ok)
		ok = pthread_cond_timedwait(&l->cond, &l->lock, &ts) != ETIMEDOUT;
	ok = l->count >= target;
	pthread_mutex_unlock(&l->lock);
	return ok;
}

/* Checks on threads other than the test's own (a reactor's loop, a
 * poster): cmocka's asserts longjmp and must stay on the test's thread, so
 * these count failures (and say where) for the test to assert on. */
static inline int *thread_check_failures(void)
{
	static int n;

	return &n;
}

#define THREAD_CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: check failed off the test thread: %s\n", \
			__FILE__, __LINE__, #cond); \
		__atomic_add_fetch(thread_check_failures(), 1, __ATOMIC_RELAXED); \
	} \
} while (0)

#define THREAD_CHECKS_PASSED() \
	(__atomic_load_n(thread_check_failures(), __ATOMIC_RELAXED) == 0)

#endif
