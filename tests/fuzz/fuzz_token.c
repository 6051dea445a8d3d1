/*
 * libFuzzer target: token text from a client or a file (token_split), the
 * claims a daemon decodes at HELLO (token_parse_claims), and a whole
 * token checked with a key (token_verify). Built and run by
 * scripts/fuzz.sh.
 *
 * Properties checked: no crash or sanitizer report; results are 0 or
 * -EINVAL (-EKEYREJECTED for token_verify, -ENOMEM aside) with a message
 * on error; claims that parse pass token_claims_check, and signing them
 * again gives a token that verifies to the same claims.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct cluster_key key = { { 7, 1, 2, 3 } };
	struct token_claims c, again;
	uint8_t secret[TOKEN_SECRET_LEN];
	char *text = malloc(size + 5), err[512], *signed_text = NULL;
	const char *sp;
	size_t sl;
	int rc;

	if (!text)
		return 0;
	/* As given (a token file's text), NUL-terminated. */
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	rc = token_split(text, &sp, &sl, secret, err, sizeof(err));
	CHECK(rc == 0 || (rc == -EINVAL && err[0]));
	rc = token_verify(&key, text, &c, err, sizeof(err));
	CHECK(rc == 0 || rc == -EINVAL || rc == -EKEYREJECTED || rc == -ENOMEM);
	/* As the signed part of a HELLO: "st1." and the bytes. */
	memcpy(text, "st1.", 4);
	memcpy(text + 4, data, size);
	err[0] = '\0';
	rc = token_parse_claims(text, size + 4, &c, err, sizeof(err));
	CHECK(rc == 0 || rc == -ENOMEM || (rc == -EINVAL && err[0]));
	if (rc == 0) {
		CHECK(token_claims_check(&c, NULL, 0) == 0);
		CHECK(memchr(c.tenant, '\0', sizeof(c.tenant)) != NULL);
		if (token_sign(&key, &c, &signed_text) == 0) {
			CHECK(token_verify(&key, signed_text, &again, NULL, 0) == 0);
			CHECK(!strcmp(again.id, c.id) && !strcmp(again.tenant, c.tenant));
			CHECK(again.uid == c.uid && again.flags == c.flags && again.exp == c.exp);
			CHECK(again.npaths == c.npaths && again.nmems == c.nmems);
			free(signed_text);
		}
	}
	free(text);
	return 0;
}
