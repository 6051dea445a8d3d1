#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void *abuf_alloc(size_t len)
{
	void *p = NULL;

	if (len == 0)
		len = STRATA_ALIGN;
	if (posix_memalign(&p, STRATA_ALIGN, align_up(len, STRATA_ALIGN)) != 0)
		return NULL;
	return p;
}

void *abuf_zalloc(size_t len)
{
	void *p = abuf_alloc(len);

	if (p)
		memset(p, 0, align_up(len ? len : 1, STRATA_ALIGN));
	return p;
}

void abuf_free(void *p) { free(p); }

void bbuf_init(struct bbuf *b)
{
	b->buf = NULL;
	b->len = 0;
	b->cap = 0;
}

void bbuf_release(struct bbuf *b)
{
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
	nb = realloc(b->buf, cap);
	if (!nb)
		return -ENOMEM;
	b->buf = nb;
	b->cap = cap;
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
