/* libFuzzer target: every decoder of the mem protocol (what a mem daemon
 * and a client decode from the network). */
#include <stdint.h>
#include <stdlib.h>

#include "mem/mem_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mp_item it, *items = NULL;
	struct mp_result res[64];
	struct mp_stats st;
	uint64_t cap;
	uint32_t n;

	if (size > (1u << 20))
		return 0;
	(void)mp_item_decode(data, (uint32_t)size, &it);
	if (mp_batch_decode(data, (uint32_t)size, &items, &n, &cap) == 0) {
		for (uint32_t i = 0; i < n; i++)
			if (items[i].klen)
				(void)items[i].key[items[i].klen - 1];
		free(items);
	}
	(void)mp_results_decode(data, (uint32_t)size, res, size ? data[0] % 64 : 0);
	(void)mp_stats_decode(data, (uint32_t)size, &st);
	return 0;
}
