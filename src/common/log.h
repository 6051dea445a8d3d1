/*
 * Leveled logging: one line per event, "TIME LEVEL component: message".
 * Thread-safe (one write(2) per line). Default level INFO, to stderr.
 */
#ifndef STRATA_COMMON_LOG_H
#define STRATA_COMMON_LOG_H

#include <stdarg.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Sends log lines to fd (default 2). */
void log_set_fd(int fd);
/* Parses "debug", "info", "warn", "error", "off". Returns 0 or -EINVAL. */
int log_level_parse(const char *s, enum log_level *out);

void log_msg(enum log_level level, const char *comp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_vmsg(enum log_level level, const char *comp, const char *fmt, va_list ap);

#define log_debug(comp, ...) do { if (log_get_level() <= LOG_DEBUG) log_msg(LOG_DEBUG, comp, __VA_ARGS__); } while (0)
#define log_info(comp, ...) log_msg(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_msg(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) log_msg(LOG_ERROR, comp, __VA_ARGS__)

/* Daemon-only: abort with file, line and reason on a broken invariant. */
#define STRATA_ASSERT(cond, reason) do { if (!(cond)) \
	assert_fail_abort(__FILE__, __LINE__, #cond, reason); } while (0)
void assert_fail_abort(const char *file, int line, const char *cond, const char *reason)
	__attribute__((noreturn));

#endif
