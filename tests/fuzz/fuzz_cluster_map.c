/* libFuzzer target: the cluster map as every client and storage daemon
 * decodes it from a GET_MAP reply (cmap_decode_since: the mg_map message,
 * then the conversion to struct cluster_map and its validation). What
 * decodes must pass cm_validate, and encode back to bytes that decode to
 * the same map. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/cluster_map.h"
#include "proto/mgmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cluster_map m, again;
	struct bbuf b, b2;
	bool changed = false;

	if (size > (1u << 20))
		return 0;
	cm_init(&m);
	if (cmap_decode_since(data, (uint32_t)size, &m, &changed) || !changed)
		return 0;
	if (cm_validate(&m) != 0)
		abort();
	/* Round trip: re-encoded, it decodes to a map that encodes the same. */
	bbuf_init(&b);
	bbuf_init(&b2);
	if (cmap_encode_since(&m, m.version + 1, &b))
		abort();
	cm_init(&again);
	if (cmap_decode_since(b.buf, (uint32_t)b.len, &again, &changed) || !changed)
		abort();
	if (cmap_encode_since(&again, again.version + 1, &b2) || b.len != b2.len ||
	    memcmp(b.buf, b2.buf, b.len) != 0)
		abort();
	bbuf_release(&b);
	bbuf_release(&b2);
	cm_release(&again);
	cm_release(&m);
	return 0;
}
