/* The storage service's messages (storage.h): their definitions and the
 * rules that span fields. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proto/storage.h"

PROTO_MSG_DEFINE(sp_cap, SP_CAP_FIELDS)
PROTO_MSG_DEFINE(sp_ref, SP_REF_FIELDS)
PROTO_MSG_DEFINE_CHECKED(sp_update, SP_UPDATE_FIELDS)
PROTO_MSG_DEFINE(sp_update_rep, SP_UPDATE_REP_FIELDS)
PROTO_MSG_DEFINE(sp_read, SP_READ_FIELDS)
PROTO_MSG_DEFINE(sp_read_rep, SP_READ_REP_FIELDS)
PROTO_MSG_DEFINE(sp_batch_item, SP_BATCH_ITEM_FIELDS)
PROTO_MSG_DEFINE_CHECKED(sp_batch, SP_BATCH_FIELDS)
PROTO_MSG_DEFINE(sp_read_result, SP_READ_RESULT_FIELDS)
PROTO_MSG_DEFINE(sp_batch_rep, SP_BATCH_REP_FIELDS)
PROTO_MSG_DEFINE(sp_stat_rep, SP_STAT_REP_FIELDS)
PROTO_MSG_DEFINE(sp_target, SP_TARGET_FIELDS)
PROTO_MSG_DEFINE(sp_space_rep, SP_SPACE_REP_FIELDS)
PROTO_MSG_DEFINE_CHECKED(sp_list, SP_LIST_FIELDS)
PROTO_MSG_DEFINE(sp_list_ent, SP_LIST_ENT_FIELDS)
PROTO_MSG_DEFINE(sp_list_rep, SP_LIST_REP_FIELDS)
PROTO_MSG_DEFINE(sp_shm_attach, SP_SHM_ATTACH_FIELDS)
PROTO_MSG_DEFINE(sp_shm_attach_rep, SP_SHM_ATTACH_REP_FIELDS)
PROTO_MSG_DEFINE(sp_shm, SP_SHM_FIELDS)
PROTO_MSG_DEFINE(sp_shm_rep, SP_SHM_REP_FIELDS)
PROTO_MSG_DEFINE(sp_shm_read, SP_SHM_READ_FIELDS)
PROTO_MSG_DEFINE(sp_shm_write, SP_SHM_WRITE_FIELDS)
PROTO_OPS_DEFINE(storage, STORAGE_OPS)

socklen_t sp_shm_sockname(const char *addr, struct sockaddr_un *sun)
{
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "strata-shm:%s", addr);
	if (n < 0 || (size_t)n >= sizeof(sun->sun_path) - 1)
		return 0;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The range an update names lies within the largest chunk. */
int sp_update_check(const struct sp_update *m)
{
	return (uint64_t)m->offset + m->len > FRAME_MAX_BULK ? STRATA_EBADMSG : 0;
}

/* The slots of a batch fit in one bulk; with caps, every item names one. */
int sp_batch_check(const struct sp_batch *m)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < m->items_n; i++) {
		total += m->items[i].len;
		if (m->caps_n && m->items[i].cap >= m->caps_n)
			return STRATA_EBADMSG;
	}
	return total > FRAME_MAX_BULK ? STRATA_EBADMSG : 0;
}

/* A page holds at least one chunk. */
int sp_list_check(const struct sp_list *m)
{
	return m->max == 0 ? STRATA_EBADMSG : 0;
}

static void on_verify_sent(void *arg, int status, struct rpc_msg *resp)
{
	(void)arg;
	(void)status;
	(void)resp;
}

int sp_ask_verify(struct rpc_pool *pool, const char *addr, const struct sp_read *rd,
		  uint32_t timeout_ms)
{
	struct proto_call c = { .timeout_ms = timeout_ms, .cb = on_verify_sent };

	return st_verify_call(pool, addr, rd, &c);
}
