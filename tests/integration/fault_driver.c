/*
 * fault_driver: a long-running writer for the fault tests
 * (tests/integration/test_faults.py), the audit of what it wrote, and a
 * dump of the cluster map.
 *
 *   fault_driver MGMT_ADDR writer LOG SEED INO NCHUNKS CHUNK_SIZE DEPTH SECONDS MAXLEN [READ_PCT]
 *       Writes (and, READ_PCT % of the time, reads) chunks 0..NCHUNKS-1
 *       of inode INO, DEPTH I/Os in flight, never two on one chunk, until
 *       SECONDS pass or SIGTERM/SIGINT arrives; then waits for what is in
 *       flight. Write lengths are 1..MAXLEN bytes of a pattern named by a
 *       fresh 64-bit data seed, at random offsets or appended. Every
 *       completed write is logged to LOG (line-buffered, so the log can be
 *       followed while it runs):
 *         S <t_us> <seed> <ino> <nchunks> <chunk_size>          (first line)
 *         W <t_us> <idx> <off> <len> <dseed> <version>           acknowledged
 *         F <t_us> <idx> <off> <len> <dseed> <errno>             failed
 *         M <t_us> <idx> <off> <len> <version> <nread>        a read that did not match
 *         E <t_us> <acked> <failed> <reads> <read_errors> <mismatches> <max_gap_us>
 *       t_us is CLOCK_REALTIME in microseconds. A chunk whose write failed
 *       is never written again (the failed write may still land later);
 *       its range is "unknown" to the audit. Reads are checked against the
 *       acknowledged writes as they go; a chunk a read found wrong is then
 *       read whole from each replica in turn ("probe" lines). Prints a summary line; exit status
 *       0 when no I/O failed and every read matched.
 *   fault_driver MGMT_ADDR fill LOG SEED INO NCHUNKS CHUNK_SIZE DEPTH
 *       Writes chunks 0..NCHUNKS-1 of INO whole, once each, DEPTH in
 *       flight, logged as the writer does (so 'audit LOG' checks them).
 *       Prints the bytes written and the rate.
 *   fault_driver MGMT_ADDR audit LOG [TIMES]
 *       Rebuilds from LOG what every chunk must hold (every acknowledged
 *       byte, zeros where nothing was written, unknown where a write
 *       failed) and reads every chunk whole TIMES times (default 1) in one
 *       client: the client visits the serving replicas in turn, so TIMES
 *       >= R reads every replica. Checks the bytes, the length and that the
 *       version is at least the last acknowledged one. Exit 0 when all
 *       match; mismatches are printed (at most 20).
 *   fault_driver MGMT_ADDR steps INO CHUNK_SIZE STEP...
 *       Runs the steps in order on chunks of inode INO, one line each:
 *         c:IDX                   the chain: "chain IDX CHAIN TARGET@NODE,... VERSION"
 *                                 (head first)
 *         w:IDX:OFF:LEN:BYTE      write LEN bytes of value BYTE (hex):
 *                                 "w ok VERSION" or "w err ERROR"
 *         t:IDX:LEN               truncate: "t ok VERSION" or "t err ERROR"
 *         r:IDX:OFF:LEN           read through the client:
 *                                 "r ok VERSION NREAD RUNS" or "r err ERROR"
 *         R:IDX:OFF:LEN:TARGET[:CHAINVER]
 *                                 read straight from one replica (no retry),
 *                                 routed by the map's chain version or
 *                                 CHAINVER (as a client with an old map):
 *                                 "R ok VERSION NREAD RUNS" or "R err ERROR"
 *       RUNS describes the bytes as runs "BYTExCOUNT,..." (hex byte).
 *       Exit 0 unless an argument is bad or the cluster is unreachable.
 *   fault_driver MGMT_ADDR map
 *       Prints the cluster map mgmt holds:
 *         map <version> <replication>
 *         node <id> <addr> <up|offline|draining>
 *         target <id> <node> <serving|syncing|offline|lost>
 *         chain <id> <version> <target>:<s|y>,... [out <target>,...]
 *       (members head first; s = serving, y = syncing).
 *
 * STRATA_TORTURE_RETRY_MS=N bounds each I/O's retries (default: the
 * client's 30 s).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/storage_client.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/layout.h"
#include "common/log.h"
#include "common/cluster_map.h"
#include "common/rand.h"
#include "proto/mgmt.h"
#include "proto/storage.h"
#include "net/codec.h"
#include "net/proto.h"
#include "net/reactor.h"
#include "net/rpc.h"
#include "strata/errors.h"

#include "driver_client.h"

/* A short-lived test driver: its model buffers live until exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

#define MAX_REPORTS 20
#define PROBES 8

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return rng_next(&rng_state);
}

/* Wall-clock microseconds: log lines line up with the daemons' logs. */
static uint64_t now_us(void)
{
	return (uint64_t)now_ns() / 1000u;
}

