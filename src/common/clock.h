/*
 * Clocks, one definition each, in the units their callers keep.
 *
 * now_ns() is wall-clock time: for timestamps that are stored or compared
 * across machines (inode times, checkpoint manifests). mono_ms() and
 * mono_sec() never jump: for deadlines, timeouts and measured intervals.
 */
#ifndef STRATA_COMMON_CLOCK_H
#define STRATA_COMMON_CLOCK_H

#include <stdint.h>

/* CLOCK_REALTIME in nanoseconds since the epoch. */
int64_t now_ns(void);
/* CLOCK_MONOTONIC in milliseconds. */
uint64_t mono_ms(void);
/* CLOCK_MONOTONIC in seconds, with nanosecond resolution (benchmarks). */
double mono_sec(void);

#endif
