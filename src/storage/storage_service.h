/* The storage service of stratad (see storage_service.c). */
#ifndef STRATA_STORAGE_SERVICE_H
#define STRATA_STORAGE_SERVICE_H

#include "common/service.h"

extern const struct service_def storage_service;

/* Target ids are derived from the node id and the target's index. */
static inline uint32_t storage_target_id(uint32_t node_id, uint32_t idx)
{
	return node_id * 256u + idx;
}

#endif
