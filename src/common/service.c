/* What the service contract (service.h) gives every service: the metrics
 * sink and the process's incarnation. */
#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/service.h"

uint64_t service_incarnation(void)
{
	/* The pid tells apart two starts within one clock tick. */
	uint64_t inc = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 48);

	return inc ? inc : 1;
}

void metrics_put(struct bbuf *out, const char *name, const char *type, const char *help,
		 double value)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n",
			 name, help, name, type, name, value);

	if (n > 0)
		bbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
