/*
 * Deterministic file placement. See layout.h for the mapping; it is a
 * contract between meta and every client, so it uses only fixed-width
 * integer arithmetic.
 */
#include <errno.h>

#include "common/layout.h"
#include "common/rand.h"

#define LAYOUT_STEP_SALT 0x9e3779b97f4a7c15ull

static uint32_t gcd32(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

int layout_check(const struct file_layout *l)
{
	uint32_t cs = l->chunk_size;

	if (cs < LAYOUT_MIN_CHUNK || cs > LAYOUT_MAX_CHUNK || (cs & (cs - 1)))
		return -EINVAL;
	if (!l->table_len || !l->stripe || l->stripe > l->table_len ||
	    l->stripe > LAYOUT_MAX_STRIPE)
		return -EINVAL;
	return 0;
}

/* A step in 1..t-1 coprime with t, picked from the seed (1 when t <= 2). */
static uint32_t layout_step(uint64_t seed, uint32_t t)
{
	uint32_t step;

	if (t <= 2)
		return 1;
	step = 1 + (uint32_t)(splitmix64(seed ^ LAYOUT_STEP_SALT) % (t - 1));
	/* Ends: 1 is coprime with everything. */
	while (gcd32(step, t) != 1)
		step = step == t - 1 ? 1 : step + 1;
	return step;
}

uint32_t layout_chain_index(const struct file_layout *l, uint64_t chunk_index)
{
	uint32_t t = l->table_len, start, step;
	uint64_t k;

	if (!t || !l->stripe)
		return 0;
	start = (uint32_t)(splitmix64(l->seed) % t);
	step = layout_step(l->seed, t);
	k = chunk_index % l->stripe;
	/* k < 2^32 and step < 2^32: reduce k first so the product fits. */
	return (uint32_t)((start + (k % t) * step % t) % t);
}

int layout_for_chain(uint32_t table_len, uint32_t chain_idx, uint32_t chunk_size,
		     struct file_layout *out)
{
	struct file_layout l = { chunk_size, 1, table_len, 0 };

	if (!table_len || chain_idx >= table_len)
		return -EINVAL;
	/* start = h(seed) % T is uniform over the table: a seed is found in
	 * about T tries; 64 T tries all missing has odds of e^-64. */
	for (uint64_t tries = 64ull * table_len; tries; tries--, l.seed++) {
		if (layout_chain_index(&l, 0) == chain_idx) {
			*out = l;
			return 0;
		}
	}
	return -ENOENT;
}
