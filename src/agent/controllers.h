/*
 * controllers.h - internal: the controllers an agent may talk to
 * (--controller URL[,URL...]) and which one it talks to now.
 *
 * Several tesserad may serve one cluster: one leader, the others standbys
 * that answer 503 {"error": {"code": "standby", "leader": URL|null}}
 * (docs/ha.md). The agent speaks to one controller at a time; after a
 * failed exchange (no connection, a timeout, a 503) it asks agent_ctls_fail
 * for the next one: the leader a standby named, else the next URL of the
 * list, round and round. Plain data, no I/O; one thread.
 */
#ifndef TS_AGENT_CONTROLLERS_H
#define TS_AGENT_CONTROLLERS_H

#include <stdbool.h>

#include "tessera/error.h"

#define TS_CTLS_MAX 8         /* URLs in one --controller list */
#define TS_CTL_URL_MAX 256    /* bytes of one URL, the NUL included */
/* Pauses between rounds of failed exchanges: short while a failover may be
 * under way (a standby takes the lease within about its lease time), then
 * the long one, so a controller that stays down is not polled 4 times a
 * second by every agent. */
#define TS_CTLS_PAUSE_QUICK_S 0.25
#define TS_CTLS_PAUSE_S 1.0
#define TS_CTLS_QUICK_PAUSES 40 /* about 10 s of short pauses */

typedef struct ts_ctls {
    char url[TS_CTLS_MAX][TS_CTL_URL_MAX]; /* as given, without a trailing '/' */
    int n;
    int pos;                  /* the list entry in use, or whose standby named hint */
    char hint[TS_CTL_URL_MAX];/* the leader a standby named, in use; "" none */
    bool hopped;              /* hint not yet answered: its own hint is not followed */
    int pauses;               /* pauses since the last exchange that succeeded */
} ts_ctls;

/*
 * Parses a comma-separated list of 1..TS_CTLS_MAX http(s) URLs into *c
 * (starting at the first). An error names the bad entry, its position and
 * why: empty, not http:// or https://, no host, blanks or control
 * characters, too long, a repeat, too many.
 */
int agent_ctls_parse(const char *list, ts_ctls *c, ts_err *err);

/* The controller to talk to now. */
const char *agent_ctls_url(const ts_ctls *c);

/* Whether s is usable as a controller URL (the same checks as a list entry). */
bool agent_ctls_url_ok(const char *s);

/*
 * The exchange with agent_ctls_url failed: no connection, a timeout or a 503;
 * leader is the URL a standby's answer named (NULL or unusable: none).
 * Moves to that leader when it is another controller and the one that
 * failed was not itself reached through such a hint; else to the list
 * entry after the one in use (or after the one whose standby gave the
 * hint). Returns whether the controller in use changed.
 */
bool agent_ctls_fail(ts_ctls *c, const char *leader);

/* The exchange with agent_ctls_url succeeded: a hint that answered is a
 * controller like any other from now on. */
void agent_ctls_ok(ts_ctls *c);

/* Seconds to pause before the next round of failed exchanges, counted:
 * with several controllers TS_CTLS_PAUSE_QUICK_S for the first
 * TS_CTLS_QUICK_PAUSES pauses since the last success (the agent finds a new
 * leader a quarter of a second after it took over, not up to a second),
 * TS_CTLS_PAUSE_S after them and always with one controller. */
double agent_ctls_pause_s(ts_ctls *c);

#endif
