/*
 * store_faults.c - injected write failures, so that the controller's
 * handling of a failed durable write (503 to its client, memory left equal
 * to the store, no exit) runs under test instead of only in theory.
 *
 * The rules (ts_store_faults_set, docs/store.md) count the writes the
 * committer runs: the Nth one from now, or every Nth one, fails with an I/O
 * error, a disk-full error, a cut PostgreSQL session, or a failed COMMIT of
 * its whole group; or every transaction is slowed down before its COMMIT (a
 * slow disk: writes committed with the controller's lock released then
 * overlap its cycles, as they do under load). The committer asks
 * store_fault_due before each write;
 * everything else about the group (rollback, re-run without the failed
 * write) is the ordinary path, which is the point. Off unless set: the cost
 * when off is one branch per write.
 */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_count(const char *v, uint64_t *out, const char *what, ts_err *err)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *end || errno || n < 1 || n > 1000000000ULL || *v == '-')
        return ts_err_set(err, TS_EINVAL, "store faults: %s: \"%s\" must be 1..1000000000",
                          what, v);
    *out = (uint64_t)n;
    return 0;
}

int ts_store_faults_set(ts_store *s, const char *spec, ts_err *err)
{
    ts_store_faults f = {0};
    if (spec && *spec && strcmp(spec, "off") != 0) {
        if (strlen(spec) > 256)
            return ts_err_set(err, TS_EINVAL, "store faults: longer than 256 characters");
        char buf[257];
        snprintf(buf, sizeof buf, "%s", spec);
        char *save = NULL;
        for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            if (!eq)
                return ts_err_set(err, TS_EINVAL, "store faults: \"%s\": want KEY=VALUE", item);
            *eq = '\0';
            const char *v = eq + 1;
            int rc = 0;
            if (strcmp(item, "nth") == 0)
                rc = parse_count(v, &f.nth, "nth", err);
            else if (strcmp(item, "every") == 0)
                rc = parse_count(v, &f.every, "every", err);
            else if (strcmp(item, "delay_ms") == 0) {
                rc = parse_count(v, &f.delay_ms, "delay_ms", err);
                if (rc == 0 && f.delay_ms > 10000)
                    rc = ts_err_set(err, TS_EINVAL,
                                    "store faults: delay_ms: \"%s\" must be 1..10000", v);
            }
            else if (strcmp(item, "kind") == 0) {
                static const char *const kinds[] = {"io", "full", "drop", "commit"};
                f.kind = -1;
                for (int k = 0; k < 4; k++)
                    if (strcmp(v, kinds[k]) == 0)
                        f.kind = k;
                if (f.kind < 0)
                    rc = ts_err_set(err, TS_EINVAL,
                                    "store faults: kind: \"%s\" is not io, full, drop or commit",
                                    v);
            } else
                rc = ts_err_set(err, TS_EINVAL,
                                "store faults: unknown key \"%s\" (nth, every, kind, delay_ms)",
                                item);
            if (rc)
                return rc;
        }
        if (!f.nth && !f.every && !f.delay_ms)
            return ts_err_set(err, TS_EINVAL, "store faults: nth, every or delay_ms is required");
        f.on = true;
    }
    pthread_mutex_lock(&s->qmu);
    f.injected = s->faults.injected;
    s->faults = f;
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

uint64_t ts_store_faults_injected(ts_store *s)
{
    pthread_mutex_lock(&s->qmu);
    uint64_t n = s->faults.injected;
    pthread_mutex_unlock(&s->qmu);
    return n;
}

bool store_fault_due(ts_store *s, int *kind)
{
    ts_store_faults *f = &s->faults;
    if (!f->on || (!f->nth && !f->every))
        return false;
    uint64_t k = ++f->seen;
    bool due = (f->nth && k == f->nth) || (f->every && k % f->every == 0);
    if (due) {
        f->injected++;
        *kind = f->kind;
    }
    return due;
}
