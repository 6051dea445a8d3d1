/* The registry of services stratad can run. A new service adds one line. */
#include <stddef.h>

#include "daemon.h"
#include "composer/composer_service.h"
#include "compute/compute_service.h"
#include "mem/mem_service.h"
#include "meta/meta_service.h"
#include "mgmt/mgmt_service.h"
#include "storage/storage_service.h"

const struct service_def *const service_registry[] = {
	&mgmt_service,
	&meta_service,
	&storage_service,
	&mem_service,
	&compute_service,
	&composer_service,
	NULL,
};
