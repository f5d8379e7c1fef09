/*
 * mig.c - read, apply and name MIG instances through NVML (see mig.h).
 *
 * Reading walks what the driver says rather than what our tables say: GPU
 * instance profiles by *index* until NVML answers INVALID_ARGUMENT (the index
 * list grows per release), each profile's *id* to list its GPU instances,
 * compute-instance profiles the same way per GI, and the MIG device handles
 * for the UUIDs (gpu-facts.md 1.4, 1.6.13). Every failing call is an error
 * naming it: apply must not decide from a half-read GPU.
 *
 * Applying is three passes over the matched sets: destroy the unwanted idle
 * instances (compute instances first, since nvmlGpuInstanceDestroy answers
 * IN_USE while a GI has any), fix the compute instances of kept ones, create
 * the missing ones at their wanted start with
 * nvmlDeviceCreateGpuInstanceWithPlacement (automatic placement makes the
 * result depend on creation order, gpu-facts.md 2.3) and then one compute
 * instance whose slice count equals the GI's. The driver judges the geometry;
 * we check only what the driver cannot know: that a wanted instance does not
 * land on a busy one that must stay, before anything is destroyed.
 */
#include "agent/mig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROFILE_INDEX_LIMIT 64 /* a guard, not a limit: NVML ends the walk first */
#define ARGS_MAX 96
#define NO_MATCH (-1)

/* One GPU instance as read, with the handles apply needs. */
struct live_gi {
    ts_mig_gi_desc d;
    unsigned slices; /* compute slices of its profile (sliceCount) */
    nvmlGpuInstance_t h;
    nvmlComputeInstance_t ci_h[TS_DISC_MAX_CI];
};

/* GPU-instance profile id -> compute slices, as this GPU reports them. */
struct gi_profiles {
    int n;
    unsigned id[PROFILE_INDEX_LIMIT], slices[PROFILE_INDEX_LIMIT];
};

struct live {
    unsigned gpu;
    nvmlDevice_t dev;
    bool capable, enabled, pending;
    struct gi_profiles prof;
    int ngi;
    struct live_gi gi[TS_DISC_MAX_GI];
};

/* ---- errors ----------------------------------------------------------------------- */

/* "gpu G: <export name>(<args>): <nvmlErrorString>"; the export name is the
 * one the table resolved, so the message names the exact call made. */
__attribute__((format(printf, 7, 8))) static int
fail_nvml(const ts_nvml *nv, enum ts_nvml_func fn, nvmlReturn_t r, unsigned gpu,
          ts_agent_mig_report *rep, ts_err *err, const char *fmt, ...)
{
    char call[TS_AGENT_MIG_CALL_MAX], args[ARGS_MAX];
    const char *s = nv->symbol[fn] ? nv->symbol[fn] : "nvml?";
    snprintf(call, sizeof call, "%.*s", (int)strcspn(s, " "), s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    if (rep) {
        snprintf(rep->failed_call, sizeof rep->failed_call, "%s", call);
        rep->nvml_rc = (int)r;
    }
    return ts_err_set(err, TS_EIO, "gpu %u: %s(%s): %s", gpu, call, args,
                      agent_nvml_strerror(nv, r));
}

#define NEED(nv, field, gpu, err)                                                         \
    do {                                                                                  \
        if (!(nv)->field)                                                                 \
            return ts_err_set(err, TS_EIO, "gpu %u: this NVML (%s) lacks nvml" #field,    \
                              gpu, (nv)->path);                                           \
    } while (0)

/* ---- reading ---------------------------------------------------------------------- */

static int read_profiles(ts_nvml *nv, struct live *lv, ts_err *err)
{
    NEED(nv, DeviceGetGpuInstanceProfileInfo, lv->gpu, err);
    lv->prof.n = 0;
    for (unsigned idx = 0; idx < PROFILE_INDEX_LIMIT; idx++) {
        nvmlGpuInstanceProfileInfo_t info;
        nvmlReturn_t r = nv->DeviceGetGpuInstanceProfileInfo(lv->dev, idx, &info);
        if (r == NVML_ERROR_INVALID_ARGUMENT)
            break; /* past the last index this driver knows */
        if (r == NVML_ERROR_NOT_SUPPORTED)
            continue; /* an index that is not a profile of this GPU */
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_DeviceGetGpuInstanceProfileInfo, r, lv->gpu, NULL,
                             err, "index %u", idx);
        lv->prof.id[lv->prof.n] = info.id;
        lv->prof.slices[lv->prof.n++] = info.sliceCount;
    }
    return 0;
}

