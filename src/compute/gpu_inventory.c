/* The GPUs of a compute node (gpu_inventory.h). */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/gpu_inventory.h"

const char *gpu_state_name(uint32_t state)
{
	static const char *const names[] = { "free", "composed", "failed" };

	return state <= GPU_FAILED ? names[state] : "?";
}

static int model_char_ok(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

bool gpu_zone_ok(const char *zone)
{
	size_t n = strlen(zone);

	if (!n || n > GPU_ZONE_MAX)
		return false;
	for (; *zone; zone++)
		if (!model_char_ok((unsigned char)*zone))
			return false;
	return true;
}

/* The N of a trailing "-<N>GB" (or "<N>GB" after any separator), in
 * bytes; 0 when the model does not say. */
static uint64_t model_memory(const char *model)
{
	const char *gb = strstr(model, "GB");
	const char *p;
	uint64_t v = 0;

	if (!gb)
		return 0;
	for (p = gb; p > model && isdigit((unsigned char)p[-1]); p--)
		;
	if (p == gb)
		return 0;
	for (; p < gb; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v << 30;
}

static int add_group(const char *grp, size_t len, struct gpu_inventory *inv, char *err,
		     size_t errlen)
{
	char buf[128], *x, *end;
	long count;

	if (len == 0 || len >= sizeof(buf)) {
		snprintf(err, errlen, "compute.gpus: '%.*s' is not COUNTxMODEL (e.g. 4xH100-80GB)",
			 (int)len, grp);
		return -EINVAL;
	}
	memcpy(buf, grp, len);
	buf[len] = 0;
	x = strchr(buf, 'x');
	if (!x || x == buf) {
		snprintf(err, errlen, "compute.gpus: '%s' is not COUNTxMODEL (e.g. 4xH100-80GB)", buf);
		return -EINVAL;
	}
	*x = 0;
	errno = 0;
	count = strtol(buf, &end, 10);
	if (errno || *end || count < 1 || count > GPU_MAX) {
		snprintf(err, errlen, "compute.gpus: '%s' is not a count of GPUs in 1..%d", buf,
			 GPU_MAX);
		return -EINVAL;
	}
	if (!x[1] || strlen(x + 1) > GPU_MODEL_MAX) {
		snprintf(err, errlen, "compute.gpus: a model of 1..%d characters is needed after '%sx'",
			 GPU_MODEL_MAX, buf);
		return -EINVAL;
	}
	for (const char *m = x + 1; *m; m++) {
		if (!model_char_ok((unsigned char)*m)) {
			snprintf(err, errlen, "compute.gpus: model '%s' may hold only letters, digits, '.', '_' and '-'",
				 x + 1);
			return -EINVAL;
		}
	}
	if (inv->n + (uint32_t)count > GPU_MAX) {
		snprintf(err, errlen, "compute.gpus: more than %d GPUs on one node", GPU_MAX);
		return -EINVAL;
	}
	for (long i = 0; i < count; i++) {
		struct gpu *g = &inv->gpus[inv->n];

		memset(g, 0, sizeof(*g));
		g->index = inv->n;
		snprintf(g->model, sizeof(g->model), "%s", x + 1);
		g->memory = model_memory(g->model);
		g->state = GPU_FREE;
		inv->n++;
	}
	return 0;
}

int gpu_parse_decl(const char *text, struct gpu_inventory *inv, char *err, size_t errlen)
{
	const char *p = text ? text : "";

	memset(inv, 0, sizeof(*inv));
	inv->source = "config";
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int rc;

		while (len && *p == ' ') {
			p++;
			len--;
		}
		while (len && p[len - 1] == ' ')
			len--;
		rc = add_group(p, len, inv, err, errlen);
		if (rc) {
			memset(inv, 0, sizeof(*inv));
			return rc;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

void gpu_model_from_name(const char *name, char *out, size_t len)
{
	size_t o = 0;

	if (!len)
		return;
	if (strncmp(name, "NVIDIA ", 7) == 0)
		name += 7;
	for (; *name && o + 1 < len; name++) {
		unsigned char c = (unsigned char)*name;

		if (c == ' ')
			c = '-';
		if (model_char_ok(c))
			out[o++] = (char)c;
	}
	out[o] = 0;
}

/* The few NVML entry points used, declared here: the header is not
 * needed to build, only the library to run. */
typedef int (*nvml_void_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_name_fn)(void *, char *, unsigned int);
struct nvml_memory {
	unsigned long long total, free, used;
};
typedef int (*nvml_mem_fn)(void *, struct nvml_memory *);

int gpu_probe_nvml(struct gpu_inventory *inv, char *err, size_t errlen)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	nvml_void_fn init, shutdown;
	nvml_count_fn count;
	nvml_handle_fn handle;
	nvml_name_fn name;
	nvml_mem_fn mem;
	unsigned int n = 0;
	int rc = -ENOENT;

	memset(inv, 0, sizeof(*inv));
	inv->source = "none";
	if (!lib)
		return -ENOENT;
	*(void **)&init = dlsym(lib, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(lib, "nvmlShutdown");
	*(void **)&count = dlsym(lib, "nvmlDeviceGetCount_v2");
	*(void **)&handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = dlsym(lib, "nvmlDeviceGetName");
	*(void **)&mem = dlsym(lib, "nvmlDeviceGetMemoryInfo");
	if (!init || !shutdown || !count || !handle || !name || !mem) {
		snprintf(err, errlen, "libnvidia-ml.so.1 lacks the NVML calls needed");
		rc = -EIO;
		goto out;
	}
	if (init() != 0) {
		snprintf(err, errlen, "NVML did not initialize (is the driver loaded?)");
		rc = -EIO;
		goto out;
	}
	if (count(&n) != 0 || n == 0) {
		shutdown();
		goto out;
	}
	for (unsigned int i = 0; i < n && i < GPU_MAX; i++) {
		struct gpu *g = &inv->gpus[inv->n];
		struct nvml_memory mi = { 0 };
		char dev_name[96] = "";
		void *h = NULL;

		memset(g, 0, sizeof(*g));
		g->index = i;
		if (handle(i, &h) != 0 || name(h, dev_name, sizeof(dev_name)) != 0) {
			snprintf(g->model, sizeof(g->model), "unknown");
			g->state = GPU_FAILED;
		} else {
			gpu_model_from_name(dev_name, g->model, sizeof(g->model));
			if (mem(h, &mi) == 0)
				g->memory = mi.total;
			g->state = GPU_FREE;
		}
		inv->n++;
	}
	shutdown();
	inv->source = "nvml";
	rc = 0;
out:
	dlclose(lib);
	return rc;
}
