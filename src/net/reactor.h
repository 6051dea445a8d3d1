/*
 * A reactor: one thread's event loop over epoll, with timers, deferred
 * tasks, a cross-thread message queue, and a helper thread for the few
 * calls that block. Objects registered with a reactor (connections, disk
 * rings) are owned by its thread; other threads reach them only through
 * reactor_post().
 */
#ifndef STRATA_NET_REACTOR_H
#define STRATA_NET_REACTOR_H

#include <stdbool.h>
#include <stdint.h>

struct reactor;

typedef void (*reactor_fd_fn)(void *arg, uint32_t events);
typedef void (*reactor_task_fn)(void *arg);

/* A file descriptor watch, embedded in its owner. fn == NULL after
 * reactor_watch_del(), so events already fetched in this loop iteration
 * are skipped; free the owner through reactor_defer(), never in place. */
struct reactor_watch {
	int fd;
	uint32_t events;
	reactor_fd_fn fn;
	void *arg;
};

/* A one-shot timer, embedded in its owner. */
struct reactor_timer {
	uint64_t due_ms;
	reactor_task_fn fn;
	void *arg;
	uint32_t heap_idx;	/* UINT32_MAX when not armed */
};

/* Monotonic milliseconds. */
uint64_t reactor_now_ms(void);

/* Creates a reactor; name is used in thread names and logs. Returns 0 or
 * a negative errno. */
int reactor_new(const char *name, struct reactor **out);
/* Frees the reactor; its thread must be stopped. Deferred tasks and posted
 * messages still queued are run first so their owners can free memory. */
void reactor_free(struct reactor *r);

/* Runs the loop on the calling thread until reactor_stop(). */
void reactor_run(struct reactor *r);
/*
 * Runs the loop on the calling thread until done(arg) is true (asked
 * before each batch of events and after it), then returns: for a reactor
 * with no thread of its own, driven by whichever thread is waiting on it
 * (rpc_direct, rpc.h). done NULL: one batch, without waiting for events.
 * Never on a reactor that reactor_start runs, and never from two threads
 * at once: the caller makes sure only it drives r (objects of r belong to
 * that thread while it does). Returns 0, or -EIO when epoll failed (logged; timers
 * still ran, so calls still time out and a done that waits for them comes
 * true).
 */
int reactor_run_until(struct reactor *r, bool (*done)(void *arg), void *arg);
/* Starts the loop on a new thread. */
int reactor_start(struct reactor *r);
/* Thread-safe: asks the loop to return; reactor_join waits for a thread
 * started by reactor_start. */
void reactor_stop(struct reactor *r);
void reactor_join(struct reactor *r);
/* True when called from r's loop thread. */
bool reactor_on_thread(const struct reactor *r);

int reactor_watch_add(struct reactor *r, struct reactor_watch *w, int fd, uint32_t events,
		      reactor_fd_fn fn, void *arg);
int reactor_watch_mod(struct reactor *r, struct reactor_watch *w, uint32_t events);
void reactor_watch_del(struct reactor *r, struct reactor_watch *w);

void reactor_timer_init(struct reactor_timer *t, reactor_task_fn fn, void *arg);
/* Arms (or re-arms) t to fire after delay_ms. Returns 0 or -ENOMEM. */
int reactor_timer_arm(struct reactor *r, struct reactor_timer *t, uint64_t delay_ms);
void reactor_timer_cancel(struct reactor *r, struct reactor_timer *t);
static inline bool reactor_timer_armed(const struct reactor_timer *t) { return t->heap_idx != UINT32_MAX; }

/* Runs fn(arg) on the loop thread after the current batch of events (a safe
 * point to free objects). Owner thread only. Returns 0 or -ENOMEM. */
int reactor_defer(struct reactor *r, reactor_task_fn fn, void *arg);
/* Runs fn(arg) on r's loop thread and waits for it to return (directly
 * when already on that thread, or when the loop is not running). */
int reactor_call(struct reactor *r, reactor_task_fn fn, void *arg);
/* Thread-safe: runs fn(arg) on r's loop thread soon. Returns 0 or -ENOMEM
 * (fn not run). */
int reactor_post(struct reactor *r, reactor_task_fn fn, void *arg);

/*
 * Runs work(arg) on r's helper thread, then done(arg) on r's loop thread:
 * for a call that blocks (a name lookup) and must not stall the loop. The
 * helper thread starts on the first use and runs jobs one at a time, in
 * order. work must not touch objects owned by the loop thread; done may.
 * Thread-safe. Returns 0, or -ENOMEM, -ESHUTDOWN (r is being freed) or a
 * thread-creation error, and then neither runs.
 *
 * done always runs exactly once. When r is freed with jobs queued, the
 * job in progress finishes, the others are skipped (work does not run),
 * and every done runs from reactor_free: a job records in arg whether its
 * work ran.
 */
int reactor_offload(struct reactor *r, reactor_task_fn work, reactor_task_fn done, void *arg);

#endif
