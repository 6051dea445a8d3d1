/* The strata command: shared helpers of its subcommands. */
#ifndef STRATA_CLI_CLI_H
#define STRATA_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "net/auth.h"
#include "net/rpc.h"

/* Each subcommand: argv[0] is the subcommand's name. Returns the exit
 * status (0 ok, 1 failure, 2 usage). */
int cmd_local(int argc, char **argv);
int cmd_ping(int argc, char **argv);
int cmd_admin(int argc, char **argv);
int cmd_rebalance(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* strata demo (cmd_demo.c): the data-ingest job end to end on a local cluster. */
int cmd_demo(int argc, char **argv);
/* strata pack (cmd_pack.c): a local directory of samples into a packed dataset. */
int cmd_pack(int argc, char **argv);
/* strata cache (cmd_cache.c): the read cache's node-wide counters. */
int cmd_cache(int argc, char **argv);
/* The file commands (cmd_fs.c, cmd_copy.c): ls, stat, mkdir, rm, mv, cat,
 * put, get, cp, du, setlayout, getlayout, status, quota. cmd_fs_is(name) is 1 when
 * name is one of them; cmd_fs runs the one named by argv[0]. */
int cmd_fs_is(const char *name);
int cmd_fs(int argc, char **argv);

/* Starts a local cluster in dir: a control daemon and nstorage storage
 * daemons (replication 0 = min(3, nstorage)); extra: more daemon flags,
 * space-separated, or NULL. Fills mgmt. Returns 0 or 1 (reported). */
int local_cluster_up(const char *dir, int nstorage, int replication, const char *extra,
		     char *mgmt, size_t mgmtlen);
/* The same without a cluster key: loopback daemons that trust every peer,
 * the "authentication off" twin of a benchmark. */
int local_cluster_up_keyless(const char *dir, int nstorage, int replication, const char *extra,
			     char *mgmt, size_t mgmtlen);
/* The same with the namespace and mgmt state on a local PostgreSQL server
 * ('local up --control N --meta-store postgresql'): control daemons
 * (1..16), each running mgmt and meta; mgmt is filled with their
 * addresses, comma-separated. */
int local_cluster_up_pg(const char *dir, int nstorage, int replication, int control,
			const char *extra, char *mgmt, size_t mgmtlen);
int local_cluster_down(const char *dir);

/* strata keygen and strata token create|list|revoke (cmd_token.c). */
int cmd_keygen(int argc, char **argv);
int cmd_token(int argc, char **argv);
/* strata compose inventory|create|list|show|delete (cmd_compose.c): the
 * composer's API. */
int cmd_compose(int argc, char **argv);
/* strata slurm install|gres (cmd_slurm.c): Strata under Slurm. */
int cmd_slurm(int argc, char **argv);
/* strata meta migrate, strata mgmt migrate (cmd_meta.c): a SQLite
 * namespace, or mgmt's SQLite cluster state, into PostgreSQL. argv[0] is
 * "meta" or "mgmt". */
int cmd_meta(int argc, char **argv);

/* Writes text and a newline to path, created with mode 0600 (an existing
 * file is -EEXIST). 0 or a negative error. */
int cli_write_secret(const char *path, const char *text);
struct token_claims;
/* The options of 'strata token create' besides the claims (NULL: not
 * given). */
struct cli_token_opts {
	const char *key;	/* --key FILE: sign here, offline */
	const char *out;	/* --out FILE */
	const char *mgmt;	/* without --key: mgmt signs (--mgmt, --dir, --token) */
	const char *dir;
	const char *token;
};
/* The claims of 'strata token create' from its options (argv[0]: "create"),
 * and the other options into o. 0, or 2 after a usage error. */
int cli_token_claims(int argc, char **argv, struct token_claims *c, struct cli_token_opts *o);

/* The token's text by the rule of strata_find_token ("" when no rule
 * applies): malloc'd, or NULL after reporting why it cannot be read. */
char *cli_find_token(const char *token, const char *mgmt, const char *dir);
/* The credential a command presents, by the rule of strata_find_token
 * (strata/locate.h: --token, $STRATA_TOKEN, $STRATA_TOKEN_FILE, the
 * cluster directory's admin.token) into out (NET_CRED_NONE when no rule
 * applies). Returns 0, or 1 after reporting why the token is unusable. */
int cli_find_cred(const char *token, const char *mgmt, const char *dir, struct net_cred *out);
/* rpc_client_new with that credential set on its pool. 0 or 1 (reported). */
int cli_rpc_client(const char *name, uint32_t timeout_ms, const char *token, const char *mgmt,
		   const char *dir, struct rpc_client **out);

/* The object of service svc ("mgmt", "storage", ...) in the STATUS of the
 * node at addr (OP_STATUS: JSON with "services": [{ "name": ... }]).
 * Returns 0 and *out (the caller json_decref's it), -ENOENT when the node
 * runs no such service, STRATA_EBADMSG when the reply is not that JSON, or
 * the call's negative error. Not reported. */
int cli_service_status(struct rpc_client *cl, const char *addr, const char *svc,
		       uint32_t timeout_ms, json_t **out);

struct strata;
/* strata_connect to mgmt presenting DIR/admin.token when dir is given (a
 * cluster the command started), else the token of the environment. 0 or
 * a negative error (not reported). */
int cli_connect(const char *mgmt, const char *dir, struct strata **out);
struct strata_opts;
/* cli_connect with the caller's options (its token is replaced). */
int cli_connect_opts(const char *mgmt, const char *dir, struct strata_opts *o,
		     struct strata **out);

struct json_t;
/* One call to the composer of the local cluster in dir (its address from
 * mgmt, its admin token from dir): method on path with body (JSON text,
 * or NULL). Returns 0 with *out (the caller json_decref's it), or an exit
 * status after printing the refusal (cmd_compose.c). */
int cli_compose_call(const char *dir, const char *method, const char *path, const char *body,
		     struct json_t **out);

/* The address of the composer of the cluster in dir (asked of its mgmt;
 * of several, the one that serves) into out: 0, or an exit status after
 * printing why (cmd_compose.c). */
int cli_compose_addr(const char *dir, char *out, size_t len);
/* One HTTP/1.1 request on a connection of its own to addr: method on path
 * with body (JSON text or NULL) and token ("": none) as a Bearer
 * credential. Returns the status code with *out the body parsed as JSON
 * (NULL when it is not; the caller json_decref's it), or a negative
 * error (cmd_compose.c). */
int cli_http_call(const char *addr, const char *token, const char *method, const char *path,
		  const char *body, struct json_t **out);
/* Runs argv (argv[0] a path) and waits: its exit status, or -1 after
 * printing why it could not run or was killed (cmd_demo.c). */
int cli_run_child(char *const *argv);

/* Prints "strata: " + message to stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The path of this program (/proc/self/exe) into out. Returns 0 or a
 * negative errno. */
int cli_self_path(char *out, size_t len);

/* Path of the stratad binary: $STRATA_STRATAD, else next to this program in
 * the build tree, else "stratad" on PATH. */
const char *cli_stratad_path(void);

/* Starts one stratad: data dir, extra flags (NULL-terminated), log to
 * DATA/stratad.log; waits up to timeout_ms for DATA/stratad.addr. Fills
 * addr and pid. Returns 0 or a negative error. */
int cli_spawn_daemon(const char *data, const char *const *flags, int timeout_ms,
		     char *addr, size_t addrlen, int *pid);
/* SIGTERM, wait up to timeout_ms, then SIGKILL. Returns 0 if it exited
 * cleanly on SIGTERM. */
int cli_stop_pid(int pid, int timeout_ms);
/* Whether process pid runs: a zombie (exited, not yet reaped by its
 * parent, as a daemon whose parent does not reap can stay) counts as
 * gone. */
int cli_pid_alive(int pid);

#endif
