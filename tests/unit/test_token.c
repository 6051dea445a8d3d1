/*
 * Unit tests for the cluster key and tokens (common/token.h): signing and
 * verifying, the client's split, every rejection of the claims parser,
 * what a token allows, and key files (mode, format, no overwrite).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/token.h"

static struct cluster_key key_a, key_b;

static int setup(void **state)
{
	(void)state;
	assert_int_equal(cluster_key_generate(&key_a), 0);
	assert_int_equal(cluster_key_generate(&key_b), 0);
	assert_memory_not_equal(key_a.k, key_b.k, sizeof(key_a.k));
	return 0;
}

static void sample(struct token_claims *c)
{
	token_claims_init(c);
	snprintf(c->tenant, sizeof(c->tenant), "t1");
	c->uid = 1000;
	c->ngids = 2;
	c->gids[0] = 1000;
	c->gids[1] = 27;
	c->npaths = 2;
	snprintf(c->paths[0].prefix, sizeof(c->paths[0].prefix), "/data");
	c->paths[0].write = true;
	snprintf(c->paths[1].prefix, sizeof(c->paths[1].prefix), "/models/llama");
	c->nmems = 1;
	snprintf(c->mems[0].ns, sizeof(c->mems[0].ns), "t1");
	c->mems[0].capacity = 1ull << 30;
	c->exp = 1900000000;
}

static void test_sign_verify_round_trip(void **state)
{
	struct token_claims c, back;
	char *text, err[256];
	const char *sp;
	size_t sl;
	uint8_t secret[TOKEN_SECRET_LEN], want[TOKEN_SECRET_LEN];

	(void)state;
	sample(&c);
	assert_int_equal(token_sign(&key_a, &c, &text), 0);
	assert_int_equal(strncmp(text, "st1.", 4), 0);
	assert_int_equal(token_verify(&key_a, text, &back, err, sizeof(err)), 0);
	assert_string_equal(back.id, c.id);
	assert_string_equal(back.tenant, "t1");
	assert_int_equal(back.uid, 1000);
	assert_int_equal(back.ngids, 2);
	assert_int_equal(back.gids[1], 27);
	assert_int_equal(back.npaths, 2);
	assert_true(back.paths[0].write);
	assert_false(back.paths[1].write);
	assert_int_equal(back.mems[0].capacity, 1ull << 30);
	assert_int_equal(back.exp, 1900000000);
	assert_int_equal(back.qos_bw, 0);
	assert_int_equal(back.qos_iops, 0);
	/* No caps: no "qos" claim, so the token reads as before on a daemon
	 * that knows nothing of them. */
	free(text);
	assert_int_equal(token_claims_to_json(&c, &text), 0);
	assert_null(strstr(text, "qos"));
	free(text);
	c.qos_bw = 20ull << 20;
	c.qos_iops = 500;
	assert_int_equal(token_sign(&key_a, &c, &text), 0);
	assert_int_equal(token_verify(&key_a, text, &back, err, sizeof(err)), 0);
	assert_int_equal(back.qos_bw, 20ull << 20);
	assert_int_equal(back.qos_iops, 500);
	free(text);
	c.qos_iops = TOKEN_QOS_IOPS_MAX + 1;	/* out of range: not signed */
	assert_int_equal(token_claims_check(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "qos"));
	c.qos_iops = 0;
	assert_int_equal(token_sign(&key_a, &c, &text), 0);
	/* The client's split gives the signed part and the secret a daemon
	 * recomputes from it. */
	assert_int_equal(token_split(text, &sp, &sl, secret, err, sizeof(err)), 0);
	token_secret(&key_a, sp, sl, want);
	assert_memory_equal(secret, want, sizeof(want));
	/* Another cluster's key: rejected. */
	assert_int_equal(token_verify(&key_b, text, &back, err, sizeof(err)), -EKEYREJECTED);
	/* One changed character of the claims: rejected. */
	text[10] = text[10] == 'A' ? 'B' : 'A';
	assert_int_not_equal(token_verify(&key_a, text, &back, err, sizeof(err)), 0);
	free(text);
}

static void test_split_rejects_malformed_text(void **state)
{
	static const char *const bad[] = {
		"", "st1.", "st2.abc.def", "st1.abc", "st1..AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"st1.abc.AAAA", "st1.abc.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA*",
	};
	const char *sp;
	size_t sl;
	uint8_t secret[TOKEN_SECRET_LEN];
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(token_split(bad[i], &sp, &sl, secret, err, sizeof(err)), -EINVAL);
}

/* Signs arbitrary claims JSON (as an attacker with the key could not, but
 * the parser must still refuse what is malformed). */
