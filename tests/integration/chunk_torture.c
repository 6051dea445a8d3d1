/*
 * chunk_torture: drives a live cluster through the storage client and
 * checks every byte against a reference model. Used by the integration
 * tests (tests/integration/test_storage.py).
 *
 *   chunk_torture MGMT_ADDR random SEED OPS CHUNKS CHUNK_SIZE DEPTH
 *       random writes of many sizes and offsets (DEPTH in flight, never
 *       two on one chunk at once), then a read-back of every chunk, and
 *       random reads along the way checked against the model.
 *   chunk_torture MGMT_ADDR samechunk SEED WRITERS CHUNK_SIZE
 *       WRITERS concurrent writes of disjoint ranges of ONE chunk, then a
 *       read-back: every range must hold its writer's data.
 *   chunk_torture MGMT_ADDR write INO IDX OFFSET LEN SEED   (one write)
 *   chunk_torture MGMT_ADDR read INO IDX OFFSET LEN SEED [TIMES]
 *       check the content; TIMES reads in one client (default 1) visit
 *       the serving replicas in turn, so TIMES >= R reads every replica.
 *   chunk_torture MGMT_ADDR fill INO IDX_FROM COUNT LEN     (until error)
 *       chunk i holds LEN bytes of the pattern of seed INO (read it back
 *       with 'read INO i 0 LEN INO'); exit status 3 on ENOSPC.
 *
 * Exit status 0 when every check passed; the first mismatch is printed.
 * STRATA_TORTURE_RETRY_MS=N: give up an I/O after N ms of retries (the
 * storage client's default is 30 s).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/storage_client.h"
#include "common/buf.h"
#include "common/layout.h"
#include "common/log.h"
#include "common/rand.h"
#include "net/reactor.h"
#include "strata/errors.h"

#include "driver_client.h"

/* A short-lived test driver: its model buffers live until exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return rng_next(&rng_state);
}

struct ctx {
	struct sclient *sc;
	uint32_t table;
	uint32_t chunk_size;
	int failures;
	uint64_t inflight, done;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

struct job {
	struct sc_io io;
	struct ctx *c;
	uint8_t *expect;	/* for reads: expected bytes (len) */
	int *busy;
};

