/*
 * spank_strata.so: a SPANK plugin that mounts a job's Strata volume with
 * strata-fuse on the compute node (docs/slurm.md).
 *
 * A job that burst_buffer.lua composed carries STRATA_VOLUME, STRATA_MGMT
 * and STRATA_TOKEN. In each of its steps this plugin (in slurmstepd, as
 * root: /dev/fuse is root's on many nodes) makes MOUNT_ROOT/strata-JOB.STEP,
 * mode 0700 and owned by the job's user, so that no one else reaches the
 * mount, starts strata-fuse with the job's credential on its "mnt"
 * (allow_other: the job's user is not the mounter), and gives the step
 * STRATA_MOUNT (the mount) and STRATA_VOLUME_DIR (the volume inside it).
 * At the step's end it unmounts (fusermount3 -u -z) and removes both
 * directories. A job passes --strata-mount=no to go without; a job
 * without STRATA_VOLUME is left alone; a mount that fails leaves the step
 * without STRATA_MOUNT and with STRATA_MOUNT_ERROR (why), and the node in
 * service.
 *
 * plugstack.conf:
 *   optional /usr/lib/strata/spank_strata.so [mount_root=/tmp] [strata_fuse=PATH]
 *
 * Loaded into slurmstepd, srun and sbatch: it uses nothing of Strata's
 * but the strata-fuse program, and keeps its state in this file's
 * statics (one step per slurmstepd).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(strata, 1);

#define STRATA_ENV_MAX 4096

static int mount_wanted = 1;
static char mount_root[PATH_MAX] = "/tmp";
static char fuse_bin[PATH_MAX] = "/usr/bin/strata-fuse";
static char parent[PATH_MAX];		/* MOUNT_ROOT/strata-JOB.STEP, once made */
static char mountpoint[PATH_MAX + 8];	/* parent/mnt, once mounted */

static int opt_mount(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (!optarg || strcmp(optarg, "yes") == 0) {
		mount_wanted = 1;
	} else if (strcmp(optarg, "no") == 0) {
		mount_wanted = 0;
	} else {
		slurm_error("strata: --strata-mount=%s: give yes or no", optarg);
		return -1;
	}
	return 0;
}

/* Registered in slurm_spank_init: sbatch 22.05 does not read a static
 * spank_options table. */
static struct spank_option mount_option = {
	"strata-mount", "yes|no", "mount the job's Strata volume with strata-fuse (default: yes)",
	1, 0, opt_mount
};

/* The plugstack.conf arguments: mount_root=DIR, strata_fuse=PATH. */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (spank_option_register(sp, &mount_option) != ESPANK_SUCCESS) {
		slurm_error("strata: cannot register --strata-mount");
		return -1;
	}
	for (int i = 0; i < ac; i++) {
		const char *v = strchr(av[i], '=');
		char *dst = NULL;
		size_t len = 0;

		if (v && strncmp(av[i], "mount_root=", 11) == 0)
			dst = mount_root, len = sizeof(mount_root);
		else if (v && strncmp(av[i], "strata_fuse=", 12) == 0)
			dst = fuse_bin, len = sizeof(fuse_bin);
		if (!dst || v[1] != '/' || strlen(v + 1) >= len) {
			slurm_error("strata: plugstack.conf: '%s' is not mount_root=/DIR or strata_fuse=/PATH",
				    av[i]);
			return -1;
		}
		snprintf(dst, len, "%s", v + 1);
	}
	return 0;
}

