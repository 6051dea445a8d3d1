/* Unit tests of the admission gate (src/net/gate.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "net/gate.h"

static struct sockaddr_storage v4(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage v6(const char *ip)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *in = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, ip, &in->sin6_addr), 1);
	return ss;
}

static struct net_gate *gate(uint32_t max_conns, uint32_t per_peer)
{
	struct net_gate_opts o;
	struct net_gate *g;

	net_gate_opts_init(&o, sizeof(o));
	o.max_conns = max_conns;
	o.max_per_peer = per_peer;
	assert_int_equal(net_gate_new(&o, &g), 0);
	return g;
}

static void test_no_caps_admits_all(void **state)
{
	struct net_gate *g = gate(0, 0);
	struct sockaddr_storage a = v4("10.0.0.1", 1);
	struct net_gate_stats st;

	(void)state;
	for (int i = 0; i < 5000; i++)
		assert_int_equal(net_gate_enter(g, &a), 0);
	net_gate_stats_get(g, &st);
	assert_int_equal(st.held, 5000);
	for (int i = 0; i < 5000; i++)
		net_gate_leave(g, &a);
	net_gate_stats_get(g, &st);
	assert_int_equal(st.held, 0);
	net_gate_free(g);
}

static void test_per_peer_cap_counts_addresses_not_ports(void **state)
{
	struct net_gate *g = gate(0, 3);
	struct sockaddr_storage a1 = v4("10.0.0.1", 1), a2 = v4("10.0.0.1", 2);
	struct sockaddr_storage b = v4("10.0.0.2", 1);
	struct sockaddr_storage mapped = v6("::ffff:10.0.0.1");
	struct net_gate_stats st;

	(void)state;
	assert_int_equal(net_gate_enter(g, &a1), 0);
	assert_int_equal(net_gate_enter(g, &a2), 0);
	assert_int_equal(net_gate_enter(g, &mapped), 0);	/* the same host */
	assert_int_equal(net_gate_enter(g, &a1), -EUSERS);
	assert_int_equal(net_gate_enter(g, &b), 0);		/* another host */
	net_gate_leave(g, &a2);
	assert_int_equal(net_gate_enter(g, &a1), 0);
	net_gate_stats_get(g, &st);
	assert_int_equal(st.held, 4);
	assert_int_equal(st.refused_peer, 1);
	assert_int_equal(st.refused_full, 0);
	net_gate_free(g);
}

static void test_daemon_cap(void **state)
{
	struct net_gate *g = gate(2, 0);
	struct sockaddr_storage a = v4("10.0.0.1", 1), b = v4("10.0.0.2", 1);
	struct net_gate_stats st;

	(void)state;
	assert_int_equal(net_gate_enter(g, &a), 0);
	assert_int_equal(net_gate_enter(g, &b), 0);
	assert_int_equal(net_gate_enter(g, &b), -EMFILE);
	net_gate_leave(g, &a);
	assert_int_equal(net_gate_enter(g, &b), 0);
	net_gate_stats_get(g, &st);
	assert_int_equal(st.refused_full, 1);
	net_gate_free(g);
}

/* Many addresses come and go: the table grows, reuses emptied slots, and
 * every address keeps its own count. */
static void test_many_addresses(void **state)
{
	struct net_gate *g = gate(0, 2);
	char ip[32];

	(void)state;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 3000; i++) {
			struct sockaddr_storage a;

			snprintf(ip, sizeof(ip), "10.%d.%d.%d", round, i / 256, i % 256);
			a = v4(ip, 9);
			assert_int_equal(net_gate_enter(g, &a), 0);
			assert_int_equal(net_gate_enter(g, &a), 0);
			assert_int_equal(net_gate_enter(g, &a), -EUSERS);
		}
		for (int i = 0; i < 3000; i++) {
			struct sockaddr_storage a;

			snprintf(ip, sizeof(ip), "10.%d.%d.%d", round, i / 256, i % 256);
			a = v4(ip, 9);
			net_gate_leave(g, &a);
			net_gate_leave(g, &a);
		}
	}
	{
		struct net_gate_stats st;

		net_gate_stats_get(g, &st);
		assert_int_equal(st.held, 0);
		assert_int_equal(st.refused_peer, 9000);
	}
	net_gate_free(g);
}

/* A family other than IP counts only against the daemon's cap. */
static void test_other_family(void **state)
{
	struct net_gate *g = gate(0, 1);
	struct sockaddr_storage u;

	(void)state;
	memset(&u, 0, sizeof(u));
	u.ss_family = AF_UNIX;
	assert_int_equal(net_gate_enter(g, &u), 0);
	assert_int_equal(net_gate_enter(g, &u), 0);
	net_gate_leave(g, &u);
	net_gate_leave(g, &u);
	net_gate_free(g);
	net_gate_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_caps_admits_all),
		cmocka_unit_test(test_per_peer_cap_counts_addresses_not_ports),
		cmocka_unit_test(test_daemon_cap),
		cmocka_unit_test(test_many_addresses),
		cmocka_unit_test(test_other_family),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
