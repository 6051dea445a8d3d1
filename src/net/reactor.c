/* epoll reactor with a timer heap, deferred tasks and a posted-message
 * queue woken by an eventfd. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "reactor.h"

struct task {
	struct task *next;
	reactor_task_fn fn;
	void *arg;
	reactor_task_fn done;		/* offloaded jobs: runs on the loop after fn */
};

/* The helper thread of reactor_offload, started on first use. */
struct helper {
	pthread_t thread;
	bool started;
	bool stopping;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct task *head, **tail;
};

struct reactor {
	char name[32];
	int epfd;
	int evfd;
	struct reactor_watch evwatch;
	volatile int stop;
	pthread_t thread;
	bool has_thread;
	pthread_t loop_tid;
	bool running;
	bool started;			/* the loop ran once (under post_lock) */
	pthread_cond_t started_cond;

	struct reactor_timer **heap;
	uint32_t heap_len, heap_cap;

	struct task *defer_head, **defer_tail;

	pthread_mutex_t post_lock;
	struct task *post_head, **post_tail;

	struct helper helper;
};

uint64_t reactor_now_ms(void)
{
	return mono_ms();
}

static void drain_eventfd(void *arg, uint32_t events)
{
	struct reactor *r = arg;
	uint64_t v;

	(void)events;
	if (read(r->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("reactor", "'%s': eventfd read: %s", r->name, strerror(errno));
}

int reactor_new(const char *name, struct reactor **out)
{
	struct reactor *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->epfd = -1;
	r->evfd = -1;
	r->defer_tail = &r->defer_head;
	r->post_tail = &r->post_head;
	r->helper.tail = &r->helper.head;
	pthread_mutex_init(&r->helper.lock, NULL);
	pthread_cond_init(&r->helper.cond, NULL);
	pthread_mutex_init(&r->post_lock, NULL);
	pthread_cond_init(&r->started_cond, NULL);
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epfd < 0) {
		rc = -errno;
		goto fail;
	}
	r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->evfd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = reactor_watch_add(r, &r->evwatch, r->evfd, EPOLLIN, drain_eventfd, r);
	if (rc)
		goto fail;
	*out = r;
	return 0;
fail:
	reactor_free(r);
	return rc;
}

static void run_list(struct task *t)
{
	while (t) {
		struct task *next = t->next;

		t->fn(t->arg);
		free(t);
		t = next;
	}
}

static struct task *take_posted(struct reactor *r)
{
	struct task *t;

	pthread_mutex_lock(&r->post_lock);
	t = r->post_head;
	r->post_head = NULL;
	r->post_tail = &r->post_head;
	pthread_mutex_unlock(&r->post_lock);
	return t;
}

static struct task *take_deferred(struct reactor *r)
{
	struct task *t = r->defer_head;

	r->defer_head = NULL;
	r->defer_tail = &r->defer_head;
	return t;
}

static void helper_stop(struct reactor *r);

void reactor_free(struct reactor *r)
{
	if (!r)
		return;
	/* The helper's jobs end in posted tasks: stop it first. */
	helper_stop(r);
	/* Let owners of queued work release it. */
	for (int i = 0; i < 4 && (r->defer_head || r->post_head); i++) {
		run_list(take_deferred(r));
		run_list(take_posted(r));
	}
	if (r->epfd >= 0)
		close(r->epfd);
	if (r->evfd >= 0)
		close(r->evfd);
	free(r->heap);
	pthread_cond_destroy(&r->helper.cond);
	pthread_mutex_destroy(&r->helper.lock);
	pthread_cond_destroy(&r->started_cond);
	pthread_mutex_destroy(&r->post_lock);
	free(r);
}

bool reactor_on_thread(const struct reactor *r)
{
	return r->running && pthread_equal(r->loop_tid, pthread_self());
}

int reactor_watch_add(struct reactor *r, struct reactor_watch *w, int fd, uint32_t events,
		      reactor_fd_fn fn, void *arg)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	w->fd = fd;
	w->events = events;
	w->fn = fn;
	w->arg = arg;
	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		w->fn = NULL;
		return -errno;
	}
	return 0;
}

int reactor_watch_mod(struct reactor *r, struct reactor_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (w->events == events)
		return 0;
	if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		return -errno;
	w->events = events;
	return 0;
}

void reactor_watch_del(struct reactor *r, struct reactor_watch *w)
{
	if (!w->fn)
		return;
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->fn = NULL;
}

/* ---- timers: a binary min-heap on due_ms ---- */

static void heap_set(struct reactor *r, uint32_t i, struct reactor_timer *t)
{
	r->heap[i] = t;
	t->heap_idx = i;
}

