/*
 * The file commands of the strata CLI (ls, stat, mkdir, rm, mv, cat, du,
 * setlayout, getlayout in cmd_fs.c; put, get, cp in cmd_copy.c; status in
 * cmd_status.c; quota in cmd_quota.c):
 * helpers they share. Private to src/cli.
 */
#ifndef STRATA_CLI_CLI_FS_H
#define STRATA_CLI_CLI_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/rpc.h"
#include "strata/strata.h"

/* Long options that take a value and have no letter. */
enum {
	FS_OPT_MGMT = 256,
	FS_OPT_DIR,
	FS_OPT_CHUNK,
	FS_OPT_STRIPE,
	FS_OPT_TOKEN,
};

/* The parsed command line of one file command. */
struct fs_args {
	const char *cmd;	/* argv[0]: the subcommand's name */
	const char *mgmt;	/* --mgmt ADDR */
	const char *dir;	/* --dir DIR of 'strata local up' */
	const char *token;	/* --token TOKEN or FILE */
	bool flag[128];		/* single-letter flags seen, e.g. flag['r'] */
	const char *val[128];	/* the values of letters that take one ('j') */
	const char *chunk_size;	/* --chunk-size */
	const char *stripe;	/* --stripe */
	char **pos;		/* positional arguments (point into argv) */
	int npos;
	const void *ctx;	/* the command's own, for its per-path function
				 * (chmod's mode, chown's owner) */
};

/* Parses argv (argv[0] = the command) with getopt_long. letters: the short
 * options the command takes, getopt style ("lr", "j:q"); their long forms
 * (--recursive, --jobs, ...) are accepted as well. layout: accept
 * --chunk-size and --stripe. Every command takes --mgmt, --dir and
 * --token.
 * Returns 0, or 2 after printing a usage error. */
int fs_parse(int argc, char **argv, const char *letters, bool layout, struct fs_args *a);

/* Finds the cluster by the rule of strata_find_mgmt (strata/locate.h:
 * --mgmt, an address or a 'strata local up' directory, else --dir, else
 * $STRATA_MGMT) and the credential by strata_find_token's (--token,
 * $STRATA_TOKEN, $STRATA_TOKEN_FILE, DIR/admin.token) and connects. Returns 0 and *out (the caller disconnects
 * it), 1 when the cluster cannot be found or reached, or 2 when none was
 * named (each reported on stderr). */
int fs_connect(const struct fs_args *a, struct strata **out);
/* fs_connect that also leaves the mgmt address it used in addr. */
int fs_connect_at(const struct fs_args *a, struct strata **out, char *addr, size_t len);
/* The mgmt address the command names, into addr: of a list (the control
 * daemons of a cluster whose mgmt is on PostgreSQL), the leader
 * (cli_mgmt_leader). Returns 0, 1 or 2 as fs_connect (reported). */
int fs_mgmt_addr(const struct fs_args *a, char *addr, size_t len);
/* When addr (len bytes) is a comma-separated list of mgmt addresses,
 * replaces it by the leader's (its STATUS says "leader"), else by the
 * first that answers (a follower: it serves reads of the map), else by
 * the first. */
void cli_mgmt_leader(struct rpc_client *cl, char *addr, size_t len);

/* fs_mgmt_addr, then an RPC client (named name) presenting the command's
 * credential (cli_rpc_client). Returns 0 and *cl, or 1 or 2 (reported). */
int fs_mgmt_client(const struct fs_args *a, const char *name, uint32_t timeout_ms, char *addr,
		   size_t len, struct rpc_client **cl);

/* Normalizes a cluster path: absolute ("a/b" is "/a/b"), no repeated or
 * trailing '/', "." and ".." resolved lexically. Returns a malloc'd string
 * (the caller frees it) or NULL when out of memory. */
char *fs_norm(const char *path);
/* dir + "/" + name (one '/' between them). Returns a malloc'd string or
 * NULL when out of memory. */
char *fs_join(const char *dir, const char *name);
/* The last component of path ("" for "/"); points into path, which must
 * have no trailing '/' unless it is "/". */
const char *fs_base(const char *path);

/* mkdir -p in the cluster: every missing component of path (normalized);
 * existing directories are fine. Returns 0, or -ENOTDIR when a component
 * is not a directory, -EEXIST when path is something else, or another
 * error of strata_mkdir. */
int fs_mkdir_p(struct strata *s, const char *path);

/* Reads every entry of the cluster directory path, sorted by name.
 * Returns the count (>= 0) and *ents (the caller frees it; NULL when
 * empty) or a negative error. */
ssize_t fs_list(struct strata *s, const char *path, struct strata_dirent **ents);

/* Prints "strata: cannot VERB 'PATH': REASON" (REASON from
 * strata_strerror(err)) as one write, safe from several threads. */
void fs_fail(const char *verb, const char *path, int err);

/* Formats bytes as "1.5 GiB" (or "512 B") into buf. Returns buf. */
const char *fs_human(uint64_t bytes, char *buf, size_t len);

/* put, get and cp (cmd_copy.c), status (cmd_status.c). argv[0] is the
 * command. Return the exit status: 0 ok, 1 some operation failed, 2
 * usage. */
int fs_cmd_put(int argc, char **argv);
int fs_cmd_get(int argc, char **argv);
int fs_cmd_cp(int argc, char **argv);
int fs_cmd_status(int argc, char **argv);
/* quota set|get (cmd_quota.c). */
int fs_cmd_quota(int argc, char **argv);
/* Prints the quota roots with their usage, for status: 0, or a negative
 * error (-EACCES without an admin token) with nothing printed. Reports
 * nothing itself but a cluster it cannot reach. */
int fs_quota_roots(const struct fs_args *a);

#endif
