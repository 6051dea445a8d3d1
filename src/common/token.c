/* The cluster key and client tokens (token.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/token.h"

#define TOKEN_PREFIX "st1."
#define SIG_B64_LEN 43		/* 32 bytes, unpadded base64url */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

void hmac_sha256(const uint8_t *key, size_t key_len, const void *const *parts,
		 const size_t *lens, int n, uint8_t out[32])
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	size_t outl = 0;
	bool ok = ctx && EVP_MAC_init(ctx, key, key_len, params);

	for (int i = 0; ok && i < n; i++)
		ok = EVP_MAC_update(ctx, parts[i], lens[i]);
	ok = ok && EVP_MAC_final(ctx, out, &outl, 32) && outl == 32;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	if (!ok)
		abort();	/* libcrypto without SHA-256: nothing is safe */
}

bool mac_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

/* ---- base64url without padding ---- */

static size_t b64url_encode(const uint8_t *in, size_t len, char *out)
{
	int n = EVP_EncodeBlock((unsigned char *)out, in, (int)len);

	while (n > 0 && out[n - 1] == '=')
		n--;
	for (int i = 0; i < n; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	out[n] = '\0';
	return (size_t)n;
}

/* Decodes len characters of base64url into out (room for len * 3 / 4 + 3
 * bytes). Returns the length, or -1 for a character outside the alphabet
 * or an impossible length. */
static long b64url_decode(const char *in, size_t len, uint8_t *out)
{
	size_t padded = (len + 3) / 4 * 4;
	char *tmp;
	int n;

	if (len % 4 == 1)
		return -1;
	tmp = malloc(padded + 1);
	if (!tmp)
		return -1;
	for (size_t i = 0; i < len; i++) {
		char ch = in[i];

		if (ch == '-')
			ch = '+';
		else if (ch == '_')
			ch = '/';
		else if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			   (ch >= '0' && ch <= '9'))) {
			free(tmp);
			return -1;
		}
		tmp[i] = ch;
	}
	for (size_t i = len; i < padded; i++)
		tmp[i] = '=';
	n = EVP_DecodeBlock(out, (const unsigned char *)tmp, (int)padded);
	free(tmp);
	if (n < 0)
		return -1;
	return n - (long)(padded - len);	/* EVP_DecodeBlock counts the padding */
}

/* ---- the cluster key ---- */

int cluster_key_generate(struct cluster_key *k)
{
	return RAND_bytes(k->k, sizeof(k->k)) == 1 ? 0 : -EIO;
}

