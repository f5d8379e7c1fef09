/*
 * events.c - the structured `data` of a job event (docs/api.md "Events"),
 * derived when the event is rendered from the detail text the store keeps.
 *
 * The controller writes each event's detail as one line of text: key=value
 * pairs ("start=1796131456.959 end=... gpus=8 model=H100-80GB tier=0") or a
 * sentence of a fixed shape ("to start by 1796135058 (in 3600 s)"). Clients
 * should not parse either, so the API adds `data`: the same facts typed
 * (times as Unix seconds, counts as integers, the tier by name). One parser
 * reads key=value text; a small table gives the sentence shapes per kind.
 * A detail this file does not recognise gives an empty object, never an
 * error: the detail string stays the source of truth, and an event written
 * by an older or newer controller still renders.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h" /* by its own folder: the fuzz target compiles this file in */

/* key=value pairs read from one detail at most; more are ignored. */
#define EVENT_KV_MAX 16
#define EVENT_KEY_MAX 32
#define EVENT_VALUE_MAX 128

/* How a value is typed in `data`. */
enum kv_type { KV_NUMBER, KV_INT, KV_TIER, KV_STRING };

static enum kv_type type_of(const char *key)
{
    static const char *const ints[] = {"gpus", "signal", "rank", "ranks", "ranks_failed",
                                       "for_job", NULL};
    for (int i = 0; ints[i]; i++)
        if (strcmp(key, ints[i]) == 0)
            return KV_INT;
    if (strcmp(key, "tier") == 0)
        return KV_TIER;
    return KV_NUMBER;
}

static json_t *typed(const char *key, const char *value)
{
    char *end;
    enum kv_type t = type_of(key);
    if (t == KV_TIER) {
        if (strcmp(value, "0") == 0 || strcmp(value, "guaranteed") == 0)
            return json_string("guaranteed");
        if (strcmp(value, "1") == 0 || strcmp(value, "opportunistic") == 0)
            return json_string("opportunistic");
        return json_string(value);
    }
    if (t == KV_INT) {
        long long v = strtoll(value, &end, 10);
        if (*value && !*end)
            return json_integer(v);
    }
    double d = strtod(value, &end);
    if (*value && !*end)
        return json_real(d);
    return json_string(value);
}

/* Adds every key=value word of s to data; how many it found. */
static int parse_kv(const char *s, json_t *data)
{
    int n = 0;
    while (*s && n < EVENT_KV_MAX) {
        while (*s == ' ')
            s++;
        size_t wl = strcspn(s, " ");
        const char *eq = memchr(s, '=', wl);
        size_t vl = eq ? wl - (size_t)(eq - s) - 1 : 0;
        if (eq && eq > s && (size_t)(eq - s) < EVENT_KEY_MAX && vl > 0 && vl < EVENT_VALUE_MAX) {
            char key[EVENT_KEY_MAX], value[EVENT_VALUE_MAX];
            memcpy(key, s, (size_t)(eq - s));
            key[eq - s] = '\0';
            memcpy(value, eq + 1, vl);
            value[vl] = '\0';
            json_object_set_new(data, key, typed(key, value));
            n++;
        }
        s += wl;
    }
    return n;
}

