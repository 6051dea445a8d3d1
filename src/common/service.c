/* The metrics sink of the service contract (service.h). */
#include <stdio.h>

#include "common/service.h"

void metrics_put(struct bbuf *out, const char *name, const char *type, const char *help,
		 double value)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n",
			 name, help, name, type, name, value);

	if (n > 0)
		bbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
