/*
 * Deterministic, balanced generation of a chain table.
 *
 * Given the targets of a cluster (each on a storage node) and a wanted
 * replication factor R, build one chain per target, each an ordered list
 * (head..tail) of R targets on R distinct nodes. R is reduced to the number
 * of distinct nodes when there are fewer.
 *
 * Algorithm (pure integer arithmetic, no randomness, no dependence on the
 * order of the input array):
 *
 *  1. Sort the targets by (node id, target id); group them by node and order
 *     the groups by size descending, then node id ascending. Call the
 *     concatenation L (length T).
 *  2. Deal L round-robin into F = floor(T / R) frames (L[i] goes to frame
 *     i % F) and concatenate the frames: this is the ring S.
 *  3. Chain j = S[j], S[j+1], ..., S[j+R-1] (indices mod T).
 *
 * Every target then appears in exactly R chains, once as head, once at each
 * middle position and once as tail. The windows hold R distinct nodes
 * whenever every node holds at most floor(T / R) targets (a node with more
 * cannot be in R chains per target without repeating in a chain, so no
 * perfect table exists). In that case the generator falls back to a greedy
 * fill: chain j's head is still S[j] (every target is head exactly once);
 * each further position takes, among targets on nodes not yet in the chain,
 * the one with the fewest memberships so far, then the nearest after S[j]
 * on the ring; the chosen members are then spread over positions 1..R-1
 * (each target's counts there kept close: within 2 in the tested shapes)
 * and a local search swaps non-head members while that evens the counts.
 * Targets of one node appear in as many chains as each other (within 1);
 * targets on the heavy node appear in fewer chains, the others in more.
 */
#ifndef STRATA_MGMT_CHAIN_TABLE_H
#define STRATA_MGMT_CHAIN_TABLE_H

#include <stdint.h>

struct ct_target {
	uint32_t target_id;
	uint32_t node_id;
};

/*
 * Returns the replication factor a table over these targets gets:
 * min(r_wanted, number of distinct node ids), and 0 when n == 0 or
 * r_wanted == 0.
 */
uint32_t chain_table_effective_r(const struct ct_target *targets, uint32_t n,
				 uint32_t r_wanted);

/*
 * Builds the chain table.
 *   targets, n: the targets (borrowed; any order; target ids must be
 *               distinct).
 *   r_wanted:   the wanted replication factor (1..64).
 *   r_out:      receives the effective R (see chain_table_effective_r).
 *   out:        receives a malloc'd array of n * (*r_out) target ids; chain
 *               c (0 <= c < n) is out[c * R .. c * R + R - 1], head first.
 *               The caller frees it with free().
 * Returns 0, -EINVAL (n == 0, r_wanted out of range, duplicate target ids) or
 * -ENOMEM; on error *out is NULL.
 */
int chain_table_build(const struct ct_target *targets, uint32_t n, uint32_t r_wanted,
		      uint32_t *r_out, uint32_t **out);

#endif
