/*
 * Unit tests of a checkpoint shard's parallel writers and readers
 * (client/checkpoint_write.c) against a fake ring over a memory file:
 * every byte lands at its offset, no I/O crosses a chunk or exceeds the
 * io size, each tensor's CRC32C is its bytes' (combined from the pieces'
 * checksummed as they land on a read), with 1 to 8 threads; a failed
 * write or read and an abandoned snapshot fail the run, a short file
 * fails a read with -ENODATA, and a snapshot still filling the tensors
 * is waited for.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/checkpoint_write.c"

/* ---- the fake public API: one memory file, rings completing at once ---- */

#define FILE_MAX (8u << 20)
#define CHUNK (64u << 10)

static struct {
	pthread_mutex_t lock;
	uint8_t *data;
	uint64_t max_len;	/* the longest write seen */
	unsigned writes, crossed;	/* writes; I/Os that crossed a chunk */
	unsigned reads;
	unsigned fail_at;	/* the n-th write or read fails with -EIO (0: none) */
} mf = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct strata_ring {
	uint32_t depth, n;
	struct strata_cqe *done;
};

int strata_get_layout(struct strata *s, const char *path, struct strata_layout *l)
{
	(void)s;
	(void)path;
	l->chunk_size = CHUNK;
	l->stripe = 3;
	return 0;
}

