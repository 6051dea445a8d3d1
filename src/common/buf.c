#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/*
 * Large aligned buffers (bulk data, chunk I/O) are kept in a cache by
 * power-of-two size class: a fresh 1 MiB posix_memalign is an mmap plus
 * 256 page faults, which costs more than moving the data. Small sizes go
 * straight to the allocator.
 */
#define CACHE_MIN_SHIFT 16	/* 64 KiB */
#define CACHE_MAX_SHIFT 26	/* 64 MiB */
#define CACHE_NCLASS (CACHE_MAX_SHIFT - CACHE_MIN_SHIFT + 1)
#define CACHE_BYTES_PER_CLASS (64u << 20)

static struct {
	pthread_mutex_t lock;
	void **slots;
	unsigned n, cap;
} g_cache[CACHE_NCLASS];
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

static void cache_init(void)
{
	for (int i = 0; i < CACHE_NCLASS; i++) {
		size_t sz = (size_t)1 << (i + CACHE_MIN_SHIFT);

		pthread_mutex_init(&g_cache[i].lock, NULL);
		g_cache[i].cap = (unsigned)(CACHE_BYTES_PER_CLASS / sz);
		if (g_cache[i].cap < 2)
			g_cache[i].cap = 2;
		g_cache[i].slots = calloc(g_cache[i].cap, sizeof(void *));
		if (!g_cache[i].slots)
			g_cache[i].cap = 0;
	}
}

static int class_of(size_t len)
{
	int shift = CACHE_MIN_SHIFT;

	while (shift <= CACHE_MAX_SHIFT && ((size_t)1 << shift) < len)
		shift++;
	return shift > CACHE_MAX_SHIFT ? -1 : shift - CACHE_MIN_SHIFT;
}

void *abuf_alloc(size_t len)
{
	void *p = NULL;
	int c;

	if (len == 0)
		len = STRATA_ALIGN;
	c = len >= ((size_t)1 << CACHE_MIN_SHIFT) ? class_of(len) : -1;
	if (c >= 0) {
		pthread_once(&g_cache_once, cache_init);
		pthread_mutex_lock(&g_cache[c].lock);
		if (g_cache[c].n > 0)
			p = g_cache[c].slots[--g_cache[c].n];
		pthread_mutex_unlock(&g_cache[c].lock);
		if (p)
			return p;
		len = (size_t)1 << (c + CACHE_MIN_SHIFT);
	}
	if (posix_memalign(&p, STRATA_ALIGN, align_up(len, STRATA_ALIGN)) != 0)
		return NULL;
	return p;
}

void *abuf_zalloc(size_t len)
{
	void *p = abuf_alloc(len);

	if (p)
		memset(p, 0, len ? len : 1);
	return p;
}

void abuf_free(void *p)
{
	size_t usable;
	int c;

	if (!p)
		return;
	usable = malloc_usable_size(p);
	/* The largest class this buffer can serve (its size rounded down),
	 * the largest class itself included. */
	c = -1;
	for (int shift = CACHE_MAX_SHIFT; shift >= CACHE_MIN_SHIFT && c < 0; shift--) {
		if (usable >= ((size_t)1 << shift))
			c = shift - CACHE_MIN_SHIFT;
	}
	if (c >= 0) {
		pthread_once(&g_cache_once, cache_init);
		pthread_mutex_lock(&g_cache[c].lock);
		if (g_cache[c].n < g_cache[c].cap) {
			g_cache[c].slots[g_cache[c].n++] = p;
			p = NULL;
		}
		pthread_mutex_unlock(&g_cache[c].lock);
	}
	free(p);
}

void bbuf_init(struct bbuf *b)
{
	b->buf = NULL;
	b->len = 0;
	b->cap = 0;
	b->borrowed = false;
}

void bbuf_init_on(struct bbuf *b, void *mem, size_t cap)
{
	b->buf = mem;
	b->len = 0;
	b->cap = cap;
	b->borrowed = true;
}

void bbuf_release(struct bbuf *b)
{
	if (!b->borrowed)
		free(b->buf);
	bbuf_init(b);
}

int bbuf_reserve(struct bbuf *b, size_t extra)
{
	size_t need = b->len + extra, cap;
	uint8_t *nb;

	if (need < b->len)
		return -ENOMEM;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	if (b->borrowed) {
		/* Outgrew the caller's memory: move to the heap. */
		nb = malloc(cap);
		if (nb && b->len)
			memcpy(nb, b->buf, b->len);
	} else {
		nb = realloc(b->buf, cap);
	}
	if (!nb)
		return -ENOMEM;
	b->buf = nb;
	b->cap = cap;
	b->borrowed = false;
	return 0;
}

int bbuf_append(struct bbuf *b, const void *data, size_t len)
{
	int rc = bbuf_reserve(b, len);

	if (rc)
		return rc;
	if (len)
		memcpy(b->buf + b->len, data, len);
	b->len += len;
	return 0;
}
