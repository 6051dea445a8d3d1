/*
 * strata-fuse's write-behind: a write(2) is answered once its data is
 * copied into a bounded per-file queue, and a pool of workers sends it
 * with strata_pwrite (on every replica when that returns). Whoever needs
 * the data out (flush, fsync, release, a read through the same handle, a
 * truncate) drains the file's queue first and collects the first error a
 * queued write met, as NFS reports write errors at close.
 *
 * Per file: at most wb->max bytes and WB_SLOTS writes in flight, and
 * writes that overlap one in flight wait for it, so a later write to the
 * same bytes is never overtaken by an earlier one.
 *
 * Threads: any FUSE worker calls wb_write/wb_drain; the pool's workers
 * run the queue. struct wb belongs to the mount, struct wb_file to one
 * open file (it borrows the strata_file, which must outlive it).
 */
#ifndef STRATA_FUSE_WRITE_BEHIND_H
#define STRATA_FUSE_WRITE_BEHIND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strata/strata.h"

#define WB_SLOTS 16
#define WB_MAX_WORKERS 8

struct wb_job;

/* The mount's queue and workers; caller-owned. */
struct wb {
	size_t max;			/* bytes queued per file; 0: every write waits */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct wb_job *head, *tail;
	bool stop;
	unsigned nworkers;
	pthread_t workers[WB_MAX_WORKERS];
};

/* One open file's writes in flight; caller-owned (inside the handle). */
struct wb_file {
	struct strata_file *f;		/* borrowed */
	uint64_t ino;			/* for log lines */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct { uint64_t off, len; } inflight[WB_SLOTS];	/* len 0: free */
	uint64_t inflight_bytes;
	int err;			/* first failed queued write, reported once */
};

/* Sets up wb with max bytes queued per file (0: off). */
void wb_init(struct wb *wb, size_t max);
/* Starts n workers (at most WB_MAX_WORKERS; none when max is 0). Returns
 * 0 or a negative errno. */
int wb_start(struct wb *wb, unsigned n);
/* Lets the workers finish what is queued, joins them and frees what wb
 * holds. The files' handles must still be open. */
void wb_release(struct wb *wb);

/* Sets up wf for writes to f (borrowed), inode ino. */
void wb_file_init(struct wb_file *wf, struct strata_file *f, uint64_t ino);
/* Frees what wf holds; its writes must be drained. */
void wb_file_release(struct wb_file *wf);

/*
 * Writes size bytes of buf at off: queued (buf copied) when write-behind
 * is on and there is room, else sent at once. Returns size, or a
 * negative error: this write's, or one an earlier queued write met (then
 * this write was not made).
 */
ssize_t wb_write(struct wb *wb, struct wb_file *wf, const char *buf, size_t size, off_t off);
/* Waits for wf's queued writes. take_err: returns (and clears) the first
 * error they met; else 0. */
int wb_drain(struct wb_file *wf, bool take_err);

#endif
