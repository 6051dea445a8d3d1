/* Metering of the compositions (usage.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "composer/usage.h"

/* The seconds comp held its resources inside [since, until]. */
static int64_t held_seconds(const struct comp *c, int64_t since, int64_t until)
{
	int64_t from = c->created, to;

	if (comp_state_holds(c->state))
		to = until;
	else if (c->state == COMP_RELEASED)
		to = c->changed;
	else
		return 0;		/* Failed (rolled back) or never placed */
	if (from < since)
		from = since;
	if (to > until)
		to = until;
	return to > from ? to - from : 0;
}

static int by_tenant(const void *a, const void *b)
{
	return strcmp(((const struct usage_row *)a)->tenant, ((const struct usage_row *)b)->tenant);
}

int usage_sum(const struct comp *comps, uint32_t n, int64_t since, int64_t until,
	      struct usage_row **out, uint32_t *nout)
{
	struct usage_row *rows = NULL;
	uint32_t nrows = 0;

	*out = NULL;
	*nout = 0;
	if (since > until)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		const struct comp *c = &comps[i];
		int64_t s = held_seconds(c, since, until);
		struct usage_row *r = NULL;
		double h = (double)s / 3600.0;

		if (!s)
			continue;
		for (uint32_t k = 0; k < nrows && !r; k++)
			if (!strcmp(rows[k].tenant, c->tenant))
				r = &rows[k];
		if (!r) {
			/* At most one row per composition: n rows bound it. */
			if (!rows && !(rows = calloc(n, sizeof(*rows))))
				return -ENOMEM;
			r = &rows[nrows++];
			snprintf(r->tenant, sizeof(r->tenant), "%s", c->tenant);
		}
		r->gpu_hours += (double)c->ngpus * h;
		r->storage_tb_hours += (double)c->rq.storage / 1e12 * h;
		r->memory_gb_hours += (double)c->rq.memory / 1e9 * h;
		r->compositions++;
	}
	if (nrows)
		qsort(rows, nrows, sizeof(*rows), by_tenant);
	*out = rows;
	*nout = nrows;
	return 0;
}