static int profile_slices(const struct live *lv, unsigned profile_id)
{
    for (int i = 0; i < lv->prof.n; i++)
        if (lv->prof.id[i] == profile_id)
            return (int)lv->prof.slices[i];
    return -1;
}

static int read_cis(ts_nvml *nv, const struct live *lv, struct live_gi *g, ts_err *err)
{
    NEED(nv, GpuInstanceGetComputeInstanceProfileInfo, lv->gpu, err);
    NEED(nv, GpuInstanceGetComputeInstances, lv->gpu, err);
    NEED(nv, ComputeInstanceGetInfo, lv->gpu, err);
    g->d.nci = 0;
    for (unsigned idx = 0; idx < PROFILE_INDEX_LIMIT; idx++) {
        nvmlComputeInstanceProfileInfo_t info;
        nvmlReturn_t r = nv->GpuInstanceGetComputeInstanceProfileInfo(
            g->h, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
        if (r == NVML_ERROR_INVALID_ARGUMENT)
            break;
        if (r == NVML_ERROR_NOT_SUPPORTED)
            continue; /* a CI size this GI cannot hold */
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_GpuInstanceGetComputeInstanceProfileInfo, r,
                             lv->gpu, NULL, err, "GPU instance %u, index %u", g->d.id, idx);
        nvmlComputeInstance_t cis[TS_DISC_MAX_CI];
        unsigned n = TS_DISC_MAX_CI;
        r = nv->GpuInstanceGetComputeInstances(g->h, info.id, cis, &n);
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_GpuInstanceGetComputeInstances, r, lv->gpu, NULL,
                             err, "GPU instance %u, profile %u", g->d.id, info.id);
        for (unsigned i = 0; i < n && g->d.nci < TS_DISC_MAX_CI; i++) {
            nvmlComputeInstanceInfo_t ci;
            r = nv->ComputeInstanceGetInfo(cis[i], &ci);
            if (r != NVML_SUCCESS)
                return fail_nvml(nv, TS_NVML_FN_ComputeInstanceGetInfo, r, lv->gpu, NULL, err,
                                 "GPU instance %u", g->d.id);
            ts_mig_ci_desc *c = &g->d.ci[g->d.nci];
            memset(c, 0, sizeof *c);
            c->id = ci.id;
            c->profile_id = ci.profileId;
            c->start = ci.placement.start;
            c->size = ci.placement.size;
            g->ci_h[g->d.nci++] = cis[i];
        }
    }
    return 0;
}

/* MIG device UUID of (GI id, CI id): the UUIDs live on MIG device handles,
 * indices 0..max-1 with NOT_FOUND for empty ones (gpu-facts.md 1.4). */
static int find_uuid(ts_nvml *nv, const struct live *lv, unsigned gi_id, unsigned ci_id,
                     char *uuid, size_t len, ts_err *err)
{
    NEED(nv, DeviceGetMaxMigDeviceCount, lv->gpu, err);
    NEED(nv, DeviceGetMigDeviceHandleByIndex, lv->gpu, err);
    NEED(nv, DeviceGetGpuInstanceId, lv->gpu, err);
    NEED(nv, DeviceGetComputeInstanceId, lv->gpu, err);
    uuid[0] = '\0';
    unsigned max = 0;
    nvmlReturn_t r = nv->DeviceGetMaxMigDeviceCount(lv->dev, &max);
    if (r != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_DeviceGetMaxMigDeviceCount, r, lv->gpu, NULL, err,
                         "GPU");
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t mig;
        unsigned gid, cid;
        r = nv->DeviceGetMigDeviceHandleByIndex(lv->dev, i, &mig);
        if (r == NVML_ERROR_NOT_FOUND)
            continue;
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_DeviceGetMigDeviceHandleByIndex, r, lv->gpu, NULL,
                             err, "index %u", i);
        if ((r = nv->DeviceGetGpuInstanceId(mig, &gid)) != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_DeviceGetGpuInstanceId, r, lv->gpu, NULL, err,
                             "MIG device %u", i);
        if ((r = nv->DeviceGetComputeInstanceId(mig, &cid)) != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_DeviceGetComputeInstanceId, r, lv->gpu, NULL, err,
                             "MIG device %u", i);
        if (gid != gi_id || cid != ci_id)
            continue;
        if ((r = nv->DeviceGetUUID(mig, uuid, (unsigned)len)) != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_DeviceGetUUID, r, lv->gpu, NULL, err,
                             "MIG device %u", i);
        return 0;
    }
    return 0; /* none carries it: uuid stays "" */
}

