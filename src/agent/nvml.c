/*
 * nvml.c - dlopen NVML and fill the function table of nvml.h.
 *
 * Each table entry lists its export names newest first; we take the first one
 * the library has. That is what NVIDIA's own Go bindings do (gpu-facts.md 1.1):
 * the header silently maps nvmlInit to nvmlInit_v2 and so on, and a driver
 * keeps the old exports for binary compatibility, so asking for the newest
 * name first gets the current semantics on new drivers and still runs on old
 * ones. Entries marked required must resolve or the open fails; the rest may
 * stay NULL and their callers report "not supported".
 */
#include "agent/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct func_spec {
    size_t offset; /* of the function pointer in ts_nvml */
    int required;
    const char *names; /* space separated, newest first */
};

static const struct func_spec funcs[TS_NVML_NFUNCS] = {
#define TS_NVML_SPEC(field, args, req, nm) {offsetof(ts_nvml, field), req, nm},
    TS_NVML_FUNCS(TS_NVML_SPEC)
#undef TS_NVML_SPEC
};

#define SYMBOL_NAME_MAX 96

/* dlsym returns void *; ISO C has no conversion to a function pointer, so
 * copy the bits (POSIX guarantees they are the same size). */
static void store_fn(void *slot, void *sym)
{
    _Static_assert(sizeof(void (*)(void)) == sizeof(void *), "function pointers fit void *");
    memcpy(slot, &sym, sizeof sym);
}

/* Resolves one entry; returns where the chosen name starts inside the static
 * spec->names (so it ends at the next space), or NULL with tried listing the
 * names asked for. */
static const char *resolve(ts_nvml *nv, const struct func_spec *spec, char *tried,
                           size_t tried_len)
{
    const char *p = spec->names;
    tried[0] = '\0';
    while (*p) {
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char name[SYMBOL_NAME_MAX];
        if (n >= sizeof name)
            return NULL;
        memcpy(name, p, n);
        name[n] = '\0';
        dlerror();
        void *sym = dlsym(nv->dl, name);
        if (sym) {
            store_fn((char *)nv + spec->offset, sym);
            return p; /* points into the static names string */
        }
        size_t used = strlen(tried);
        if (used + n + 3 < tried_len) {
            if (used)
                strcat(tried, ", ");
            strncat(tried, name, n);
        }
        p += n;
        while (*p == ' ')
            p++;
    }
    return NULL;
}

int agent_nvml_open(const char *path, ts_nvml **out, ts_err *err)
{
    *out = NULL;
    if (!path || !*path)
        path = getenv(TS_NVML_LIBRARY_ENV);
    if (!path || !*path)
        path = TS_NVML_DEFAULT_LIBRARY;

    ts_nvml *nv = calloc(1, sizeof *nv);
    if (!nv)
        return ts_err_set(err, TS_ENOMEM, "nvml: out of memory");
    snprintf(nv->path, sizeof nv->path, "%s", path);
    nv->dl = dlopen(path, RTLD_LAZY | RTLD_GLOBAL);
    if (!nv->dl) {
        const char *why = dlerror();
        int rc = ts_err_set(err, TS_ENOENT, "no NVML: cannot load %s: %s", path,
                            why ? why : "unknown dlopen error");
        free(nv);
        return rc;
    }
    void *es = dlsym(nv->dl, "nvmlErrorString");
    if (es)
        store_fn(&nv->ErrorString, es);

    for (int i = 0; i < TS_NVML_NFUNCS; i++) {
        char tried[256];
        nv->symbol[i] = resolve(nv, &funcs[i], tried, sizeof tried);
        if (!nv->symbol[i] && funcs[i].required) {
            int rc = ts_err_set(err, TS_EIO, "nvml: %s lacks a required function (tried %s)",
                                path, tried);
            dlclose(nv->dl);
            free(nv);
            return rc;
        }
    }

    nvmlReturn_t r = nv->Init();
    if (r != NVML_SUCCESS) {
        int rc = ts_err_set(err, TS_EIO, "nvml: nvmlInit (%.*s) failed: %s (%d)",
                            (int)strcspn(nv->symbol[TS_NVML_FN_Init], " "),
                            nv->symbol[TS_NVML_FN_Init], agent_nvml_strerror(nv, r), (int)r);
        dlclose(nv->dl);
        free(nv);
        return rc;
    }
    *out = nv;
    return 0;
}

void agent_nvml_close(ts_nvml *nv)
{
    if (!nv)
        return;
    nv->Shutdown();
    dlclose(nv->dl);
    free(nv);
}

const char *agent_nvml_strerror(const ts_nvml *nv, nvmlReturn_t rc)
{
    const char *s = nv && nv->ErrorString ? nv->ErrorString(rc) : NULL;
    return s ? s : "unknown NVML error";
}

bool agent_nvml_is_fallback(const ts_nvml *nv, enum ts_nvml_func fn)
{
    return nv->symbol[fn] && nv->symbol[fn] != funcs[fn].names;
}
