/* The mgmt service of stratad (see mgmt_service.c). */
#ifndef STRATA_MGMT_SERVICE_H
#define STRATA_MGMT_SERVICE_H

#include "common/service.h"

extern const struct service_def mgmt_service;

#endif