static int cmp_start(const void *a, const void *b)
{
    const struct live_gi *x = a, *y = b;
    return (x->d.start > y->d.start) - (x->d.start < y->d.start);
}

static int read_live(ts_nvml *nv, unsigned gpu, struct live *lv, ts_err *err)
{
    memset(lv, 0, sizeof *lv);
    lv->gpu = gpu;
    unsigned count = 0;
    nvmlReturn_t r = nv->DeviceGetCount(&count);
    if (r != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_DeviceGetCount, r, gpu, NULL, err, "count");
    if (gpu >= count)
        return ts_err_set(err, TS_EINVAL, "gpu %u: no such GPU (NVML lists %u)", gpu, count);
    if ((r = nv->DeviceGetHandleByIndex(gpu, &lv->dev)) != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_DeviceGetHandleByIndex, r, gpu, NULL, err, "%u", gpu);
    if (!nv->DeviceGetMigMode)
        return 0; /* an NVML that predates MIG */
    unsigned cur = 0, pend = 0;
    r = nv->DeviceGetMigMode(lv->dev, &cur, &pend);
    if (r == NVML_ERROR_NOT_SUPPORTED)
        return 0;
    if (r != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_DeviceGetMigMode, r, gpu, NULL, err, "GPU");
    lv->capable = true;
    lv->enabled = cur == NVML_DEVICE_MIG_ENABLE;
    lv->pending = pend == NVML_DEVICE_MIG_ENABLE;
    if (!lv->enabled)
        return 0;
    int rc = read_profiles(nv, lv, err);
    if (rc)
        return rc;
    NEED(nv, DeviceGetGpuInstances, gpu, err);
    NEED(nv, GpuInstanceGetInfo, gpu, err);
    for (int p = 0; p < lv->prof.n; p++) {
        nvmlGpuInstance_t gis[TS_DISC_MAX_GI];
        unsigned n = TS_DISC_MAX_GI;
        r = nv->DeviceGetGpuInstances(lv->dev, lv->prof.id[p], gis, &n);
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_DeviceGetGpuInstances, r, gpu, NULL, err,
                             "profile %u", lv->prof.id[p]);
        for (unsigned i = 0; i < n && lv->ngi < TS_DISC_MAX_GI; i++) {
            nvmlGpuInstanceInfo_t info;
            if ((r = nv->GpuInstanceGetInfo(gis[i], &info)) != NVML_SUCCESS)
                return fail_nvml(nv, TS_NVML_FN_GpuInstanceGetInfo, r, gpu, NULL, err,
                                 "profile %u", lv->prof.id[p]);
            struct live_gi *g = &lv->gi[lv->ngi++];
            g->h = gis[i];
            g->slices = lv->prof.slices[p];
            g->d.id = info.id;
            g->d.profile_id = info.profileId;
            g->d.start = info.placement.start;
            g->d.size = info.placement.size;
            if ((rc = read_cis(nv, lv, g, err)) != 0)
                return rc;
            for (int c = 0; c < g->d.nci; c++)
                if ((rc = find_uuid(nv, lv, g->d.id, g->d.ci[c].id, g->d.ci[c].uuid,
                                    sizeof g->d.ci[c].uuid, err)) != 0)
                    return rc;
        }
    }
    qsort(lv->gi, (size_t)lv->ngi, sizeof lv->gi[0], cmp_start);
    return 0;
}

int agent_mig_read(ts_nvml *nv, unsigned gpu, ts_agent_mig_state *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    struct live *lv = malloc(sizeof *lv);
    if (!lv)
        return ts_err_set(err, TS_ENOMEM, "gpu %u: out of memory", gpu);
    int rc = read_live(nv, gpu, lv, err);
    if (rc == 0) {
        out->capable = lv->capable;
        out->enabled = lv->enabled;
        out->pending = lv->pending;
        out->ngi = lv->ngi;
        for (int i = 0; i < lv->ngi; i++)
            out->gi[i] = lv->gi[i].d;
    }
    free(lv);
    return rc;
}

