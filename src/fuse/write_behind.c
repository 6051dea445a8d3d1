/* strata-fuse's write-behind (see write_behind.h). */
#include "fuse/write_behind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define COMP "fuse"

struct wb_job {
	struct wb_job *next;
	struct wb_file *wf;
	unsigned slot;
	uint64_t off;
	size_t len;
	char data[];
};

void wb_init(struct wb *wb, size_t max)
{
	memset(wb, 0, sizeof(*wb));
	wb->max = max;
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->cond, NULL);
}

void wb_file_init(struct wb_file *wf, struct strata_file *f, uint64_t ino)
{
	memset(wf, 0, sizeof(*wf));
	wf->f = f;
	wf->ino = ino;
	pthread_mutex_init(&wf->lock, NULL);
	pthread_cond_init(&wf->cond, NULL);
}

void wb_file_release(struct wb_file *wf)
{
	pthread_mutex_destroy(&wf->lock);
	pthread_cond_destroy(&wf->cond);
}

int wb_drain(struct wb_file *wf, bool take_err)
{
	int err = 0;

	pthread_mutex_lock(&wf->lock);
	while (wf->inflight_bytes)
		pthread_cond_wait(&wf->cond, &wf->lock);
	if (take_err) {
		err = wf->err;
		wf->err = 0;
	}
	pthread_mutex_unlock(&wf->lock);
	return err;
}

static bool overlaps(const struct wb_file *wf, uint64_t off, uint64_t len)
{
	for (unsigned i = 0; i < WB_SLOTS; i++)
		if (wf->inflight[i].len && off < wf->inflight[i].off + wf->inflight[i].len &&
		    wf->inflight[i].off < off + len)
			return true;
	return false;
}

static int free_slot(const struct wb_file *wf)
{
	for (unsigned i = 0; i < WB_SLOTS; i++)
		if (!wf->inflight[i].len)
			return (int)i;
	return -1;
}

static void slot_done(struct wb_file *wf, unsigned slot, int err)
{
	pthread_mutex_lock(&wf->lock);
	if (err && !wf->err)
		wf->err = err;
	wf->inflight_bytes -= wf->inflight[slot].len;
	wf->inflight[slot].len = 0;
	pthread_cond_broadcast(&wf->cond);
	pthread_mutex_unlock(&wf->lock);
}

static void *worker(void *arg)
{
	struct wb *wb = arg;

	for (;;) {
		struct wb_job *j;
		ssize_t n;

		pthread_mutex_lock(&wb->lock);
		while (!wb->head && !wb->stop)
			pthread_cond_wait(&wb->cond, &wb->lock);
		j = wb->head;
		if (j) {
			wb->head = j->next;
			if (!wb->head)
				wb->tail = NULL;
		}
		pthread_mutex_unlock(&wb->lock);
		if (!j)
			return NULL;	/* stopping, queue empty */
		n = strata_pwrite(j->wf->f, j->data, j->len, j->off);
		if (n < 0)
			log_warn(COMP, "queued write of %zu bytes at %llu to inode %llu: %s", j->len,
				 (unsigned long long)j->off, (unsigned long long)j->wf->ino,
				 strata_strerror((int)n));
		slot_done(j->wf, j->slot, n < 0 ? (int)n : 0);
		free(j);
	}
}

/* Queues a write (copying buf). Returns 0, 1 when the caller should write
 * synchronously instead, or a negative error an earlier queued write met. */
static int enqueue(struct wb *wb, struct wb_file *wf, const char *buf, size_t size, off_t off)
{
	struct wb_job *j;
	int slot, err;

	pthread_mutex_lock(&wf->lock);
	while (!wf->err && ((wf->inflight_bytes && wf->inflight_bytes + size > wb->max) ||
			    free_slot(wf) < 0 || overlaps(wf, (uint64_t)off, size)))
		pthread_cond_wait(&wf->cond, &wf->lock);
	err = wf->err;
	wf->err = 0;
	if (err) {
		pthread_mutex_unlock(&wf->lock);
		return err;
	}
	slot = free_slot(wf);
	wf->inflight[slot].off = (uint64_t)off;
	wf->inflight[slot].len = size;
	wf->inflight_bytes += size;
	pthread_mutex_unlock(&wf->lock);
	j = malloc(sizeof(*j) + size);
	if (!j) {
		slot_done(wf, (unsigned)slot, 0);
		return 1;
	}
	j->next = NULL;
	j->wf = wf;
	j->slot = (unsigned)slot;
	j->off = (uint64_t)off;
	j->len = size;
	memcpy(j->data, buf, size);
	pthread_mutex_lock(&wb->lock);
	if (wb->tail)
		wb->tail->next = j;
	else
		wb->head = j;
	wb->tail = j;
	pthread_cond_signal(&wb->cond);
	pthread_mutex_unlock(&wb->lock);
	return 0;
}

ssize_t wb_write(struct wb *wb, struct wb_file *wf, const char *buf, size_t size, off_t off)
{
	int rc = 1;

	if (wb->max && wb->nworkers && size)
		rc = enqueue(wb, wf, buf, size, off);
	if (rc == 1)
		return strata_pwrite(wf->f, buf, size, (uint64_t)off);
	return rc ? rc : (ssize_t)size;
}

int wb_start(struct wb *wb, unsigned n)
{
	if (!wb->max)
		n = 0;
	if (n > WB_MAX_WORKERS)
		n = WB_MAX_WORKERS;
	for (; wb->nworkers < n; wb->nworkers++) {
		int rc = pthread_create(&wb->workers[wb->nworkers], NULL, worker, wb);

		if (rc)
			return -rc;
	}
	return 0;
}

void wb_release(struct wb *wb)
{
	/* The workers finish the queue, then exit. */
	pthread_mutex_lock(&wb->lock);
	wb->stop = true;
	pthread_cond_broadcast(&wb->cond);
	pthread_mutex_unlock(&wb->lock);
	for (unsigned i = 0; i < wb->nworkers; i++)
		pthread_join(wb->workers[i], NULL);
	wb->nworkers = 0;
	pthread_mutex_destroy(&wb->lock);
	pthread_cond_destroy(&wb->cond);
}