/* The sentence shapes, one per kind that writes one. */
static void parse_sentence(const char *kind, const char *d, json_t *data)
{
    double a, b, g;
    long long id;
    int x, y;
    char word[EVENT_VALUE_MAX], why[64];
    if (strcmp(kind, "reserved") == 0 && sscanf(d, "to start by %lf (in %lf s)", &a, &b) == 2) {
        json_object_set_new(data, "start_by", json_real(a));
        json_object_set_new(data, "in_s", json_real(b));
    } else if (strcmp(kind, "started") == 0 && strncmp(d, "on ", 3) == 0 && d[3]) {
        /* "on n1,n2,n3", "... and N more" past 64 nodes; older: "on n1 and others" */
        const char *p = d + 3;
        size_t n = strcspn(p, " ");
        json_t *nodes = json_array();
        for (const char *q = p; q < p + n;) {
            size_t k = strcspn(q, ",");
            if (k > n - (size_t)(q - p))
                k = n - (size_t)(q - p);
            if (k > 0)
                json_array_append_new(nodes, json_stringn(q, k));
            q += k + 1;
        }
        json_object_set_new(data, "node", json_copy(json_array_get(nodes, 0)));
        json_object_set_new(data, "nodes", nodes);
        json_object_set_new(data, "more_nodes",
                            json_boolean(strstr(d, " and others") || strstr(d, " more")));
    } else if (strcmp(kind, "preempted") == 0 &&
               sscanf(d, "for job %lld (%127[^,], %63[^)]); signal %d, grace %lf s, %lf", &id,
                      word, why, &x, &g, &a) == 6) {
        json_object_set_new(data, "for_job", json_integer(id));
        json_object_set_new(data, "for_tenant", json_string(word));
        /* "TIER, reclaim" or "TIER, time-sharing, level L over V"; before the
         * tier was written: "guaranteed" (any reclaim) or "time-sharing, ..." */
        bool tiered = strncmp(why, "guaranteed, ", 12) == 0 ||
                      strncmp(why, "opportunistic, ", 15) == 0;
        if (tiered)
            json_object_set_new(data, "tier", json_stringn(why, strcspn(why, ",")));
        json_object_set_new(data, "cause", json_string(strstr(why, "time-sharing") ? "time-sharing"
                                                       : strstr(why, "moved")      ? "move"
                                                                                   : "reclaim"));
        json_object_set_new(data, "signal", json_integer(x));
        json_object_set_new(data, "grace_s", json_real(g));
        json_object_set_new(data, "lost_gpu_s", json_real(a));
    } else if (strcmp(kind, "requeued") == 0 || strcmp(kind, "held") == 0) {
        /* "every rank stopped (OUTCOME)...", or "OUTCOME; eligible again at T" */
        const char *at = strstr(d, "eligible again at ");
        size_t ol = strcspn(d, ";");
        if (sscanf(d, "every rank stopped (%127[^)])", word) == 1)
            json_object_set_new(data, "outcome", json_string(word));
        else if (at && d[ol] == ';' && ol < sizeof word && strcspn(d, " ") >= ol)
            json_object_set_new(data, "outcome", json_stringn(d, ol));
        if (at && sscanf(at, "eligible again at %lf", &a) == 1)
            json_object_set_new(data, "eligible_at", json_real(a));
    } else if (strcmp(kind, "failed") == 0 && sscanf(d, "%d of %d ranks failed", &x, &y) == 2) {
        json_object_set_new(data, "ranks_failed", json_integer(x));
        json_object_set_new(data, "ranks", json_integer(y));
    } else if (strcmp(kind, "idle-warning") == 0 &&
               sscanf(d, "every rank below %lf%% GPU utilisation for %lf s; stopped and held at "
                      "%lf s", &a, &b, &g) == 3) {
        json_object_set_new(data, "threshold_pct", json_real(a));
        json_object_set_new(data, "idle_s", json_real(b));
        json_object_set_new(data, "window_s", json_real(g));
    } else if (strcmp(kind, "reaped") == 0 &&
               sscanf(d, "idle for %lf s (below %lf%%", &a, &b) == 2) {
        json_object_set_new(data, "idle_s", json_real(a));
        json_object_set_new(data, "threshold_pct", json_real(b));
    } else if (strcmp(kind, "output") == 0 && sscanf(d, "rank %d %127s", &x, word) == 2) {
        json_object_set_new(data, "rank", json_integer(x));
        json_object_set_new(data, "stream", json_string(word));
    }
}

json_t *ctld_event_data(const char *kind, const char *detail)
{
    json_t *data = json_object();
    if (!data || !kind || !detail)
        return data;
    if (strncmp(kind, "step-", 5) == 0) { /* a step's document (steps.c) */
        json_error_t je;
        json_t *doc = json_loads(detail, 0, &je);
        if (json_is_object(doc)) {
            json_decref(data);
            return doc;
        }
        json_decref(doc);
        return data;
    }
    /* an output event's detail is the output itself: only its first line is ours */
    if (strcmp(kind, "output") != 0 && parse_kv(detail, data) > 0)
        return data;
    parse_sentence(kind, detail, data);
    return data;
}

char *ctld_event_redact(const char *kind, const char *detail, json_t *data,
                        bool (*may_see)(const void *ctx, const char *tenant), const void *ctx)
{
    const char *tenant = json_string_value(json_object_get(data, "for_tenant"));
    if (!kind || strcmp(kind, "preempted") != 0 || !detail || !tenant || may_see(ctx, tenant))
        return NULL;
    const char *rest = strchr(detail, ';'); /* "; signal N, grace G s, L GPU-s ..." */
    const char *tier = json_string_value(json_object_get(data, "tier"));
    const char *cause = json_string_value(json_object_get(data, "cause"));
    char buf[512];
    snprintf(buf, sizeof buf, "for another tenant's %s work (%s)%s",
             tier ? tier : "guaranteed", cause ? cause : "reclaim", rest ? rest : "");
    json_object_del(data, "for_job");
    json_object_del(data, "for_tenant");
    return strdup(buf);
}
