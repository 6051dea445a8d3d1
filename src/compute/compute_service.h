/* The compute service of stratad (see compute_service.c and
 * docs/composer.md): a GPU host's inventory, announced to mgmt. */
#ifndef STRATA_COMPUTE_SERVICE_H
#define STRATA_COMPUTE_SERVICE_H

#include "common/service.h"

extern const struct service_def compute_service;

#endif
