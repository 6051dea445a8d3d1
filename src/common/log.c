/* Leveled, component-tagged logging; one write(2) per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "log.h"

static volatile int g_level = LOG_INFO;
static volatile int g_fd = 2;
static log_sink_fn g_sink;
static void *g_sink_arg;

static const char *const level_names[] = { "DEBUG", "INFO", "WARN", "ERROR", "OFF" };

void log_set_level(enum log_level level) { g_level = level; }
enum log_level log_get_level(void) { return (enum log_level)g_level; }
void log_set_fd(int fd) { g_fd = fd; }

void log_set_sink(log_sink_fn fn, void *arg)
{
	g_sink = fn;
	g_sink_arg = arg;
}

int log_level_parse(const char *s, enum log_level *out)
{
	static const char *const names[] = { "debug", "info", "warn", "error", "off" };

	for (int i = 0; i < 5; i++) {
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void log_vmsg(enum log_level level, const char *comp, const char *fmt, va_list ap)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	int n, m;

	if ((int)level < g_level || level >= LOG_OFF)
		return;
	if (g_sink) {
		vsnprintf(line, sizeof(line), fmt, ap);
		g_sink(g_sink_arg, level, comp, line);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], comp);
	if (n < 0)
		return;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A short or failed log write is not worth failing the caller over. */
	if (write(g_fd, line, (size_t)n) < 0)
		return;
}

void log_msg(enum log_level level, const char *comp, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, comp, fmt, ap);
	va_end(ap);
}

void log_limited(struct log_limit *l, enum log_level level, const char *comp, const char *fmt,
		 ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct timespec ts;
	uint32_t dropped = 0;
	bool last = false;
	char msg[900];
	uint64_t now;
	va_list ap;

	if ((int)level < g_level || level >= LOG_OFF)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	pthread_mutex_lock(&lock);
	if (now - l->window_ms >= LOG_LIMIT_MS || l->window_ms > now) {
		l->window_ms = now;
		l->used = 0;
		dropped = l->dropped;
		l->dropped = 0;
	}
	if (l->used >= LOG_LIMIT_BURST) {
		l->dropped++;
		pthread_mutex_unlock(&lock);
		return;
	}
	last = ++l->used == LOG_LIMIT_BURST;
	pthread_mutex_unlock(&lock);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dropped)
		log_msg(level, comp, "%s (and %u more like it dropped before)", msg, dropped);
	else if (last)
		log_msg(level, comp, "%s (more lines like this in the next %d s are dropped)", msg,
			LOG_LIMIT_MS / 1000);
	else
		log_msg(level, comp, "%s", msg);
}

void assert_fail_abort(const char *file, int line, const char *cond, const char *reason)
{
	log_msg(LOG_ERROR, "assert", "%s:%d: assertion '%s' failed: %s", file, line, cond, reason);
	abort();
}

int log_open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fd != g_fd && dup2(fd, g_fd) < 0)
		rc = -errno;
	if (fd != g_fd)
		close(fd);
	return rc;
}