/* MIG must be on: the agent never switches it (mig.h). */
static int require_mig(const struct live *lv, ts_err *err)
{
    if (!lv->capable)
        return ts_err_set(err, TS_EINVAL, "gpu %u: not MIG capable (NVML has no MIG mode for it)",
                          lv->gpu);
    if (!lv->enabled)
        return ts_err_set(err, TS_EINVAL,
                          "gpu %u: MIG mode is off%s; the agent never changes MIG mode: an "
                          "administrator enables it (nvidia-smi -i %u -mig 1, GPU idle, then "
                          "a GPU reset if asked)",
                          lv->gpu, lv->pending ? " (on after the next GPU reset)" : "", lv->gpu);
    return 0;
}

/* The compute instance a task should get: the one covering the whole GI,
 * else the first; -1 when the GI has none. */
static int main_ci(const struct live_gi *g)
{
    for (int c = 0; c < g->d.nci; c++)
        if (g->d.ci[c].size == g->slices)
            return c;
    return g->d.nci > 0 ? 0 : -1;
}

/* ---- applying --------------------------------------------------------------------- */

static ts_agent_mig_step *add_step(ts_agent_mig_report *rep, int action,
                                   const ts_mig_gi_desc *d, const char *uuid)
{
    if (rep->nsteps >= TS_AGENT_MIG_STEPS_MAX)
        return NULL; /* cannot happen: 7 before, 7 after */
    ts_agent_mig_step *s = &rep->step[rep->nsteps++];
    memset(s, 0, sizeof *s);
    s->action = action;
    s->profile_id = d->profile_id;
    s->start = d->start;
    s->size = d->size;
    s->gi_id = d->id;
    snprintf(s->uuid, sizeof s->uuid, "%s", uuid ? uuid : "");
    switch (action) {
    case TS_AGENT_MIG_KEPT: rep->nkept++; break;
    case TS_AGENT_MIG_KEPT_BUSY: rep->nbusy++; break;
    case TS_AGENT_MIG_DESTROYED: rep->ndestroyed++; break;
    default: rep->ncreated++; break;
    }
    return s;
}

static bool gi_matches_busy(const struct live_gi *g, const ts_agent_mig_busy *b)
{
    if (!b->uuid)
        return (int)g->d.profile_id == b->profile_id && (int)g->d.start == b->start;
    for (int c = 0; c < g->d.nci; c++)
        if (g->d.ci[c].uuid[0] && strcmp(g->d.ci[c].uuid, b->uuid) == 0)
            return true;
    return false;
}

/* busy[g]: a task holds GI g. A UUID that matches nothing while some compute
 * instance has no readable UUID might be that one: such GIs count as busy,
 * since destroying a running task's instance is the one unforgivable error. */
static void mark_busy(const struct live *lv, const ts_agent_mig_busy *busy, int nbusy,
                      bool *is_busy)
{
    bool unmatched_uuid = false;
    for (int b = 0; b < nbusy; b++) {
        bool hit = false;
        for (int g = 0; g < lv->ngi; g++)
            if (gi_matches_busy(&lv->gi[g], &busy[b]))
                is_busy[g] = hit = true;
        if (!hit && busy[b].uuid)
            unmatched_uuid = true;
    }
    for (int g = 0; unmatched_uuid && g < lv->ngi; g++)
        for (int c = 0; c < lv->gi[g].d.nci; c++)
            if (!lv->gi[g].d.ci[c].uuid[0])
                is_busy[g] = true;
}

static int destroy_cis(ts_nvml *nv, const struct live *lv, struct live_gi *g,
                       ts_agent_mig_report *rep, ts_err *err)
{
    NEED(nv, ComputeInstanceDestroy, lv->gpu, err);
    for (int c = 0; c < g->d.nci; c++) {
        nvmlReturn_t r = nv->ComputeInstanceDestroy(g->ci_h[c]);
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_ComputeInstanceDestroy, r, lv->gpu, rep, err,
                             "profile %u, start %u: GPU instance %u, compute instance %u",
                             g->d.profile_id, g->d.start, g->d.id, g->d.ci[c].id);
    }
    g->d.nci = 0;
    return 0;
}

/* Creates the compute instance whose slice count equals the GI's (the CI
 * profile ids are the NVML_COMPUTE_INSTANCE_PROFILE_* values, but we take
 * info.id as the driver reports it) and records it as g's only CI. */
