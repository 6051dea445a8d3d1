/* libFuzzer target: every request and reply decoder of the storage and
 * mgmt tables (src/proto/): what a storage daemon, mgmt and a client
 * decode from the network. The first byte picks the operation. The
 * cluster map's conversion has its own target, fuzz_cluster_map.c. */
#include <stdint.h>
#include <stdlib.h>

#include "proto/mgmt.h"
#include "proto/storage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_op(const struct proto_op *op, const uint8_t *data, uint32_t size)
{
	uint8_t m[512] __attribute__((aligned(16)));

	if (op->req_size <= sizeof(m) && op->req_decode(data, size, m) == 0)
		op->req_release(m);
	if (op->rep_size <= sizeof(m) && op->rep_decode(data, size, m) == 0)
		op->rep_release(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t pick;

	if (size < 1 || size > (1u << 20))
		return 0;
	pick = data[0];
	data++;
	size--;
	if (pick < storage_NOPS) {
		try_op(&storage_ops[pick], data, (uint32_t)size);
	} else if (pick < storage_NOPS + mgmt_NOPS) {
		try_op(&mgmt_ops[pick - storage_NOPS], data, (uint32_t)size);
	}
	return 0;
}
