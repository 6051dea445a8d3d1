/* strata: local cluster launcher, admin, copy in/out, benchmarks. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <limits.h>

#include "cli.h"
#include "common/log.h"
#include "net/reactor.h"
#include "strata/errors.h"

void cli_err(const char *fmt, ...)
{
	va_list ap;

	fputs("strata: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_self_path(char *out, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 1);

	if (n < 0)
		return -errno;
	if (n == 0 || (size_t)n >= len - 1)
		return -ENAMETOOLONG;
	out[n] = '\0';
	return 0;
}

const char *cli_stratad_path(void)
{
	static char path[PATH_MAX];
	char self[PATH_MAX];
	const char *env = getenv("STRATA_STRATAD");

	if (env && *env)
		return env;
	if (cli_self_path(self, sizeof(self)) == 0) {
		char *slash;

		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/../stratad/stratad", self);
			if (access(path, X_OK) == 0)
				return path;
			snprintf(path, sizeof(path), "%s/stratad", self);
			if (access(path, X_OK) == 0)
				return path;
		}
	}
	return "stratad";
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int cli_spawn_daemon(const char *data, const char *const *flags, int timeout_ms,
		     char *addr, size_t addrlen, int *pid_out)
{
	char addrfile[PATH_MAX], logfile[PATH_MAX];
	const char *argv[64];
	int argc = 0, status;
	pid_t pid;
	uint64_t deadline;

	if (mkdir(data, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(addrfile, sizeof(addrfile), "%s/stratad.addr", data);
	snprintf(logfile, sizeof(logfile), "%s/stratad.log", data);
	unlink(addrfile);
	argv[argc++] = cli_stratad_path();
	argv[argc++] = "--data";
	argv[argc++] = data;
	for (int i = 0; flags && flags[i] && argc < 62; i++)
		argv[argc++] = flags[i];
	argv[argc] = NULL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND, 0644);

		setsid();
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	deadline = reactor_now_ms() + (uint64_t)timeout_ms;
	while (reactor_now_ms() < deadline) {
		FILE *f = fopen(addrfile, "r");

		if (f) {
			char line[128] = "";

			if (fgets(line, sizeof(line), f)) {
				line[strcspn(line, "\n")] = '\0';
				snprintf(addr, addrlen, "%s", line);
			}
			fclose(f);
			*pid_out = (int)pid;
			return 0;
		}
		if (waitpid(pid, &status, WNOHANG) == pid) {
			cli_err("stratad for '%s' exited during start-up; see '%s'", data, logfile);
			return -ECHILD;
		}
		sleep_ms(20);
	}
	cli_err("stratad for '%s' did not come up within %d ms; see '%s'", data, timeout_ms, logfile);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -ETIMEDOUT;
}

int cli_pid_alive(int pid)
{
	char path[64], buf[256];
	int status, fd;
	ssize_t n;
	char *rp;

	if (waitpid(pid, &status, WNOHANG) == pid)
		return 0;
	if (kill(pid, 0) != 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

int cli_stop_pid(int pid, int timeout_ms)
{
	uint64_t deadline = reactor_now_ms() + (uint64_t)timeout_ms;

	if (pid <= 0 || kill(pid, SIGTERM) < 0)
		return -ESRCH;
	while (reactor_now_ms() < deadline) {
		if (!cli_pid_alive(pid))
			return 0;
		sleep_ms(20);
	}
	kill(pid, SIGKILL);
	for (int i = 0; i < 100 && cli_pid_alive(pid); i++)
		sleep_ms(10);
	return -ETIMEDOUT;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: strata COMMAND [ARGS]\n\n"
		"cluster:\n"
		"  local up --dir DIR [--storage N]   start a local cluster: a control daemon\n"
		"                                     (mgmt, meta) and N storage daemons\n"
		"                   [--mem N] [--compute N --gpus-per-node G]  with mem daemons\n"
		"                                     and compute daemons declaring G GPUs each\n"
		"                   [--zones Z]       the compute daemons over zones a, b, ...\n"
		"                   [--meta-store postgresql [--control N]]  the namespace in a\n"
		"                                     local PostgreSQL, served by N meta daemons\n"
		"  local down --dir DIR               stop it\n"
		"  local status --dir DIR             show its daemons\n"
		"  local add --dir DIR --storage N    N more storage daemons; the rebalancer\n"
		"                                     moves chains onto them\n"
		"  local stop|start|restart --dir DIR --node N  one daemon, by the command\n"
		"                                     line 'local up' recorded for it\n"
		"  ping ADDR [--count N]              round trip to a daemon\n"
		"  node drain NODE_ID                 move a node's replicas to other nodes\n"
		"  node remove NODE_ID                retire a drained or dead node for good;\n"
		"                                     a dead one's chains re-replicate\n"
		"  target replace OLD NEW             rebuild a lost target on a spare\n"
		"  rebalance status|pause|resume      move chains onto emptier (added) nodes\n"
		"security (docs/security.md):\n"
		"  keygen FILE                        a new cluster key (mode 0600)\n"
		"  token create [--key FILE] ...      a token: tenant, uid/gids, path and mem\n"
		"                                     scopes, admin, expiry; without --key\n"
		"                                     mgmt signs it and records it\n"
		"  token list                         mgmt's tokens (admin token)\n"
		"  token revoke ID                    refuse a token everywhere (admin token)\n"
		"composition (docs/composer.md; an admin token):\n"
		"  compose inventory                  the pools: GPUs, storage, memory\n"
		"  compose create [--gpus N] [--model M] [--same-node] [--gpu-ids ID,...]\n"
		"                 [--zone Z] [--same-zone] [--storage SIZE]\n"
		"                 [--memory SIZE] [--tenant T] [--ttl TIME] [--retain]\n"
		"                 [--owner UID[:GID]] [--path r:PATH|rw:PATH]...\n"
		"                 [--token-out FILE]  compose a job's resources and credential\n"
		"  compose list | show ID | delete ID  the compositions; delete releases one\n"
		"  compose recompose ID               replace the GPUs a composition lost\n"		"  compose usage [--since TIME]       GPU-, TB- and GB-hours per tenant\n"
		"slurm (docs/slurm.md):\n"
		"  slurm install [--conf-dir DIR]     the burst_buffer/lua script, its settings\n"
		"                                     and SlurmUser's token\n"
		"  slurm gres [--names N1,N2]         gres.conf lines for the composer's GPUs\n"
		"namespace database (docs/namespace.md):\n"
		"  meta migrate --from DATA/meta.db --to postgresql://... [--passfile FILE]\n"
		"                                     copy a SQLite namespace into PostgreSQL\n"
		"  mgmt migrate --from DATA/mgmt.db --to postgresql://... [--passfile FILE]\n"
		"                                     copy mgmt's cluster state into PostgreSQL\n"
		"files (the cluster: --mgmt ADDR, --dir DIR of 'local up', or $STRATA_MGMT;\n"
		"       the credential: --token TOKEN|FILE, $STRATA_TOKEN, $STRATA_TOKEN_FILE,\n"
		"       or DIR/admin.token):\n"
		"  ls [-l] PATH...                    list directories\n"
		"  stat PATH...                       every attribute, with the layout\n"
		"  mkdir [-p] PATH...                 create directories\n"
		"  chmod MODE PATH...                 set the permission bits (octal)\n"
		"  chown USER[:GROUP] PATH...         set the owner (numbers or local names;\n"
		"                                     an admin token, or the owner for GROUP)\n"
		"  rm [-r] [-f] PATH...               remove files, empty dirs (-r: trees)\n"
		"  mv SRC... DST                      rename or move\n"
		"  cat PATH...                        print files to stdout\n"
		"  put [-j N] [-q] LOCAL... DEST      copy local files and trees in\n"
		"  get [-j N] [-q] SRC... LOCALDIR    copy files and trees out\n"
		"  cp [-r] SRC... DST                 copy inside the cluster\n"
		"  du [-s] PATH...                    bytes and file counts\n"
		"  setlayout DIR [--chunk-size SIZE] [--stripe N]\n"
		"  getlayout PATH...                  chunk size and stripe\n"
		"  status [--json]                    nodes, targets, chains, capacity, health;\n"
		"                                     exit 0 ok, 1 not ok, 3 mgmt unreachable\n"
		"  quota set PATH [--bytes SIZE] [--inodes N]  limit a directory tree (admin\n"
		"                                     token; 0 removes a limit)\n"
		"  quota get PATH...                  a directory's limits and usage\n"
		"the main job:\n"
		"  demo [--dir DIR] [--small]         a local cluster, a job's slice composed, a\n"
		"                                     dataset put in and read back shuffled as\n"
		"                                     the job, verified, the slice released\n"
		"benchmarks:\n"
		"  bench rpc [--addr ADDR] [--tls DIR]  RPC round trips and bulk vs raw TCP (TLS: DIR\n"
		"                                     from scripts/tls-cert.sh)\n"
		"  bench io [--seconds S] [--threads N]  file I/O vs a local dir\n"
		"  bench train [--workload W] [--seconds S]  training I/O: accelerator utilization\n"		"  bench chunk [--seconds S]          the chunk engine and R=1/R=3 vs fio O_DIRECT\n"
		"  bench meta [--seconds S] [--threads N]  create/stat/open/unlink vs a local dir\n"
		"  bench mem [--threads N] [--batch B]  the memory plane vs Redis (libhiredis)\n"
		"  bench ckpt [--ranks N,...]         checkpoint save/restore vs torch.save\n"
		"  bench compose [--requests N]       compose+release vs the HTTP floor\n"
		"datasets:\n"
		"  pack SRC DEST                      local sample files into a packed dataset\n"
		"compute-node read cache (docs/cache.md):\n"
		"  cache stats [--dir DIR] [--json]   the node's hits, misses, bytes, evictions\n");
}

/* 'strata CMD --help' for a command without its own: the lines of the
 * usage above that name CMD, with their continuation lines. 0 when some
 * matched, else -ENOENT. */