int strata_ring_new(struct strata *s, uint32_t depth, struct strata_ring **out)
{
	struct strata_ring *r = calloc(1, sizeof(*r));

	(void)s;
	if (!r)
		return -ENOMEM;
	r->depth = depth;
	r->done = calloc(depth, sizeof(*r->done));
	if (!r->done) {
		free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

void strata_ring_free(struct strata_ring *r)
{
	if (r)
		free(r->done);
	free(r);
}

/* Counts an I/O (mf.lock held, released here) and completes it. */
static void note_io(struct strata_ring *r, uint64_t off, size_t len, uint64_t user_data,
		    ssize_t res)
{
	if (len > mf.max_len)
		mf.max_len = len;
	if (len && off / CHUNK != (off + len - 1) / CHUNK)
		mf.crossed++;
	pthread_mutex_unlock(&mf.lock);
	r->done[r->n++] = (struct strata_cqe){ .user_data = user_data, .res = res };
}

int strata_ring_prep_write(struct strata_ring *r, struct strata_file *f, const void *buf,
			   size_t len, uint64_t off, uint64_t user_data)
{
	ssize_t res = (ssize_t)len;

	(void)f;
	if (r->n == r->depth)
		return -EBUSY;
	assert_true(off + len <= FILE_MAX);
	pthread_mutex_lock(&mf.lock);
	if (++mf.writes == mf.fail_at)
		res = -EIO;
	else
		memcpy(mf.data + off, buf, len);
	note_io(r, off, len, user_data, res);
	return 0;
}

/* Reads from the memory file; a read past FILE_MAX comes back short. */
int strata_ring_prep_read(struct strata_ring *r, struct strata_file *f, void *buf, size_t len,
			  uint64_t off, uint64_t user_data)
{
	ssize_t res = (ssize_t)len;

	(void)f;
	if (r->n == r->depth)
		return -EBUSY;
	pthread_mutex_lock(&mf.lock);
	if (++mf.reads == mf.fail_at)
		res = -EIO;
	else if (off >= FILE_MAX)
		res = 0;
	else {
		if (off + len > FILE_MAX)
			res = (ssize_t)(FILE_MAX - off);
		memcpy(buf, mf.data + off, (size_t)res);
	}
	note_io(r, off, len, user_data, res);
	return 0;
}

int strata_ring_submit(struct strata_ring *r)
{
	return (int)r->n;
}

int strata_ring_wait(struct strata_ring *r, struct strata_cqe *cqes, unsigned max,
		     unsigned min_complete, int timeout_ms)
{
	unsigned n = r->n < max ? r->n : max;

	(void)min_complete;
	(void)timeout_ms;
	memcpy(cqes, r->done, n * sizeof(*cqes));
	memmove(r->done, r->done + n, (r->n - n) * sizeof(*r->done));
	r->n -= n;
	return (int)n;
}

/* ---- tensors ---- */

#define NT 9
static const uint64_t sizes[NT] = { 0, 1, 4095, 4097, CHUNK - 1, CHUNK + 1,
				    3 * CHUNK + 100, 200001, (1u << 20) + 5 };

struct shard {
	struct strata_ckpt_tensor t[NT];
	uint8_t *bufs[NT];
	uint64_t offs[NT];
	uint32_t crcs[NT];
	char names[NT][8];
};

static void shard_init(struct shard *sh, unsigned seed)
{
	uint64_t off = 0;

	memset(sh, 0, sizeof(*sh));
	for (int i = 0; i < NT; i++) {
		sh->bufs[i] = malloc(sizes[i] ? sizes[i] : 1);
		assert_non_null(sh->bufs[i]);
		for (uint64_t b = 0; b < sizes[i]; b++)
			sh->bufs[i][b] = (uint8_t)((b * 31 + (uint64_t)i * 7 + seed) ^ (b >> 9));
		snprintf(sh->names[i], sizeof(sh->names[i]), "t%d", i);
		sh->t[i] = (struct strata_ckpt_tensor){ sh->names[i], "uint8", 0, NULL, sh->bufs[i],
							sizes[i] };
		sh->offs[i] = off;
		off += (sizes[i] + STRATA_CKPT_ALIGN - 1) / STRATA_CKPT_ALIGN * STRATA_CKPT_ALIGN;
	}
	assert_true(off <= FILE_MAX);
}

static void shard_release(struct shard *sh)
{
	for (int i = 0; i < NT; i++)
		free(sh->bufs[i]);
}

static void reset_file(unsigned fail_at)
{
	memset(mf.data, 0xee, FILE_MAX);
	mf.max_len = 0;
	mf.writes = mf.crossed = mf.reads = 0;
	mf.fail_at = fail_at;
}

static int setup(void **state)
{
	(void)state;
	mf.data = malloc(FILE_MAX);
	return mf.data ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	free(mf.data);
	return 0;
}

static void check_written(const struct shard *sh)
{
	for (int i = 0; i < NT; i++) {
		assert_memory_equal(mf.data + sh->offs[i], sh->bufs[i], sizes[i] ? sizes[i] : 0);
		assert_int_equal(sh->crcs[i], crc32c(0, sh->bufs[i], sizes[i]));
	}
}

static void test_bytes_offsets_crcs(void **state)
{
	static const uint32_t writers[] = { 1, 2, 3, 8 };
	static const uint32_t io[] = { 0, 16u << 10, 100000 };
	struct shard sh;

	(void)state;
	shard_init(&sh, 5);
	for (size_t w = 0; w < sizeof(writers) / sizeof(writers[0]); w++) {
		for (size_t k = 0; k < sizeof(io) / sizeof(io[0]); k++) {
			struct ck_write_opts o = { .path = "/x", .writers = writers[w],
						   .depth = 8, .io_size = io[k] };
			struct ck_write_result res;

			reset_file(0);
			assert_int_equal(ck_write_data(NULL, NULL, sh.t, NT, sh.offs, sh.crcs, &o,
						       &res), 0);
			check_written(&sh);
			assert_int_equal(mf.crossed, 0);
			assert_true(mf.max_len <= (io[k] ? io[k] : CHUNK));
			assert_int_equal(res.pieces, mf.writes);
			assert_int_equal(res.writers, writers[w]);
		}
	}
	shard_release(&sh);
}

static void test_failed_write_fails_the_run(void **state)
{
	struct shard sh;
	struct ck_write_opts o = { .path = "/x", .writers = 4, .depth = 8 };
	struct ck_write_result res;

	(void)state;
	shard_init(&sh, 9);
	reset_file(7);
	assert_int_equal(ck_write_data(NULL, NULL, sh.t, NT, sh.offs, sh.crcs, &o, &res), -EIO);
	shard_release(&sh);
}

/* The snapshot: fills the tensors one by one after the writers started,
 * raising ready (or abandoning at tensor stop_at). */
struct filler {
	struct shard *sh;
	uint64_t ready;
	int stop_at;		/* -1: fill all */
	unsigned seed;
};

static void *fill_main(void *arg)
{
	struct filler *fl = arg;

	for (int i = 0; i < NT; i++) {
		if (i == fl->stop_at) {
			__atomic_store_n(&fl->ready, UINT64_MAX, __ATOMIC_RELEASE);
			return NULL;
		}
		usleep(1000);
		for (uint64_t b = 0; b < sizes[i]; b++)
			fl->sh->bufs[i][b] = (uint8_t)(b * 13 + fl->seed + (uint64_t)i);
		__atomic_store_n(&fl->ready, (uint64_t)i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void test_waits_for_the_snapshot(void **state)
{
	struct shard sh;
	struct filler fl = { &sh, 0, -1, 3 };
	struct ck_write_opts o = { .path = "/x", .writers = 3, .depth = 6, .ready = &fl.ready,
				   .wait_ms = 60000 };
	struct ck_write_result res;
	pthread_t tid;

	(void)state;
	shard_init(&sh, 1);	/* stale bytes: what the filler overwrites */
	reset_file(0);
	assert_int_equal(pthread_create(&tid, NULL, fill_main, &fl), 0);
	assert_int_equal(ck_write_data(NULL, NULL, sh.t, NT, sh.offs, sh.crcs, &o, &res), 0);
	pthread_join(tid, NULL);
	check_written(&sh);	/* the filled bytes, not the stale ones */
	shard_release(&sh);
}

static void test_abandoned_snapshot_cancels(void **state)
{
	struct shard sh;
	struct filler fl = { &sh, 0, 5, 3 };
	struct ck_write_opts o = { .path = "/x", .writers = 2, .depth = 4, .ready = &fl.ready,
				   .wait_ms = 60000 };
	struct ck_write_result res;
	pthread_t tid;

	(void)state;
	shard_init(&sh, 1);
	reset_file(0);
	assert_int_equal(pthread_create(&tid, NULL, fill_main, &fl), 0);
	assert_int_equal(ck_write_data(NULL, NULL, sh.t, NT, sh.offs, sh.crcs, &o, &res),
			 -ECANCELED);
	pthread_join(tid, NULL);
	shard_release(&sh);
}

static void test_snapshot_never_done_times_out(void **state)
{
	struct shard sh;
	uint64_t ready = 2;	/* two tensors in place, the rest never */
	struct ck_write_opts o = { .path = "/x", .writers = 2, .depth = 4, .ready = &ready,
				   .wait_ms = 50 };
	struct ck_write_result res;

	(void)state;
	shard_init(&sh, 1);
	reset_file(0);
	assert_int_equal(ck_write_data(NULL, NULL, sh.t, NT, sh.offs, sh.crcs, &o, &res),
			 -ETIMEDOUT);
	shard_release(&sh);
}

/* Reads a written shard back into fresh buffers: bytes and CRCs. */
static void test_read_back(void **state)
{
	static const uint32_t readers[] = { 1, 2, 4, 8 };
	static const uint32_t io[] = { 0, 16u << 10, 100000 };
	struct shard sh;
	struct ck_write_opts wo = { .path = "/x", .writers = 2, .depth = 8 };
	struct ck_write_result res;
	struct ck_read rd[NT];
	uint32_t crcs[NT];

	(void)state;
	shard_init(&sh, 11);
	reset_file(0);
	assert_int_equal(ck_write_data(NULL, NULL, sh.t, NT, sh.offs, sh.crcs, &wo, &res), 0);
	for (size_t r = 0; r < sizeof(readers) / sizeof(readers[0]); r++) {
		for (size_t k = 0; k < sizeof(io) / sizeof(io[0]); k++) {
			struct ck_write_opts o = { .writers = readers[r], .depth = 8,
						   .io_size = io[k] };

			for (int i = 0; i < NT; i++) {
				rd[i] = (struct ck_read){ NULL, malloc(sizes[i] ? sizes[i] : 1),
							  sh.offs[i], sizes[i], CHUNK };
				assert_non_null(rd[i].buf);
				memset(rd[i].buf, 0x5a, sizes[i]);
			}
			mf.reads = mf.crossed = 0;
			mf.max_len = 0;
			assert_int_equal(ck_read_data(NULL, rd, NT, crcs, &o, &res), 0);
			for (int i = 0; i < NT; i++) {
				assert_memory_equal(rd[i].buf, sh.bufs[i], sizes[i]);
				assert_int_equal(crcs[i], sh.crcs[i]);
				free(rd[i].buf);
			}
			assert_int_equal(mf.crossed, 0);
			assert_true(mf.max_len <= (io[k] ? io[k] : CHUNK));
			assert_int_equal(res.pieces, mf.reads);
		}
	}
	shard_release(&sh);
}

static void test_failed_or_short_read_fails_the_run(void **state)
{
	static uint8_t buf[3 * CHUNK];
	struct ck_write_opts o = { .writers = 3, .depth = 6 };
	struct ck_write_result res;
	struct ck_read rd = { NULL, buf, 0, sizeof(buf), CHUNK };
	uint32_t crc;

	(void)state;
	reset_file(2);
	assert_int_equal(ck_read_data(NULL, &rd, 1, &crc, &o, &res), -EIO);
	reset_file(0);
	rd.off = FILE_MAX - CHUNK - 10;	/* runs past the end of the file */
	assert_int_equal(ck_read_data(NULL, &rd, 1, &crc, &o, &res), -ENODATA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_offsets_crcs),
		cmocka_unit_test(test_failed_write_fails_the_run),
		cmocka_unit_test(test_waits_for_the_snapshot),
		cmocka_unit_test(test_abandoned_snapshot_cancels),
		cmocka_unit_test(test_snapshot_never_done_times_out),
		cmocka_unit_test(test_read_back),
		cmocka_unit_test(test_failed_or_short_read_fails_the_run),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