static void heap_up(struct reactor *r, uint32_t i)
{
	struct reactor_timer *t = r->heap[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (r->heap[p]->due_ms <= t->due_ms)
			break;
		heap_set(r, i, r->heap[p]);
		i = p;
	}
	heap_set(r, i, t);
}

static void heap_down(struct reactor *r, uint32_t i)
{
	struct reactor_timer *t = r->heap[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= r->heap_len)
			break;
		if (c + 1 < r->heap_len && r->heap[c + 1]->due_ms < r->heap[c]->due_ms)
			c++;
		if (t->due_ms <= r->heap[c]->due_ms)
			break;
		heap_set(r, i, r->heap[c]);
		i = c;
	}
	heap_set(r, i, t);
}

void reactor_timer_init(struct reactor_timer *t, reactor_task_fn fn, void *arg)
{
	t->due_ms = 0;
	t->fn = fn;
	t->arg = arg;
	t->heap_idx = UINT32_MAX;
}

void reactor_timer_cancel(struct reactor *r, struct reactor_timer *t)
{
	uint32_t i = t->heap_idx;

	if (i == UINT32_MAX)
		return;
	t->heap_idx = UINT32_MAX;
	r->heap_len--;
	if (i == r->heap_len)
		return;
	struct reactor_timer *moved = r->heap[r->heap_len];

	heap_set(r, i, moved);
	heap_up(r, i);
	heap_down(r, moved->heap_idx);
}

