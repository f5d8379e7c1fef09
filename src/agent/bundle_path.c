/*
 * bundle_path.c - where a file a container task names is on this node
 * (bundle_path.h).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agent/bundle_path.h"

#define BUNDLE_PATH_MAX 4096

/* name made absolute from cwd, its "." and ".." and repeated slashes
 * resolved by their text ("/.." is "/"), into out; false when too long. */
static bool lexical_path(const char *cwd, const char *name, char *out, size_t len)
{
    char in[BUNDLE_PATH_MAX];
    int n = name[0] == '/' ? snprintf(in, sizeof in, "%s", name)
                           : snprintf(in, sizeof in, "%s/%s", cwd && *cwd ? cwd : "/", name);
    if (n < 0 || (size_t)n >= sizeof in || len < 2)
        return false;
    size_t at = 0; /* out holds "" or "/a/b" */
    out[0] = '\0';
    for (char *save = NULL, *c = strtok_r(in, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            while (at > 0 && out[at - 1] != '/')
                at--;
            at = at > 0 ? at - 1 : 0;
            out[at] = '\0';
            continue;
        }
        size_t cl = strlen(c);
        if (at + 1 + cl + 1 > len)
            return false;
        out[at++] = '/';
        memcpy(out + at, c, cl + 1);
        at += cl;
    }
    if (at == 0)
        snprintf(out, len, "/");
    return true;
}

/* The length of dest ("/" or "/a/b", no trailing slash) when it holds path
 * (path itself or below it), else -1. */
static long holds(const char *dest, const char *path)
{
    size_t dl = strlen(dest);
    while (dl > 1 && dest[dl - 1] == '/')
        dl--;
    if (dl == 1 && dest[0] == '/')
        return 0;
    if (strncmp(dest, path, dl) != 0 || (path[dl] != '\0' && path[dl] != '/'))
        return -1;
    return (long)dl;
}

int agent_bundle_path(const char *bundle, const char *name, char *root, size_t rlen, char *rel,
                      size_t rellen, ts_err *err)
{
    char cfg[BUNDLE_PATH_MAX], path[BUNDLE_PATH_MAX];
    snprintf(cfg, sizeof cfg, "%s/config.json", bundle);
    json_t *c = json_load_file(cfg, 0, NULL);
    if (!json_is_object(c)) {
        json_decref(c);
        return ts_err_set(err, TS_ENOENT, "%s: no container bundle", bundle);
    }
    const char *cwd = json_string_value(json_object_get(json_object_get(c, "process"), "cwd"));
    if (!lexical_path(cwd, name, path, sizeof path)) {
        json_decref(c);
        return ts_err_set(err, TS_EINVAL, "%.200s: a name too long", name);
    }
    /* the mount deepest at path decides, as in the container */
    long best = -1;
    const json_t *in = NULL, *m;
    size_t i;
    json_array_foreach(json_object_get(c, "mounts"), i, m)
    {
        const char *dest = json_string_value(json_object_get(m, "destination"));
        long l = dest && dest[0] == '/' ? holds(dest, path) : -1;
        if (l > best) {
            best = l;
            in = m;
        }
    }
    int rc = 0, n;
    const char *type = in ? json_string_value(json_object_get(in, "type")) : NULL;
    const char *src = in ? json_string_value(json_object_get(in, "source")) : NULL;
    if (!in)
        n = snprintf(root, rlen, "%s/rootfs", bundle);
    else if (type && !strcmp(type, "bind") && src && src[0] == '/')
        n = snprintf(root, rlen, "%s", src);
    else
        n = -1, rc = ts_err_set(err, TS_EINVAL, "%.200s: in the container's %.100s (%.20s), "
                                "not a file of this node", name,
                                json_string_value(json_object_get(in, "destination")),
                                type ? type : "?");
    const char *below = path + (best > 0 ? best : 0);
    while (*below == '/')
        below++;
    if (rc == 0 && (n < 0 || (size_t)n >= rlen ||
                    (size_t)snprintf(rel, rellen, "%s", *below ? below : ".") >= rellen))
        rc = ts_err_set(err, TS_EINVAL, "%.200s: a name too long", name);
    json_decref(c);
    return rc;
}
