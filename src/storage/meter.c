/* Bytes moved per tenant (meter.h). */
#include <stdio.h>
#include <string.h>

#include "common/rand.h"
#include "storage/meter.h"

void meter_init(struct meter *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
}

void meter_release(struct meter *m)
{
	pthread_mutex_destroy(&m->lock);
}

static uint32_t tenant_hash(const char *t)
{
	uint64_t h = 0x6d65746572ull;

	for (; *t; t++)
		h = splitmix64(h ^ (uint8_t)*t);
	return (uint32_t)(h % METER_SLOTS);
}

/* The slot of tenant, claimed if need be; NULL when the table is full. */
static struct meter_slot *slot_of(struct meter *m, const char *tenant)
{
	uint32_t h = tenant_hash(tenant);
	struct meter_slot *s = NULL;

	for (uint32_t i = 0; i < METER_SLOTS; i++) {
		s = &m->slots[(h + i) % METER_SLOTS];
		if (!__atomic_load_n(&s->used, __ATOMIC_ACQUIRE))
			break;
		if (!strcmp(s->tenant, tenant))
			return s;
		s = NULL;
	}
	if (!s)
		return NULL;
	pthread_mutex_lock(&m->lock);
	/* Again under the lock: another thread may have claimed it. */
	for (uint32_t i = 0; i < METER_SLOTS; i++) {
		s = &m->slots[(h + i) % METER_SLOTS];
		if (!s->used) {
			snprintf(s->tenant, sizeof(s->tenant), "%s", tenant);
			__atomic_store_n(&s->used, 1, __ATOMIC_RELEASE);
			break;
		}
		if (!strcmp(s->tenant, tenant))
			break;
		s = NULL;
	}
	pthread_mutex_unlock(&m->lock);
	return s;
}

void meter_add(struct meter *m, const char *tenant, uint64_t bytes, bool write)
{
	struct meter_slot *s;

	if (!tenant[0] || !bytes)
		return;
	s = slot_of(m, tenant);
	if (!s)
		__atomic_fetch_add(&m->overflow, bytes, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(write ? &s->written : &s->read, bytes, __ATOMIC_RELAXED);
}

void meter_each(struct meter *m, void (*fn)(void *arg, const char *tenant, uint64_t read,
					     uint64_t written), void *arg)
{
	for (uint32_t i = 0; i < METER_SLOTS; i++) {
		struct meter_slot *s = &m->slots[i];

		if (__atomic_load_n(&s->used, __ATOMIC_ACQUIRE))
			fn(arg, s->tenant, __atomic_load_n(&s->read, __ATOMIC_RELAXED),
			   __atomic_load_n(&s->written, __ATOMIC_RELAXED));
	}
}
