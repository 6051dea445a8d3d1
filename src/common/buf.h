/*
 * Aligned buffers for O_DIRECT I/O and a growable byte buffer.
 */
#ifndef STRATA_COMMON_BUF_H
#define STRATA_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STRATA_ALIGN 4096u

static inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
static inline size_t align_down(size_t v, size_t a) { return v / a * a; }
static inline int is_aligned(uint64_t v, uint64_t a) { return v % a == 0; }

/* Allocates len bytes (rounded up to STRATA_ALIGN) aligned to STRATA_ALIGN.
 * Returns NULL on ENOMEM. Free with abuf_free(). */
void *abuf_alloc(size_t len);
/* Same, zero-filled. */
void *abuf_zalloc(size_t len);
void abuf_free(void *p);

/*
 * Growable byte buffer. Caller-owned struct; bbuf_init() sets it up empty,
 * bbuf_release() frees what it holds. buf is NULL until the first append.
 */
struct bbuf {
	uint8_t *buf;
	size_t len;
	size_t cap;
	bool borrowed;		/* buf is the caller's memory (bbuf_init_on) */
};

void bbuf_init(struct bbuf *b);
/* Starts b on the caller's memory mem[cap] (a stack buffer for small
 * messages): it moves to the heap only if it outgrows it. Release it as
 * any bbuf. */
void bbuf_init_on(struct bbuf *b, void *mem, size_t cap);
void bbuf_release(struct bbuf *b);
/* Ensures room for extra more bytes. Returns 0 or -ENOMEM. */
int bbuf_reserve(struct bbuf *b, size_t extra);
int bbuf_append(struct bbuf *b, const void *data, size_t len);

#endif