static int parse_json(const char *json, struct token_claims *c, char *err, size_t errlen)
{
	char text[4096] = "st1.";
	size_t n = 4;
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const unsigned char *p = (const unsigned char *)json;
	size_t len = strlen(json);

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < len ? p[i + 2] : 0);

		text[n++] = tbl[(v >> 18) & 63];
		text[n++] = tbl[(v >> 12) & 63];
		if (i + 1 < len)
			text[n++] = tbl[(v >> 6) & 63];
		if (i + 2 < len)
			text[n++] = tbl[v & 63];
	}
	text[n] = '\0';
	return token_parse_claims(text, n, c, err, errlen);
}

static void test_claims_rejections(void **state)
{
	static const char *const bad[] = {
		"[]",
		"{\"v\":2,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0}",
		"{\"v\":1,\"tenant\":\"t\",\"exp\":0}",
		"{\"v\":1,\"id\":\"0123456789ABCDEF\",\"tenant\":\"t\",\"exp\":0}",
		"{\"v\":1,\"id\":\"0123\",\"tenant\":\"t\",\"exp\":0}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"a b\",\"exp\":0}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\"}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":-1}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"extra\":1}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"uid\":-1}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"uid\":4294967296}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"admin\":1}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"paths\":[{\"prefix\":\"a\",\"access\":\"r\"}]}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"paths\":[{\"prefix\":\"/a/\",\"access\":\"r\"}]}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"paths\":[{\"prefix\":\"/a/../b\",\"access\":\"r\"}]}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"paths\":[{\"prefix\":\"/a\",\"access\":\"w\"}]}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"mem\":[{\"ns\":\"a/b\",\"capacity\":1}]}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"mem\":[{\"ns\":\"a\",\"capacity\":-1}]}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\\u0000x\",\"exp\":0}",
		/* qos: both caps, integers in range, nothing else. */
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":1}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":{\"bw\":1}}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":{\"bw\":-1,\"iops\":0}}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":{\"bw\":1.5,\"iops\":0}}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":{\"bw\":1,\"iops\":100000001}}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":{\"bw\":1099511627777,\"iops\":0}}",
		"{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0,\"qos\":{\"bw\":1,\"iops\":1,\"x\":1}}",
	};
	struct token_claims c;
	char err[256];

	(void)state;
	assert_int_equal(parse_json("{\"v\":1,\"id\":\"0123456789abcdef\",\"tenant\":\"t\",\"exp\":0}",
				    &c, err, sizeof(err)), 0);
	assert_int_equal(c.uid, TOKEN_NOBODY);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (parse_json(bad[i], &c, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
	}
}

static void test_what_a_token_allows(void **state)
{
	struct token_claims c;

	(void)state;
	sample(&c);
	assert_true(token_allows_path(&c, "/data", true));
	assert_true(token_allows_path(&c, "/data/x/y", true));
	assert_false(token_allows_path(&c, "/database", false));
	assert_true(token_allows_path(&c, "/models/llama/w.bin", false));
	assert_false(token_allows_path(&c, "/models/llama/w.bin", true));
	assert_false(token_allows_path(&c, "/", false));
	assert_non_null(token_mem_scope(&c, "t1/k", 4));
	assert_null(token_mem_scope(&c, "t2/k", 4));
	assert_null(token_mem_scope(&c, "t1", 2));
	/* Identity: root squashed unless allowed; the caller's uid only with
	 * TOKEN_F_CALLER. */
	assert_int_equal(token_effective_uid(&c, 5), 1000);
	c.flags = TOKEN_F_CALLER;
	assert_int_equal(token_effective_uid(&c, 5), 5);
	assert_int_equal(token_effective_uid(&c, 0), TOKEN_NOBODY);
	c.flags = TOKEN_F_CALLER | TOKEN_F_ROOT;
	assert_int_equal(token_effective_uid(&c, 0), 0);
	c.flags = TOKEN_F_SQUASH;
	assert_int_equal(token_effective_uid(&c, 5), TOKEN_NOBODY);
}

static void test_key_files(void **state)
{
	char dir[] = "/tmp/strata-key-XXXXXX", path[64], err[256];
	struct cluster_key k;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	assert_int_equal(cluster_key_save(path, &key_a), 0);
	assert_int_equal(cluster_key_save(path, &key_b), -EEXIST);
	assert_int_equal(cluster_key_load(path, &k, err, sizeof(err)), 0);
	assert_memory_equal(k.k, key_a.k, sizeof(k.k));
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(cluster_key_load(path, &k, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "chmod 600"));
	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not hex\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(cluster_key_load(path, &k, err, sizeof(err)), -EINVAL);
	unlink(path);
	assert_int_equal(cluster_key_load(path, &k, err, sizeof(err)), -ENOENT);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_verify_round_trip),
		cmocka_unit_test(test_split_rejects_malformed_text),
		cmocka_unit_test(test_claims_rejections),
		cmocka_unit_test(test_what_a_token_allows),
		cmocka_unit_test(test_key_files),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
