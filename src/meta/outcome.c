/*
 * The outcome a request id's record holds (outcome.h).
 */
#include <errno.h>

#include "common/log.h"
#include "meta/outcome.h"
#include "net/codec.h"

#define COMP "meta-ns"

#define OUTCOME_V1 1
/* version, inode (72) and its layout (20), truncation (29) and its layout */
#define OUTCOME_LEN (1 + 72 + 20 + 29 + 20)
_Static_assert(OUTCOME_LEN <= META_REQ_OUT_MAX, "an outcome overflows struct meta_req");

static uint8_t *put_layout(uint8_t *p, const struct file_layout *l)
{
	put_le32(p, l->chunk_size);
	put_le32(p + 4, l->stripe);
	put_le32(p + 8, l->table_len);
	put_le64(p + 12, l->seed);
	return p + 20;
}

static const uint8_t *get_layout(const uint8_t *p, struct file_layout *l)
{
	l->chunk_size = get_le32(p);
	l->stripe = get_le32(p + 4);
	l->table_len = get_le32(p + 8);
	l->seed = get_le64(p + 12);
	return p + 20;
}

void ns_outcome_encode(struct meta_req *r, const struct meta_inode *in,
		       const struct ns_trunc *tr)
{
	uint8_t *p = r->out;

	*p++ = OUTCOME_V1;
	put_le64(p, in->ino);
	put_le64(p + 8, in->gen);
	put_le32(p + 16, in->mode);
	put_le32(p + 20, in->uid);
	put_le32(p + 24, in->gid);
	put_le32(p + 28, in->nlink);
	put_le64(p + 32, in->size);
	put_le64(p + 40, (uint64_t)in->atime_ns);
	put_le64(p + 48, (uint64_t)in->mtime_ns);
	put_le64(p + 56, (uint64_t)in->ctime_ns);
	put_le64(p + 64, in->parent);
	p = put_layout(p + 72, &in->layout);
	*p++ = tr->partial;
	put_le64(p, tr->chunk);
	put_le32(p + 8, tr->len);
	put_le64(p + 12, tr->gc_from);
	put_le64(p + 20, tr->gc_to);
	p = put_layout(p + 28, &tr->layout);
	r->len = (uint32_t)(p - r->out);
}

int ns_outcome_decode(const struct meta_req *r, struct meta_inode *in, struct ns_trunc *tr)
{
	const uint8_t *p = r->out;

	if (r->len != OUTCOME_LEN || p[0] != OUTCOME_V1) {
		log_error(COMP, "request %llx:%llu: recorded outcome of %u bytes, version %u,"
			  " is not one this build reads", (unsigned long long)r->client,
			  (unsigned long long)r->seq, r->len, r->len ? p[0] : 0);
		return -EIO;
	}
	p++;
	in->ino = get_le64(p);
	in->gen = get_le64(p + 8);
	in->mode = get_le32(p + 16);
	in->uid = get_le32(p + 20);
	in->gid = get_le32(p + 24);
	in->nlink = get_le32(p + 28);
	in->size = get_le64(p + 32);
	in->atime_ns = (int64_t)get_le64(p + 40);
	in->mtime_ns = (int64_t)get_le64(p + 48);
	in->ctime_ns = (int64_t)get_le64(p + 56);
	in->parent = get_le64(p + 64);
	p = get_layout(p + 72, &in->layout);
	tr->partial = *p++ != 0;
	tr->chunk = get_le64(p);
	tr->len = get_le32(p + 8);
	tr->gc_from = get_le64(p + 12);
	tr->gc_to = get_le64(p + 20);
	get_layout(p + 28, &tr->layout);
	return 0;
}

