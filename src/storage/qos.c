/* Storage QoS: the per-credential token buckets (qos.h). */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "storage/qos.h"

#define NS_PER_S 1000000000ull
#define WARN_EVERY_NS (10 * NS_PER_S)
/* No request is pushed further than this on a timeline (a cap of one
 * byte per second and a batch of gigabytes would overflow): a day. */
#define QOS_MAX_STEP_NS (86400 * NS_PER_S)

/* Pushes one timeline by cost at rate; the wait it implies. */
static uint64_t timeline(uint64_t *tat, uint64_t cost, uint64_t rate, uint64_t now,
			 uint64_t burst)
{
	unsigned __int128 step;
	uint64_t t;

	if (!rate || !cost)
		return 0;
	t = *tat > now ? *tat : now;
	/* Rounded up: a request never costs less than it moves. */
	step = ((unsigned __int128)cost * NS_PER_S + rate - 1) / rate;
	t += step > QOS_MAX_STEP_NS ? QOS_MAX_STEP_NS : (uint64_t)step;
	*tat = t;
	return t > now + burst ? t - now - burst : 0;
}

uint64_t qos_bucket_charge(struct qos_bucket *b, const struct qos_caps *c, uint64_t bytes,
			   uint32_t ops, uint64_t now_ns, uint64_t burst_ns)
{
	uint64_t wb = timeline(&b->tat_bytes_ns, bytes, c->bw, now_ns, burst_ns);
	uint64_t wo = timeline(&b->tat_ops_ns, ops, c->iops, now_ns, burst_ns);

	return wb > wo ? wb : wo;
}

bool qos_bucket_idle(const struct qos_bucket *b, uint64_t now_ns)
{
	return b->tat_bytes_ns <= now_ns && b->tat_ops_ns <= now_ns;
}

void qos_table_init(struct qos_table *q, uint32_t burst_ms)
{
	memset(q, 0, sizeof(*q));
	pthread_mutex_init(&q->mu, NULL);
	q->burst_ns = (uint64_t)(burst_ms ? burst_ms : QOS_BURST_MS) * 1000000ull;
}

void qos_table_release(struct qos_table *q)
{
	pthread_mutex_destroy(&q->mu);
}

static uint32_t id_hash(const char *id)
{
	uint32_t h = 2166136261u;

	for (; *id; id++)
		h = (h ^ (uint8_t)*id) * 16777619u;
	return h;
}

/* The bucket of id: its slot, else a free or idle slot of its window
 * (taken for it), else NULL. Under q->mu. */
static struct qos_bucket *find_bucket(struct qos_table *q, const char *id, uint64_t now)
{
	uint32_t h = id_hash(id);
	struct qos_slot *spare = NULL;

	for (uint32_t i = 0; i < QOS_WINDOW; i++) {
		struct qos_slot *s = &q->slot[(h + i) % QOS_SLOTS];

		if (!strcmp(s->id, id))
			return &s->b;
		if (!spare && (!s->id[0] || qos_bucket_idle(&s->b, now)))
			spare = s;
	}
	if (!spare)
		return NULL;
	/* An idle bucket owes nothing: a fresh one is the same. */
	snprintf(spare->id, sizeof(spare->id), "%s", id);
	memset(&spare->b, 0, sizeof(spare->b));
	return &spare->b;
}

uint64_t qos_charge(struct qos_table *q, const char *id, const struct qos_caps *c,
		    uint64_t bytes, uint32_t ops, uint64_t now_ns)
{
	struct qos_bucket *b;
	bool warn = false;
	uint64_t wait;

	pthread_mutex_lock(&q->mu);
	b = find_bucket(q, id, now_ns);
	if (!b) {
		b = &q->overflow;
		q->st.overflow++;
		if (!q->warned_ns || now_ns - q->warned_ns >= WARN_EVERY_NS) {
			q->warned_ns = now_ns;
			warn = true;
		}
	}
	wait = qos_bucket_charge(b, c, bytes, ops, now_ns, q->burst_ns);
	q->st.charged++;
	if (wait) {
		q->st.delayed++;
		q->st.delay_ms += (wait + 999999) / 1000000;
	}
	pthread_mutex_unlock(&q->mu);
	if (warn)
		log_warn("storage", "qos: no room for token %s in the table of %u credentials "
			 "(its slots are held by credentials that still owe time): it is paced, "
			 "at its own caps, in one bucket shared with the others that do not fit "
			 "(counted in strata_storage_qos_overflow_total; not logged again for 10 s)",
			 id, QOS_SLOTS);
	return wait;
}

void qos_stats_get(struct qos_table *q, uint64_t now_ns, struct qos_stats *out)
{
	pthread_mutex_lock(&q->mu);
	*out = q->st;
	out->active = 0;
	for (uint32_t i = 0; i < QOS_SLOTS; i++)
		out->active += q->slot[i].id[0] && !qos_bucket_idle(&q->slot[i].b, now_ns);
	pthread_mutex_unlock(&q->mu);
}