static int command_help(const char *cmd)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0, n = strlen(cmd);
	bool in = false, any = false;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return -ENOMEM;
	usage(f);
	fclose(f);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		bool cont = strncmp(line, "      ", 6) == 0 || strncmp(line, "                 ", 17) == 0;

		if (!strncmp(line, "  ", 2) && !strncmp(line + 2, cmd, n) &&
		    (line[2 + n] == ' ' || line[2 + n] == '\0')) {
			if (!any)
				printf("usage: strata COMMAND [ARGS]; '%s' takes:\n", cmd);
			in = any = true;
		} else if (!cont) {
			in = false;
		}
		if (in)
			printf("%s\n", line);
	}
	free(text);
	return any ? 0 : -ENOENT;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_WARN);
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	/* Commands without a --help of their own answer from the list above. */
	if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) &&
	    strcmp(argv[1], "demo") && strcmp(argv[1], "meta") && strcmp(argv[1], "mgmt") &&
	    strcmp(argv[1], "pack") &&
	    strcmp(argv[1], "bench") && command_help(argv[1]) == 0)
		return 0;
	if (strcmp(argv[1], "local") == 0)
		return cmd_local(argc - 1, argv + 1);
	if (strcmp(argv[1], "node") == 0 || strcmp(argv[1], "target") == 0)
		return cmd_admin(argc - 1, argv + 1);
	if (strcmp(argv[1], "rebalance") == 0)
		return cmd_rebalance(argc - 1, argv + 1);
	if (strcmp(argv[1], "ping") == 0)
		return cmd_ping(argc - 1, argv + 1);
	if (strcmp(argv[1], "keygen") == 0)
		return cmd_keygen(argc - 1, argv + 1);
	if (strcmp(argv[1], "token") == 0)
		return cmd_token(argc - 1, argv + 1);
	if (strcmp(argv[1], "compose") == 0)
		return cmd_compose(argc - 1, argv + 1);
	if (strcmp(argv[1], "slurm") == 0)
		return cmd_slurm(argc - 1, argv + 1);
	if (strcmp(argv[1], "meta") == 0 || strcmp(argv[1], "mgmt") == 0)
		return cmd_meta(argc - 1, argv + 1);
	if (strcmp(argv[1], "bench") == 0)
		return cmd_bench(argc - 1, argv + 1);
	if (strcmp(argv[1], "demo") == 0)
		return cmd_demo(argc - 1, argv + 1);
	if (strcmp(argv[1], "pack") == 0)
		return cmd_pack(argc - 1, argv + 1);
	if (strcmp(argv[1], "cache") == 0)
		return cmd_cache(argc - 1, argv + 1);
	if (cmd_fs_is(argv[1]))
		return cmd_fs(argc - 1, argv + 1);
	cli_err("unknown command '%s' (see 'strata --help')", argv[1]);
	return 2;
}
