/* The mem service's messages (mem.h): their definitions and the rules
 * that span fields. */
#include "proto/mem.h"

PROTO_MSG_DEFINE(mp_key, MP_KEY_FIELDS)
PROTO_MSG_DEFINE(mp_put, MP_PUT_FIELDS)
PROTO_MSG_DEFINE(mp_get, MP_GET_FIELDS)
PROTO_MSG_DEFINE(mp_len, MP_LEN_FIELDS)
PROTO_MSG_DEFINE(mp_pin, MP_PIN_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mp_list, MP_LIST_FIELDS)
PROTO_MSG_DEFINE(mp_list_ent, MP_LIST_ENT_FIELDS)
PROTO_MSG_DEFINE(mp_list_rep, MP_LIST_REP_FIELDS)
PROTO_MSG_DEFINE(mp_put_item, MP_PUT_ITEM_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mp_mput, MP_MPUT_FIELDS)
PROTO_MSG_DEFINE(mp_mget, MP_MGET_FIELDS)
PROTO_MSG_DEFINE(mp_keys, MP_KEYS_FIELDS)
PROTO_MSG_DEFINE(mp_result, MP_RESULT_FIELDS)
PROTO_MSG_DEFINE(mp_results, MP_RESULTS_FIELDS)
PROTO_MSG_DEFINE(mp_stats, MP_STATS_FIELDS)
PROTO_OPS_DEFINE(mem, MEM_OPS)

/* A listing asks for at least one key. */
int mp_list_check(const struct mp_list *m)
{
	return m->max == 0 ? STRATA_EBADMSG : 0;
}

/* The values fit one bulk (each is checked first, so the sum cannot
 * wrap). */
int mp_mput_check(const struct mp_mput *m)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < m->items_n; i++) {
		if (m->items[i].len > FRAME_MAX_BULK)
			return STRATA_EBADMSG;
		total += m->items[i].len;
	}
	return total > FRAME_MAX_BULK ? STRATA_EBADMSG : 0;
}
