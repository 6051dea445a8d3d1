/* libFuzzer target: every decoder of the storage protocol and the cluster
 * map (what a storage daemon and a client decode from the network). */
#include <stdint.h>
#include <stdlib.h>

#include "mgmt/cluster_map.h"
#include "storage/storage_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_update u;
	struct sp_read rd;
	struct sp_batch_item *items = NULL;
	uint32_t target, n;
	struct cluster_map m;
	struct rbuf r;
	bool changed;

	if (size > (1u << 20))
		return 0;
	(void)sp_update_decode(data, (uint32_t)size, &u);
	(void)sp_read_decode(data, (uint32_t)size, &rd);
	if (sp_batch_decode(data, (uint32_t)size, &target, &items, &n) == 0)
		free(items);
	cm_init(&m);
	rbuf_init(&r, data, size);
	if (cm_decode(&r, &m) == 0)
		cm_release(&m);
	cm_init(&m);
	rbuf_init(&r, data, size);
	if (cm_decode_since(&r, &m, &changed) == 0 && changed)
		cm_release(&m);
	return 0;
}
