/*
 * spec_json.c - a parsed job spec written back as canonical JSON, and the
 * small questions asked of a spec afterwards (its GPU count, its errors on
 * one line).
 *
 * The store keeps the canonical form, so two equal specs must give the same
 * bytes and parsing the bytes must give the spec back field by field: keys
 * in one fixed order, every default written out (null where the spec says
 * "the controller's default"), durations in seconds and a GPU share as
 * "gpus": 1 with "gpu_fraction". Numbers that are not whole are printed with
 * JSON_REAL_DIGITS significant digits: the parser keeps durations to the
 * millisecond and shares to the milli-GPU, so 15 digits print them exactly
 * and read back to the same double, without the 17-digit noise
 * (0.29999999999999999) of the shortest-exact default. A few characters
 * jansson writes as they are are escaped afterwards, so that the YAML reader
 * gives them back too (yaml_safe).
 */
#include "tessera/spec.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_scalar.h"
#include "tessera/model.h"
#include "tessera/tenant.h"

#define JSON_REAL_DIGITS 15
#define JSON_EXACT_INT_MAX 9007199254740992.0 /* 2^53: doubles are whole and exact below */
#define JSON_ESCAPE_LEN 6                     /* "\u2028" */

/* Adds key: value to obj; a NULL value (allocation failure, or a string that
 * is not UTF-8 in a spec built by hand) turns *ok false. */
static void put(json_t *obj, const char *key, json_t *value, bool *ok)
{
    if (!value || json_object_set_new(obj, key, value) != 0)
        *ok = false;
}

static void append(json_t *arr, json_t *value, bool *ok)
{
    if (!value || json_array_append_new(arr, value) != 0)
        *ok = false;
}

static json_t *string_or_null(const char *s) { return s && s[0] ? json_string(s) : json_null(); }

static json_t *seconds(double s)
{
    if (s == floor(s) && fabs(s) < JSON_EXACT_INT_MAX)
        return json_integer((json_int_t)s);
    return json_real(s);
}

/* An elastic group's {min, max}, else the plain number. */
static json_t *range_or_int(int v, int max)
{
    if (max <= 0)
        return json_integer(v);
    return json_pack("{s:i,s:i}", "min", v, "max", max);
}

static json_t *task_json(const ts_task_spec *t, bool *ok)
{
    json_t *o = json_object();
    if (!o) {
        *ok = false;
        return NULL;
    }
    bool share = !t->mig_profile[0] && t->gpu_milli > 0 && t->gpu_milli < TS_MILLI_PER_GPU;
    put(o, "count", range_or_int(t->count, t->count_max), ok);
    put(o, "gpus", range_or_int(t->gpus, t->gpus_max), ok);
    put(o, "gpu_fraction", share ? json_real((double)t->gpu_milli / TS_MILLI_PER_GPU) : json_null(),
        ok);
    put(o, "gpu_memory_mib", json_integer(t->gpu_mem_mib), ok);
    put(o, "gpu_model", string_or_null(t->gpu_model), ok);
    put(o, "mig_profile", string_or_null(t->mig_profile), ok);
    put(o, "cpu_milli", json_integer(t->cpu_milli), ok);
    put(o, "memory_mib", json_integer(t->mem_mib), ok);
    return o;
}

static json_t *signal_json(int sig)
{
    if (sig <= 0)
        return json_null();
    const char *name = api_spec_signal_name(sig);
    return name ? json_string(name) : json_integer(sig);
}

/* network: left out unless asked (older specs stay byte for byte). */
static void put_network(json_t *root, const ts_job_spec *s, bool *ok)
{
    if (s->dedicated_nics || s->npublish > 0) { /* left out unless asked: older specs stay
                                                 * byte for byte */
        json_t *nw = json_pack("{s:s}", "mode", s->host_network ? "host" : "tenant");
        if (s->dedicated_nics)
            json_object_set_new(nw, "nics", json_string("dedicated"));
        if (s->npublish > 0) {
            json_t *pl = json_array();
            for (int i = 0; i < s->npublish; i++) {
                char port[16];
                snprintf(port, sizeof port, "%u/%s", (unsigned)s->publish[i].port,
                         s->publish[i].udp ? "udp" : "tcp");
                json_array_append_new(pl, json_string(port));
            }
            json_object_set_new(nw, "publish", pl);
        }
        put(root, "network", nw, ok);
    } else if (s->host_network)
        put(root, "network", json_string("host"), ok);
}