/* What a chunk must hold: bytes, which of them are known, the length. */
struct model {
	uint8_t *data;
	uint8_t *known;		/* 1: data[i] is what an acknowledged write (or a hole) left */
	uint32_t len;		/* end of the acknowledged writes */
	uint64_t min_version;	/* version of the last acknowledged write */
	int uncertain;		/* a write failed: length and its range unknown */
};

static int model_init(struct model *m, uint32_t chunk_size)
{
	m->data = calloc(1, chunk_size);
	m->known = malloc(chunk_size);
	if (!m->data || !m->known)
		return -ENOMEM;
	memset(m->known, 1, chunk_size);
	return 0;
}

static void model_write(struct model *m, uint32_t off, uint32_t len, uint64_t dseed, uint64_t ver)
{
	pattern_fill(m->data + off, len, dseed);
	memset(m->known + off, 1, len);
	if (off + len > m->len)
		m->len = off + len;
	m->min_version = ver;
}

static void model_fail(struct model *m, uint32_t off, uint32_t len)
{
	memset(m->known + off, 0, len);
	m->uncertain = 1;
}

/* First byte in [off, off+len) where buf differs from a known model byte,
 * or -1. *nbad counts the differing known bytes. */
static int64_t model_cmp(const struct model *m, uint32_t off, uint32_t len, const uint8_t *buf,
			 uint64_t *nbad)
{
	int64_t first = -1;

	*nbad = 0;
	for (uint32_t i = 0; i < len; i++) {
		if (m->known[off + i] && buf[i] != m->data[off + i]) {
			if (first < 0)
				first = off + i;
			(*nbad)++;
		}
	}
	return first;
}

/* ---- writer ---- */

struct slot {
	struct sc_io io;
	struct wctx *w;
	int busy;
	uint64_t dseed;
};

struct wctx {
	struct sclient *sc;
	FILE *log;
	uint64_t ino;
	uint32_t nchunks, chunk_size, table;
	struct model *models;
	uint8_t *chunk_busy;	/* 1 in flight, 2 retired (a write failed) */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t inflight;
	uint64_t acked, failed, reads, read_errors, mismatches;
	uint64_t last_ack_us, max_gap_us, max_gap_at_us;
	bool fill;		/* each chunk once, whole, in order */
	uint32_t probes[PROBES];	/* chunks a read found wrong: read each replica */
	uint32_t nprobes;
	uint32_t next_fill;
};

static uint32_t chain_of(uint32_t table, uint32_t chunk_size, uint64_t ino, uint64_t idx)
{
	struct file_layout l = { chunk_size, table < 16 ? table : 16, table, ino };

	return layout_chain_index(&l, idx);
}

