/*
 * test_net_ports.c - a published port is never one the node serves itself
 * (src/agent/net_ports.c, docs/network.md "Published ports").
 *
 * Proves, on /proc/net tables written here as the kernel writes them: a
 * TCP port is served when a socket listens on it, on any address, IPv4 or
 * IPv6, and not when a socket merely holds it for a connection; a UDP port
 * whenever a socket is bound to it, connected or not; a missing table
 * holds nothing; a task publishing such a port, or one of the agent's own
 * (--metrics-listen, --p2p-listen, listening or not), is refused naming
 * net.publish[i] and what holds it, and one that is free passes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/net_ports.h"

static char dir[64];

#define HEAD "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  " \
             "timeout inode\n"

static void put(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ts-netports-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    /* sshd on 0.0.0.0:22 listening; a connection from port 30000 (01, not served);
     * a listener on 127.0.0.1:30555 */
    put("tcp", HEAD
        "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0"
        "        0 1 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0B00A8C0:7530 FEFCA8C0:0016 01 00000000:00000000 00:00000000 00000000     0"
        "        0 2 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 0100007F:775B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0"
        "        0 3 1 0000000000000000 100 0 0 10 0\n");
    /* [::]:8443 listening */
    put("tcp6", "  sl  local_address                         remote_address                        st\n"
        "   0: 00000000000000000000000000000000:20FB 00000000000000000000000000000000:0000 0A"
        " 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0\n");
    /* a DNS server bound on 0.0.0.0:53, unconnected (07); a connected socket on 30053 */
    put("udp", HEAD
        "  100: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0"
        "        0 5 2 0000000000000000 0\n"
        "  101: 0B00A8C0:7545 0101A8C0:0035 01 00000000:00000000 00:00000000 00000000     0"
        "        0 6 2 0000000000000000 0\n");
    /* no udp6 table (a kernel without IPv6) */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"tcp", "tcp6", "udp"};
    for (size_t i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}

static void served_ports(void **state)
{
    (void)state;
    char what[128];
    assert_true(agent_net_port_served(dir, 22, false, what, sizeof what));
    assert_string_equal(what, "tcp 0.0.0.0:22 listening");
    assert_true(agent_net_port_served(dir, 30555, false, what, sizeof what));
    assert_string_equal(what, "tcp 127.0.0.1:30555 listening");
    assert_true(agent_net_port_served(dir, 8443, false, what, sizeof what));
    assert_string_equal(what, "tcp6 [::]:8443 listening");
    assert_false(agent_net_port_served(dir, 30000, false, what, sizeof what)); /* a connection's */
    assert_false(agent_net_port_served(dir, 53, false, what, sizeof what));    /* UDP's, not TCP's */
    assert_true(agent_net_port_served(dir, 53, true, what, sizeof what));
    assert_string_equal(what, "udp 0.0.0.0:53 bound");
    assert_true(agent_net_port_served(dir, 30021, true, what, sizeof what));
    assert_false(agent_net_port_served(dir, 22, true, what, sizeof what));
    assert_false(agent_net_port_served("/nonexistent", 22, false, what, sizeof what));
}

static void publish_refused(void **state)
{
    (void)state;
    char why[512] = "";
    const unsigned own[] = {0, 31000}; /* no metrics; --p2p-listen :31000, not listening yet */
    const char *ok[] = {"30100/tcp", "30100/udp", "22/udp"};
    assert_int_equal(agent_net_publish_check(dir, ok, 3, own, 2, why, sizeof why), 0);
    const char *ssh[] = {"30100/tcp", "22/tcp"};
    assert_int_equal(agent_net_publish_check(dir, ssh, 2, own, 2, why, sizeof why), -1);
    assert_string_equal(why, "net.publish[1]: 22/tcp: this node serves it itself (tcp "
                        "0.0.0.0:22 listening); a published port never takes the node's own");
    const char *dns[] = {"53/udp"};
    assert_int_equal(agent_net_publish_check(dir, dns, 1, own, 2, why, sizeof why), -1);
    assert_non_null(strstr(why, "net.publish[0]: 53/udp: this node serves it itself (udp "));
    const char *p2p[] = {"31000/tcp"};
    assert_int_equal(agent_net_publish_check(dir, p2p, 1, own, 2, why, sizeof why), -1);
    assert_non_null(strstr(why, "net.publish[0]: 31000/tcp: this node's agent serves it"));
    const char *p2pu[] = {"31000/udp"}; /* the agent's ports are TCP */
    assert_int_equal(agent_net_publish_check(dir, p2pu, 1, own, 2, why, sizeof why), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(served_ports),
        cmocka_unit_test(publish_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
