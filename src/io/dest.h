/*
 * dest.h - where an outgoing call that a tenant chooses may go. A job's
 * webhook (the controller calls it) and a job's image registry, with the
 * redirects and token services it names (the agent calls them), are a
 * tenant's to choose, and the call is made from a host of the cluster: a
 * loopback address reaches that host's own services, a link-local one a
 * cloud's instance metadata (169.254.169.254, which hands out the host's
 * credentials). So those kinds of address, with unspecified and multicast
 * ones, are refused unless the site admitted a range holding them. The check
 * is made on the address a connection goes to, after the name was resolved
 * (curl's socket callback), so a name that resolves there is refused too.
 */
#ifndef TS_IO_DEST_H
#define TS_IO_DEST_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr; /* <sys/socket.h>, which dest.c includes */

typedef struct io_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int prefix; /* bits */
} io_cidr;

/* "A.B.C.D[/N]" or "X::Y[/N]" into c; false for anything else. */
bool io_cidr_parse(const char *s, io_cidr *c);

/* Whether a call may connect to sa: an address of no refused kind, or one in
 * allow[0..n). False with why (room wn): the address, its kind, and that
 * `admit` (the setting that admits a range, e.g. "webhooks.allow in
 * tesserad.yaml") admits it. */
bool io_dest_ok(const struct sockaddr *sa, const io_cidr *allow, int n, const char *who,
                const char *admit, char *why, size_t wn);

#endif
