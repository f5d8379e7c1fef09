/*
 * dest.c - where an outgoing call that a tenant chooses may go (dest.h).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "io/dest.h"

bool io_cidr_parse(const char *s, io_cidr *c)
{
    char a[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof a)
        return false;
    memcpy(a, s, n);
    a[n] = '\0';
    memset(c, 0, sizeof *c);
    if (inet_pton(AF_INET, a, c->addr) == 1)
        c->family = AF_INET;
    else if (inet_pton(AF_INET6, a, c->addr) == 1)
        c->family = AF_INET6;
    else
        return false;
    int most = c->family == AF_INET ? 32 : 128;
    c->prefix = most;
    if (slash) {
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end || p < 0 || p > most)
            return false;
        c->prefix = (int)p;
    }
    return true;
}

static bool in_range(const io_cidr *c, int family, const unsigned char *a)
{
    if (c->family != family)
        return false;
    int full = c->prefix / 8, rest = c->prefix % 8;
    if (memcmp(c->addr, a, (size_t)full) != 0)
        return false;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return rest == 0 || (c->addr[full] & mask) == (a[full] & mask);
}

/* Whether a is one of this host's own interface addresses: the host
 * itself by another name than loopback (its services bound to every
 * address). */
static bool own_address(int family, const unsigned char *a)
{
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0)
        return false;
    bool own = false;
    for (const struct ifaddrs *i = list; i && !own; i = i->ifa_next) {
        const struct sockaddr *sa = i->ifa_addr;
        if (!sa || sa->sa_family != family)
            continue;
        const void *mine = family == AF_INET
                               ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                               : (const void *)((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        own = memcmp(mine, a, family == AF_INET ? 4 : 16) == 0;
    }
    freeifaddrs(list);
    return own;
}

/* What kind of address a call may not reach by default ("" none). */
static const char *refused_kind(int family, const unsigned char *a)
{
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (family == AF_INET6 && memcmp(a, v4mapped, 12) == 0)
        return refused_kind(AF_INET, a + 12);
    if (family == AF_INET) {
        if (a[0] == 127)
            return "a loopback address (the calling host itself)";
        if (a[0] == 169 && a[1] == 254)
            return "a link-local address (a cloud's instance metadata among them)";
        if (a[0] == 0)
            return "an unspecified address";
        if (a[0] >= 224)
            return "a multicast or reserved address";
        return own_address(AF_INET, a) ? "an address of the calling host itself" : "";
    }
    static const unsigned char zero[16], one[16] = {[15] = 1};
    if (memcmp(a, one, 16) == 0)
        return "a loopback address (the calling host itself)";
    if (memcmp(a, zero, 16) == 0)
        return "an unspecified address";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return "a link-local address";
    if (a[0] == 0xff)
        return "a multicast address";
    return own_address(AF_INET6, a) ? "an address of the calling host itself" : "";
}

bool io_dest_ok(const struct sockaddr *sa, const io_cidr *allow, int n, const char *who,
                const char *admit, char *why, size_t wn)
{
    const unsigned char *a;
    int family = sa->sa_family;
    if (family == AF_INET)
        a = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
    else if (family == AF_INET6)
        a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    else {
        snprintf(why, wn, "not an IP address");
        return false;
    }
    const char *kind = refused_kind(family, a);
    if (!kind[0])
        return true;
    for (int i = 0; i < n; i++)
        if (in_range(&allow[i], family, a))
            return true;
    char text[INET6_ADDRSTRLEN];
    inet_ntop(family, a, text, sizeof text);
    snprintf(why, wn, "%s is %s, which %s may not reach (%s admits it)", text, kind, who, admit);
    return false;
}
