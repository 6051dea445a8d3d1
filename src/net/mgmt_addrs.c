/* The mgmt addresses a caller knows (mgmt_addrs.h). */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/mgmt_addrs.h"
#include "common/errors_int.h"
#include "common/rand.h"
#include "net/conn.h"

int mgmt_addrs_init(struct mgmt_addrs *a, const char *spec)
{
	const char *p = spec;

	memset(a, 0, sizeof(*a));
	if (!spec)
		return -EINVAL;
	for (;;) {
		size_t len = strcspn(p, ",");
		const char *s = p, *e = p + len;

		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e == s || (size_t)(e - s) >= CM_ADDR_LEN || a->n >= MGMT_ADDRS_MAX) {
			memset(a, 0, sizeof(*a));
			return -EINVAL;
		}
		memcpy(a->addr[a->n], s, (size_t)(e - s));
		a->addr[a->n++][e - s] = '\0';
		if (!p[len])
			break;
		p += len + 1;
	}
	/* Not secret, only different between callers: the process, the
	 * time, and the struct's place (several lists in one process). */
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		a->rd = (uint32_t)(splitmix64((uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^
					      (uint64_t)(uintptr_t)a) % a->n);
	}
	return 0;
}

static const char *at(const struct mgmt_addrs *a, const uint32_t *idx)
{
	uint32_t i = __atomic_load_n(idx, __ATOMIC_ACQUIRE);

	return a->addr[i < a->n ? i : 0];
}

const char *mgmt_addrs_cur(const struct mgmt_addrs *a)
{
	return at(a, &a->cur);
}

const char *mgmt_addrs_read(const struct mgmt_addrs *a)
{
	return at(a, &a->rd);
}

uint32_t mgmt_addrs_timeout(const struct mgmt_addrs *a, uint32_t timeout_ms)
{
	return a->n > 1 && timeout_ms > MGMT_ADDRS_CALL_MS ? MGMT_ADDRS_CALL_MS : timeout_ms;
}

bool mgmt_addrs_retry_elsewhere(int status)
{
	switch (status) {
	case STRATA_ENOTLEADER:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ETIMEDOUT:
	case -ENOTCONN:
	case -EPIPE:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -EHOSTDOWN:
		return true;
	default:
		return false;
	}
}

/* The index of the address the reply of a follower names, or -1. */
static int named_leader(const struct mgmt_addrs *a, int status, const struct rpc_msg *resp)
{
	uint32_t len;

	if (status != STRATA_ENOTLEADER || !resp || !resp->body)
		return -1;
	len = resp->hdr.body_len;
	for (uint32_t i = 0; len && i < a->n; i++)
		if (strlen(a->addr[i]) == len && !memcmp(a->addr[i], resp->body, len))
			return (int)i;
	return -1;
}

/* Moves *idx (a->cur or a->rd) away from called, as mgmt_addrs_failed. */
static bool move(struct mgmt_addrs *a, uint32_t *idx, const char *called, int status,
		 const struct rpc_msg *resp)
{
	uint32_t from = a->n, to;
	int leader;

	if (a->n < 2 || !mgmt_addrs_retry_elsewhere(status))
		return false;
	for (uint32_t i = 0; i < a->n; i++)
		if (!strcmp(a->addr[i], called))
			from = i;
	if (from == a->n)
		return false;
	leader = named_leader(a, status, resp);
	to = leader >= 0 && (uint32_t)leader != from ? (uint32_t)leader : (from + 1) % a->n;
	/* Once, however many calls to called failed. */
	return __atomic_compare_exchange_n(idx, &from, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

bool mgmt_addrs_failed(struct mgmt_addrs *a, const char *called, int status,
		       const struct rpc_msg *resp)
{
	return move(a, &a->cur, called, status, resp);
}

bool mgmt_addrs_read_failed(struct mgmt_addrs *a, const char *called, int status,
			    const struct rpc_msg *resp)
{
	return move(a, &a->rd, called, status, resp);
}
