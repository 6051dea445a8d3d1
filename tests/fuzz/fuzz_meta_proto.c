/*
 * libFuzzer target: every request and reply decoder of the meta service,
 * reached through its table (meta_ops[], src/proto/meta.h), on the same
 * input, with the checks of fuzz_proto.h. Built and run by
 * scripts/fuzz.sh.
 */
#include "fuzz_proto.h"
#include "proto/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (8u << 20))
		return 0;
	fuzz_table(meta_ops, meta_NOPS, data, (uint32_t)size);
	return 0;
}
