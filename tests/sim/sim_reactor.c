/*
 * reactor.h on one virtual clock: every reactor of every simulated node
 * shares one event queue, a binary heap ordered by (due time, sequence
 * number), so that two events due at the same microsecond run in the
 * order they were scheduled and a seed replays exactly.
 *
 *  - reactor_post: due after a seeded jitter (a hop between threads),
 *    but in order with earlier posts from the same reactor, as the real
 *    posted-message queue is FIFO;
 *  - reactor_defer: due now, after what is already due;
 *  - reactor_call: runs fn at once, "on" r (the current reactor is r
 *    meanwhile, for logs and reactor_on_thread);
 *  - timers: due at virtual time, embedded in their owner as in the real
 *    reactor (heap_idx is their place in the heap);
 *  - fd watches: recorded, so that a simulated device can make its fd
 *    "readable" (sim_fd_signal) and the watch runs on its reactor.
 *
 * The queue is global: the platform API has no context argument, and a
 * run is one thread driving it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "sim.h"

/* The monotonic clock of a machine booted a while ago: code that keeps
 * "0" as "never" (resync's report times) sees real-looking values. */
#define MONO_BASE_MS 1000000ull

struct sim_ev {
	uint64_t due_us;
	uint64_t seq;
	struct reactor *r;
	struct reactor_timer *timer;	/* a timer: fn/arg are read from it */
	sim_fn fn, drop;
	void *arg;
};

struct watch_ent {
	int fd;
	struct reactor *r;
	struct reactor_watch *w;
};

static struct {
	uint64_t now_us;
	uint64_t seq;
	uint64_t nrun;
	struct sim_ev *heap;
	uint32_t n, cap;
	struct reactor *cur;
	uint32_t next_rid;
	struct watch_ent *watches;
	uint32_t nwatches, capwatches;
	int next_fd;
	struct sim_rng rng;
	uint32_t jitter_us;
	/* Reactors made this run, freed by sim_release (their nodes' memory
	 * is abandoned, but they are ours). */
	struct reactor **all;
	uint32_t nall, capall;
} g;

/* ---- the heap ---- */

static bool ev_less(const struct sim_ev *a, const struct sim_ev *b)
{
	return a->due_us != b->due_us ? a->due_us < b->due_us : a->seq < b->seq;
}

static void heap_put(uint32_t i, const struct sim_ev *ev)
{
	g.heap[i] = *ev;
	if (ev->timer)
		ev->timer->heap_idx = i;
}

static void sift_up(uint32_t i)
{
	struct sim_ev ev = g.heap[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (!ev_less(&ev, &g.heap[p]))
			break;
		heap_put(i, &g.heap[p]);
		i = p;
	}
	heap_put(i, &ev);
}

static void sift_down(uint32_t i)
{
	struct sim_ev ev = g.heap[i];

	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		const struct sim_ev *best = &ev;

		if (l < g.n && ev_less(&g.heap[l], best)) {
			m = l;
			best = &g.heap[l];
		}
		if (l + 1 < g.n && ev_less(&g.heap[l + 1], best))
			m = l + 1;
		if (m == i)
			break;
		heap_put(i, &g.heap[m]);
		i = m;
	}
	heap_put(i, &ev);
}

static void heap_push(struct sim_ev *ev)
{
	if (g.n == g.cap) {
		uint32_t cap = g.cap ? g.cap * 2 : 1024;
		struct sim_ev *v = realloc(g.heap, cap * sizeof(*v));

		/* The simulation cannot go on without its queue. */
		if (!v)
			abort();
		g.heap = v;
		g.cap = cap;
	}
	ev->seq = ++g.seq;
	g.n++;
	heap_put(g.n - 1, ev);
	sift_up(g.n - 1);
}

static void heap_remove(uint32_t i)
{
	struct sim_ev last;

	if (g.heap[i].timer)
		g.heap[i].timer->heap_idx = UINT32_MAX;
	g.n--;
	if (i == g.n)
		return;
	last = g.heap[g.n];
	heap_put(i, &last);
	sift_down(i);
	sift_up(i);
}

/* ---- the loop ---- */

void sim_reset(uint64_t seed, uint32_t jitter_us)
{
	sim_release();
	sim_rng_init(&g.rng, seed, 1);
	g.jitter_us = jitter_us;
	g.next_fd = 1 << 20;	/* far from real descriptors; never used with syscalls */
}

