/*
 * Unit tests of strata_find_mgmt (client/locate.c): the one rule that
 * finds a cluster -- --mgmt (an address or a 'strata local up'
 * directory), else --dir, else $STRATA_MGMT -- and its errors.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "strata/errors.h"
#include "strata/locate.h"

struct fixture {
	char dir[PATH_MAX];	/* holds cluster.json naming "10.0.0.1:7000" */
	char empty[PATH_MAX];	/* a directory without cluster.json */
	char bad[PATH_MAX];	/* cluster.json without "mgmt" */
};

static void write_file(const char *dir, const char *text)
{
	char path[PATH_MAX + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/strata-locate-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->empty, sizeof(f->empty), "/tmp/strata-locate-XXXXXX");
	assert_non_null(mkdtemp(f->empty));
	snprintf(f->bad, sizeof(f->bad), "/tmp/strata-locate-XXXXXX");
	assert_non_null(mkdtemp(f->bad));
	write_file(f->dir, "{\"mgmt\": \"10.0.0.1:7000\", \"nodes\": []}");
	write_file(f->bad, "{\"nodes\": []}");
	unsetenv("STRATA_MGMT");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/cluster.json", f->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/cluster.json", f->bad);
	unlink(path);
	rmdir(f->dir);
	rmdir(f->empty);
	rmdir(f->bad);
	unsetenv("STRATA_MGMT");
	free(f);
	return 0;
}

static void test_order(void **state)
{
	struct fixture *f = *state;
	char out[64];

	/* --mgmt wins over --dir and the environment. */
	setenv("STRATA_MGMT", "env:1", 1);
	assert_int_equal(strata_find_mgmt("h:2", f->dir, out, sizeof(out)), 0);
	assert_string_equal(out, "h:2");
	/* --dir over the environment. */
	assert_int_equal(strata_find_mgmt(NULL, f->dir, out, sizeof(out)), 0);
	assert_string_equal(out, "10.0.0.1:7000");
	/* "" is "not given". */
	assert_int_equal(strata_find_mgmt("", "", out, sizeof(out)), 0);
	assert_string_equal(out, "env:1");
	unsetenv("STRATA_MGMT");
	assert_int_equal(strata_find_mgmt(NULL, NULL, out, sizeof(out)), -EDESTADDRREQ);
	assert_string_equal(out, "");
}

static void test_directory_as_mgmt(void **state)
{
	struct fixture *f = *state;
	char out[64];

	/* A directory given where an address goes is read as one. */
	assert_int_equal(strata_find_mgmt(f->dir, NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "10.0.0.1:7000");
	setenv("STRATA_MGMT", f->dir, 1);
	assert_int_equal(strata_find_mgmt(NULL, NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "10.0.0.1:7000");
}

static void test_errors(void **state)
{
	struct fixture *f = *state;
	char out[64], tiny[4];

	assert_int_equal(strata_find_mgmt(NULL, f->empty, out, sizeof(out)), -ENOENT);
	assert_int_equal(strata_find_mgmt(f->empty, NULL, out, sizeof(out)), -ENOENT);
	assert_int_equal(strata_find_mgmt(NULL, "/nonexistent/strata", out, sizeof(out)),
			 -ENOENT);
	assert_int_equal(strata_find_mgmt(NULL, f->bad, out, sizeof(out)), STRATA_EBADMSG);
	assert_int_equal(strata_find_mgmt("host:2", NULL, tiny, sizeof(tiny)), -ENAMETOOLONG);
	assert_int_equal(strata_find_mgmt(NULL, f->dir, tiny, sizeof(tiny)), -ENAMETOOLONG);
	assert_int_equal(strata_find_mgmt("h:2", NULL, NULL, 8), -EINVAL);
	assert_int_equal(strata_find_mgmt("h:2", NULL, out, 0), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_directory_as_mgmt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
