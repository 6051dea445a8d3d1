/*
 * Metering: what each tenant's compositions held over a window, in
 * GPU-hours, TB-hours of storage and GB-hours of memory (docs/composer.md,
 * "Usage"). Pure: computed from the compositions the composer keeps
 * (released ones stay in its store for the record), no I/O.
 *
 * A composition holds its resources from its creation until it is
 * released (its last change then), or until now while it still holds
 * them; one that failed held nothing. Sizes are what was asked (a
 * volume's quota, the memory namespace's size), not what was used.
 */
#ifndef STRATA_COMPOSER_USAGE_H
#define STRATA_COMPOSER_USAGE_H

#include <stdint.h>

#include "composer/comp_store.h"

struct usage_row {
	char tenant[TOKEN_TENANT_MAX + 1];
	double gpu_hours;
	double storage_tb_hours;	/* TB: 10^12 bytes */
	double memory_gb_hours;		/* GB: 10^9 bytes */
	uint32_t compositions;		/* that held something in the window */
};

/*
 * Sums comps[0..n) per tenant over the window [since, until] (seconds
 * since the epoch; since <= until). *out (malloc'd, the caller frees it;
 * NULL when *nout is 0) is sorted by tenant. 0, -EINVAL (since > until)
 * or -ENOMEM.
 */
int usage_sum(const struct comp *comps, uint32_t n, int64_t since, int64_t until,
	      struct usage_row **out, uint32_t *nout);

#endif
