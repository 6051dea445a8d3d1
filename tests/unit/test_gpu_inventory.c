/*
 * Unit tests of a compute node's GPU inventory (src/compute/gpu_inventory.c):
 * declarations in config, every malformed one refused with the part named,
 * model names from NVML device names, and the NVML probe on a machine
 * without the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "compute/gpu_inventory.h"

static void test_decl(void **state)
{
	struct gpu_inventory inv;
	char err[256];

	(void)state;
	assert_int_equal(gpu_parse_decl("4xH100-80GB", &inv, err, sizeof(err)), 0);
	assert_int_equal(inv.n, 4);
	assert_string_equal(inv.source, "config");
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(inv.gpus[i].index, i);
		assert_string_equal(inv.gpus[i].model, "H100-80GB");
		assert_int_equal(inv.gpus[i].memory, 80ull << 30);
		assert_int_equal(inv.gpus[i].state, GPU_FREE);
	}
	assert_int_equal(gpu_parse_decl(" 2xA100-40GB, 1xL4 ", &inv, err, sizeof(err)), 0);
	assert_int_equal(inv.n, 3);
	assert_string_equal(inv.gpus[1].model, "A100-40GB");
	assert_int_equal(inv.gpus[1].memory, 40ull << 30);
	assert_string_equal(inv.gpus[2].model, "L4");
	assert_int_equal(inv.gpus[2].memory, 0);
	assert_int_equal(inv.gpus[2].index, 2);
	assert_int_equal(gpu_parse_decl("", &inv, err, sizeof(err)), 0);
	assert_int_equal(inv.n, 0);
	assert_string_equal(gpu_state_name(GPU_COMPOSED), "composed");
	assert_string_equal(gpu_state_name(GPU_FAILED), "failed");
}

static void test_decl_refused(void **state)
{
	static const struct { const char *text, *says; } bad[] = {
		{ "H100", "'H100' is not COUNTxMODEL" },
		{ "0xH100", "'0' is not a count of GPUs in 1..64" },
		{ "65xH100", "'65' is not a count" },
		{ "-1xH100", "'-1' is not a count" },
		{ "4x", "a model of 1..63 characters is needed after '4x'" },
		{ "4xH 100", "model 'H 100' may hold only" },
		{ "4xH100,,", "'' is not COUNTxMODEL" },
		{ "40xA,40xB", "more than 64 GPUs on one node" },
		{ "x4", "'x4' is not COUNTxMODEL" },
	};
	struct gpu_inventory inv;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(gpu_parse_decl(bad[i].text, &inv, err, sizeof(err)), -EINVAL);
		if (!strstr(err, bad[i].says))
			fail_msg("'%s': '%s' does not say '%s'", bad[i].text, err, bad[i].says);
		assert_int_equal(inv.n, 0);
	}
}

static void test_model_from_name(void **state)
{
	char m[GPU_MODEL_MAX + 1];

	(void)state;
	gpu_model_from_name("NVIDIA H100 80GB HBM3", m, sizeof(m));
	assert_string_equal(m, "H100-80GB-HBM3");
	gpu_model_from_name("Tesla T4 (rev/a)", m, sizeof(m));
	assert_string_equal(m, "Tesla-T4-reva");
	gpu_model_from_name("NVIDIA A100-SXM4-40GB", m, sizeof(m));
	assert_string_equal(m, "A100-SXM4-40GB");
}

/* Without libnvidia-ml the probe says so and offers nothing; with it (a
 * GPU machine) it must find devices with names. */
/* compute.zone: a short name of [A-Za-z0-9._-]. */
static void test_zone_names(void **state)
{
	char longest[GPU_ZONE_MAX + 2];

	(void)state;
	assert_true(gpu_zone_ok("default"));
	assert_true(gpu_zone_ok("rack-1.row_2"));
	memset(longest, 'z', sizeof(longest));
	longest[GPU_ZONE_MAX] = 0;
	assert_true(gpu_zone_ok(longest));
	longest[GPU_ZONE_MAX] = 'z';
	longest[GPU_ZONE_MAX + 1] = 0;
	assert_false(gpu_zone_ok(longest));
	assert_false(gpu_zone_ok(""));
	assert_false(gpu_zone_ok("rack 1"));
	assert_false(gpu_zone_ok("a/b"));
	assert_false(gpu_zone_ok("zone\n"));
}

static void test_nvml_probe(void **state)
{
	struct gpu_inventory inv;
	char err[256] = "";
	int rc = gpu_probe_nvml(&inv, err, sizeof(err));

	(void)state;
	if (rc == -ENOENT) {
		assert_int_equal(inv.n, 0);
		assert_string_equal(inv.source, "none");
		return;
	}
	if (rc)
		fail_msg("NVML present but failed: %s", err);
	assert_string_equal(inv.source, "nvml");
	assert_true(inv.n > 0);
	for (uint32_t i = 0; i < inv.n; i++) {
		assert_true(inv.gpus[i].model[0] != 0);
		print_message("GPU %u: %s, %llu bytes, %s\n", inv.gpus[i].index, inv.gpus[i].model,
			      (unsigned long long)inv.gpus[i].memory,
			      gpu_state_name(inv.gpus[i].state));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decl),
		cmocka_unit_test(test_decl_refused),
		cmocka_unit_test(test_model_from_name),
		cmocka_unit_test(test_zone_names),
		cmocka_unit_test(test_nvml_probe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