/* Runs argv with envp and waits; returns its exit status, or -1. */
static int run_wait(char *const argv[], char *const envp[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execve(argv[0], argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int get_env(spank_t sp, const char *name, char *buf, int len)
{
	return spank_getenv(sp, name, buf, len) == ESPANK_SUCCESS && buf[0] ? 0 : -1;
}

static void remove_dirs(void)
{
	if (mountpoint[0] && rmdir(mountpoint) < 0 && errno != ENOENT)
		slurm_error("strata: cannot remove '%s': %s", mountpoint, strerror(errno));
	if (parent[0] && rmdir(parent) < 0 && errno != ENOENT)
		slurm_error("strata: cannot remove '%s': %s", parent, strerror(errno));
	mountpoint[0] = parent[0] = 0;
}

/* A mount that cannot be made: logged, and said to the step in
 * STRATA_MOUNT_ERROR. The step runs without it: a plugin's error here
 * would fail the batch step, and slurmd drains the node for that. */
static int mount_failed(spank_t sp, const char *why)
{
	slurm_error("strata: %s", why);
	spank_setenv(sp, "STRATA_MOUNT_ERROR", why, 1);
	remove_dirs();
	return 0;
}

/* In slurmstepd, as root, before the step's tasks: mount. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char vol[PATH_MAX], mgmt[512], dir[sizeof(mountpoint) + PATH_MAX], step[16];
	char env_token[STRATA_ENV_MAX + 16], env_mgmt[sizeof(mgmt) + 16], why[PATH_MAX * 2 + 256];
	uint32_t job = 0, stepid = 0;
	uid_t uid;
	gid_t gid;
	int rc;

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !mount_wanted)
		return 0;
	if (get_env(sp, "STRATA_VOLUME", vol, sizeof(vol)))
		return 0;		/* not a job of Strata's burst buffer */
	memcpy(env_token, "STRATA_TOKEN=", 13);
	if (get_env(sp, "STRATA_TOKEN", env_token + 13, STRATA_ENV_MAX) ||
	    get_env(sp, "STRATA_MGMT", mgmt, sizeof(mgmt)))
		return mount_failed(sp, "the job has STRATA_VOLUME but no STRATA_TOKEN or STRATA_MGMT: not mounted");
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return mount_failed(sp, "cannot read the job's id, step and user: not mounted");
	if (stepid == SLURM_BATCH_SCRIPT)
		snprintf(step, sizeof(step), "batch");
	else
		snprintf(step, sizeof(step), "%u", stepid);
	snprintf(parent, sizeof(parent), "%s/strata-%u.%s", mount_root, job, step);
	snprintf(mountpoint, sizeof(mountpoint), "%s/mnt", parent);
	if (mkdir(parent, 0700) < 0 || chown(parent, uid, gid) < 0 || mkdir(mountpoint, 0700) < 0 ||
	    chown(mountpoint, uid, gid) < 0) {
		snprintf(why, sizeof(why), "cannot make the mount point '%s': %s", mountpoint,
			 strerror(errno));
		return mount_failed(sp, why);
	}
	snprintf(env_mgmt, sizeof(env_mgmt), "STRATA_MGMT=%s", mgmt);
	{
		/* The token travels in the environment, never in argv (ps). */
		char *argv[] = { fuse_bin, mountpoint, "-o", "allow_other", "--timeout", "30", NULL };
		char *envp[] = { env_token, env_mgmt, "PATH=/usr/bin:/bin", NULL };

		rc = run_wait(argv, envp);
	}
	memset(env_token, 0, sizeof(env_token));
	if (rc) {
		snprintf(why, sizeof(why), "strata-fuse '%s' could not mount the volume on '%s' (exit %d; its reason is in slurmd's log)",
			 fuse_bin, mountpoint, rc);
		return mount_failed(sp, why);
	}
	snprintf(dir, sizeof(dir), "%s%s", mountpoint, vol);
	spank_setenv(sp, "STRATA_MOUNT", mountpoint, 1);
	spank_setenv(sp, "STRATA_VOLUME_DIR", dir, 1);
	slurm_info("strata: job %u step %s: volume %s mounted on %s", job, step, vol, mountpoint);
	return 0;
}

/* At the step's end (as root): unmount, lazily (a process of the job may
 * still hold a file), and remove the mount point. */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	char *argv[] = { "/usr/bin/fusermount3", "-u", "-z", mountpoint, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };

	(void)ac;
	(void)av;
	if (!spank_remote(sp) || !parent[0])
		return 0;
	if (run_wait(argv, envp)) {
		slurm_error("strata: cannot unmount '%s'", mountpoint);
		return 0;
	}
	remove_dirs();
	return 0;
}