static void writer_done(struct sc_io *io)
{
	struct slot *s = (struct slot *)io;
	struct wctx *w = s->w;
	struct model *m = &w->models[io->idx];
	uint64_t t = now_us();

	pthread_mutex_lock(&w->lock);
	if (io->kind == SC_WRITE) {
		if (io->status == 0) {
			model_write(m, io->offset, io->len, s->dseed, io->version);
			fprintf(w->log, "W %" PRIu64 " %" PRIu64 " %u %u %" PRIu64 " %" PRIu64 "\n", t,
				io->idx, io->offset, io->len, s->dseed, io->version);
			w->acked++;
			if (w->last_ack_us && t - w->last_ack_us > w->max_gap_us) {
				w->max_gap_us = t - w->last_ack_us;
				w->max_gap_at_us = w->last_ack_us;
			}
			w->last_ack_us = t;
		} else {
			model_fail(m, io->offset, io->len);
			fprintf(w->log, "F %" PRIu64 " %" PRIu64 " %u %u %" PRIu64 " %d\n", t, io->idx,
				io->offset, io->len, s->dseed, io->status);
			fprintf(stderr, "write %" PRIu64 ":%" PRIu64 " at %u+%u failed: %s\n", io->ino,
				io->idx, io->offset, io->len, strata_strerror(io->status));
			w->failed++;
		}
	} else {
		uint64_t nbad;
		int64_t first;

		w->reads++;
		if (io->status) {
			fprintf(stderr, "read %" PRIu64 ":%" PRIu64 " at %u+%u failed: %s\n", io->ino,
				io->idx, io->offset, io->len, strata_strerror(io->status));
			w->read_errors++;
		} else if ((first = model_cmp(m, io->offset, io->len, io->buf, &nbad)) >= 0) {
			fprintf(stderr, "%.3f read %" PRIu64 ":%" PRIu64 " at %u+%u (version %" PRIu64
				", %u bytes, last acknowledged version %" PRIu64 "): %" PRIu64
				" bytes differ from the acknowledged writes, first at %" PRId64 "\n",
				t / 1e6, io->ino, io->idx, io->offset, io->len, io->version, io->nread,
				m->min_version, nbad, first);
			fprintf(w->log, "M %" PRIu64 " %" PRIu64 " %u %u %" PRIu64 " %u\n", t, io->idx,
				io->offset, io->len, io->version, io->nread);
			w->mismatches++;
			if (w->nprobes < PROBES)
				w->probes[w->nprobes++] = (uint32_t)io->idx;
		}
	}
	w->chunk_busy[io->idx] = io->kind == SC_WRITE && io->status ? 2 : 0;
	for (uint32_t i = 0; i < w->nprobes; i++) {
		if (w->probes[i] == io->idx)
			w->chunk_busy[io->idx] = 3;	/* until probed */
	}
	s->busy = 0;
	w->inflight--;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* A read of chunk k did not match: read it whole once per replica (the
 * client moves to the next serving replica at every submit) and say what
 * each returned, to tell one bad replica from a lost write. */
static void probe(struct wctx *w, uint32_t k)
{
	uint8_t *buf = abuf_alloc(w->chunk_size);
	struct model *m = &w->models[k];

	for (uint32_t a = 0; buf && a < 4; a++) {
		struct sc_io io = { .kind = SC_READ, .ino = w->ino, .idx = k, .len = w->chunk_size,
				    .buf = buf };
		uint64_t nbad = 0;
		int64_t first;

		io.chain_idx = chain_of(w->table, w->chunk_size, w->ino, k);
		sc_sync(w->sc, &io);
		first = io.status ? -1 : model_cmp(m, 0, w->chunk_size, buf, &nbad);
		fprintf(stderr, "%.3f probe %" PRIu64 ":%u read %u: %s, version %" PRIu64
			", %u bytes (model %u, last acknowledged version %" PRIu64 "), %" PRIu64
			" bytes differ, first at %" PRId64 "\n", now_us() / 1e6, w->ino, k, a + 1,
			strata_strerror(io.status), io.version, io.nread, m->len, m->min_version,
			nbad, first);
	}
	abuf_free(buf);
}

static const uint32_t write_sizes[] = { 1, 100, 512, 4096, 4097, 16384, 65536, 65537, 131072,
					262144, 1u << 20 };

/* argv: LOG SEED INO NCHUNKS CHUNK_SIZE DEPTH [SECONDS MAXLEN [READ_PCT]]
 * (fill: no SECONDS, MAXLEN = CHUNK_SIZE). */
static int run_writer(struct sclient *sc, char **argv, int argc, bool fill)
{
	struct wctx w = { .sc = sc, .lock = PTHREAD_MUTEX_INITIALIZER,
			  .cond = PTHREAD_COND_INITIALIZER };
	const char *path = argv[0];
	uint64_t seed = strtoull(argv[1], NULL, 0);
	uint32_t depth = (uint32_t)strtoul(argv[5], NULL, 0);
	uint64_t seconds = fill ? 86400 : strtoull(argv[6], NULL, 0);
	uint32_t maxlen = fill ? (uint32_t)strtoul(argv[4], NULL, 0) :
			  (uint32_t)strtoul(argv[7], NULL, 0);
	uint32_t read_pct = argc > 8 ? (uint32_t)strtoul(argv[8], NULL, 0) : 0;
	uint64_t deadline, counter = 0, t0;
	struct slot *slots;
	int rc = 0;

	w.ino = strtoull(argv[2], NULL, 0);
	w.nchunks = (uint32_t)strtoul(argv[3], NULL, 0);
	w.chunk_size = (uint32_t)strtoul(argv[4], NULL, 0);
	w.table = sclient_table_len(sc);
	w.fill = fill;
	if (!w.nchunks || !depth || depth > w.nchunks || !maxlen || maxlen > w.chunk_size) {
		fprintf(stderr, "writer: need 0 < DEPTH <= NCHUNKS and 0 < MAXLEN <= CHUNK_SIZE\n");
		return 2;
	}
	w.log = fopen(path, "w");
	if (!w.log) {
		fprintf(stderr, "cannot create '%s': %s\n", path, strerror(errno));
		return 2;
	}
	setvbuf(w.log, NULL, _IOLBF, 0);
	w.models = calloc(w.nchunks, sizeof(*w.models));
	w.chunk_busy = calloc(w.nchunks, 1);
	slots = calloc(depth, sizeof(*slots));
	if (!w.models || !w.chunk_busy || !slots)
		return 2;
	for (uint32_t i = 0; i < w.nchunks; i++) {
		if (model_init(&w.models[i], w.chunk_size))
			return 2;
	}
	for (uint32_t i = 0; i < depth; i++) {
		slots[i].io.buf = abuf_alloc(w.chunk_size);
		slots[i].w = &w;
		if (!slots[i].io.buf)
			return 2;
	}
	rng_state = seed;
	fprintf(w.log, "S %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %u\n", now_us(), seed, w.ino,
		w.nchunks, w.chunk_size);
	t0 = mono_ms();
	deadline = t0 + seconds * 1000u;
	while (!g_stop && mono_ms() < deadline && (!fill || w.next_fill < w.nchunks)) {
		struct slot *s = NULL;

		pthread_mutex_lock(&w.lock);
		if (w.nprobes) {
			uint32_t k = w.probes[--w.nprobes];

			pthread_mutex_unlock(&w.lock);
			probe(&w, k);
			pthread_mutex_lock(&w.lock);
			w.chunk_busy[k] = 0;
		}
		pthread_mutex_unlock(&w.lock);
		struct model *m;
		uint32_t k = 0, n, off, tries = 0, free_chunks = 0;

		pthread_mutex_lock(&w.lock);
		while (!g_stop) {
			for (uint32_t i = 0; i < depth && !s; i++) {
				if (!slots[i].busy)
					s = &slots[i];
			}
			if (s)
				break;
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&w.cond, &w.lock, &ts);
		}
		for (uint32_t i = 0; i < w.nchunks; i++)
			free_chunks += w.chunk_busy[i] == 0;
		if (s && fill) {
			k = w.next_fill;
			if (w.chunk_busy[k] == 0)
				w.next_fill++;
		} else if (s && free_chunks) {
			do {
				k = (uint32_t)(rnd() % w.nchunks);
			} while (w.chunk_busy[k] && ++tries < 1000000);
		}
		if (g_stop || !s || !free_chunks || w.chunk_busy[k]) {
			pthread_mutex_unlock(&w.lock);
			if (!g_stop && s && !free_chunks && w.inflight == 0) {
				fprintf(stderr, "writer: every chunk retired after failures\n");
				break;
			}
			continue;
		}
		m = &w.models[k];
		w.chunk_busy[k] = 1;
		s->busy = 1;
		w.inflight++;
		pthread_mutex_unlock(&w.lock);

		memset(&s->io, 0, offsetof(struct sc_io, buf));
		s->io.ino = w.ino;
		s->io.idx = k;
		s->io.chain_idx = chain_of(w.table, w.chunk_size, w.ino, k);
		s->io.cb = writer_done;
		do {
			n = write_sizes[rnd() % (sizeof(write_sizes) / sizeof(write_sizes[0]))];
		} while (n > maxlen);
		if (n == 1 && maxlen > 1)
			n = 1 + (uint32_t)(rnd() % maxlen);
		if (fill)
			n = w.chunk_size;
		if (!fill && rnd() % 100 < read_pct) {
			/* The chunk's model is stable: nothing else is in flight on it. */
			s->io.kind = SC_READ;
			off = (uint32_t)(rnd() % (w.chunk_size - n + 1));
		} else {
			s->io.kind = SC_WRITE;
			off = (uint32_t)(rnd() % (w.chunk_size - n + 1));
			if (fill)
				off = 0;
			else if (rnd() % 3 == 0 && m->len <= w.chunk_size - n)
				off = m->len;	/* an append */
			s->dseed = splitmix64(seed * 1000003u + ++counter);
			pattern_fill(s->io.buf, n, s->dseed);
		}
		s->io.offset = off;
		s->io.len = n;
		sc_submit(sc, &s->io);
	}
	pthread_mutex_lock(&w.lock);
	while (w.inflight)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	fprintf(w.log, "E %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		" %" PRIu64 "\n", now_us(), w.acked, w.failed, w.reads, w.read_errors, w.mismatches,
		w.max_gap_us);
	fclose(w.log);
	if (fill) {
		double secs = (mono_ms() - t0) / 1000.0;

		printf("fill: %" PRIu64 " chunks, %" PRIu64 " bytes in %.2f s (%.1f MB/s), %" PRIu64
		       " failed\n", w.acked, w.acked * w.chunk_size, secs,
		       w.acked * w.chunk_size / 1e6 / (secs > 0 ? secs : 1), w.failed);
		return w.failed || w.acked != w.nchunks ? 1 : 0;
	}
	printf("writer: seed %" PRIu64 ": %" PRIu64 " writes acknowledged, %" PRIu64 " failed, %"
	       PRIu64 " reads (%" PRIu64 " failed, %" PRIu64 " mismatched), longest gap between"
	       " acks %.3f s at %.3f\n", seed, w.acked, w.failed, w.reads, w.read_errors,
	       w.mismatches, w.max_gap_us / 1e6, w.max_gap_at_us / 1e6);
	if (w.failed || w.read_errors || w.mismatches || !w.acked)
		rc = 1;
	return rc;
}

