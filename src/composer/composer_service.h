/* The composer service of stratad (see composer_service.c and
 * docs/composer.md): compositions of GPUs, a volume and pooled memory,
 * served through a Redfish-style HTTP API. Runs beside mgmt. */
#ifndef STRATA_COMPOSER_SERVICE_H
#define STRATA_COMPOSER_SERVICE_H

#include "common/service.h"

extern const struct service_def composer_service;

#endif