static int create_full_ci(ts_nvml *nv, const struct live *lv, struct live_gi *g,
                          ts_agent_mig_report *rep, ts_err *err)
{
    NEED(nv, GpuInstanceGetComputeInstanceProfileInfo, lv->gpu, err);
    NEED(nv, GpuInstanceCreateComputeInstance, lv->gpu, err);
    NEED(nv, ComputeInstanceGetInfo, lv->gpu, err);
    nvmlComputeInstanceProfileInfo_t info;
    bool found = false;
    for (unsigned idx = 0; idx < PROFILE_INDEX_LIMIT && !found; idx++) {
        nvmlReturn_t r = nv->GpuInstanceGetComputeInstanceProfileInfo(
            g->h, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
        if (r == NVML_ERROR_INVALID_ARGUMENT)
            break;
        if (r == NVML_ERROR_NOT_SUPPORTED)
            continue;
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_GpuInstanceGetComputeInstanceProfileInfo, r,
                             lv->gpu, rep, err, "profile %u, start %u: index %u",
                             g->d.profile_id, g->d.start, idx);
        found = info.sliceCount == g->slices;
    }
    if (!found)
        return ts_err_set(err, TS_EIO,
                          "gpu %u: profile %u, start %u: no compute-instance profile has the "
                          "%u slices of GPU instance %u",
                          lv->gpu, g->d.profile_id, g->d.start, g->slices, g->d.id);
    nvmlComputeInstance_t ci;
    nvmlReturn_t r = nv->GpuInstanceCreateComputeInstance(g->h, info.id, &ci);
    if (r != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_GpuInstanceCreateComputeInstance, r, lv->gpu, rep, err,
                         "profile %u, start %u: GPU instance %u, compute profile %u",
                         g->d.profile_id, g->d.start, g->d.id, info.id);
    ts_mig_ci_desc *c = &g->d.ci[0];
    memset(c, 0, sizeof *c);
    g->ci_h[0] = ci; /* recorded at once, so a caller undoing this finds it */
    g->d.nci = 1;
    nvmlComputeInstanceInfo_t ci_info;
    if ((r = nv->ComputeInstanceGetInfo(ci, &ci_info)) != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_ComputeInstanceGetInfo, r, lv->gpu, rep, err,
                         "profile %u, start %u: GPU instance %u", g->d.profile_id, g->d.start,
                         g->d.id);
    c->id = ci_info.id;
    c->profile_id = ci_info.profileId;
    c->start = ci_info.placement.start;
    c->size = ci_info.placement.size;
    return find_uuid(nv, lv, g->d.id, c->id, c->uuid, sizeof c->uuid, err);
}

/* The memory-slice width of profile_id, from the driver's placement list. */
static int placement_size(ts_nvml *nv, const struct live *lv, unsigned profile_id,
                          unsigned *size, ts_agent_mig_report *rep, ts_err *err)
{
    NEED(nv, DeviceGetGpuInstancePossiblePlacements, lv->gpu, err);
    nvmlGpuInstancePlacement_t pl[TS_MIG_MEM_SLICES];
    unsigned n = TS_MIG_MEM_SLICES;
    nvmlReturn_t r = nv->DeviceGetGpuInstancePossiblePlacements(lv->dev, profile_id, pl, &n);
    if (r == NVML_SUCCESS && n == 0)
        r = NVML_ERROR_NOT_SUPPORTED; /* a profile with nowhere to go */
    if (r != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_DeviceGetGpuInstancePossiblePlacements, r, lv->gpu,
                         rep, err, "profile %u", profile_id);
    *size = pl[0].size; /* one profile, one width */
    return 0;
}

