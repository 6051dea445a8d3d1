/*
 * SplitMix64 (Steele, Lea and Flood): the one mix function and the one
 * seeded generator of the tree. Header-only, so a test program linked
 * against libstrata alone (tests/integration/api_test.c) uses the same
 * definition as the daemon.
 *
 * splitmix64() is part of the placement contract (common/layout.h): its
 * output must never change.
 */
#ifndef STRATA_COMMON_RAND_H
#define STRATA_COMMON_RAND_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull

/* A fixed bijective mix of a 64-bit integer: SplitMix64's output step
 * applied to x + gamma. */
static inline uint64_t splitmix64(uint64_t x)
{
	x += SPLITMIX64_GAMMA;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The generator: advances *state and returns the next 64 random bits.
 * Deterministic for a seed (every benchmark and test reproduces). Not for
 * anything secret. */
static inline uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;

	*state = x + SPLITMIX64_GAMMA;
	return splitmix64(x);
}

/* A number in [0, n) (n > 0); the modulo bias is negligible for the
 * sizes we draw. */
static inline uint64_t rng_below(uint64_t *state, uint64_t n)
{
	return rng_next(state) % n;
}

/* A double in [0, 1) with 53 random bits. */
static inline double rng_unit(uint64_t *state)
{
	return (double)(rng_next(state) >> 11) / 9007199254740992.0;
}

/* Fills len bytes with the generator's output, 8 bytes per step (the
 * last step's low bytes end a buffer of odd length). */
static inline void rng_fill(uint64_t *state, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = rng_next(state);

		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = rng_next(state);

		memcpy(p + i, &v, len - i);
	}
}

/* The test pattern named by seed: byte i is byte i % 8 (little end
 * first) of splitmix64(seed + i / 8), so a reader that knows the seed
 * checks what it got without keeping a copy. */
static inline void pattern_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = 0;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x = splitmix64(seed + i / 8);
		p[i] = (uint8_t)(x >> (8 * (i % 8)));
	}
}

#endif
