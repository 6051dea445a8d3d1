/*
 * libFuzzer target: every request and reply decoder of the mem service,
 * reached through its table (mem_ops[], src/proto/mem.h), on the same
 * input, with the checks of fuzz_proto.h: what a mem daemon and a client
 * decode from the network. Built and run by scripts/fuzz.sh.
 */
#include "fuzz_proto.h"
#include "proto/mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (8u << 20))
		return 0;
	fuzz_table(mem_ops, mem_NOPS, data, (uint32_t)size);
	return 0;
}