/* The image, its pull secret, mounts, user and data: each left out when none. */
static void put_image(json_t *root, const ts_job_spec *s, bool *ok)
{
    if (s->image) /* left out when none, as secrets are */
        put(root, "image", json_string(s->image), ok);
    if (s->image_secret[0])
        put(root, "image_pull_secret", json_string(s->image_secret), ok);
    if (s->nmounts > 0) {
        json_t *ms = json_array();
        for (int i = 0; ms && i < s->nmounts; i++)
            append(ms, json_pack("{s:s,s:s,s:b}", "host", s->mounts[i].host, "path",
                                 s->mounts[i].path, "write", s->mounts[i].write), ok);
        put(root, "mounts", ms, ok);
    }
    if (s->user[0]) /* left out when none */
        put(root, "user", json_string(s->user), ok);
    if (s->ndata > 0) { /* left out when none: older specs stay byte for byte */
        json_t *ds = json_array();
        for (int i = 0; ds && i < s->ndata; i++)
            append(ds, json_pack("{s:s,s:s}", "ref", s->data[i].ref, "path", s->data[i].path),
                   ok);
        put(root, "data", ds, ok);
    }
}

/* Where it may run and when: constraint, nodes, reservation, secrets (each
 * left out when unset, as secrets: older specs stay byte for byte). */
static void put_select(json_t *root, const ts_job_spec *s, bool *ok)
{
    /* left out when unset, as secrets: older specs stay byte for byte */
    if (s->constraint)
        put(root, "constraint", json_string(s->constraint), ok);
    if (s->nodelist)
        put(root, "nodelist", json_string(s->nodelist), ok);
    if (s->exclude)
        put(root, "exclude", json_string(s->exclude), ok);
    if (s->reservation[0])
        put(root, "reservation", json_string(s->reservation), ok);
    if (s->nsecrets > 0) { /* left out when none: older specs stay byte for byte */
        json_t *sec = json_array();
        for (int i = 0; sec && i < s->nsecrets; i++)
            append(sec, json_pack("{s:s,s:s}", "name", s->secrets[i].name,
                                  s->secrets[i].file ? "file" : "env", s->secrets[i].target),
                   ok);
        put(root, "secrets", sec, ok);
    }
}

/* hold, nice and interactive: left out when unset. */
static void put_options(json_t *root, const ts_job_spec *s, bool *ok)
{
    if (s->hold) /* left out when false, as secrets */
        put(root, "hold", json_true(), ok);
    if (s->nice) /* left out when 0 */
        put(root, "nice", json_integer(s->nice), ok);
    if (s->interactive) { /* left out unless asked: older specs stay byte for byte */
        json_t *it = json_pack("{s:b}", "terminal", s->interactive_tty);
        if (it && s->tty_rows > 0)
            json_object_set_new(it, "rows", json_integer(s->tty_rows));
        if (it && s->tty_cols > 0)
            json_object_set_new(it, "cols", json_integer(s->tty_cols));
        put(root, "interactive", it, ok);
    }
}

/* notify: left out when none, as secrets. */
static void put_notify(json_t *root, const ts_job_spec *s, bool *ok)
{
    if (s->notify_url || s->notify_mail) { /* left out when none, as secrets */
        json_t *on = json_array();
        static const char *const NAMES[] = {"start", "end", "fail"};
        for (int b = 0; on && b < 3; b++)
            if (s->notify_on & (1u << b))
                append(on, json_string(NAMES[b]), ok);
        json_t *nt = json_object();
        if (s->notify_url) /* url first: a webhook-only spec stays byte for byte */
            put(nt, "url", json_string(s->notify_url), ok);
        put(nt, "on", on, ok);
        if (s->notify_mail) {
            json_t *to = json_array();
            for (const char *p = s->notify_mail; to && *p;) {
                size_t l = strcspn(p, ",");
                append(to, json_stringn(p, l), ok);
                p += l + (p[l] == ',');
            }
            put(nt, "mail", to, ok);
        }
        put(root, "notify", nt, ok);
    }
}