static int create_gi(ts_nvml *nv, struct live *lv, unsigned profile_id, unsigned start,
                     unsigned size, ts_agent_mig_report *rep, ts_err *err)
{
    NEED(nv, DeviceCreateGpuInstanceWithPlacement, lv->gpu, err);
    NEED(nv, GpuInstanceGetInfo, lv->gpu, err);
    NEED(nv, GpuInstanceDestroy, lv->gpu, err);
    int slices = profile_slices(lv, profile_id);
    if (slices < 0)
        return ts_err_set(err, TS_EINVAL,
                          "gpu %u: profile %u, start %u: not a GPU-instance profile of this GPU",
                          lv->gpu, profile_id, start);
    const nvmlGpuInstancePlacement_t pl = {start, size};
    nvmlGpuInstance_t h;
    nvmlReturn_t r = nv->DeviceCreateGpuInstanceWithPlacement(lv->dev, profile_id, &pl, &h);
    if (r != NVML_SUCCESS)
        return fail_nvml(nv, TS_NVML_FN_DeviceCreateGpuInstanceWithPlacement, r, lv->gpu, rep,
                         err, "profile %u, start %u, size %u", profile_id, start, size);
    struct live_gi g;
    memset(&g, 0, sizeof g);
    g.h = h;
    g.slices = (unsigned)slices;
    nvmlGpuInstanceInfo_t info;
    if ((r = nv->GpuInstanceGetInfo(h, &info)) != NVML_SUCCESS) {
        fail_nvml(nv, TS_NVML_FN_GpuInstanceGetInfo, r, lv->gpu, rep, err,
                  "profile %u, start %u", profile_id, start);
        nv->GpuInstanceDestroy(h);
        return TS_EIO;
    }
    g.d.id = info.id;
    g.d.profile_id = info.profileId;
    g.d.start = info.placement.start;
    g.d.size = info.placement.size;
    int rc = create_full_ci(nv, lv, &g, rep, err);
    if (rc) {
        /* a GI without its CI is nothing a task can use: undo it, so the GPU
         * is as the report says (best effort; the next apply retries) */
        if (g.d.nci > 0 && nv->ComputeInstanceDestroy)
            nv->ComputeInstanceDestroy(g.ci_h[0]);
        nv->GpuInstanceDestroy(h);
        return rc;
    }
    add_step(rep, TS_AGENT_MIG_CREATED, &g.d, g.d.ci[0].uuid);
    return 0;
}

static bool ranges_overlap(unsigned a_start, unsigned a_size, unsigned b_start,
                           unsigned b_size)
{
    return a_start < b_start + b_size && b_start < a_start + a_size;
}

/* The wanted layout, checked before the driver is asked anything. */
static int layout_check(unsigned gpu, const ts_mig_layout *want, const ts_agent_mig_busy *busy,
                        int nbusy, ts_err *err)
{
    if (want->n < 0 || want->n > TS_MIG_MAX_INSTANCES)
        return ts_err_set(err, TS_EINVAL, "gpu %u: layout.n: must be 0..%d, not %d", gpu,
                          TS_MIG_MAX_INSTANCES, want->n);
    for (int i = 0; i < want->n; i++)
        if (want->inst[i].profile_id < 0 || want->inst[i].start < 0 ||
            want->inst[i].start >= TS_MIG_MEM_SLICES)
            return ts_err_set(err, TS_EINVAL,
                              "gpu %u: layout.inst[%d]: profile %d, start %d: start must be "
                              "0..%d and the profile a non-negative id",
                              gpu, i, want->inst[i].profile_id, want->inst[i].start,
                              TS_MIG_MEM_SLICES - 1);
    if (nbusy < 0 || (nbusy > 0 && !busy))
        return ts_err_set(err, TS_EINVAL, "gpu %u: busy: %d entries but no list", gpu, nbusy);
    return 0;
}

/* Which present GPU instance each wanted one is (NO_MATCH: to be made), and
 * back; which present ones a task uses; the width of each one to make. */
struct mig_match {
    int want_gi[TS_MIG_MAX_INSTANCES], gi_want[TS_DISC_MAX_GI];
    bool is_busy[TS_DISC_MAX_GI];
    unsigned want_size[TS_MIG_MAX_INSTANCES];
};

/* Wanted instances are matched to present ones by (profile id, start). */
static void match_instances(const struct live *lv, const ts_mig_layout *want,
                            const ts_agent_mig_busy *busy, int nbusy, struct mig_match *mm)
{
    memset(mm, 0, sizeof *mm);
    for (int g = 0; g < lv->ngi; g++)
        mm->gi_want[g] = NO_MATCH;
    for (int i = 0; i < want->n; i++) {
        mm->want_gi[i] = NO_MATCH;
        for (int g = 0; g < lv->ngi && mm->want_gi[i] == NO_MATCH; g++)
            if (mm->gi_want[g] == NO_MATCH &&
                (int)lv->gi[g].d.profile_id == want->inst[i].profile_id &&
                (int)lv->gi[g].d.start == want->inst[i].start) {
                mm->want_gi[i] = g;
                mm->gi_want[g] = i;
            }
    }
    mark_busy(lv, busy, nbusy, mm->is_busy);
}

/* A wanted instance on top of a busy one that stays can never be made:
 * refused before anything is destroyed. Fills want_size. */
