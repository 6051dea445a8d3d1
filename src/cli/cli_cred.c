/* The credential of a CLI command (cli.h): found by strata_find_token. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "net/proto.h"
#include "strata/errors.h"
#include "strata/locate.h"
#include "strata/strata.h"

char *cli_find_token(const char *token, const char *mgmt, const char *dir)
{
	char *text = malloc(TOKEN_TEXT_MAX + 2);
	int rc;

	if (!text) {
		cli_err("out of memory");
		return NULL;
	}
	rc = strata_find_token(token, mgmt, dir, text, TOKEN_TEXT_MAX + 2);
	if (rc == -EPERM)
		cli_err("cannot use the token file: it must be a regular file only its owner "
			"can read (chmod 600)");
	else if (rc)
		cli_err("cannot read the token: %s", strata_strerror(rc));
	if (rc) {
		free(text);
		return NULL;
	}
	return text;
}

int cli_find_cred(const char *token, const char *mgmt, const char *dir, struct net_cred *out)
{
	char *text = cli_find_token(token, mgmt, dir), err[256];
	int rc = 0;

	net_cred_init(out);
	if (!text)
		return 1;
	if (text[0] && net_cred_from_token(out, text, err, sizeof(err))) {
		cli_err("unusable token: %s", err);
		rc = 1;
	}
	free(text);
	return rc;
}

int cli_rpc_client(const char *name, uint32_t timeout_ms, const char *token, const char *mgmt,
		   const char *dir, struct rpc_client **out)
{
	struct net_cred cred;
	int rc;

	if (cli_find_cred(token, mgmt, dir, &cred))
		return 1;
	rc = rpc_client_new(name, timeout_ms, out);
	if (!rc && cred.kind != NET_CRED_NONE && (rc = rpc_pool_set_cred(rpc_client_pool(*out), &cred))) {
		rpc_client_free(*out);
		*out = NULL;
	}
	net_cred_release(&cred);
	if (rc)
		cli_err("cannot start an RPC client: %s", strata_strerror(rc));
	return rc ? 1 : 0;
}

int cli_connect(const char *mgmt, const char *dir, struct strata **out)
{
	struct strata_opts o;

	strata_opts_init(&o, sizeof(o));
	return cli_connect_opts(mgmt, dir, &o, out);
}

int cli_connect_opts(const char *mgmt, const char *dir, struct strata_opts *o,
		     struct strata **out)
{
	char *text = malloc(TOKEN_TEXT_MAX + 2), path[4096];
	int rc;

	if (!text)
		return -ENOMEM;
	if (dir)
		snprintf(path, sizeof(path), "%s/admin.token", dir);
	rc = strata_find_token(dir ? path : NULL, NULL, NULL, text, TOKEN_TEXT_MAX + 2);
	o->token = text;
	if (!rc)
		rc = strata_connect(mgmt, o, out);
	o->token = NULL;
	free(text);
	return rc;
}

int cli_service_status(struct rpc_client *cl, const char *addr, const char *svc,
		       uint32_t timeout_ms, json_t **out)
{
	struct rpc_sync_args a = { .op = OP_STATUS, .timeout_ms = timeout_ms };
	struct rpc_result res;
	json_t *st = NULL, *svcs;
	int rc;

	*out = NULL;
	rc = rpc_call_sync(cl, addr, &a, &res);
	if (!rc) {
		st = json_loadb((const char *)res.body.buf, res.body.len, 0, NULL);
		rc = st ? -ENOENT : STRATA_EBADMSG;
	}
	rpc_result_release(&res);
	svcs = json_object_get(st, "services");
	for (size_t i = 0; i < json_array_size(svcs) && rc == -ENOENT; i++) {
		json_t *sv = json_array_get(svcs, i);

		if (strcmp(json_string_value(json_object_get(sv, "name")) ?: "", svc) == 0) {
			*out = json_incref(sv);
			rc = 0;
		}
	}
	json_decref(st);
	return rc;
}