void sim_release(void)
{
	/* Drop functions may look at the queue: empty it first. */
	while (g.n) {
		struct sim_ev ev = g.heap[0];

		heap_remove(0);
		if (!ev.timer && ev.drop)
			ev.drop(ev.arg);
	}
	free(g.heap);
	free(g.watches);
	for (uint32_t i = 0; i < g.nall; i++)
		free(g.all[i]);
	free(g.all);
	memset(&g, 0, sizeof(g));
}

uint64_t sim_now_us(void)
{
	return g.now_us;
}

struct reactor *sim_current(void)
{
	return g.cur;
}

uint64_t sim_events_run(void)
{
	return g.nrun;
}

void sim_at(struct reactor *r, uint64_t due_us, sim_fn fn, sim_fn drop, void *arg)
{
	struct sim_ev ev = { .due_us = due_us < g.now_us ? g.now_us : due_us, .r = r, .fn = fn,
			     .drop = drop, .arg = arg };

	if (r && r->dead) {
		if (drop)
			drop(arg);
		return;
	}
	heap_push(&ev);
}

bool sim_step(uint64_t until_us)
{
	struct sim_ev ev;
	struct reactor *saved;

	if (!g.n || g.heap[0].due_us > until_us) {
		if (until_us > g.now_us)
			g.now_us = until_us;
		return false;
	}
	ev = g.heap[0];
	heap_remove(0);
	g.now_us = ev.due_us;
	if (ev.timer) {
		ev.fn = ev.timer->fn;
		ev.arg = ev.timer->arg;
	}
	saved = g.cur;
	g.cur = ev.r;
	g.nrun++;
	ev.fn(ev.arg);
	g.cur = saved;
	return true;
}

void sim_run_until(uint64_t until_us)
{
	while (sim_step(until_us))
		;
}

/* ---- reactors ---- */

struct reactor *sim_reactor_new(struct sim_node *n, int idx)
{
	struct reactor *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (g.nall == g.capall) {
		uint32_t cap = g.capall ? g.capall * 2 : 32;
		struct reactor **v = realloc(g.all, cap * sizeof(*v));

		if (!v) {
			free(r);
			return NULL;
		}
		g.all = v;
		g.capall = cap;
	}
	g.all[g.nall++] = r;
	r->node = n;
	r->id = ++g.next_rid;
	r->idx = idx;
	return r;
}

void sim_reactor_kill(struct reactor *r)
{
	uint32_t w = 0;

	if (r->dead)
		return;
	r->dead = true;
	/* Keep the survivors, then rebuild the heap: kills are rare. */
	for (uint32_t i = 0; i < g.n; i++) {
		struct sim_ev ev = g.heap[i];

		if (ev.r == r) {
			if (ev.timer)
				ev.timer->heap_idx = UINT32_MAX;
			else if (ev.drop)
				ev.drop(ev.arg);
			continue;
		}
		heap_put(w++, &ev);
	}
	g.n = w;
	for (uint32_t i = g.n / 2; i-- > 0;)
		sift_down(i);
	for (uint32_t i = 0; i < g.nwatches;) {
		if (g.watches[i].r == r)
			g.watches[i] = g.watches[--g.nwatches];
		else
			i++;
	}
}

uint64_t reactor_now_ms(void)
{
	return MONO_BASE_MS + g.now_us / 1000;
}

int reactor_new(const char *name, struct reactor **out)
{
	(void)name;
	*out = sim_reactor_new(NULL, 0);
	return *out ? 0 : -ENOMEM;
}

void reactor_free(struct reactor *r)
{
	if (r)
		sim_reactor_kill(r);
}

/* The queue is driven by the harness: a reactor has no loop of its own. */
void reactor_run(struct reactor *r)
{
	(void)r;
}

int reactor_start(struct reactor *r)
{
	(void)r;
	return 0;
}

void reactor_stop(struct reactor *r)
{
	(void)r;
}

void reactor_join(struct reactor *r)
{
	(void)r;
}

bool reactor_on_thread(const struct reactor *r)
{
	return g.cur == r;
}

/* ---- fd watches ---- */