static int refuse_overlaps(ts_nvml *nv, const struct live *lv, const ts_mig_layout *want,
                           struct mig_match *mm, ts_agent_mig_report *rep, ts_err *err)
{
    int rc = 0;
    for (int i = 0; i < want->n && rc == 0; i++) {
        if (mm->want_gi[i] != NO_MATCH)
            continue;
        rc = placement_size(nv, lv, (unsigned)want->inst[i].profile_id, &mm->want_size[i], rep,
                            err);
        for (int g = 0; g < lv->ngi && rc == 0; g++)
            if (mm->is_busy[g] && ranges_overlap((unsigned)want->inst[i].start,
                                                 mm->want_size[i], lv->gi[g].d.start,
                                                 lv->gi[g].d.size))
                rc = ts_err_set(err, TS_ENOSPC,
                                "gpu %u: profile %d, start %d: overlaps GPU instance %u "
                                "(profile %u, slots %u-%u) where a task runs; nothing changed",
                                lv->gpu, want->inst[i].profile_id, want->inst[i].start,
                                lv->gi[g].d.id, lv->gi[g].d.profile_id, lv->gi[g].d.start,
                                lv->gi[g].d.start + lv->gi[g].d.size - 1);
    }
    return rc;
}

/* Step 1: unwanted idle instances are destroyed, CIs first (the GI refuses
 * otherwise); unwanted busy ones are kept and reported. */
static int destroy_unwanted(ts_nvml *nv, struct live *lv, const struct mig_match *mm,
                            ts_agent_mig_report *rep, ts_err *err)
{
    for (int g = 0; g < lv->ngi; g++) {
        struct live_gi *gi = &lv->gi[g];
        if (mm->gi_want[g] != NO_MATCH)
            continue;
        int m = main_ci(gi);
        char old_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        snprintf(old_uuid, sizeof old_uuid, "%s", m >= 0 ? gi->d.ci[m].uuid : "");
        if (mm->is_busy[g]) {
            add_step(rep, TS_AGENT_MIG_KEPT_BUSY, &gi->d, old_uuid);
            continue;
        }
        int rc = destroy_cis(nv, lv, gi, rep, err);
        if (rc != 0)
            return rc;
        if (!nv->GpuInstanceDestroy)
            return ts_err_set(err, TS_EIO, "gpu %u: this NVML lacks nvmlGpuInstanceDestroy",
                              lv->gpu);
        nvmlReturn_t r = nv->GpuInstanceDestroy(gi->h);
        if (r != NVML_SUCCESS)
            return fail_nvml(nv, TS_NVML_FN_GpuInstanceDestroy, r, lv->gpu, rep, err,
                             "profile %u, start %u: GPU instance %u", gi->d.profile_id,
                             gi->d.start, gi->d.id);
        add_step(rep, TS_AGENT_MIG_DESTROYED, &gi->d, old_uuid);
    }
    return 0;
}

/* Step 2: a kept instance gets one compute instance covering the GI, unless
 * a task uses it. */
static int keep_wanted(ts_nvml *nv, struct live *lv, const struct mig_match *mm,
                       ts_agent_mig_report *rep, ts_err *err)
{
    for (int g = 0; g < lv->ngi; g++) {
        struct live_gi *gi = &lv->gi[g];
        if (mm->gi_want[g] == NO_MATCH)
            continue;
        bool whole = gi->d.nci == 1 && gi->d.ci[0].size == gi->slices;
        bool rebuilt = false;
        if (!whole && !mm->is_busy[g]) {
            int rc = destroy_cis(nv, lv, gi, rep, err);
            if (rc == 0)
                rc = create_full_ci(nv, lv, gi, rep, err);
            if (rc != 0)
                return rc;
            rebuilt = true;
        }
        int m = main_ci(gi);
        ts_agent_mig_step *s = add_step(rep, TS_AGENT_MIG_KEPT, &gi->d,
                                        m >= 0 ? gi->d.ci[m].uuid : "");
        if (s)
            s->ci_rebuilt = rebuilt;
    }
    return 0;
}

