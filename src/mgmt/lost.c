/* The chunks storage reports lost: see lost.h. A small array searched
 * linearly: lost chunks are rare, and a set past LOST_MAX stops growing. */
#include <errno.h>
#include <stdlib.h>

#include "mgmt/lost.h"
#include "strata/errors.h"

struct lost_ent {
	uint64_t ino, idx;
	uint64_t seen_ms;
};

void lost_init(struct lost_set *s)
{
	s->v = NULL;
	s->n = s->cap = 0;
}

void lost_release(struct lost_set *s)
{
	free(s->v);
	lost_init(s);
}

int lost_report(struct lost_set *s, uint64_t ino, uint64_t idx, int err, uint64_t now_ms)
{
	uint32_t i;

	if (err && err != STRATA_ELOST)
		return 0;
	for (i = 0; i < s->n; i++) {
		if (s->v[i].ino == ino && s->v[i].idx == idx)
			break;
	}
	if (!err) {
		if (i < s->n)
			s->v[i] = s->v[--s->n];
		return 0;
	}
	if (i == s->n) {
		if (s->n == LOST_MAX)
			return 0;
		if (s->n == s->cap) {
			uint32_t cap = s->cap ? s->cap * 2 : 16;
			struct lost_ent *v = realloc(s->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			s->v = v;
			s->cap = cap;
		}
		s->v[s->n++] = (struct lost_ent){ ino, idx, now_ms };
	}
	s->v[i].seen_ms = now_ms;
	return 0;
}

uint32_t lost_count(struct lost_set *s, uint64_t now_ms)
{
	for (uint32_t i = 0; i < s->n;) {
		if (now_ms - s->v[i].seen_ms > LOST_FORGET_MS)
			s->v[i] = s->v[--s->n];
		else
			i++;
	}
	return s->n;
}