/* ---- audit ---- */

static int run_audit(struct sclient *sc, const char *path, uint32_t times)
{
	FILE *f = fopen(path, "r");
	char line[512];
	uint64_t seed = 0, ino = 0, checked = 0, reports = 0, unknown = 0;
	uint32_t nchunks = 0, chunk_size = 0, table = sclient_table_len(sc);
	struct model *models = NULL;
	uint8_t *buf = NULL;
	int bad = 0, ended = 0;

	if (!f) {
		fprintf(stderr, "cannot open '%s': %s\n", path, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		uint64_t t, idx, dseed, ver;
		uint32_t off, len;
		int err;

		if (line[0] == 'S') {
			if (sscanf(line, "S %" SCNu64 " %" SCNu64 " %" SCNu64 " %u %u", &t, &seed, &ino,
				   &nchunks, &chunk_size) != 5 || !nchunks || !chunk_size || models) {
				fprintf(stderr, "%s: bad header: %s", path, line);
				return 2;
			}
			models = calloc(nchunks, sizeof(*models));
			for (uint32_t i = 0; models && i < nchunks; i++) {
				if (model_init(&models[i], chunk_size))
					return 2;
			}
			if (!models)
				return 2;
		} else if (line[0] == 'W' && models) {
			if (sscanf(line, "W %" SCNu64 " %" SCNu64 " %u %u %" SCNu64 " %" SCNu64, &t, &idx,
				   &off, &len, &dseed, &ver) != 6 || idx >= nchunks ||
			    off > chunk_size || len > chunk_size - off)
				goto badline;
			model_write(&models[idx], off, len, dseed, ver);
		} else if (line[0] == 'F' && models) {
			if (sscanf(line, "F %" SCNu64 " %" SCNu64 " %u %u %" SCNu64 " %d", &t, &idx,
				   &off, &len, &dseed, &err) != 6 || idx >= nchunks ||
			    off > chunk_size || len > chunk_size - off)
				goto badline;
			model_fail(&models[idx], off, len);
		} else if (line[0] == 'E') {
			ended = 1;
		} else if (line[0] == 'M') {
			;	/* a mismatched read during the run */
		} else if (line[0] != '\n') {
			goto badline;
		}
		continue;
badline:
		fprintf(stderr, "%s: bad line: %s", path, line);
		return 2;
	}
	fclose(f);
	if (!models) {
		fprintf(stderr, "%s: no header line\n", path);
		return 2;
	}
	buf = abuf_alloc(chunk_size);
	if (!buf)
		return 2;
	for (uint32_t k = 0; k < nchunks; k++) {
		struct model *m = &models[k];

		for (uint32_t i = 0; i < chunk_size; i++)
			unknown += !m->known[i];
		for (uint32_t a = 0; a < times; a++) {
			struct sc_io io = { .kind = SC_READ, .ino = ino, .idx = k, .len = chunk_size,
					    .buf = buf };
			uint64_t nbad = 0;
			int64_t first;
			const char *why = NULL;

			io.chain_idx = chain_of(table, chunk_size, ino, k);
			memset(buf, 0xa5, chunk_size);
			if (sc_sync(sc, &io)) {
				why = strata_strerror(io.status);
			} else if ((first = model_cmp(m, 0, chunk_size, buf, &nbad)) >= 0) {
				why = "content";
			} else if (!m->uncertain && io.nread != m->len) {
				why = "length";
			} else if (io.version < m->min_version) {
				why = "version";
			}
			checked += chunk_size;
			if (!why)
				continue;
			bad++;
			if (reports++ < MAX_REPORTS) {
				first = model_cmp(m, 0, chunk_size, buf, &nbad);
				printf("mismatch: chunk %" PRIu64 ":%u read %u: %s: %u bytes (model %u%s),"
				       " version %" PRIu64 " (last acknowledged %" PRIu64 "), %" PRIu64
				       " acknowledged bytes differ, first at %" PRId64 "\n", ino, k, a + 1,
				       why, io.nread, m->len, m->uncertain ? ", uncertain" : "",
				       io.version, m->min_version, nbad, first);
			}
		}
	}
	printf("audit: seed %" PRIu64 ", %u chunks x %u reads, %" PRIu64 " bytes compared (%" PRIu64
	       " unknown after failed writes)%s: %s\n", seed, nchunks, times, checked, unknown,
	       ended ? "" : ", log without its end line", bad ? "FAILED" : "ok");
	return bad ? 1 : 0;
}

/* ---- map ---- */

/* The cluster map from mgmt, into m (released by the caller). */
static int fetch_map(const char *mgmt, struct cluster_map *m)
{
	struct rpc_client *cl;
	int rc;

	cm_init(m);
	if (rpc_client_new("fault-map", 5000, &cl))
		return -ENOMEM;
	rc = cmap_fetch_sync(cl, mgmt, 5000, m);
	rpc_client_free(cl);
	if (rc)
		fprintf(stderr, "cluster map from '%s': %s\n", mgmt, strata_strerror(rc));
	return rc;
}

static const char *node_state(uint32_t s)
{
	return s == NODE_UP ? "up" : s == NODE_OFFLINE ? "offline" :
	       s == NODE_DRAINING ? "draining" : "?";
}

static const char *target_state(uint32_t s)
{
	return s == TARGET_SERVING ? "serving" : s == TARGET_SYNCING ? "syncing" :
	       s == TARGET_OFFLINE ? "offline" : s == TARGET_LOST ? "lost" : "?";
}

static int run_map(const char *mgmt)
{
	struct cluster_map m;

	if (fetch_map(mgmt, &m))
		return 1;
	printf("map %" PRIu64 " %u\n", m.version, m.replication);
	for (uint32_t i = 0; i < m.nnodes; i++)
		printf("node %u %s %s\n", m.nodes[i].id, m.nodes[i].addr,
		       node_state(m.nodes[i].state));
	for (uint32_t i = 0; i < m.ntargets; i++)
		printf("target %u %u %s\n", m.targets[i].id, m.targets[i].node_id,
		       target_state(m.targets[i].state));
	for (uint32_t i = 0; i < m.nchains; i++) {
		const struct cm_chain *c = &m.chains[i];

		printf("chain %u %" PRIu64 " ", c->id, c->version);
		for (int j = 0; j < c->len; j++)
			printf("%s%u:%c", j ? "," : "", c->targets[j],
			       c->states[j] == TARGET_SERVING ? 's' : 'y');
		if (!c->len)
			printf("-");
		for (int j = 0; j < c->nout; j++)
			printf("%s%u", j ? "," : " out ", c->out[j]);
		printf("\n");
	}
	for (uint32_t i = 0; i < m.nservices; i++)
		printf("service %s %u %s %s\n", m.services[i].kind == CM_SVC_META ? "meta" : "mem",
		       m.services[i].node_id, m.services[i].addr, node_state(m.services[i].state));
	cm_release(&m);
	return 0;
}

/* ---- steps ---- */

static void print_runs(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;

		while (j < n && p[j] == p[i])
			j++;
		printf("%s%02xx%u", i ? "," : "", p[i], j - i);
		i = j;
	}
	if (!n)
		printf("-");
}