static void job_done(struct sc_io *io)
{
	struct job *j = (struct job *)io;
	struct ctx *c = j->c;

	pthread_mutex_lock(&c->lock);
	if (io->status) {
		fprintf(stderr, "chunk %" PRIx64 ":%" PRIu64 " %s at %u+%u failed: %s\n", io->ino, io->idx,
			io->kind == SC_READ ? "read" : "write", io->offset, io->len,
			strata_strerror(io->status));
		c->failures++;
	} else if (j->expect && memcmp(io->buf, j->expect, io->len) != 0) {
		fprintf(stderr, "chunk %" PRIx64 ":%" PRIu64 ": read at %u+%u does not match the model\n",
			io->ino, io->idx, io->offset, io->len);
		c->failures++;
	}
	if (j->busy)
		*j->busy = 0;
	c->inflight--;
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static uint32_t chain_of(struct ctx *c, uint64_t ino, uint64_t idx)
{
	struct file_layout l = { c->chunk_size, c->table < 16 ? c->table : 16, c->table, ino };

	return layout_chain_index(&l, idx);
}

static void wait_below(struct ctx *c, uint64_t n)
{
	pthread_mutex_lock(&c->lock);
	while (c->inflight > n)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

static int run_random(struct ctx *c, uint64_t seed, uint64_t ops, uint32_t nchunks, uint32_t depth)
{
	uint8_t **model = calloc(nchunks, sizeof(*model));
	uint32_t *len = calloc(nchunks, sizeof(*len));
	int *busy = calloc(nchunks, sizeof(int));
	struct job *jobs = calloc(depth, sizeof(*jobs));
	uint8_t **expect = calloc(depth, sizeof(*expect));
	uint64_t ino = 1000 + seed;
	static const uint32_t sizes[] = { 1, 7, 512, 4096, 4097, 65536, 65537, 131072, 1 << 20 };

	rng_state = seed;
	for (uint32_t i = 0; i < nchunks; i++)
		model[i] = calloc(1, c->chunk_size);
	for (uint32_t i = 0; i < depth; i++) {
		jobs[i].io.buf = abuf_alloc(c->chunk_size);
		expect[i] = malloc(c->chunk_size);
	}
	for (uint64_t op = 0; op < ops && !c->failures; op++) {
		struct job *j = NULL;
		uint32_t k, off, n;
		bool is_read;

		/* A free slot (its busy pointer cleared by job_done) and a chunk
		 * with nothing in flight. */
		pthread_mutex_lock(&c->lock);
		for (;;) {
			for (uint32_t i = 0; i < depth && !j; i++) {
				if (!jobs[i].busy || *jobs[i].busy == 0)
					j = &jobs[i];
			}
			if (j)
				break;
			pthread_cond_wait(&c->cond, &c->lock);
		}
		do {
			k = (uint32_t)(rnd() % nchunks);
		} while (busy[k]);
		busy[k] = 1;
		c->inflight++;
		pthread_mutex_unlock(&c->lock);
		n = sizes[rnd() % (sizeof(sizes) / sizeof(sizes[0]))];
		if (n > c->chunk_size)
			n = c->chunk_size;
		off = (uint32_t)(rnd() % (c->chunk_size - n + 1));
		if (rnd() % 3 == 0 && len[k] <= c->chunk_size - n)
			off = len[k];	/* an append */
		is_read = rnd() % 3 == 0;
		memset(&j->io, 0, offsetof(struct sc_io, buf));
		j->io.ino = ino;
		j->io.idx = k;
		j->io.chain_idx = chain_of(c, ino, k);
		j->io.offset = off;
		j->io.len = n;
		j->io.cb = job_done;
		j->c = c;
		j->busy = &busy[k];
		if (is_read) {
			j->io.kind = SC_READ;
			j->expect = expect[j - jobs];
			memset(j->expect, 0, n);
			if (off < len[k])
				memcpy(j->expect, model[k] + off, (off + n > len[k] ? len[k] : off + n) - off);
		} else {
			j->io.kind = SC_WRITE;
			j->expect = NULL;
			pattern_fill(j->io.buf, n, rnd());
			memcpy(model[k] + off, j->io.buf, n);
			if (off + n > len[k])
				len[k] = off + n;
		}
		sc_submit(c->sc, &j->io);
	}
	wait_below(c, 0);
	/* Read back every chunk whole. */
	for (uint32_t k = 0; k < nchunks && !c->failures; k++) {
		struct job *j = &jobs[0];

		memset(&j->io, 0, offsetof(struct sc_io, buf));
		j->io.kind = SC_READ;
		j->io.ino = ino;
		j->io.idx = k;
		j->io.chain_idx = chain_of(c, ino, k);
		j->io.len = c->chunk_size;
		sc_sync(c->sc, &j->io);
		if (j->io.status || j->io.nread != len[k] || memcmp(j->io.buf, model[k], c->chunk_size)) {
			fprintf(stderr, "read-back of chunk %u: status %s, %u bytes (model %u)%s\n", k,
				strata_strerror(j->io.status), j->io.nread, len[k],
				j->io.status ? "" : ", content differs");
			c->failures++;
		}
	}
	printf("random: %" PRIu64 " ops over %u chunks: %s\n", ops, nchunks,
	       c->failures ? "FAILED" : "ok");
	return c->failures ? 1 : 0;
}

static int run_samechunk(struct ctx *c, uint64_t seed, uint32_t writers)
{
	uint32_t slice = c->chunk_size / writers;
	struct job *jobs = calloc(writers, sizeof(*jobs));
	uint8_t *all = abuf_alloc(c->chunk_size), *expect = calloc(1, c->chunk_size);
	uint64_t ino = 5000 + seed;
	struct sc_io rd = { 0 };

	slice -= slice % 8;
	for (uint32_t i = 0; i < writers; i++) {
		struct job *j = &jobs[i];

		j->c = c;
		j->io.kind = SC_WRITE;
		j->io.ino = ino;
		j->io.idx = 0;
		j->io.chain_idx = chain_of(c, ino, 0);
		j->io.offset = i * slice;
		j->io.len = slice;
		j->io.buf = abuf_alloc(slice);
		j->io.cb = job_done;
		pattern_fill(j->io.buf, slice, seed * 1000 + i);
		memcpy(expect + i * slice, j->io.buf, slice);
		pthread_mutex_lock(&c->lock);
		c->inflight++;
		pthread_mutex_unlock(&c->lock);
		sc_submit(c->sc, &j->io);
	}
	wait_below(c, 0);
	rd.kind = SC_READ;
	rd.ino = ino;
	rd.chain_idx = chain_of(c, ino, 0);
	rd.len = slice * writers;
	rd.buf = all;
	if (sc_sync(c->sc, &rd) || memcmp(all, expect, slice * writers)) {
		fprintf(stderr, "same-chunk read-back: %s\n",
			rd.status ? strata_strerror(rd.status) : "content differs");
		c->failures++;
	}
	printf("samechunk: %u writers: %s\n", writers, c->failures ? "FAILED" : "ok");
	return c->failures ? 1 : 0;
}

/* One write, or TIMES reads of the same range (the client moves to the
 * next serving replica at every submit). */
static int one_io(struct ctx *c, enum sc_kind kind, char **argv, uint32_t times)
{
	struct sc_io io = { 0 };
	uint32_t len = (uint32_t)strtoul(argv[3], NULL, 0);
	uint8_t *buf = abuf_alloc(len ? len : 1), *expect = malloc(len ? len : 1);

	pattern_fill(kind == SC_WRITE ? buf : expect, len, strtoull(argv[4], NULL, 0));
	for (uint32_t i = 0; i < times; i++) {
		memset(&io, 0, sizeof(io));
		io.kind = kind;
		io.ino = strtoull(argv[0], NULL, 0);
		io.idx = strtoull(argv[1], NULL, 0);
		io.offset = (uint32_t)strtoul(argv[2], NULL, 0);
		io.len = len;
		io.buf = buf;
		io.chain_idx = chain_of(c, io.ino, io.idx);
		if (kind == SC_READ)
			memset(buf, 0xa5, len);
		if (sc_sync(c->sc, &io)) {
			printf("error: %s (attempt %u)\n", strata_strerror(io.status), i + 1);
			return 1;
		}
		if (kind == SC_READ && (io.nread != len || memcmp(buf, expect, len))) {
			printf("mismatch: %u bytes read (attempt %u)\n", io.nread, i + 1);
			return 1;
		}
	}
	printf("ok version %" PRIu64 "\n", io.version);
	return 0;
}

static int run_fill(struct ctx *c, char **argv)
{
	uint64_t ino = strtoull(argv[0], NULL, 0), from = strtoull(argv[1], NULL, 0);
	uint64_t count = strtoull(argv[2], NULL, 0);
	uint32_t len = (uint32_t)strtoul(argv[3], NULL, 0);
	uint8_t *buf = abuf_alloc(len);

	pattern_fill(buf, len, ino);
	for (uint64_t i = 0; i < count; i++) {
		struct sc_io io = { .kind = SC_WRITE, .ino = ino, .idx = from + i, .len = len, .buf = buf };

		io.chain_idx = chain_of(c, ino, from + i);
		if (sc_sync(c->sc, &io)) {
			printf("stopped after %" PRIu64 " chunks: %s\n", i, strata_strerror(io.status));
			return io.status == -ENOSPC ? 3 : 1;
		}
	}
	printf("wrote %" PRIu64 " chunks\n", count);
	return 0;
}

int main(int argc, char **argv)
{
	struct ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

	log_set_level(LOG_WARN);
	if (argc < 3) {
		fprintf(stderr, "usage: see the comment at the top of chunk_torture.c\n");
		return 2;
	}
	c.sc = driver_connect("torture", argv[1]);
	if (!c.sc)
		return 1;
	c.table = sclient_table_len(c.sc);
	c.chunk_size = 1 << 20;
	if (strcmp(argv[2], "random") == 0 && argc == 8) {
		c.chunk_size = (uint32_t)strtoul(argv[6], NULL, 0);
		return run_random(&c, strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
				  (uint32_t)strtoul(argv[5], NULL, 0), (uint32_t)strtoul(argv[7], NULL, 0));
	}
	if (strcmp(argv[2], "samechunk") == 0 && argc == 6) {
		c.chunk_size = (uint32_t)strtoul(argv[5], NULL, 0);
		return run_samechunk(&c, strtoull(argv[3], NULL, 0), (uint32_t)strtoul(argv[4], NULL, 0));
	}
	if (strcmp(argv[2], "write") == 0 && argc == 8)
		return one_io(&c, SC_WRITE, argv + 3, 1);
	if (strcmp(argv[2], "read") == 0 && (argc == 8 || argc == 9))
		return one_io(&c, SC_READ, argv + 3,
			      argc == 9 ? (uint32_t)strtoul(argv[8], NULL, 0) : 1);
	if (strcmp(argv[2], "fill") == 0 && argc == 7)
		return run_fill(&c, argv + 3);
	fprintf(stderr, "bad arguments\n");
	return 2;
}
