/*
 * The deterministic simulation's shared internals (tests/sim/).
 *
 * The real storage, mgmt and client code runs on simulated replacements of
 * its platform: sim_reactor.c (reactor.h: one virtual clock and one event
 * queue for every node), sim_net.c (rpc.h, server.h and the part of conn.h
 * the services use, with a fault layer), sim_chunk_store.c (chunk_store.h
 * in memory, with a durable part that survives a node's crash, and disk
 * faults) and sim_mgmt_store.c (mgmt_store.h in memory). sim_chain.c runs
 * the scenario, the workload and the faults; sim_check.c checks the
 * history. A seed determines a run: every choice comes from a sim_rng
 * seeded from it, nothing reads the wall clock, and nothing depends on
 * addresses or hash order.
 *
 * Single-threaded: everything runs on the thread that drives the queue.
 * Time is kept in microseconds so that posts, messages and disk
 * completions interleave finely; reactor_now_ms() shows it in ms.
 */
#ifndef STRATA_TESTS_SIM_H
#define STRATA_TESTS_SIM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/layout.h"
#include "common/rand.h"
#include "net/reactor.h"
#include "storage/chunk_store.h"

struct cluster_map;

#define SIM_MAX_NODES 12u

/* ---- random source ---- */

/* SplitMix64 (common/rand.h): small, fast, and every
 * stream is a pure function of its seed. */
struct sim_rng {
	uint64_t s;
};

static inline void sim_rng_init(struct sim_rng *r, uint64_t seed, uint64_t stream)
{
	r->s = splitmix64(seed ^ splitmix64(stream + 0x5151u));
}

static inline uint64_t sim_rng_next(struct sim_rng *r)
{
	r->s += 0x9E3779B97F4A7C15ull;
	return splitmix64(r->s);
}

/* Uniform in [0, n); 0 when n == 0. */
static inline uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
	return n ? sim_rng_next(r) % n : 0;
}

/* Uniform in [lo, hi]. */
static inline uint64_t sim_rng_range(struct sim_rng *r, uint64_t lo, uint64_t hi)
{
	return lo + sim_rng_below(r, hi - lo + 1);
}

/* True with probability ppm / 1e6. */
static inline bool sim_rng_ppm(struct sim_rng *r, uint32_t ppm)
{
	return ppm && sim_rng_below(r, 1000000) < ppm;
}

/* ---- nodes and reactors ---- */

/* A simulated machine. A start of its process bumps inc; everything a
 * process owned (reactors, connections, open stores) carries the inc it
 * was made under, and dies with it. */
struct sim_node {
	uint32_t id;
	char addr[32];		/* "simN:7300" */
	char name[8];		/* "nN", in traces */
	uint32_t inc;
	bool up;
};

/* The sim's reactor (opaque in reactor.h): a name for a set of events
 * that run "on one thread" and die with their node's process. */
struct reactor {
	struct sim_node *node;	/* NULL: the harness itself */
	uint32_t id;
	int idx;
	bool dead;
	/* Posts from one reactor to this one arrive in order (the real
	 * queue is FIFO): last due time per source. */
	struct {
		uint32_t src;
		uint64_t due_us;
	} fifo[8];
	int nfifo;
};

typedef void (*sim_fn)(void *arg);

/* Resets the queue and the clock for a new run; jitter_us bounds the
 * delay of a reactor_post (a cross-thread hop). */
void sim_reset(uint64_t seed, uint32_t jitter_us);
/* Frees what the queue still holds (drop functions run). */
void sim_release(void);
uint64_t sim_now_us(void);
/* The reactor whose event runs now (NULL: the harness). */
struct reactor *sim_current(void);
/* Schedules fn(arg) on r (NULL: the harness) at due_us (>= now). drop, if
 * not NULL, frees arg when the event is discarded because r died. */
void sim_at(struct reactor *r, uint64_t due_us, sim_fn fn, sim_fn drop, void *arg);
/* Runs the next event if it is due at or before until_us; else moves the
 * clock to until_us. Returns false when nothing ran. */
bool sim_step(uint64_t until_us);
/* Runs events until until_us (the clock ends there). */
void sim_run_until(uint64_t until_us);
uint64_t sim_events_run(void);

/* A reactor of node n (index idx among the node's threads). */
struct reactor *sim_reactor_new(struct sim_node *n, int idx);
/* The process of r's node died: its events are discarded (drop functions
 * run), its timers disarmed, its fd watches forgotten. r stays allocated
 * (the dead process's memory is abandoned, as a kill -9 leaves it). */
void sim_reactor_kill(struct reactor *r);

/* A fake file descriptor for a simulated device, and its "readable"
 * edge: the watch registered for fd runs on its reactor soon after. */
int sim_fd_new(void);
void sim_fd_signal(int fd);

/* ---- trace and log ---- */

/* Tracing off: nothing is formatted (the batch runs); on: every line goes
 * to a ring buffer and a digest, and to stdout when live. */