int reactor_watch_add(struct reactor *r, struct reactor_watch *w, int fd, uint32_t events,
		      reactor_fd_fn fn, void *arg)
{
	if (g.nwatches == g.capwatches) {
		uint32_t cap = g.capwatches ? g.capwatches * 2 : 16;
		struct watch_ent *v = realloc(g.watches, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		g.watches = v;
		g.capwatches = cap;
	}
	w->fd = fd;
	w->events = events;
	w->fn = fn;
	w->arg = arg;
	g.watches[g.nwatches].fd = fd;
	g.watches[g.nwatches].r = r;
	g.watches[g.nwatches].w = w;
	g.nwatches++;
	return 0;
}

int reactor_watch_mod(struct reactor *r, struct reactor_watch *w, uint32_t events)
{
	(void)r;
	w->events = events;
	return 0;
}

void reactor_watch_del(struct reactor *r, struct reactor_watch *w)
{
	(void)r;
	w->fn = NULL;
	for (uint32_t i = 0; i < g.nwatches; i++) {
		if (g.watches[i].w == w) {
			g.watches[i] = g.watches[--g.nwatches];
			break;
		}
	}
}

int sim_fd_new(void)
{
	return g.next_fd++;
}

static struct watch_ent *watch_of(int fd)
{
	for (uint32_t i = 0; i < g.nwatches; i++) {
		if (g.watches[i].fd == fd)
			return &g.watches[i];
	}
	return NULL;
}

static void fd_ready(void *arg)
{
	/* Looked up again: the watch may have gone since the signal. */
	struct watch_ent *e = watch_of((int)(intptr_t)arg);

	if (e && e->w->fn)
		e->w->fn(e->w->arg, EPOLLIN);
}

void sim_fd_signal(int fd)
{
	struct watch_ent *e = watch_of(fd);

	if (e)
		sim_at(e->r, g.now_us + sim_rng_below(&g.rng, 20), fd_ready, NULL,
		       (void *)(intptr_t)fd);
}

/* ---- timers and tasks ---- */

void reactor_timer_init(struct reactor_timer *t, reactor_task_fn fn, void *arg)
{
	t->due_ms = 0;
	t->fn = fn;
	t->arg = arg;
	t->heap_idx = UINT32_MAX;
}

int reactor_timer_arm(struct reactor *r, struct reactor_timer *t, uint64_t delay_ms)
{
	struct sim_ev ev = { .due_us = g.now_us + delay_ms * 1000, .r = r, .timer = t };

	if (t->heap_idx != UINT32_MAX)
		heap_remove(t->heap_idx);
	if (r->dead)
		return 0;
	t->due_ms = MONO_BASE_MS + ev.due_us / 1000;
	heap_push(&ev);
	return 0;
}

void reactor_timer_cancel(struct reactor *r, struct reactor_timer *t)
{
	(void)r;
	if (t->heap_idx != UINT32_MAX)
		heap_remove(t->heap_idx);
}

int reactor_defer(struct reactor *r, reactor_task_fn fn, void *arg)
{
	sim_at(r, g.now_us, fn, NULL, arg);
	return 0;
}

int reactor_call(struct reactor *r, reactor_task_fn fn, void *arg)
{
	struct reactor *saved = g.cur;

	g.cur = r;
	fn(arg);
	g.cur = saved;
	return 0;
}

int reactor_post(struct reactor *r, reactor_task_fn fn, void *arg)
{
	uint32_t src = g.cur ? g.cur->id : 0;
	uint64_t due = g.now_us + sim_rng_below(&g.rng, (uint64_t)g.jitter_us + 1);
	int i;

	for (i = 0; i < r->nfifo && r->fifo[i].src != src; i++)
		;
	if (i == r->nfifo && r->nfifo < (int)(sizeof(r->fifo) / sizeof(r->fifo[0]))) {
		r->fifo[i].src = src;
		r->fifo[i].due_us = 0;
		r->nfifo++;
	}
	if (i < r->nfifo) {
		if (due < r->fifo[i].due_us)
			due = r->fifo[i].due_us;
		r->fifo[i].due_us = due;
	}
	sim_at(r, due, fn, NULL, arg);
	return 0;
}

/* No helper thread in the simulation: nothing simulated blocks. The one
 * user linked here, the storage client's same-host attach (shm_reads.c),
 * is off in the simulation and treats a refusal as "read over TCP". */
int reactor_offload(struct reactor *r, reactor_task_fn work, reactor_task_fn done, void *arg)
{
	(void)r;
	(void)work;
	(void)done;
	(void)arg;
	return -ENOTSUP;
}