int reactor_timer_arm(struct reactor *r, struct reactor_timer *t, uint64_t delay_ms)
{
	reactor_timer_cancel(r, t);
	if (r->heap_len == r->heap_cap) {
		uint32_t cap = r->heap_cap ? r->heap_cap * 2 : 64;
		struct reactor_timer **h = realloc(r->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		r->heap = h;
		r->heap_cap = cap;
	}
	t->due_ms = reactor_now_ms() + delay_ms;
	heap_set(r, r->heap_len++, t);
	heap_up(r, t->heap_idx);
	return 0;
}

static int next_timeout(struct reactor *r)
{
	uint64_t now;

	if (r->defer_head)
		return 0;
	if (r->heap_len == 0)
		return 1000;
	now = reactor_now_ms();
	if (r->heap[0]->due_ms <= now)
		return 0;
	return (int)(r->heap[0]->due_ms - now > 1000 ? 1000 : r->heap[0]->due_ms - now);
}

static void run_timers(struct reactor *r)
{
	uint64_t now = reactor_now_ms();

	while (r->heap_len > 0 && r->heap[0]->due_ms <= now) {
		struct reactor_timer *t = r->heap[0];

		reactor_timer_cancel(r, t);
		t->fn(t->arg);
	}
}

int reactor_defer(struct reactor *r, reactor_task_fn fn, void *arg)
{
	struct task *t = malloc(sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->next = NULL;
	t->fn = fn;
	t->arg = arg;
	*r->defer_tail = t;
	r->defer_tail = &t->next;
	return 0;
}

int reactor_post(struct reactor *r, reactor_task_fn fn, void *arg)
{
	struct task *t = malloc(sizeof(*t));
	uint64_t one = 1;
	bool wake;

	if (!t)
		return -ENOMEM;
	t->next = NULL;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_lock(&r->post_lock);
	wake = r->post_head == NULL;
	*r->post_tail = t;
	r->post_tail = &t->next;
	pthread_mutex_unlock(&r->post_lock);
	if (wake && write(r->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("reactor", "'%s': eventfd write: %s", r->name, strerror(errno));
	return 0;
}

static void loop_enter(struct reactor *r)
{
	pthread_mutex_lock(&r->post_lock);
	r->loop_tid = pthread_self();
	r->running = true;
	r->started = true;
	pthread_cond_broadcast(&r->started_cond);
	pthread_mutex_unlock(&r->post_lock);
}

/* One batch: events (waiting up to timeout_ms), posted tasks, timers,
 * deferred tasks. Returns false when epoll failed (then nothing ran). */
static bool loop_once(struct reactor *r, int timeout_ms)
{
	struct epoll_event evs[128];
	int n = epoll_wait(r->epfd, evs, 128, timeout_ms);

	if (n < 0 && errno != EINTR) {
		log_error("reactor", "'%s': epoll_wait: %s", r->name, strerror(errno));
		return false;
	}
	for (int i = 0; i < n; i++) {
		struct reactor_watch *w = evs[i].data.ptr;

		if (w->fn)
			w->fn(w->arg, evs[i].events);
	}
	run_list(take_posted(r));
	run_timers(r);
	/* Deferred tasks may defer more; run until quiet. */
	while (r->defer_head)
		run_list(take_deferred(r));
	return true;
}

void reactor_run(struct reactor *r)
{
	loop_enter(r);
	while (!r->stop && loop_once(r, next_timeout(r)))
		;
	run_list(take_posted(r));
	while (r->defer_head)
		run_list(take_deferred(r));
	r->running = false;
}

int reactor_run_until(struct reactor *r, bool (*done)(void *arg), void *arg)
{
	int rc = 0;

	loop_enter(r);
	if (!done) {
		if (!loop_once(r, 0))
			rc = -EIO;
	} else {
		while (!done(arg)) {
			if (loop_once(r, next_timeout(r)))
				continue;
			/* Timers still run, so that calls time out and done
			 * comes true; a pause keeps this from spinning. */
			rc = -EIO;
			usleep(1000);
			run_timers(r);
			while (r->defer_head)
				run_list(take_deferred(r));
		}
	}
	r->running = false;
	return rc;
}

static void *reactor_thread(void *arg)
{
	struct reactor *r = arg;

	pthread_setname_np(pthread_self(), r->name);
	reactor_run(r);
	return NULL;
}

int reactor_start(struct reactor *r)
{
	int rc = pthread_create(&r->thread, NULL, reactor_thread, r);

	if (rc)
		return -rc;
	r->has_thread = true;
	/* Until the loop runs, reactor_call would run its task on the
	 * caller's thread, racing the loop's first look at the timers. */
	pthread_mutex_lock(&r->post_lock);
	while (!r->started)
		pthread_cond_wait(&r->started_cond, &r->post_lock);
	pthread_mutex_unlock(&r->post_lock);
	return 0;
}

void reactor_stop(struct reactor *r)
{
	uint64_t one = 1;

	r->stop = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("reactor", "'%s': eventfd write: %s", r->name, strerror(errno));
}

void reactor_join(struct reactor *r)
{
	if (r->has_thread) {
		pthread_join(r->thread, NULL);
		r->has_thread = false;
	}
}

struct call_ctx {
	reactor_task_fn fn;
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

static void call_trampoline(void *arg)
{
	struct call_ctx *c = arg;

	c->fn(c->arg);
	pthread_mutex_lock(&c->lock);
	c->done = 1;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int reactor_call(struct reactor *r, reactor_task_fn fn, void *arg)
{
	struct call_ctx c = { .fn = fn, .arg = arg };
	int rc;

	if (!r->running || reactor_on_thread(r)) {
		fn(arg);
		return 0;
	}
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	rc = reactor_post(r, call_trampoline, &c);
	if (rc == 0) {
		pthread_mutex_lock(&c.lock);
		while (!c.done)
			pthread_cond_wait(&c.cond, &c.lock);
		pthread_mutex_unlock(&c.lock);
	}
	pthread_mutex_destroy(&c.lock);
	pthread_cond_destroy(&c.cond);
	return rc;
}

/* ---- the helper thread: blocking work off the loop ---- */

/* Runs on the helper thread: each job's work, then its done posted back
 * to the loop. When stopping, the jobs not started are skipped and only
 * their done is posted. */
static void *helper_main(void *arg)
{
	struct reactor *r = arg;
	struct helper *h = &r->helper;
	char name[16];

	snprintf(name, sizeof(name), "%.11s-hlp", r->name);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&h->lock);
	for (;;) {
		struct task *t = h->head;

		if (!t) {
			if (h->stopping)
				break;
			pthread_cond_wait(&h->cond, &h->lock);
			continue;
		}
		h->head = t->next;
		if (!h->head)
			h->tail = &h->head;
		if (!h->stopping) {
			pthread_mutex_unlock(&h->lock);
			t->fn(t->arg);
			pthread_mutex_lock(&h->lock);
		}
		/* The loop may be gone by now: reactor_free runs what is
		 * posted after this thread is joined. */
		if (reactor_post(r, t->done, t->arg))
			log_error("reactor", "'%s': cannot post an offloaded job's completion", r->name);
		free(t);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

int reactor_offload(struct reactor *r, reactor_task_fn work, reactor_task_fn done, void *arg)
{
	struct helper *h = &r->helper;
	struct task *t = malloc(sizeof(*t));
	int rc = 0;

	if (!t)
		return -ENOMEM;
	t->next = NULL;
	t->fn = work;
	t->done = done;
	t->arg = arg;
	pthread_mutex_lock(&h->lock);
	if (h->stopping) {
		rc = -ESHUTDOWN;
	} else if (!h->started) {
		rc = -pthread_create(&h->thread, NULL, helper_main, r);
		h->started = rc == 0;
	}
	if (rc == 0) {
		*h->tail = t;
		h->tail = &t->next;
		pthread_cond_signal(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
	if (rc)
		free(t);
	return rc;
}

static void helper_stop(struct reactor *r)
{
	struct helper *h = &r->helper;
	bool started;

	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	started = h->started;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (started)
		pthread_join(h->thread, NULL);
	h->started = false;
}
