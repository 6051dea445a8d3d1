/*
 * What a composition makes in the cluster (composer_int.h): its volume (a
 * directory with a byte quota, made through the meta service's own
 * operations with the cluster key), its credential (a token signed by
 * mgmt's registry, so that it can be revoked) and their removal. All on
 * the composer's owner thread, with blocking calls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/fsutil.h"
#include "common/log.h"
#include "composer/composer_int.h"
#include "net/rpc.h"
#include "proto/meta.h"
#include "proto/mgmt.h"
#include "strata/errors.h"
#include "strata/strata.h"

#define ATTACH_TIMEOUT_MS 10000

void comp_volume_path(const struct composer *c, const struct comp *comp, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", strcmp(c->cfg.volumes, "/") ? c->cfg.volumes : "", comp->id);
}

static int resolve(struct composer *c, const char *path, struct mt_handle *h)
{
	struct proto_sync s = { .timeout_ms = ATTACH_TIMEOUT_MS };
	struct mt_inode in;
	int rc = md_resolve_call_sync(c->cl, c->meta, &(struct mt_resolve){ pstr_c(path), 0 }, &s,
				      &in);

	if (!rc)
		*h = (struct mt_handle){ in.ino, in.gen };
	return rc;
}

/* Makes dir/name (an existing directory is fine); *h its handle. */
static int make_dir(struct composer *c, const char *parent, const char *name, uint32_t mode,
		    uint32_t uid, uint32_t gid, struct mt_handle *h)
{
	struct proto_sync s = { .timeout_ms = ATTACH_TIMEOUT_MS };
	struct mt_handle dir;
	struct mt_inode in;
	char path[FSU_PATH_MAX];
	int rc = resolve(c, parent, &dir);

	if (rc)
		return rc;
	rc = md_mkdir_call_sync(c->cl, c->meta,
				&(struct mt_create){ dir, pstr_c(name), mode, uid, gid, 0, { 0, 0 } }, &s,
				&in);
	if (!rc) {
		*h = (struct mt_handle){ in.ino, in.gen };
		return 0;
	}
	if (rc != -EEXIST)
		return rc;
	snprintf(path, sizeof(path), "%s/%s", strcmp(parent, "/") ? parent : "", name);
	return resolve(c, path, h);
}

int attach_volume(struct composer *c, const struct comp *comp, char *err, size_t errlen)
{
	struct proto_sync s = { .timeout_ms = ATTACH_TIMEOUT_MS };
	const char *vols = c->cfg.volumes;
	struct mt_handle root, vol;
	struct mt_quota q;
	int rc;

	if (!c->meta[0]) {
		snprintf(err, errlen, "no meta service is up in the cluster map");
		return STRATA_EUNAVAIL;
	}
	/* The volumes' directory: made once, only root may create in it. */
	rc = strcmp(vols, "/") ? make_dir(c, "/", vols + 1, 0755, 0, 0, &root)
			       : resolve(c, "/", &root);
	if (!rc)
		rc = make_dir(c, vols, comp->id, 0700, comp->owner_uid, comp->owner_gid, &vol);
	if (rc) {
		snprintf(err, errlen, "cannot make the volume '%s/%s': %s", vols, comp->id,
			 strata_strerror(rc));
		return rc;
	}
	rc = md_quota_set_call_sync(c->cl, c->meta,
				    &(struct mt_quota_set){ vol, comp->rq.storage, 0 }, &s, &q);
	if (rc)
		snprintf(err, errlen, "cannot set the quota of the volume '%s/%s': %s", vols,
			 comp->id, strata_strerror(rc));
	return rc;
}

/* libstrata with the process's credential (the cluster key), made on
 * first use: removing a tree is its fsu_rmtree. */
static int fs_connect(struct composer *c)
{
	struct strata_opts o;

	if (c->fs)
		return 0;
	strata_opts_init(&o, sizeof(o));
	o.token = "";		/* none: the process default, the cluster key */
	o.timeout_ms = ATTACH_TIMEOUT_MS;
	o.retry_ms = ATTACH_TIMEOUT_MS;
	o.io_threads = 1;
	return strata_connect(c->mgmt, &o, &c->fs);
}

int detach_volume(struct composer *c, const struct comp *comp, char *err, size_t errlen)
{
	char path[FSU_PATH_MAX];
	int rc = fs_connect(c);

	comp_volume_path(c, comp, path, sizeof(path));
	if (!rc)
		rc = fsu_rmtree(c->fs, path);
	if (rc == -ENOENT)
		rc = 0;
	if (rc)
		snprintf(err, errlen, "cannot remove the volume '%s': %s", path, strata_strerror(rc));
	return rc;
}