int agent_mig_apply(ts_nvml *nv, unsigned gpu, const ts_mig_layout *want,
                       const ts_agent_mig_busy *busy, int nbusy, ts_agent_mig_report *report,
                       ts_err *err)
{
    ts_agent_mig_report scratch;
    ts_agent_mig_report *rep = report ? report : &scratch;
    memset(rep, 0, sizeof *rep);
    rep->gpu = gpu;
    static const ts_mig_layout empty = {0};
    if (!want)
        want = &empty;
    int rc = layout_check(gpu, want, busy, nbusy, err);
    if (rc)
        return rc;
    struct live *lv = malloc(sizeof *lv);
    if (!lv)
        return ts_err_set(err, TS_ENOMEM, "gpu %u: out of memory", gpu);
    rc = read_live(nv, gpu, lv, err);
    if (rc == 0)
        rc = require_mig(lv, err);
    if (rc) {
        free(lv);
        return rc;
    }
    struct mig_match mm;
    match_instances(lv, want, busy, nbusy, &mm);
    rc = refuse_overlaps(nv, lv, want, &mm, rep, err);
    if (rc == 0)
        rc = destroy_unwanted(nv, lv, &mm, rep, err);
    if (rc == 0)
        rc = keep_wanted(nv, lv, &mm, rep, err);
    /* step 3: the missing ones are made where the controller placed them */
    for (int i = 0; i < want->n && rc == 0; i++)
        if (mm.want_gi[i] == NO_MATCH)
            rc = create_gi(nv, lv, (unsigned)want->inst[i].profile_id,
                           (unsigned)want->inst[i].start, mm.want_size[i], rep, err);
    free(lv);
    return rc;
}

int agent_mig_uuid(ts_nvml *nv, unsigned gpu, int profile_id, int start, char *uuid,
                      size_t len, ts_err *err)
{
    if (len > 0)
        uuid[0] = '\0';
    struct live *lv = malloc(sizeof *lv);
    if (!lv)
        return ts_err_set(err, TS_ENOMEM, "gpu %u: out of memory", gpu);
    int rc = read_live(nv, gpu, lv, err);
    if (rc == 0)
        rc = require_mig(lv, err);
    int found = NO_MATCH;
    for (int g = 0; rc == 0 && g < lv->ngi && found == NO_MATCH; g++)
        if ((int)lv->gi[g].d.profile_id == profile_id && (int)lv->gi[g].d.start == start)
            found = g;
    if (rc == 0 && found == NO_MATCH)
        rc = ts_err_set(err, TS_ENOENT, "gpu %u: no GPU instance of profile %d at start %d",
                        gpu, profile_id, start);
    if (rc == 0) {
        const struct live_gi *g = &lv->gi[found];
        int m = main_ci(g);
        if (m < 0 || !g->d.ci[m].uuid[0])
            rc = ts_err_set(err, TS_ENOENT,
                            "gpu %u: GPU instance %u (profile %d, start %d) has %s", gpu,
                            g->d.id, profile_id, start,
                            m < 0 ? "no compute instance" : "no MIG device UUID");
        else if (strlen(g->d.ci[m].uuid) >= len)
            rc = ts_err_set(err, TS_EINVAL, "gpu %u: uuid buffer of %zu bytes is too small",
                            gpu, len);
        else
            memcpy(uuid, g->d.ci[m].uuid, strlen(g->d.ci[m].uuid) + 1);
    }
    free(lv);
    return rc;
}

/* ---- report ----------------------------------------------------------------------- */

const char *agent_mig_action_name(int action)
{
    switch (action) {
    case TS_AGENT_MIG_KEPT: return "kept";
    case TS_AGENT_MIG_KEPT_BUSY: return "kept-busy";
    case TS_AGENT_MIG_DESTROYED: return "destroyed";
    case TS_AGENT_MIG_CREATED: return "created";
    default: return "?";
    }
}

json_t *agent_mig_report_json(const ts_agent_mig_report *rep)
{
    json_t *steps = json_array();
    if (!steps)
        return NULL;
    for (int i = 0; i < rep->nsteps; i++) {
        const ts_agent_mig_step *s = &rep->step[i];
        json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "action",
                              agent_mig_action_name(s->action), "profile_id",
                              (json_int_t)s->profile_id, "start", (json_int_t)s->start, "size",
                              (json_int_t)s->size, "gpu_instance_id", (json_int_t)s->gi_id,
                              "uuid", s->uuid);
        if (j && s->ci_rebuilt)
            json_object_set_new(j, "ci_rebuilt", json_true());
        if (!j || json_array_append_new(steps, j) != 0) {
            json_decref(steps);
            return NULL;
        }
    }
    json_t *out = json_pack("{s:I, s:o, s:i, s:i, s:i, s:i}", "gpu", (json_int_t)rep->gpu,
                            "steps", steps, "created", rep->ncreated, "destroyed",
                            rep->ndestroyed, "kept", rep->nkept, "busy", rep->nbusy);
    if (out && rep->failed_call[0]) {
        json_object_set_new(out, "failed_call", json_string(rep->failed_call));
        json_object_set_new(out, "nvml_rc", json_integer(rep->nvml_rc));
    }
    return out;
}
