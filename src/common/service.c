/* What the service contract (service.h) gives every service: the metrics
 * sink and the process's incarnation. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/service.h"

uint64_t service_incarnation(void)
{
	/* The pid tells apart two starts within one clock tick. */
	uint64_t inc = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 48);

	return inc ? inc : 1;
}

void metrics_head(struct bbuf *out, const char *name, const char *type, const char *help)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);

	if (n > 0)
		bbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void metrics_put(struct bbuf *out, const char *name, const char *type, const char *help,
		 double value)
{
	char line[160];
	int n;

	metrics_head(out, name, type, help);
	n = snprintf(line, sizeof(line), "%s %.17g\n", name, value);
	if (n > 0)
		bbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void metrics_series(struct bbuf *out, const char *name, const char *label, const char *value,
		    double v)
{
	char line[64];
	int n;

	bbuf_append(out, name, strlen(name));
	bbuf_append(out, "{", 1);
	bbuf_append(out, label, strlen(label));
	bbuf_append(out, "=\"", 2);
	for (const char *s = value; *s; s++) {
		if (*s == '\\' || *s == '"')
			bbuf_append(out, "\\", 1);
		if (*s == '\n')
			bbuf_append(out, "\\n", 2);
		else
			bbuf_append(out, s, 1);
	}
	n = snprintf(line, sizeof(line), "\"} %.17g\n", v);
	bbuf_append(out, line, (size_t)n);
}
