/*
 * Link-time replacements (ld --wrap) of the few system calls the linked
 * services make outside the platform API: the storage service stamps its
 * incarnation with the wall clock and the pid, keeps its data directory's
 * identity in a file, and creates its targets' directory. In the simulation the clock is virtual, the pid fixed, and a
 * target's disk lives in memory (sim_chunk_store.c), so a seed replays
 * exactly and nothing touches the file system.
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/rand.h"
#include "sim.h"

int __wrap_service_data_ident(const char *data, uint64_t *out);
int __wrap_target_dir_claim(const char *dir, uint64_t ident, uint32_t idx);

/* Virtual "now" as 2024-01-01 plus the run's time: two process starts
 * of one node at different virtual times get different incarnations, as
 * two real starts do. */
#define REALTIME_BASE_S 1704067200ull

int __wrap_clock_gettime(clockid_t clk, struct timespec *ts)
{
	uint64_t us = sim_now_us();

	ts->tv_sec = (time_t)(us / 1000000 + (clk == CLOCK_REALTIME ? REALTIME_BASE_S : 1000));
	ts->tv_nsec = (long)(us % 1000000) * 1000;
	return 0;
}

pid_t __wrap_getpid(void)
{
	return 4242;
}

int __wrap_mkdir(const char *path, mode_t mode)
{
	(void)path;
	(void)mode;
	return 0;
}

/* A node's directory keeps its identity across its restarts: a hash of
 * its path (one per node), never 0. */
int __wrap_service_data_ident(const char *data, uint64_t *out)
{
	uint64_t h = 0x5157a7a1;

	for (const char *c = data; *c; c++)
		h = splitmix64(h ^ (uint8_t)*c);
	*out = h ? h : 1;
	return 0;
}

/* A target's directory is always its own (no file system in a run). */
int __wrap_target_dir_claim(const char *dir, uint64_t ident, uint32_t idx)
{
	(void)dir;
	(void)ident;
	(void)idx;
	return 0;
}
