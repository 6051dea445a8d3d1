/*
 * Deterministic file placement: which chain of the chain table holds chunk
 * i of a file. Used by meta (to record a layout) and by the client (to route
 * chunk I/O); both must agree bit for bit on every build and machine, so the
 * mapping below is part of the on-disk/wire contract: change it only with a
 * new layout version.
 *
 * Mapping. Let T = table_len, S = stripe, h(x) = splitmix64(x) (common/rand.h:
 * the finalizer of Steele, Lea and Flood's SplitMix64, 64-bit integer ops only):
 *   start = h(seed) % T
 *   step  = 1 + h(seed ^ 0x9e3779b97f4a7c15) % (T - 1), then incremented
 *           (wrapping within 1..T-1) until gcd(step, T) == 1; step = 1
 *           when T == 1.
 *   chain index of chunk i = (start + (i % S) * step) % T
 * Because step is coprime with T, the S chains of a file are distinct; the
 * file's chunks go round-robin over them. Different seeds spread files
 * evenly over the table.
 */
#ifndef STRATA_COMMON_LAYOUT_H
#define STRATA_COMMON_LAYOUT_H

#include <stdint.h>

#define LAYOUT_MIN_CHUNK (64u * 1024)
#define LAYOUT_MAX_CHUNK (64u * 1024 * 1024)
#define LAYOUT_MAX_STRIPE 256u

struct file_layout {
	uint32_t chunk_size;	/* bytes, power of two, 64 KiB..64 MiB */
	uint32_t stripe;	/* chains the file spreads over, 1..min(table_len, 256) */
	uint32_t table_len;	/* chains in the chain table the layout was made for */
	uint64_t seed;		/* per-file placement seed */
};

/*
 * Validates l. Returns 0, or -EINVAL when chunk_size is not a power of two
 * in 64 KiB..64 MiB, table_len is 0, or stripe is not in
 * 1..min(table_len, LAYOUT_MAX_STRIPE).
 */
int layout_check(const struct file_layout *l);

/*
 * Returns the chain index (0..table_len-1, an index into the chain table,
 * not a chain id) of chunk chunk_index of a file with layout l. l must have
 * passed layout_check(); a layout that did not yields 0 for table_len 0 or
 * stripe 0 rather than dividing by zero.
 */
uint32_t layout_chain_index(const struct file_layout *l, uint64_t chunk_index);

/*
 * Fills *out with a layout (stripe 1, table_len chains, chunk_size) that
 * places every chunk on chain index chain_idx: what removes a chunk found
 * on that chain whose file, and so whose layout, is gone (meta's orphan
 * reconciler). Returns 0, -EINVAL (chain_idx not below table_len) or
 * -ENOENT (no seed found; practically never).
 */
int layout_for_chain(uint32_t table_len, uint32_t chain_idx, uint32_t chunk_size,
		     struct file_layout *out);

/* The chunk that holds byte offset off: off / chunk_size (0 if chunk_size 0). */
static inline uint64_t layout_chunk_of(const struct file_layout *l, uint64_t off)
{
	return l->chunk_size ? off / l->chunk_size : 0;
}

#endif