/* One read of [off, off + len) of chunk (ino, idx) straight from target. */
static void direct_read(const char *mgmt, uint32_t table, uint32_t chunk_size, uint64_t ino,
			uint64_t idx, uint32_t off, uint32_t len, uint32_t target, uint64_t chain_ver)
{
	struct cluster_map m;
	const struct cm_chain *c;
	const struct cm_target *t;
	const struct cm_node *nd;
	struct rpc_client *cl = NULL;
	struct sp_read rd = { 0 };
	struct sp_read_rep rep = { 0 };
	uint8_t *buf = malloc(len ? len : 1);
	int rc;

	if (fetch_map(mgmt, &m)) {
		printf("R err no map\n");
		free(buf);
		return;
	}
	c = cm_find_chain(&m, chain_of(table, chunk_size, ino, idx) + 1);
	t = cm_find_target(&m, target);
	nd = t ? cm_find_node(&m, t->node_id) : NULL;
	rc = c && nd && buf ? rpc_client_new("fault-read", 5000, &cl) : -ENOENT;
	if (!rc) {
		rd.ref.chain_id = c->id;
		rd.ref.chain_ver = chain_ver ? chain_ver : c->version;
		rd.ref.target_id = target;
		rd.ref.ino = ino;
		rd.ref.idx = idx;
		rd.offset = off;
		rd.len = len;
		struct proto_sync ps = { .bulk_dst = buf, .bulk_cap = len, .timeout_ms = 5000 };

		rc = st_read_call_sync(cl, nd->addr, &rd, &ps, &rep);
	}
	if (rc) {
		printf("R err %s\n", strata_strerror(rc));
	} else {
		printf("R ok %" PRIu64 " %u ", rep.version, rep.nread);
		print_runs(buf, rep.nread <= len ? rep.nread : len);
		printf("\n");
	}
	if (cl)
		rpc_client_free(cl);
	cm_release(&m);
	free(buf);
}

