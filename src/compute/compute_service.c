/*
 * The compute service: runs on a GPU host and reports what the composer
 * may give to jobs, its GPUs (declared in `compute.gpus`, else read from
 * NVML when the library is present) and its host memory, in its STATUS
 * (services[].gpus). It announces itself to mgmt like meta and mem
 * (mgmt/announce.h), so it is listed in the cluster map as a compute
 * service while its lease holds; the composer reads the map to find the
 * compute nodes and their STATUS for the GPUs, and marks the compositions
 * of a node whose lease ran out Degraded.
 *
 * The inventory is read once at start and never changes, so status runs
 * on any thread without a lock. Its network interfaces (NICs) are read
 * from /sys/class/net at each STATUS (name, state, link speed): the
 * composer lists them per node. The node's zone (`compute.zone`, e.g. its
 * rack) travels in the STATUS too: the composer keeps a composition's
 * GPUs in one zone when asked.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors_int.h"
#include "common/log.h"
#include "compute/compute_service.h"
#include "compute/gpu_inventory.h"
#include "mgmt/announce.h"
#include "strata/errors.h"

struct compute_cfg {
	char gpus[CFG_STR_MAX];
	char failed[CFG_STR_MAX];
	uint64_t host_memory;
	char zone[CFG_STR_MAX];
};

struct compute {
	struct gpu_inventory inv;
	uint64_t host_memory;
	char zone[GPU_ZONE_MAX + 1];
	struct announcer *ann;
};

/* compute.failed: comma-separated GPU indices reported failed. */
static int mark_failed(struct gpu_inventory *inv, const char *list)
{
	const char *p = list;

	while (*p) {
		char *end;
		long idx;

		errno = 0;
		idx = strtol(p, &end, 10);
		if (errno || end == p || idx < 0 || (uint32_t)idx >= inv->n ||
		    (*end && *end != ',')) {
			log_error("compute", "compute.failed: '%s' is not a list of GPU indices below %u",
				  list, inv->n);
			return STRATA_ECONFIG;
		}
		inv->gpus[idx].state = GPU_FAILED;
		p = *end ? end + 1 : end;
	}
	return 0;
}

static int load_gpus(const struct compute_cfg *cfg, struct gpu_inventory *inv)
{
	char err[256] = "";
	int rc;

	if (cfg->gpus[0]) {
		rc = gpu_parse_decl(cfg->gpus, inv, err, sizeof(err));
		if (rc) {
			log_error("compute", "%s", err);
			return STRATA_ECONFIG;
		}
		return 0;
	}
	rc = gpu_probe_nvml(inv, err, sizeof(err));
	if (rc == -ENOENT) {
		log_info("compute", "no GPU declared (compute.gpus) and no NVML: this node offers none");
		return 0;
	}
	if (rc)
		log_warn("compute", "%s: this node offers no GPU", err);
	return 0;
}

static int compute_start(const struct service_env *env, void **out)
{
	const struct compute_cfg *cfg = env->cfg;
	struct compute *c = calloc(1, sizeof(*c));
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	int rc;

	if (!c)
		return -ENOMEM;
	rc = load_gpus(cfg, &c->inv);
	if (!rc)
		rc = mark_failed(&c->inv, cfg->failed);
	if (rc)
		goto fail;
	snprintf(c->zone, sizeof(c->zone), "%s", cfg->zone);
	c->host_memory = cfg->host_memory ? cfg->host_memory :
			 (pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0);
	rc = announce_start(env, CM_SVC_COMPUTE, &c->ann);
	if (rc) {
		log_error("compute", "cannot announce the compute service to mgmt '%s': %s",
			  env->mgmt_addr, strata_strerror(rc));
		goto fail;
	}
	log_info("compute", "%u GPU(s) from %s%s%s, %llu MiB of host memory, zone '%s'", c->inv.n,
		 c->inv.source, c->inv.n ? ", first " : "", c->inv.n ? c->inv.gpus[0].model : "",
		 (unsigned long long)(c->host_memory >> 20), c->zone);
	*out = c;
	return 0;
fail:
	free(c);
	return rc;
}

static void compute_stop(void *svc)
{
	struct compute *c = svc;

	announce_stop(c->ann);
	free(c);
}

#define NIC_MAX 32
#define SYS_NET "/sys/class/net"