int cluster_key_save(const char *path, const struct cluster_key *k)
{
	char text[CLUSTER_KEY_LEN * 2 + 2];
	int fd, rc;

	for (int i = 0; i < CLUSTER_KEY_LEN; i++)
		snprintf(text + 2 * i, 3, "%02x", k->k[i]);
	text[CLUSTER_KEY_LEN * 2] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_full(fd, text, sizeof(text) - 1);
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (rc)
		unlink(path);
	return rc;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int cluster_key_load(const char *path, struct cluster_key *k, char *err, size_t errlen)
{
	char text[CLUSTER_KEY_LEN * 2 + 4];
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return fail(err, errlen, -errno, "cannot open the cluster key '%s': %s", path,
			    strerror(errno));
	if (fstat(fd, &st)) {
		int e = errno;

		close(fd);
		return fail(err, errlen, -e, "cannot stat '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		close(fd);
		return fail(err, errlen, -EPERM,
			    "the cluster key '%s' has mode %04o: it must be a regular file "
			    "only its owner can read (chmod 600)",
			    path, (unsigned)(st.st_mode & 07777));
	}
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n == CLUSTER_KEY_LEN * 2 + 1 && text[n - 1] == '\n')
		n--;
	if (n != CLUSTER_KEY_LEN * 2)
		return fail(err, errlen, -EINVAL,
			    "the cluster key '%s' is not 64 hex digits (strata keygen makes one)",
			    path);
	for (int i = 0; i < CLUSTER_KEY_LEN; i++) {
		int hi = hexval(text[2 * i]), lo = hexval(text[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return fail(err, errlen, -EINVAL,
				    "the cluster key '%s' is not 64 hex digits (strata keygen makes one)",
				    path);
		k->k[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* ---- claims ---- */

void token_claims_init(struct token_claims *c)
{
	uint8_t id[TOKEN_ID_LEN / 2];

	memset(c, 0, sizeof(*c));
	if (RAND_bytes(id, sizeof(id)) != 1)
		abort();
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(c->id + 2 * i, 3, "%02x", id[i]);
	snprintf(c->tenant, sizeof(c->tenant), "default");
	c->uid = TOKEN_NOBODY;
	c->ngids = 1;
	c->gids[0] = TOKEN_NOBODY;
}

static bool name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return strcmp(s, ".") && strcmp(s, "..");
}

/* "/" or "/a/b": absolute, no empty, "." or ".." component, no trailing /. */
bool token_path_normal(const char *p)
{
	const char *s = p;

	if (p[0] != '/')
		return false;
	if (!strcmp(p, "/"))
		return true;
	while (*s == '/') {
		const char *e = strchr(s + 1, '/');
		size_t n = e ? (size_t)(e - s - 1) : strlen(s + 1);

		if (n == 0 || (n == 1 && s[1] == '.') || (n == 2 && s[1] == '.' && s[2] == '.'))
			return false;
		if (!e)
			return true;
		s = e;
	}
	return false;
}

bool token_id_ok(const char *id)
{
	if (strnlen(id, TOKEN_ID_LEN + 1) != TOKEN_ID_LEN)
		return false;
	for (int i = 0; i < TOKEN_ID_LEN; i++)
		if (hexval(id[i]) < 0 || (id[i] >= 'A' && id[i] <= 'F'))
			return false;
	return true;
}

int token_path_parse(const char *s, struct token_path *p)
{
	const char *colon = strchr(s, ':');

	if (!colon)
		return -EINVAL;
	if (colon - s == 1 && s[0] == 'r')
		p->write = false;
	else if (colon - s == 2 && s[0] == 'r' && s[1] == 'w')
		p->write = true;
	else
		return -EINVAL;
	if (!token_path_normal(colon + 1) || strlen(colon + 1) >= sizeof(p->prefix))
		return -EINVAL;
	snprintf(p->prefix, sizeof(p->prefix), "%s", colon + 1);
	return 0;
}

int token_claims_check(const struct token_claims *c, char *err, size_t errlen)
{
	if (!token_id_ok(c->id))
		return fail(err, errlen, -EINVAL, "token id must be %d lowercase hex digits",
			    TOKEN_ID_LEN);
	if (!name_ok(c->tenant, TOKEN_TENANT_MAX))
		return fail(err, errlen, -EINVAL,
			    "tenant '%s' must be 1..%d of A-Z a-z 0-9 . _ -", c->tenant,
			    TOKEN_TENANT_MAX);
	if (c->ngids > TOKEN_GIDS_MAX || c->npaths > TOKEN_PATHS_MAX || c->nmems > TOKEN_MEMS_MAX)
		return fail(err, errlen, -EINVAL, "too many gids, paths or mem scopes");
	if (c->flags & ~(uint32_t)(TOKEN_F_SQUASH | TOKEN_F_ROOT | TOKEN_F_CALLER | TOKEN_F_ADMIN))
		return fail(err, errlen, -EINVAL, "unknown token flags 0x%x", c->flags);
	for (uint32_t i = 0; i < c->npaths; i++)
		if (!token_path_normal(c->paths[i].prefix))
			return fail(err, errlen, -EINVAL,
				    "path scope '%s' must be absolute and normalized "
				    "(no '.', '..', '//' or trailing '/')", c->paths[i].prefix);
	for (uint32_t i = 0; i < c->nmems; i++)
		if (!name_ok(c->mems[i].ns, TOKEN_NS_MAX))
			return fail(err, errlen, -EINVAL,
				    "mem namespace '%s' must be 1..%d of A-Z a-z 0-9 . _ -",
				    c->mems[i].ns, TOKEN_NS_MAX);
	if (c->qos_bw > TOKEN_QOS_BW_MAX || c->qos_iops > TOKEN_QOS_IOPS_MAX)
		return fail(err, errlen, -EINVAL,
			    "token qos caps must be at most %llu bytes/s and %u operations/s",
			    (unsigned long long)TOKEN_QOS_BW_MAX, TOKEN_QOS_IOPS_MAX);
	if (c->exp < 0)
		return fail(err, errlen, -EINVAL, "token expiry must not be negative");
	return 0;
}

static json_t *claims_json(const struct token_claims *c)
{
	json_t *o = json_object(), *gids = json_array(), *paths = json_array(),
	       *mems = json_array();

	json_object_set_new(o, "v", json_integer(1));
	json_object_set_new(o, "id", json_string(c->id));
	json_object_set_new(o, "tenant", json_string(c->tenant));
	json_object_set_new(o, "uid", json_integer(c->uid));
	for (uint32_t i = 0; i < c->ngids; i++)
		json_array_append_new(gids, json_integer(c->gids[i]));
	json_object_set_new(o, "gids", gids);
	if (c->flags & TOKEN_F_SQUASH)
		json_object_set_new(o, "squash", json_true());
	if (c->flags & TOKEN_F_ROOT)
		json_object_set_new(o, "root", json_true());
	if (c->flags & TOKEN_F_CALLER)
		json_object_set_new(o, "caller", json_true());
	if (c->flags & TOKEN_F_ADMIN)
		json_object_set_new(o, "admin", json_true());
	for (uint32_t i = 0; i < c->npaths; i++)
		json_array_append_new(paths, json_pack("{s:s, s:s}", "prefix", c->paths[i].prefix,
						       "access", c->paths[i].write ? "rw" : "r"));
	json_object_set_new(o, "paths", paths);
	for (uint32_t i = 0; i < c->nmems; i++)
		json_array_append_new(mems, json_pack("{s:s, s:I}", "ns", c->mems[i].ns,
						      "capacity", (json_int_t)c->mems[i].capacity));
	json_object_set_new(o, "mem", mems);
	if (c->qos_bw || c->qos_iops)
		json_object_set_new(o, "qos", json_pack("{s:I, s:I}", "bw", (json_int_t)c->qos_bw,
							"iops", (json_int_t)c->qos_iops));
	json_object_set_new(o, "exp", json_integer(c->exp));
	return o;
}

int token_claims_to_json(const struct token_claims *c, char **out)
{
	json_t *o;
	int rc = token_claims_check(c, NULL, 0);

	if (rc)
		return rc;
	o = claims_json(c);
	*out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return *out ? 0 : -ENOMEM;
}

int token_sign(const struct cluster_key *k, const struct token_claims *c, char **out)
{
	size_t pl = strlen(TOKEN_PREFIX), jl, n;
	uint8_t sig[TOKEN_SECRET_LEN];
	char *js, *text;
	int rc = token_claims_to_json(c, &js);

	if (rc)
		return rc;
	jl = strlen(js);
	text = malloc(pl + jl * 4 / 3 + 8 + 1 + SIG_B64_LEN + 4);
	if (!text) {
		free(js);
		return -ENOMEM;
	}
	memcpy(text, TOKEN_PREFIX, pl);
	n = pl + b64url_encode((const uint8_t *)js, jl, text + pl);
	free(js);
	token_secret(k, text, n, sig);
	text[n++] = '.';
	b64url_encode(sig, sizeof(sig), text + n);
	if (strlen(text) > TOKEN_TEXT_MAX) {
		free(text);
		return -E2BIG;
	}
	*out = text;
	return 0;
}

int token_split(const char *text, const char **signed_part, size_t *signed_len,
		uint8_t secret[TOKEN_SECRET_LEN], char *err, size_t errlen)
{
	const char *s = text, *dot, *e;
	uint8_t buf[TOKEN_SECRET_LEN + 4];

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		e--;
	if ((size_t)(e - s) > TOKEN_TEXT_MAX)
		return fail(err, errlen, -EINVAL, "token is longer than %d bytes", TOKEN_TEXT_MAX);
	if ((size_t)(e - s) < strlen(TOKEN_PREFIX) || memcmp(s, TOKEN_PREFIX, strlen(TOKEN_PREFIX)))
		return fail(err, errlen, -EINVAL, "not a strata token (it starts with '%s')",
			    TOKEN_PREFIX);
	dot = memrchr(s, '.', (size_t)(e - s));
	if (!dot || dot < s + strlen(TOKEN_PREFIX) + 1 || e - dot - 1 != SIG_B64_LEN ||
	    b64url_decode(dot + 1, SIG_B64_LEN, buf) != TOKEN_SECRET_LEN)
		return fail(err, errlen, -EINVAL, "malformed token: bad signature part");
	memcpy(secret, buf, TOKEN_SECRET_LEN);
	*signed_part = s;
	*signed_len = (size_t)(dot - s);
	return 0;
}

void token_secret(const struct cluster_key *k, const char *signed_part, size_t len,
		  uint8_t secret[TOKEN_SECRET_LEN])
{
	const void *parts[] = { signed_part };
	size_t lens[] = { len };

	hmac_sha256(k->k, sizeof(k->k), parts, lens, 1, secret);
}

static int get_u32(json_t *v, uint32_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return -1;
	i = json_integer_value(v);
	if (i < 0 || i > UINT32_MAX)
		return -1;
	*out = (uint32_t)i;
	return 0;
}

static int copy_str(json_t *v, char *dst, size_t cap)
{
	const char *s = json_string_value(v);

	if (!s || strlen(s) >= cap || strlen(s) != json_string_length(v))
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static int flag(json_t *o, const char *key, uint32_t bit, uint32_t *flags)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return -1;
	if (json_is_true(v))
		*flags |= bit;
	return 0;
}

/* "qos": {"bw": N, "iops": N}, both present, nothing else. */
static int qos_from_json(json_t *v, struct token_claims *c)
{
	json_t *bw = json_object_get(v, "bw"), *iops = json_object_get(v, "iops");

	if (!json_is_object(v) || json_object_size(v) != 2 || !json_is_integer(bw) ||
	    !json_is_integer(iops) || json_integer_value(bw) < 0 ||
	    (uint64_t)json_integer_value(bw) > TOKEN_QOS_BW_MAX || json_integer_value(iops) < 0 ||
	    json_integer_value(iops) > TOKEN_QOS_IOPS_MAX)
		return -1;
	c->qos_bw = (uint64_t)json_integer_value(bw);
	c->qos_iops = (uint32_t)json_integer_value(iops);
	return 0;
}

static int claims_from_json(json_t *o, struct token_claims *c, char *err, size_t errlen)
{
	static const char *const known[] = { "v", "id", "tenant", "uid", "gids", "squash", "root",
					     "caller", "admin", "paths", "mem", "qos", "exp" };
	const char *key;
	json_t *v, *gids, *paths, *mems;
	size_t i;

	memset(c, 0, sizeof(*c));
	if (!json_is_object(o))
		return fail(err, errlen, -EINVAL, "token claims are not a JSON object");
	json_object_foreach(o, key, v) {
		bool found = false;

		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			found |= !strcmp(key, known[i]);
		if (!found)
			return fail(err, errlen, -EINVAL, "unknown token claim '%s'", key);
	}
	v = json_object_get(o, "v");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		return fail(err, errlen, -EINVAL, "token claims version must be 1");
	if (copy_str(json_object_get(o, "id"), c->id, sizeof(c->id)) ||
	    copy_str(json_object_get(o, "tenant"), c->tenant, sizeof(c->tenant)))
		return fail(err, errlen, -EINVAL, "token claims need an id and a tenant");
	c->uid = TOKEN_NOBODY;
	if ((v = json_object_get(o, "uid")) && get_u32(v, &c->uid))
		return fail(err, errlen, -EINVAL, "token uid must be 0..4294967295");
	gids = json_object_get(o, "gids");
	if (gids) {
		if (!json_is_array(gids) || json_array_size(gids) > TOKEN_GIDS_MAX)
			return fail(err, errlen, -EINVAL, "token gids must be a list of at most %d",
				    TOKEN_GIDS_MAX);
		json_array_foreach(gids, i, v)
			if (get_u32(v, &c->gids[c->ngids++]))
				return fail(err, errlen, -EINVAL, "token gid must be 0..4294967295");
	} else {
		c->ngids = 1;
		c->gids[0] = TOKEN_NOBODY;
	}
	if (flag(o, "squash", TOKEN_F_SQUASH, &c->flags) || flag(o, "root", TOKEN_F_ROOT, &c->flags) ||
	    flag(o, "caller", TOKEN_F_CALLER, &c->flags) || flag(o, "admin", TOKEN_F_ADMIN, &c->flags))
		return fail(err, errlen, -EINVAL, "token flags must be true or false");
	paths = json_object_get(o, "paths");
	if (paths) {
		if (!json_is_array(paths) || json_array_size(paths) > TOKEN_PATHS_MAX)
			return fail(err, errlen, -EINVAL, "token paths must be a list of at most %d",
				    TOKEN_PATHS_MAX);
		json_array_foreach(paths, i, v) {
			struct token_path *p = &c->paths[c->npaths++];
			const char *acc = json_string_value(json_object_get(v, "access"));

			if (!json_is_object(v) || json_object_size(v) != 2 ||
			    copy_str(json_object_get(v, "prefix"), p->prefix, sizeof(p->prefix)) ||
			    !acc || (strcmp(acc, "r") && strcmp(acc, "rw")))
				return fail(err, errlen, -EINVAL,
					    "token path scope must be {\"prefix\": PATH, \"access\": \"r\"|\"rw\"}");
			p->write = !strcmp(acc, "rw");
		}
	}
	mems = json_object_get(o, "mem");
	if (mems) {
		if (!json_is_array(mems) || json_array_size(mems) > TOKEN_MEMS_MAX)
			return fail(err, errlen, -EINVAL, "token mem scopes must be a list of at most %d",
				    TOKEN_MEMS_MAX);
		json_array_foreach(mems, i, v) {
			struct token_mem *m = &c->mems[c->nmems++];
			json_t *cap = json_object_get(v, "capacity");

			if (!json_is_object(v) || json_object_size(v) != 2 ||
			    copy_str(json_object_get(v, "ns"), m->ns, sizeof(m->ns)) ||
			    !json_is_integer(cap) || json_integer_value(cap) < 0)
				return fail(err, errlen, -EINVAL,
					    "token mem scope must be {\"ns\": NAME, \"capacity\": BYTES}");
			m->capacity = (uint64_t)json_integer_value(cap);
		}
	}
	v = json_object_get(o, "qos");
	if (v && qos_from_json(v, c))
		return fail(err, errlen, -EINVAL,
			    "token qos must be {\"bw\": BYTES_PER_S, \"iops\": OPS_PER_S}, each "
			    "0..%llu and 0..%u", (unsigned long long)TOKEN_QOS_BW_MAX,
			    TOKEN_QOS_IOPS_MAX);
	v = json_object_get(o, "exp");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return fail(err, errlen, -EINVAL, "token claims need an expiry (exp, 0: never)");
	c->exp = json_integer_value(v);
	return token_claims_check(c, err, errlen);
}

int token_claims_from_json(const char *text, size_t len, struct token_claims *c, char *err,
			   size_t errlen)
{
	json_error_t je;
	json_t *o;
	int rc;

	memset(c, 0, sizeof(*c));
	if (len > TOKEN_TEXT_MAX)
		return fail(err, errlen, -EINVAL, "token claims are longer than %d bytes",
			    TOKEN_TEXT_MAX);
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return fail(err, errlen, -EINVAL, "malformed token claims: %s", je.text);
	rc = claims_from_json(o, c, err, errlen);
	json_decref(o);
	return rc;
}

int token_parse_claims(const char *signed_part, size_t len, struct token_claims *c,
		       char *err, size_t errlen)
{
	size_t pl = strlen(TOKEN_PREFIX);
	uint8_t *js;
	long n;
	int rc;

	if (len < pl || len > TOKEN_TEXT_MAX || memcmp(signed_part, TOKEN_PREFIX, pl))
		return fail(err, errlen, -EINVAL, "not a strata token");
	js = malloc((len - pl) * 3 / 4 + 4);
	if (!js)
		return -ENOMEM;
	n = b64url_decode(signed_part + pl, len - pl, js);
	rc = n <= 0 ? fail(err, errlen, -EINVAL, "malformed token: claims are not base64url")
		    : token_claims_from_json((const char *)js, (size_t)n, c, err, errlen);
	free(js);
	return rc;
}

int token_verify(const struct cluster_key *k, const char *text, struct token_claims *c,
		 char *err, size_t errlen)
{
	const char *sp;
	size_t sl;
	uint8_t secret[TOKEN_SECRET_LEN], want[TOKEN_SECRET_LEN];
	int rc = token_split(text, &sp, &sl, secret, err, errlen);

	if (rc)
		return rc;
	token_secret(k, sp, sl, want);
	if (!mac_equal(secret, want, sizeof(want)))
		return fail(err, errlen, -EKEYREJECTED,
			    "the token is not signed by this cluster's key");
	return token_parse_claims(sp, sl, c, err, errlen);
}

/* ---- what a token allows ---- */

uint32_t token_effective_uid(const struct token_claims *c, uint32_t caller_uid)
{
	uint32_t uid = c->uid;

	if ((c->flags & TOKEN_F_CALLER) && caller_uid != UINT32_MAX)
		uid = caller_uid;
	if (c->flags & TOKEN_F_SQUASH)
		return TOKEN_NOBODY;
	if (uid == 0 && !(c->flags & TOKEN_F_ROOT))
		return TOKEN_NOBODY;
	return uid;
}

bool token_allows_path(const struct token_claims *c, const char *path, bool write)
{
	for (uint32_t i = 0; i < c->npaths; i++) {
		const struct token_path *p = &c->paths[i];
		size_t n = strlen(p->prefix);

		if (write && !p->write)
			continue;
		if (!strcmp(p->prefix, "/"))
			return true;
		if (!strncmp(path, p->prefix, n) && (path[n] == '\0' || path[n] == '/'))
			return true;
	}
	return false;
}

const struct token_mem *token_mem_scope(const struct token_claims *c, const void *key,
					size_t len)
{
	const char *slash = memchr(key, '/', len);
	size_t n;

	if (!slash)
		return NULL;
	n = (size_t)(slash - (const char *)key);
	for (uint32_t i = 0; i < c->nmems; i++)
		if (strlen(c->mems[i].ns) == n && !memcmp(c->mems[i].ns, key, n))
			return &c->mems[i];
	return NULL;
}
