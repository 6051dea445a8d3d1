/*
 * Leveled logging: one line per event, "TIME LEVEL component: message".
 * Thread-safe (one write(2) per line). Default level INFO, to stderr.
 */
#ifndef STRATA_COMMON_LOG_H
#define STRATA_COMMON_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Sends log lines to fd (default 2). */
void log_set_fd(int fd);
/*
 * Makes the log fd (2 unless log_set_fd changed it) the file path, opened
 * for appending (created with mode 0640): log lines, and whatever else
 * the process writes there (sanitizer reports), go to it. Calling it again
 * reopens path, which is how a daemon follows a rotation (logrotate moves
 * the file, then sends SIGHUP). Another thread's line goes whole to the
 * old file or the new one (dup2 replaces the fd atomically).
 * Returns 0 or -errno (the log fd then unchanged).
 */
int log_open_file(const char *path);
/*
 * Sends log lines to fn instead of the fd; NULL restores the fd. fn gets
 * the level, the component and the formatted message (no time stamp, no
 * newline; valid during the call) and runs on the logging thread. For
 * harnesses that own the clock and the output, such as the deterministic
 * simulation (tests/sim/): the line then carries their time, not the wall
 * clock's. Set it before other threads log.
 */
typedef void (*log_sink_fn)(void *arg, enum log_level level, const char *comp, const char *msg);
void log_set_sink(log_sink_fn fn, void *arg);
/* Parses "debug", "info", "warn", "error", "off". Returns 0 or -EINVAL. */
int log_level_parse(const char *s, enum log_level *out);

void log_msg(enum log_level level, const char *comp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_vmsg(enum log_level level, const char *comp, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

#define log_debug(comp, ...) do { if (log_get_level() <= LOG_DEBUG) log_msg(LOG_DEBUG, comp, __VA_ARGS__); } while (0)
#define log_info(comp, ...) log_msg(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_msg(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) log_msg(LOG_ERROR, comp, __VA_ARGS__)

/*
 * Rate-limited lines, for what a peer can make happen as often as it likes
 * (malformed frames, connection floods): at most LOG_LIMIT_BURST lines per
 * LOG_LIMIT_MS per call site; the first line past them says that more are
 * dropped, and the first line of a later window how many were.
 * log_warn_limited keeps its state in a static of the call site.
 * Thread-safe.
 */
#define LOG_LIMIT_MS 10000
#define LOG_LIMIT_BURST 32
struct log_limit {
	uint64_t window_ms;	/* when the current window began */
	uint32_t used;		/* lines logged in it */
	uint32_t dropped;	/* lines dropped since the last one logged */
};
void log_limited(struct log_limit *l, enum log_level level, const char *comp, const char *fmt,
		 ...) __attribute__((format(printf, 4, 5)));
#define log_warn_limited(comp, ...) do { \
	static struct log_limit ll_; \
	log_limited(&ll_, LOG_WARN, comp, __VA_ARGS__); \
} while (0)

/* Daemon-only: abort with file, line and reason on a broken invariant. */
#define STRATA_ASSERT(cond, reason) do { if (!(cond)) \
	assert_fail_abort(__FILE__, __LINE__, #cond, reason); } while (0)
void assert_fail_abort(const char *file, int line, const char *cond, const char *reason)
	__attribute__((noreturn));

#endif