void sim_trace_reset(bool on, bool live);
bool sim_tracing(void);
/* One line, prefixed with the virtual time and the current node. */
void sim_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_vtrace(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* FNV-1a of every line traced since the reset. */
uint64_t sim_trace_digest(void);
uint64_t sim_trace_lines(void);
/* Prints the last n lines of the ring to stdout. */
void sim_trace_print_tail(uint32_t n);
/* Routes log_* of the real code into the trace (log_set_sink). */
void sim_log_attach(void);

/* ---- the chunk store's simulated disks (sim_chunk_store.c) ---- */

/* A chunk's content as a disk or a live store holds it. */
struct sim_copy {
	bool exists;
	uint64_t version;
	uint32_t tag;
	uint32_t len;
	uint32_t crc;
	uint8_t *data;		/* len bytes, cap allocated */
	uint32_t cap;
	/* Sim-only: the chunk's lifetime when this copy was created from
	 * nothing or installed whole (sim_chunk_lifetime): versions start
	 * again after a removal, so only copies of one lifetime compare. */
	uint32_t born;
};

struct sim_disk;

struct sim_disk_faults {
	uint32_t fail_ppm;		/* an update fails before it applies */
	uint32_t fail_after_ppm;	/* an update applies, then reports -EIO */
	int fail_err;			/* -ENOSPC or -EIO for fail_ppm */
	uint32_t read_fail_ppm;		/* a read fails with -EIO */
	uint32_t slow_ppm;		/* an op takes 5-40 ms */
};

/* Forgets every disk (a new run). */
void sim_disks_reset(uint64_t seed);
void sim_disks_release(void);
/* Declares the disk at dir (a target directory) as target_id's. */
struct sim_disk *sim_disk_add(const char *dir, uint32_t target_id, uint64_t capacity);
struct sim_disk *sim_disk_of_target(uint32_t target_id);
uint32_t sim_disk_target(const struct sim_disk *d);
void sim_disk_set_faults(struct sim_disk *d, const struct sim_disk_faults *f);
void sim_disk_set_capacity(struct sim_disk *d, uint64_t capacity);
uint64_t sim_disk_used(const struct sim_disk *d);
/* The process that has d open died: each update in flight reaches the
 * durable part or not (at random, whole), so does each update whose sync
 * "failed"; then the open store is abandoned. */
void sim_disk_crash(struct sim_disk *d);
/* The chunk as the target holds it now: the open store's, or the durable
 * one when no process has the disk open. NULL when absent. */
const struct sim_copy *sim_disk_chunk(const struct sim_disk *d, const struct chunk_id *id);
bool sim_disk_is_open(const struct sim_disk *d);
uint32_t sim_disk_inflight(const struct sim_disk *d);

/* ---- the mgmt store (sim_mgmt_store.c) ---- */

void sim_mgmt_stores_reset(void);
void sim_mgmt_stores_release(void);
/* The map last saved at path, or NULL. */
const struct cluster_map *sim_mgmt_store_map(const char *path);

/* ---- the network (sim_net.c) ---- */

struct sim_net_faults {
	uint32_t drop_ppm;	/* a message is lost */
	uint32_t dup_ppm;	/* a request is delivered twice */
	uint32_t reorder_ppm;	/* a message may overtake earlier ones */
	uint32_t spike_ppm;	/* a message takes 20-600 ms */
};

struct sim_net_stats {
	uint64_t sent, delivered, dropped, dups, reordered, spikes, resets, refused, timeouts;
};

void sim_net_reset(uint64_t seed, struct sim_node *nodes, uint32_t nnodes);
void sim_net_release(void);
void sim_net_set_faults(const struct sim_net_faults *f);
/* Cuts (cut true) or heals the link between nodes a and b, both ways. */
void sim_net_cut(uint32_t a, uint32_t b, bool cut);
bool sim_net_is_cut(uint32_t a, uint32_t b);
/* Node n's process died: its listener goes away, and every connection it
 * had is reset (peers see -ECONNRESET when not cut off from it). */
void sim_net_node_down(struct sim_node *n);
void sim_net_stats_get(struct sim_net_stats *out);

/* ---- hooks into the scenario (sim_chain.c) ---- */

/* A live store committed a chunk of target (c == NULL or !c->exists:
 * removed). */
void sim_on_commit(uint32_t target, const struct chunk_id *id, const struct sim_copy *c);
/* The current lifetime of a chunk: bumped by each removal a client asks
 * for. */
uint32_t sim_chunk_lifetime(const struct chunk_id *id);
/* A live store of target starts applying an update (its disk is busy). */
void sim_on_update_start(uint32_t target);
/* mgmt saved a map. */
void sim_on_map_saved(const char *path, const struct cluster_map *m);
/* The network delivers a second copy of a request from node from whose
 * callback argument is cb_arg. */
void sim_on_request_dup(uint32_t from, void *cb_arg);

/* ---- link-time wrappers (sim_wrap.c): no wall clock, no pid, no fs ---- */

int __wrap_clock_gettime(clockid_t clk, struct timespec *ts);
/* The real one, for the harness's own wall-clock figures (never a run's). */
int __real_clock_gettime(clockid_t clk, struct timespec *ts);
pid_t __wrap_getpid(void);
int __wrap_mkdir(const char *path, mode_t mode);

#endif
