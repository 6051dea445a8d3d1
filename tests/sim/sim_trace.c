/*
 * The run's trace: sim events and the real code's log lines, each line
 * prefixed with the virtual time and the node it ran on, kept in a ring
 * buffer (printed when a run fails), folded into a digest (two runs of a
 * seed must agree on it byte for byte), and printed as it goes with
 * --verbose. With tracing off nothing is formatted: batches run fast, and
 * a failing seed is run again with tracing on to explain itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "sim.h"

#define RING_BYTES (4u << 20)
#define LINE_MAX_LEN 1200

static struct {
	bool on, live;
	char *ring;
	uint64_t pos;		/* bytes written since the reset (ring index = pos % size) */
	uint64_t digest;
	uint64_t lines;
} g_tr;

void sim_trace_reset(bool on, bool live)
{
	g_tr.on = on;
	g_tr.live = live;
	g_tr.pos = 0;
	g_tr.lines = 0;
	g_tr.digest = 0xcbf29ce484222325ull;
	if (on && !g_tr.ring)
		g_tr.ring = malloc(RING_BYTES);
	if (!g_tr.ring)
		g_tr.on = false;
	/* The real code logs at info and up only when someone looks. */
	log_set_level(g_tr.on ? LOG_INFO : LOG_OFF);
}

bool sim_tracing(void)
{
	return g_tr.on;
}

uint64_t sim_trace_digest(void)
{
	return g_tr.digest;
}

uint64_t sim_trace_lines(void)
{
	return g_tr.lines;
}

static void ring_put(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		g_tr.ring[g_tr.pos % RING_BYTES] = s[i];
		g_tr.pos++;
		g_tr.digest = (g_tr.digest ^ (uint8_t)s[i]) * 0x100000001b3ull;
	}
}

static void emit(const char *body)
{
	char line[LINE_MAX_LEN + 64];
	struct reactor *r = sim_current();
	uint64_t now = sim_now_us();
	int n;

	n = snprintf(line, sizeof(line), "%6llu.%06llu %-4s %s\n",
		     (unsigned long long)(now / 1000000), (unsigned long long)(now % 1000000),
		     r && r->node ? r->node->name : "sim", body);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	ring_put(line, (size_t)n);
	g_tr.lines++;
	if (g_tr.live)
		fwrite(line, 1, (size_t)n, stdout);
}

void sim_vtrace(const char *fmt, va_list ap)
{
	char body[LINE_MAX_LEN];

	if (!g_tr.on)
		return;
	vsnprintf(body, sizeof(body), fmt, ap);
	emit(body);
}

void sim_trace(const char *fmt, ...)
{
	va_list ap;

	if (!g_tr.on)
		return;
	va_start(ap, fmt);
	sim_vtrace(fmt, ap);
	va_end(ap);
}

void sim_trace_print_tail(uint32_t n)
{
	uint64_t start, end = g_tr.pos, i;
	uint32_t seen = 0;

	if (!g_tr.ring || !end)
		return;
	start = end > RING_BYTES ? end - RING_BYTES : 0;
	/* Back from the end to the start of the n-th last line. */
	for (i = end - 1; i > start; i--) {
		if (g_tr.ring[(i - 1) % RING_BYTES] == '\n' && ++seen == n)
			break;
	}
	if (i == start && start) {
		/* The oldest line in the ring may be cut: skip it. */
		while (i < end && g_tr.ring[i % RING_BYTES] != '\n')
			i++;
		i++;
	}
	for (; i < end; i++)
		putchar(g_tr.ring[i % RING_BYTES]);
	fflush(stdout);
}

static void log_sink(void *arg, enum log_level level, const char *comp, const char *msg)
{
	static const char *const names[] = { "DEBUG", "INFO", "WARN", "ERROR", "OFF" };
	char body[LINE_MAX_LEN];

	(void)arg;
	snprintf(body, sizeof(body), "%-5s %s: %s", names[level], comp, msg);
	emit(body);
	/* The real code is about to abort on a broken invariant: show why
	 * before the process goes. */
	if (strcmp(comp, "assert") == 0) {
		printf("---- trace tail before the assertion ----\n");
		sim_trace_print_tail(200);
	}
}

void sim_log_attach(void)
{
	log_set_sink(log_sink, NULL);
}
