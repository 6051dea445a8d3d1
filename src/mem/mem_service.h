/* The mem service of stratad (see mem_service.c and docs/mem.md). */
#ifndef STRATA_MEM_SERVICE_H
#define STRATA_MEM_SERVICE_H

#include "common/service.h"

extern const struct service_def mem_service;

#endif
