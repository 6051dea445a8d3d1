/* What the benchmarks and the demo share (bench.h). */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/rand.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void bench_sort(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
}

double bench_pct(const double *sorted, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(p * (double)n);
	return sorted[i < n ? i : n - 1];
}

void bench_shuffle(void *base, size_t n, size_t size, uint64_t *rng)
{
	uint8_t *b = base, tmp[64];

	/* Fisher-Yates; elements are small (indexes, task records). */
	for (size_t i = n; i > 1 && size <= sizeof(tmp); i--) {
		size_t j = (size_t)rng_below(rng, i);

		memcpy(tmp, b + (i - 1) * size, size);
		memcpy(b + (i - 1) * size, b + j * size, size);
		memcpy(b + j * size, tmp, size);
	}
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	/* Best effort: what cannot be removed is left, the walk goes on. */
	remove(path);
	return 0;
}

void bench_rmtree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* /proc/PID/stat of pid: its CPU seconds (user + system), parent and
 * command name (comm, len bytes; may be NULL). -1 when unreadable. */
static double proc_stat(long pid, long *ppid, char *comm, size_t len)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	const char *open_p, *p;
	long pp;
	FILE *fp;
	size_t n;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fp = fopen(path, "r");
	if (!fp)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	/* "PID (comm) state ppid ...": the name may hold spaces and ')', so
	 * the fields count from the last ')'; utime and stime are 14 and 15. */
	open_p = strchr(buf, '(');
	p = strrchr(buf, ')');
	if (!open_p || !p || p < open_p ||
	    sscanf(p + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &pp, &ut,
		   &st) != 3)
		return -1;
	if (ppid)
		*ppid = pp;
	if (comm)
		snprintf(comm, len, "%.*s", (int)(p - open_p - 1), open_p + 1);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double bench_pid_cpu(long pid, long *ppid)
{
	return proc_stat(pid, ppid, NULL, 0);
}

double bench_children_cpu(long parent, const char *comm)
{
	struct dirent *e;
	double sum = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char name[64];
		long pid, ppid = 0;
		char *end;
		double c;

		pid = strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end || pid <= 0)
			continue;
		c = proc_stat(pid, &ppid, name, sizeof(name));
		if (c >= 0 && ppid == parent && (!comm || !strcmp(name, comm)))
			sum += c;
	}
	closedir(d);
	return sum;
}

int bench_opt_seconds(const char *cmd, const char *val, double *out)
{
	char *end;
	double v = strtod(val, &end);

	if (*end || !(v > 0 && v <= 600)) {
		cli_err("%s: --seconds must be in (0, 600]", cmd);
		return 2;
	}
	*out = v;
	return 0;
}

int bench_opt_int(const char *cmd, const char *opt, const char *val, int64_t lo, int64_t hi,
		  int64_t *out)
{
	int64_t v;

	if (parse_i64(val, &v) || v < lo || v > hi) {
		cli_err("%s: %s must be in %lld..%lld", cmd, opt, (long long)lo, (long long)hi);
		return 2;
	}
	*out = v;
	return 0;
}


#define RUN_OUT_MAX (1u << 20)

json_t *bench_run_json(const char *const *argv, double timeout_s, int *status)
{
	char *out = malloc(RUN_OUT_MAX + 1);
	double deadline = mono_sec() + timeout_s;
	int pfd[2], st = 0;
	size_t n = 0;
	json_t *root = NULL;
	pid_t pid;

	*status = -1;
	if (!out || pipe(pfd) < 0) {
		free(out);
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	while (pid > 0) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		double left = deadline - mono_sec();
		ssize_t got;

		if (left <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			break;
		if (!p.revents)
			continue;
		got = read(pfd[0], out + n, RUN_OUT_MAX - n);
		if (got <= 0 || (n += (size_t)got) == RUN_OUT_MAX)
			break;
	}
	close(pfd[0]);
	out[n] = '\0';
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st)) {
		*status = WEXITSTATUS(st);
		if (!*status)
			root = json_loads(out, 0, NULL);
	}
	free(out);
	return root;
}
