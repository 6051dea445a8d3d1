/* The registry of services stratad can run. A new service adds one line. */
#include <stddef.h>

#include "daemon.h"

const struct service_def *const service_registry[] = {
	NULL,
};
