/*
 * ha.h - high availability of tesserad (ha.c, docs/ha.md): several
 * controllers on one PostgreSQL store, one leader by a lease in the store.
 * Off unless the configuration has an `ha:` key; then main.c runs the
 * standby part first and opens the controller only once this process holds
 * the lease.
 */
#ifndef CTLD_HA_H
#define CTLD_HA_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctld/ctld.h"

/* The leader gives up this fraction of the lease before it could expire
 * elsewhere (clock rate differences, the time to stop). */
#define CTLD_HA_MARGIN_FRACTION 0.2

/* Refuses an `ha:` configuration that cannot work (a SQLite store). */
int ctld_ha_check(const ctld_config *cfg, ts_err *err);
/* Stands by: serves the standby front (503 with the leader's URL) on the
 * listening address and tries to take the lease every ha.renew. Returns 0
 * once this process leads (cfg->ha_epoch set, the lease renewed from now
 * on by a thread of its own, the front still answering until
 * ctld_ha_front_stop), 1 when one of the signals in `set` came first
 * (nothing left running), or an error. */
int ctld_ha_standby(ctld_config *cfg, const sigset_t *set, ts_err *err);
/* Stops the standby front (just before the controller's own server binds
 * the same address). Nothing when HA is off. */
void ctld_ha_front_stop(void);
/* A clean stop, once the controller is closed: stops renewing and ends the
 * lease at once, so a standby takes over without waiting for it to expire. */
void ctld_ha_stop(void);
/* Whether HA is on in this process. */
bool ctld_ha_on(void);
/* The leader's lines for /metrics (role and epoch); "" when HA is off. */
void ctld_ha_metrics(char *buf, size_t cap);

#endif