/* One line of a sysfs file of interface name into buf ("" when absent). */
static void nic_attr(const char *name, const char *attr, char *buf, size_t cap)
{
	char path[256];
	FILE *f;

	buf[0] = '\0';
	if (snprintf(path, sizeof(path), SYS_NET "/%s/%s", name, attr) >= (int)sizeof(path))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(buf, (int)cap, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

/* The host's network interfaces but loopback: name, operstate, link speed
 * in Mb/s (0 when the driver does not say, as for virtual links). */
static json_t *nics_json(void)
{
	json_t *a = json_array();
	DIR *d = opendir(SYS_NET);
	struct dirent *e;
	char state[32], speed[32];
	size_t n = 0;

	while (d && a && (e = readdir(d)) && n < NIC_MAX) {
		long v;
		char *end;

		if (e->d_name[0] == '.' || !strcmp(e->d_name, "lo"))
			continue;
		nic_attr(e->d_name, "operstate", state, sizeof(state));
		nic_attr(e->d_name, "speed", speed, sizeof(speed));
		errno = 0;
		v = strtol(speed, &end, 10);
		if (errno || end == speed || *end || v < 0)
			v = 0;
		json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "name", e->d_name, "state",
						   state[0] ? state : "unknown", "speed_mbps",
						   (json_int_t)v));
		n++;
	}
	if (d)
		closedir(d);
	return a;
}

static void compute_status(void *svc, json_t *o)
{
	struct compute *c = svc;
	json_t *gpus = json_array();

	for (uint32_t i = 0; i < c->inv.n; i++) {
		const struct gpu *g = &c->inv.gpus[i];

		json_array_append_new(gpus, json_pack("{s:i, s:s, s:I, s:s}", "index", (int)g->index,
						      "model", g->model, "memory",
						      (json_int_t)g->memory, "state",
						      gpu_state_name(g->state)));
	}
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "gpu_source", json_string(c->inv.source));
	json_object_set_new(o, "host_memory", json_integer((json_int_t)c->host_memory));
	json_object_set_new(o, "zone", json_string(c->zone));
	json_object_set_new(o, "nics", nics_json());
}

static void compute_metrics(void *svc, struct bbuf *out)
{
	struct compute *c = svc;
	uint32_t failed = 0;

	for (uint32_t i = 0; i < c->inv.n; i++)
		failed += c->inv.gpus[i].state == GPU_FAILED;
	metrics_put(out, "strata_compute_gpus", "gauge", "GPUs of this node", c->inv.n);
	metrics_put(out, "strata_compute_gpus_failed", "gauge", "GPUs of this node reported failed",
		    failed);
}

static int compute_check(const void *cfg, char *err, size_t errlen)
{
	const struct compute_cfg *c = cfg;

	if (!gpu_zone_ok(c->zone)) {
		snprintf(err, errlen,
			 "compute.zone: '%s' is not a zone name (1..%d letters, digits, '.', '_' or '-')",
			 c->zone, GPU_ZONE_MAX);
		return STRATA_ECONFIG;
	}
	return 0;
}

#define K(name, type, field, def, min, max, help) \
	CFG_KEY(struct compute_cfg, "compute", name, type, field, def, min, max, help)
static const struct cfg_key compute_keys[] = {
	K("gpus", CFG_STR, gpus, "", 0, 0,
	  "GPUs declared as COUNTxMODEL[,...] (e.g. 4xH100-80GB); empty: ask NVML"),
	K("failed", CFG_STR, failed, "", 0, 0, "GPU indices to report failed (e.g. 1,3)"),
	K("host_memory", CFG_SIZE, host_memory, "0", 0, 0,
	  "host memory to report; 0: the machine's"),
	K("zone", CFG_STR, zone, GPU_ZONE_DEFAULT, 0, 0,
	  "the zone of this node (e.g. a rack): compositions may keep their GPUs in one"),
};
#undef K
static const struct cfg_schema compute_schema = CFG_SCHEMA(compute_keys);

const struct service_def compute_service = {
	.name = "compute",
	.schema = &compute_schema,
	.cfg_size = sizeof(struct compute_cfg),
	.check = compute_check,
	.start = compute_start,
	.stop = compute_stop,
	.status = compute_status,
	.metrics = compute_metrics,
};