static json_t *spec_json(const ts_job_spec *s, bool *ok)
{
    json_t *root = json_object(), *tasks = json_array(), *topo = json_object(),
           *ckpt = json_object(), *idle = json_object(), *argv = json_array(), *env = json_object();
    put(root, "tenant", json_string(s->tenant), ok);
    put(root, "name", json_string(s->name), ok);
    put(root, "tier",
        json_string(s->tier == TS_TIER_OPPORTUNISTIC ? "opportunistic" : "guaranteed"), ok);
    put(root, "priority_class", json_string(s->priority_class), ok);

    for (int i = 0; tasks && i < s->ntasks; i++)
        append(tasks, task_json(&s->tasks[i], ok), ok);
    put(root, "tasks", tasks, ok);

    if (topo) {
        put(topo, "required", json_string(s->required_level[0] ? s->required_level : "any"), ok);
        put(topo, "preferred", string_or_null(s->preferred_level), ok);
        put(topo, "rail_aligned", json_boolean(s->rail_aligned), ok);
    }
    put(root, "topology", topo, ok);
    put(root, "time_limit", seconds(s->time_limit_s), ok);
    put(root, "duration", seconds(s->duration_s), ok);
    if (ckpt) {
        put(ckpt, "signal", signal_json(s->ckpt_signal), ok);
        put(ckpt, "grace", s->ckpt_grace_s < 0 ? json_null() : seconds(s->ckpt_grace_s), ok);
    }
    put(root, "checkpoint", ckpt, ok);
    if (idle)
        put(idle, "timeout", seconds(s->idle_timeout_s), ok);
    put(root, "idle", idle, ok);

    for (int i = 0; argv && i < s->argc; i++)
        append(argv, json_string(s->argv[i]), ok);
    put(root, "command", argv, ok);
    for (int i = 0; env && i < s->nenv; i++) {
        const char *eq = strchr(s->env[i], '=');
        char name[TS_ERR_MSG_MAX];
        if (!eq || (size_t)(eq - s->env[i]) >= sizeof name) {
            *ok = false;
            break;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - s->env[i]), s->env[i]);
        put(env, name, json_string(eq + 1), ok);
    }
    put(root, "env", env, ok);
    put(root, "workdir", string_or_null(s->workdir), ok);
    put(root, "array_size", json_integer(s->array_size), ok);
    put(root, "dependency", string_or_null(s->dependency), ok);
    put(root, "array_throttle", s->array_throttle > 0 ? json_integer(s->array_throttle)
                                                      : json_null(), ok);
    put_network(root, s, ok);
    put_image(root, s, ok);
    put_select(root, s, ok);
    put_options(root, s, ok);
    put_notify(root, s, ok);
    return root;
}

/* The length of a character at p that jansson writes raw but libyaml would
 * not read back as itself (0 for any other), and its code point. libyaml
 * refuses DEL, the C1 controls, U+FFFE and U+FFFF in its input, reads NEL,
 * LS and PS (U+0085, U+2028, U+2029) as line breaks and folds them inside a
 * quoted string, and skips a BOM (U+FEFF) at the start of a line. */
static int yaml_unsafe(const unsigned char *p, unsigned *cp)
{
    if (p[0] == 0x7F) {
        *cp = 0x7F;
        return 1;
    }
    if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) {
        *cp = p[1];
        return 2;
    }
    if (p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) {
        *cp = 0x2000u | (p[2] - 0x80u);
        return 3;
    }
    if (p[0] == 0xEF && ((p[1] == 0xBB && p[2] == 0xBF) || (p[1] == 0xBF && p[2] >= 0xBE))) {
        *cp = 0xF000u | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
        return 3;
    }
    return 0;
}

/* json with those characters as \uXXXX escapes (JSON's own syntax is ASCII,
 * so they can only be inside strings); json itself when there are none. */
static char *yaml_safe(char *json)
{
    size_t extra = 0;
    unsigned cp;
    for (const unsigned char *p = (const unsigned char *)json; *p; p++)
        if (yaml_unsafe(p, &cp))
            extra += JSON_ESCAPE_LEN;
    if (!extra)
        return json;
    size_t len = strlen(json);
    char *out = malloc(len + extra + 1), *o = out;
    if (out) {
        for (const unsigned char *p = (const unsigned char *)json; *p;) {
            int n = yaml_unsafe(p, &cp);
            if (n) {
                snprintf(o, JSON_ESCAPE_LEN + 1, "\\u%04x", cp);
                o += JSON_ESCAPE_LEN;
                p += n;
            } else {
                *o++ = (char)*p++;
            }
        }
        *o = '\0';
    }
    free(json);
    return out;
}

char *ts_spec_to_json(const ts_job_spec *spec)
{
    if (!spec)
        return NULL;
    bool ok = true;
    json_t *root = spec_json(spec, &ok);
    char *text =
        ok && root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(JSON_REAL_DIGITS)) : NULL;
    json_decref(root);
    return text ? yaml_safe(text) : NULL;
}

int64_t ts_spec_gpus(const ts_job_spec *spec)
{
    int64_t n = 0;
    for (int i = 0; spec && i < spec->ntasks; i++) {
        const ts_task_spec *t = &spec->tasks[i];
        n += (int64_t)t->count * (t->mig_profile[0] ? 1 : t->gpus);
    }
    return n;
}

/* Drops a UTF-8 sequence cut short at the end of s, so that a message cut to
 * fit a buffer is still valid UTF-8. */
static void trim_partial_utf8(char *s)
{
    size_t n = strlen(s), lead = n;
    while (lead > 0 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead == 0)
        return;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (n - (lead - 1) < want)
        s[lead - 1] = '\0';
}

void ts_spec_errors_join(const ts_spec_errors *errs, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; errs && i < errs->n && i < TS_SPEC_MAX_ERRORS && used < size; i++) {
        int w = snprintf(buf + used, size - used, "%s%s", i ? "; " : "", errs->msg[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (errs && errs->more > 0 && used < size)
        used += (size_t)snprintf(buf + used, size - used, "; and %d more", errs->more);
    if (used >= size)
        trim_partial_utf8(buf);
}