/* The mgmt that signs and revokes: the one beside this composer when it
 * follows the mgmt leader (it serves only while that one leads), else
 * mgmt.address. */
static const char *mgmt_writer(const struct composer *c)
{
	return c->follows ? c->env.addr : c->mgmt;
}

int attach_credential(struct composer *c, const struct comp *comp, char **text, char *err,
		      size_t errlen)
{
	struct proto_sync s = { .timeout_ms = ATTACH_TIMEOUT_MS };
	struct token_claims cl;
	struct mg_token rep;
	struct bbuf body;
	char *json = NULL;
	int rc;

	*text = NULL;
	token_claims_init(&cl);
	snprintf(cl.id, sizeof(cl.id), "%s", comp->token_id);
	snprintf(cl.tenant, sizeof(cl.tenant), "%s", comp->tenant);
	/* The credential acts as the job's owner (nobody when not given). */
	cl.uid = comp->owner_uid;
	cl.gids[0] = comp->owner_gid;
	cl.ngids = 1;
	if (comp->rq.storage) {
		comp_volume_path(c, comp, cl.paths[0].prefix, sizeof(cl.paths[0].prefix));
		cl.paths[0].write = true;
		cl.npaths = 1;
	}
	for (uint32_t i = 0; i < comp->npaths; i++)
		cl.paths[cl.npaths++] = comp->paths[i];
	if (comp->rq.memory) {
		snprintf(cl.mems[0].ns, sizeof(cl.mems[0].ns), "%s", comp->id);
		cl.mems[0].capacity = comp->mem_share;
		cl.nmems = 1;
	}
	/* The storage caps travel in the credential: each storage daemon
	 * enforces them for it (storage/qos.h). */
	cl.qos_bw = (uint64_t)comp->qos_mbps << 20;
	cl.qos_iops = comp->qos_iops;
	cl.exp = comp->expires;
	rc = token_claims_check(&cl, err, errlen);
	if (!rc)
		rc = token_claims_to_json(&cl, &json);
	if (rc) {
		if (!err[0])
			snprintf(err, errlen, "cannot write the credential's claims: %s",
				 strata_strerror(rc));
		return rc;
	}
	bbuf_init(&body);
	s.body = &body;
	rc = mg_token_create_call_sync(c->cl, mgmt_writer(c), &(struct mg_token_create){ pstr_c(json) },
				       &s, &rep);
	if (!rc && !(*text = strndup(rep.token.p, rep.token.len)))
		rc = -ENOMEM;
	if (rc)
		snprintf(err, errlen, "mgmt '%s' did not sign the credential: %s", mgmt_writer(c),
			 strata_strerror(rc));
	if (body.buf)
		memset(body.buf, 0, body.len);
	bbuf_release(&body);
	free(json);
	return rc;
}

int detach_credential(struct composer *c, const struct comp *comp, char *err, size_t errlen)
{
	struct proto_sync s = { .timeout_ms = ATTACH_TIMEOUT_MS };
	struct proto_void none;
	int rc;

	if (!comp->token_id[0])
		return 0;
	rc = mg_token_revoke_call_sync(c->cl, mgmt_writer(c),
				       &(struct mg_token_id){ .id = pstr_c(comp->token_id) }, &s, &none);
	if (rc == -ENOENT)
		rc = 0;
	if (rc)
		snprintf(err, errlen, "cannot revoke the credential %s: %s", comp->token_id,
			 strata_strerror(rc));
	return rc;
}

int volumes_consumed(struct composer *c, const char **paths, uint64_t *bytes, uint32_t n)
{
	struct bbuf body;
	struct proto_sync s = { .timeout_ms = ATTACH_TIMEOUT_MS, .body = &body };
	struct mt_quota_list_rep rep;
	uint64_t after = 0;
	bool eof = false;
	int rc = 0;

	for (uint32_t i = 0; i < n; i++)
		bytes[i] = UINT64_MAX;
	if (!c->meta[0])
		return STRATA_EUNAVAIL;
	bbuf_init(&body);
	while (!eof && !rc) {
		rc = md_quota_list_call_sync(c->cl, c->meta,
					     &(struct mt_quota_list){ after, MD_QUOTA_LIST_MAX }, &s,
					     &rep);
		if (rc)
			break;
		for (uint32_t k = 0; k < rep.ents_n; k++) {
			const struct mt_quota_ent *e = &rep.ents[k];

			for (uint32_t i = 0; i < n; i++)
				if (strlen(paths[i]) == e->path.len &&
				    !memcmp(paths[i], e->path.p, e->path.len))
					bytes[i] = e->quota.bytes;
			after = e->quota.ino;
		}
		eof = rep.eof || !rep.ents_n;
		mt_quota_list_rep_release(&rep);
	}
	bbuf_release(&body);
	return rc;
}