static int run_steps(const char *mgmt, struct sclient *sc, char **argv, int argc)
{
	uint64_t ino = strtoull(argv[0], NULL, 0);
	uint32_t chunk_size = (uint32_t)strtoul(argv[1], NULL, 0);
	uint32_t table = sclient_table_len(sc);
	uint8_t *buf = abuf_alloc(chunk_size ? chunk_size : 1);

	if (!buf || !chunk_size)
		return 2;
	for (int i = 2; i < argc; i++) {
		char kind = argv[i][0];
		unsigned long v[5] = { 0 };
		int n = 0;
		struct sc_io io = { 0 };
		char *p = argv[i] + 1;

		while (*p == ':' && n < 5) {
			v[n] = strtoul(p + 1, &p, kind == 'w' && n == 3 ? 16 : 0);
			n++;
		}
		if (*p) {
			fprintf(stderr, "bad step '%s'\n", argv[i]);
			return 2;
		}
		io.ino = ino;
		io.idx = v[0];
		io.chain_idx = chain_of(table, chunk_size, ino, v[0]);
		io.buf = buf;
		if (kind == 'c' && n == 1) {
			struct cluster_map m;
			const struct cm_chain *c;

			if (fetch_map(mgmt, &m))
				return 1;
			c = cm_find_chain(&m, io.chain_idx + 1);
			printf("chain %lu %u ", v[0], c ? c->id : 0);
			for (int k = 0; c && k < c->len; k++) {
				const struct cm_target *t = cm_find_target(&m, c->targets[k]);

				printf("%s%u@%u", k ? "," : "", c->targets[k], t ? t->node_id : 0);
			}
			printf(" %" PRIu64 "\n", c ? c->version : 0);
			cm_release(&m);
		} else if (kind == 'w' && n == 4 && v[1] + v[2] <= chunk_size) {
			io.kind = SC_WRITE;
			io.offset = (uint32_t)v[1];
			io.len = (uint32_t)v[2];
			memset(buf, (int)v[3], io.len);
			if (sc_sync(sc, &io))
				printf("w err %s\n", strata_strerror(io.status));
			else
				printf("w ok %" PRIu64 "\n", io.version);
		} else if (kind == 't' && n == 2 && v[1] <= chunk_size) {
			io.kind = SC_TRUNCATE;
			io.len = (uint32_t)v[1];
			if (sc_sync(sc, &io))
				printf("t err %s\n", strata_strerror(io.status));
			else
				printf("t ok %" PRIu64 "\n", io.version);
		} else if (kind == 'r' && n == 3 && v[1] + v[2] <= chunk_size) {
			io.kind = SC_READ;
			io.offset = (uint32_t)v[1];
			io.len = (uint32_t)v[2];
			if (sc_sync(sc, &io)) {
				printf("r err %s\n", strata_strerror(io.status));
			} else {
				printf("r ok %" PRIu64 " %u ", io.version, io.nread);
				print_runs(buf, io.nread);
				printf("\n");
			}
		} else if (kind == 'R' && (n == 4 || n == 5) && v[1] + v[2] <= chunk_size) {
			direct_read(mgmt, table, chunk_size, ino, v[0], (uint32_t)v[1], (uint32_t)v[2],
				    (uint32_t)v[3], v[4]);
		} else {
			fprintf(stderr, "bad step '%s'\n", argv[i]);
			return 2;
		}
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct sclient *sc;

	log_set_level(LOG_WARN);
	if (argc < 3) {
		fprintf(stderr, "usage: see the comment at the top of fault_driver.c\n");
		return 2;
	}
	if (driver_use_env_token())
		return 1;
	if (strcmp(argv[2], "map") == 0 && argc == 3)
		return run_map(argv[1]);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (strcmp(argv[2], "writer") == 0 && (argc == 11 || argc == 12)) {
		sc = driver_connect("fault", argv[1]);
		return sc ? run_writer(sc, argv + 3, argc - 3, false) : 1;
	}
	if (strcmp(argv[2], "fill") == 0 && argc == 9) {
		sc = driver_connect("fault", argv[1]);
		return sc ? run_writer(sc, argv + 3, argc - 3, true) : 1;
	}
	if (strcmp(argv[2], "steps") == 0 && argc >= 6) {
		sc = driver_connect("fault", argv[1]);
		return sc ? run_steps(argv[1], sc, argv + 3, argc - 3) : 1;
	}
	if (strcmp(argv[2], "audit") == 0 && (argc == 4 || argc == 5)) {
		sc = driver_connect("fault", argv[1]);
		return sc ? run_audit(sc, argv[3], argc == 5 ? (uint32_t)strtoul(argv[4], NULL, 0)
						  : 1) : 1;
	}
	fprintf(stderr, "bad arguments (see the comment at the top of fault_driver.c)\n");
	return 2;
}
