/*
 * The chunks storage reports lost (no intact replica left in their chain:
 * docs/failures.md, "Lost chunks"), as mgmt knows them for `strata status`
 * and /metrics. A replica that finds a chunk lost reports it (MGMT_REPORT,
 * STRATA_ELOST) and reports it again every LOST_RECHECK_MS while it stays
 * so; a report of 0 says it is lost no more (repaired or removed). An
 * entry not heard of for LOST_FORGET_MS is forgotten, so a restarted
 * storage node or a report that never came does not keep the cluster
 * degraded for ever.
 *
 * One thread (mgmt's reactor 0) uses a set; lost_count()'s result may be
 * copied into a snapshot for other threads.
 */
#ifndef STRATA_MGMT_LOST_H
#define STRATA_MGMT_LOST_H

#include <stdint.h>

#define LOST_FORGET_MS 95000u
#define LOST_MAX 65536u		/* chunks remembered; more count as this many */

struct lost_set {
	struct lost_ent *v;
	uint32_t n, cap;
};

void lost_init(struct lost_set *s);
void lost_release(struct lost_set *s);

/* Records a report of chunk (ino, idx) at now_ms: err STRATA_ELOST adds
 * or renews it, 0 removes it, anything else is ignored. Returns 0 or
 * -ENOMEM (the report is dropped). */
int lost_report(struct lost_set *s, uint64_t ino, uint64_t idx, int err, uint64_t now_ms);

/* Forgets entries older than LOST_FORGET_MS and returns how many are left. */
uint32_t lost_count(struct lost_set *s, uint64_t now_ms);

#endif
