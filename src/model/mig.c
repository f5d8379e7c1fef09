/*
 * mig.c - MIG geometry: the per-GPU profile tables, layout validation, the
 * placement search for a requested mix, and the choice of a start slot.
 *
 * The tables are static const data transcribed from gpu-facts.md section 2
 * (profile IDs, memory slices, start masks, max counts). The four geometries
 * share placements and differ only in names and memory sizes. mem_mib is the
 * nominal size in the name times 1024 (1g.5gb -> 5120 MiB); drivers report a
 * little less, and NVML's memorySizeMB is authoritative at runtime.
 *
 * A layout has at most 7 instances on an 8-slot axis, so everything here is a
 * brute-force walk over tiny sets: validation is O(n * 8), the mix search is a
 * backtracking search over starts (with symmetry breaking for repeated
 * profiles) that keeps the placement leaving the most room. Nothing allocates;
 * nothing is mutable outside the caller's layout.
 */
#include "tessera/mig.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define MIB_PER_GB 1024
#define MIG_COMPUTE_SLICES 7
#define MIG_SLOTS_ALL 0x7F    /* starts 0..6 */
#define MIG_SLOTS_PAIRS 0x55  /* starts 0,2,4,6 */
#define MIG_SLOTS_2G 0x15     /* starts 0,2,4 */
#define MIG_SLOTS_HALVES 0x11 /* starts 0,4 */
#define MIG_SLOTS_FIRST 0x01  /* start 0 */
#define MIG_LIST_MAX 64       /* "0,1,2,3,4,5,6" and friends */
#define MIG_MIX_MAX 200       /* "4g.71gb + 2g.35gb x2 + ..." */
#define MIG_REQUEST_MAX 28    /* longest mix we name in a refusal; 4x a full GPU */

/* One row per profile, smallest first, in the order of gpu-facts 2.4-2.7. */
#define MIG_ROWS(g1, g1x2, g2, g3, g4, g7, n1, n1me, n1x2, n2, n3, n4, n7)                \
    {                                                                                  \
        {TS_MIG_P_1G, n1, 1, 1, MIG_SLOTS_ALL, 7, (int64_t)(g1)*MIB_PER_GB},           \
        {TS_MIG_P_1G_ME, n1me, 1, 1, MIG_SLOTS_ALL, 1, (int64_t)(g1)*MIB_PER_GB},      \
        {TS_MIG_P_1G_2X, n1x2, 1, 2, MIG_SLOTS_PAIRS, 4, (int64_t)(g1x2)*MIB_PER_GB},  \
        {TS_MIG_P_2G, n2, 2, 2, MIG_SLOTS_2G, 3, (int64_t)(g2)*MIB_PER_GB},            \
        {TS_MIG_P_3G, n3, 3, 4, MIG_SLOTS_HALVES, 2, (int64_t)(g3)*MIB_PER_GB},        \
        {TS_MIG_P_4G, n4, 4, 4, MIG_SLOTS_FIRST, 1, (int64_t)(g4)*MIB_PER_GB},         \
        {TS_MIG_P_7G, n7, 7, 8, MIG_SLOTS_FIRST, 1, (int64_t)(g7)*MIB_PER_GB},         \
    }

static const ts_mig_profile MIG_TABLES[TS_MIG_NGEOMETRY][TS_MIG_NPROFILES] = {
    [TS_MIG_A100_40GB] = MIG_ROWS(5, 10, 10, 20, 20, 40, "1g.5gb", "1g.5gb+me", "1g.10gb",
                                  "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    [TS_MIG_A100_80GB] = MIG_ROWS(10, 20, 20, 40, 40, 80, "1g.10gb", "1g.10gb+me", "1g.20gb",
                                  "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    [TS_MIG_H100_80GB] = MIG_ROWS(10, 20, 20, 40, 40, 80, "1g.10gb", "1g.10gb+me", "1g.20gb",
                                  "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    [TS_MIG_H200_141GB] = MIG_ROWS(18, 35, 35, 71, 71, 141, "1g.18gb", "1g.18gb+me",
                                   "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
};

/* Geometry-free short forms, same row order as the tables. */
static const char *const MIG_SHORT[TS_MIG_NPROFILES] = {"1g", "1g+me", "1gx2", "2g",
                                                       "3g", "4g", "7g"};

static const char *const MIG_GEOMETRY_NAMES[TS_MIG_NGEOMETRY] = {
    [TS_MIG_A100_40GB] = "A100-40GB",
    [TS_MIG_A100_80GB] = "A100-80GB",
    [TS_MIG_H100_80GB] = "H100-80GB",
    [TS_MIG_H200_141GB] = "H200-141GB",
};

static bool geometry_ok(int geometry)
{
    return geometry >= 0 && geometry < TS_MIG_NGEOMETRY;
}

/* Row of profile_id in the tables, or -1. */
static int profile_row(int profile_id)
{
    for (int r = 0; r < TS_MIG_NPROFILES; r++)
        if (MIG_TABLES[0][r].id == profile_id)
            return r;
    return -1;
}

static const char *short_name(int profile_id)
{
    int r = profile_row(profile_id);
    return r < 0 ? "?" : MIG_SHORT[r];
}

/* ASCII case-insensitive equality; strcasecmp is POSIX, not C11. */
static bool name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        int ca = (*a >= 'A' && *a <= 'Z') ? *a - 'A' + 'a' : *a;
        int cb = (*b >= 'A' && *b <= 'Z') ? *b - 'A' + 'a' : *b;
        if (ca != cb)
            return false;
    }
    return *a == *b;
}

static void slot_list(uint8_t mask, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int s = 0; s < TS_MIG_MEM_SLICES; s++) {
        if (!(mask & (1u << s)))
            continue;
        int w = snprintf(buf + len, size - len, "%s%d", len ? "," : "", s);
        if (w < 0 || (size_t)w >= size - len)
            return;
        len += (size_t)w;
    }
}

/* "size memory slices starting at start" as a bitmask of slots. */
static unsigned slot_bits(int start, int size)
{
    return ((1u << size) - 1u) << start;
}

int ts_mig_geometry_of(const char *gpu_model)
{
    if (!gpu_model)
        return TS_MIG_NONE;
    for (int g = 0; g < TS_MIG_NGEOMETRY; g++)
        if (strcmp(gpu_model, MIG_GEOMETRY_NAMES[g]) == 0)
            return g;
    return TS_MIG_NONE;
}

/* "none" for TS_MIG_NONE and "invalid" for anything else out of range, so the
 * result can always go straight into a message. */
const char *ts_mig_geometry_name(int geometry)
{
    if (geometry == TS_MIG_NONE)
        return "none";
    return geometry_ok(geometry) ? MIG_GEOMETRY_NAMES[geometry] : "invalid";
}

const ts_mig_profile *ts_mig_profiles(int geometry)
{
    return geometry_ok(geometry) ? MIG_TABLES[geometry] : NULL;
}

const ts_mig_profile *ts_mig_profile_get(int geometry, int profile_id)
{
    int r = profile_row(profile_id);
    if (!geometry_ok(geometry) || r < 0)
        return NULL;
    return &MIG_TABLES[geometry][r];
}

/* Matching is ASCII case-insensitive: "1G.10GB" is what a human types. */
int ts_mig_profile_parse(int geometry, const char *name, ts_err *err)
{
    if (!geometry_ok(geometry))
        return ts_err_set(err, TS_EINVAL, "MIG profile: geometry %d is not a MIG geometry",
                          geometry);
    if (!name || !name[0])
        return ts_err_set(err, TS_EINVAL, "MIG profile: name must not be empty");
    for (int r = 0; r < TS_MIG_NPROFILES; r++) {
        if (name_eq(name, MIG_TABLES[geometry][r].name) ||
            name_eq(name, MIG_SHORT[r]))
            return MIG_TABLES[geometry][r].id;
    }
    /* A name of another geometry ("3g.40gb" on an A100-40GB) gets a hint. */
    for (int g = 0; g < TS_MIG_NGEOMETRY; g++) {
        for (int r = 0; r < TS_MIG_NPROFILES; r++) {
            if (name_eq(name, MIG_TABLES[g][r].name))
                return ts_err_set(err, TS_EINVAL,
                                  "MIG profile \"%.64s\": a %s profile, not one of %s "
                                  "(use %s or the short form %s)",
                                  name, MIG_GEOMETRY_NAMES[g], MIG_GEOMETRY_NAMES[geometry],
                                  MIG_TABLES[geometry][r].name, MIG_SHORT[r]);
        }
    }
    const ts_mig_profile *p = MIG_TABLES[geometry];
    return ts_err_set(err, TS_EINVAL,
                      "MIG profile \"%.64s\": not a profile of %s (expected one of %s, %s, %s, "
                      "%s, %s, %s, %s or 1g, 1g+me, 1gx2, 2g, 3g, 4g, 7g)",
                      name, MIG_GEOMETRY_NAMES[geometry], p[0].name, p[1].name, p[2].name,
                      p[3].name, p[4].name, p[5].name, p[6].name);
}

int ts_mig_layout_validate(int geometry, const ts_mig_layout *layout, ts_err *err)
{
    if (!geometry_ok(geometry))
        return ts_err_set(err, TS_EINVAL, "MIG layout: geometry %d is not a MIG geometry",
                          geometry);
    if (!layout)
        return ts_err_set(err, TS_EINVAL, "MIG layout: missing (NULL)");
    if (layout->n > TS_MIG_MAX_INSTANCES)
        return ts_err_set(err, TS_EINVAL, "MIG layout: %d instances: more than %d instances",
                          layout->n, TS_MIG_MAX_INSTANCES);
    if (layout->n < 0)
        return ts_err_set(err, TS_EINVAL, "MIG layout: instance count %d is negative",
                          layout->n);

    const ts_mig_profile *prof[TS_MIG_MAX_INSTANCES];
    for (int i = 0; i < layout->n; i++) {
        const ts_mig_instance *in = &layout->inst[i];
        prof[i] = ts_mig_profile_get(geometry, in->profile_id);
        if (!prof[i])
            return ts_err_set(err, TS_EINVAL, "instance %d: profile id %d is not a MIG profile "
                              "of %s", i, in->profile_id, MIG_GEOMETRY_NAMES[geometry]);
        if (in->start < 0 || in->start >= TS_MIG_MEM_SLICES ||
            !(prof[i]->start_mask & (1u << in->start))) {
            char starts[MIG_LIST_MAX];
            slot_list(prof[i]->start_mask, starts, sizeof starts);
            return ts_err_set(err, TS_EINVAL, "instance %d (%s) at slot %d: %s may start only "
                              "at slot%s %s", i, prof[i]->name, in->start,
                              short_name(in->profile_id),
                              prof[i]->start_mask == MIG_SLOTS_FIRST ? "" : "s", starts);
        }
    }

    for (int i = 0; i < layout->n; i++) {
        int same = 0;
        for (int j = 0; j <= i; j++)
            same += layout->inst[j].profile_id == layout->inst[i].profile_id;
        if (same <= prof[i]->max_count)
            continue;
        if (layout->inst[i].profile_id == TS_MIG_P_1G_ME)
            return ts_err_set(err, TS_EINVAL, "instance %d (%s): two +me instances (at most "
                              "one per GPU)", i, prof[i]->name);
        return ts_err_set(err, TS_EINVAL, "instance %d (%s): too many %s instances (at most %d "
                          "per GPU)", i, prof[i]->name, prof[i]->name, prof[i]->max_count);
    }

    int owner[TS_MIG_MEM_SLICES];
    for (int s = 0; s < TS_MIG_MEM_SLICES; s++)
        owner[s] = -1;
    int compute = 0;
    for (int i = 0; i < layout->n; i++) {
        int start = layout->inst[i].start;
        for (int s = start; s < start + prof[i]->mem_slices; s++) {
            int o = owner[s];
            if (o >= 0)
                return ts_err_set(err, TS_EINVAL, "instances %d and %d overlap at slot %d "
                                  "(%s at slots %d-%d, %s at slots %d-%d)", o, i, s,
                                  prof[o]->name, layout->inst[o].start,
                                  layout->inst[o].start + prof[o]->mem_slices - 1,
                                  prof[i]->name, start, start + prof[i]->mem_slices - 1);
            owner[s] = i;
        }
        compute += prof[i]->compute_slices;
    }
    /* The start masks keep every non-overlapping layout within 7 SM slices. */
    assert(compute <= MIG_COMPUTE_SLICES);
    (void)compute;
    return 0;
}

bool ts_mig_can_place(int geometry, const ts_mig_layout *layout, int profile_id, int start)
{
    if (!layout || layout->n < 0 || layout->n >= TS_MIG_MAX_INSTANCES)
        return false;
    if (start < 0 || start >= TS_MIG_MEM_SLICES || profile_row(profile_id) < 0)
        return false;
    ts_mig_layout cand = *layout;
    cand.inst[cand.n++] = (ts_mig_instance){(int8_t)profile_id, (int8_t)start, 0};
    return ts_mig_layout_validate(geometry, &cand, NULL) == 0;
}

int ts_mig_free_placements(int geometry, const ts_mig_layout *layout)
{
    if (!geometry_ok(geometry))
        return 0;
    int n = 0;
    for (int r = 0; r < TS_MIG_NPROFILES; r++)
        for (int s = 0; s < TS_MIG_MEM_SLICES; s++)
            n += ts_mig_can_place(geometry, layout, MIG_TABLES[geometry][r].id, s);
    return n;
}

static bool larger(const ts_mig_profile *q, const ts_mig_profile *p)
{
    return q->mem_slices > p->mem_slices ||
           (q->mem_slices == p->mem_slices && q->compute_slices > p->compute_slices);
}

/*
 * Rule: try every start where the profile can be placed; for each, count the
 * (profile, start) placements of strictly larger profiles - more memory
 * slices, or as many memory slices and more compute slices - that are still
 * possible once the new instance is there. The start with the highest count
 * wins (it blocks the fewest larger placements); ties go to the lowest start.
 * Small instances thus drift to the top of the memory axis (a 1g on an empty
 * GPU goes to slot 6), keeping slot 0 free for 4g and 7g.
 * Returns TS_EINVAL for a bad geometry, layout or profile id.
 */
int ts_mig_best_start(int geometry, const ts_mig_layout *layout, int profile_id)
{
    const ts_mig_profile *p = ts_mig_profile_get(geometry, profile_id);
    if (!p || !layout)
        return TS_EINVAL;
    int best = TS_ENOSPC;
    int best_room = -1;
    for (int s = 0; s < TS_MIG_MEM_SLICES; s++) {
        if (!ts_mig_can_place(geometry, layout, profile_id, s))
            continue;
        ts_mig_layout cand = *layout;
        cand.inst[cand.n++] = (ts_mig_instance){(int8_t)profile_id, (int8_t)s, 0};
        int room = 0;
        for (int r = 0; r < TS_MIG_NPROFILES; r++) {
            const ts_mig_profile *q = &MIG_TABLES[geometry][r];
            if (!larger(q, p))
                continue;
            for (int t = 0; t < TS_MIG_MEM_SLICES; t++)
                room += ts_mig_can_place(geometry, &cand, q->id, t);
        }
        if (room > best_room) {
            best_room = room;
            best = s;
        }
    }
    return best;
}

int ts_mig_layout_add(int geometry, ts_mig_layout *layout, int profile_id, int start,
                      ts_err *err)
{
    int rc = ts_mig_layout_validate(geometry, layout, err);
    if (rc < 0)
        return ts_err_prefix(err, "MIG layout before adding: ");
    const ts_mig_profile *p = ts_mig_profile_get(geometry, profile_id);
    if (!p)
        return ts_err_set(err, TS_EINVAL, "profile id %d is not a MIG profile of %s",
                          profile_id, MIG_GEOMETRY_NAMES[geometry]);
    if (start < 0 || start >= TS_MIG_MEM_SLICES || !(p->start_mask & (1u << start))) {
        char starts[MIG_LIST_MAX];
        slot_list(p->start_mask, starts, sizeof starts);
        return ts_err_set(err, TS_EINVAL, "%s at slot %d: %s may start only at slot%s %s",
                          p->name, start, short_name(profile_id),
                          p->start_mask == MIG_SLOTS_FIRST ? "" : "s", starts);
    }
    if (layout->n >= TS_MIG_MAX_INSTANCES)
        return ts_err_set(err, TS_ENOSPC, "%s at slot %d: the GPU already has %d instances "
                          "(at most %d)", p->name, start, layout->n, TS_MIG_MAX_INSTANCES);
    ts_mig_layout cand = *layout;
    cand.inst[cand.n++] = (ts_mig_instance){(int8_t)profile_id, (int8_t)start, 0};
    if (ts_mig_layout_validate(geometry, &cand, err) < 0) {
        if (err)
            err->code = TS_ENOSPC;
        return TS_ENOSPC;
    }
    *layout = cand;
    return 0;
}

/* ---- building a layout for a mix --------------------------------------- */

typedef struct mix_search {
    int geometry;
    int n;
    int order[MIG_REQUEST_MAX];                /* input index, largest first */
    const ts_mig_profile *prof[MIG_REQUEST_MAX]; /* by input index */
    int start[MIG_REQUEST_MAX];                /* by input index, current try */
    int best_start[MIG_REQUEST_MAX];
    int best_room;                             /* -1: nothing found yet */
} mix_search;

static int mix_room(const mix_search *ms)
{
    ts_mig_layout l = {.n = ms->n};
    for (int i = 0; i < ms->n; i++)
        l.inst[i] = (ts_mig_instance){(int8_t)ms->prof[i]->id, (int8_t)ms->start[i], 0};
    return ts_mig_free_placements(ms->geometry, &l);
}

/* Places order[k..] on top of the slots in used; at a leaf keeps the placement
 * that leaves the most free placements. Repeated profiles take increasing
 * starts so that permutations of the same placement are visited once. */
static void mix_place(mix_search *ms, int k, unsigned used)
{
    if (k == ms->n) {
        int room = mix_room(ms);
        if (room > ms->best_room) {
            ms->best_room = room;
            memcpy(ms->best_start, ms->start, sizeof ms->start);
        }
        return;
    }
    int i = ms->order[k];
    const ts_mig_profile *p = ms->prof[i];
    int first = 0;
    if (k > 0 && ms->prof[ms->order[k - 1]] == p)
        first = ms->start[ms->order[k - 1]] + 1;
    for (int s = first; s < TS_MIG_MEM_SLICES; s++) {
        unsigned bits = slot_bits(s, p->mem_slices);
        if (!(p->start_mask & (1u << s)) || (used & bits))
            continue;
        ms->start[i] = s;
        mix_place(ms, k + 1, used | bits);
    }
}

/* Search order: larger profiles first, then by profile id so that repeated
 * profiles are adjacent. */
static bool mix_before(const ts_mig_profile *a, const ts_mig_profile *b)
{
    return larger(a, b) || (!larger(b, a) && a->id < b->id);
}

/* "4g.40gb + 2g.20gb x2 + 1g.10gb", largest first. */
static void mix_name(const mix_search *ms, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < ms->n;) {
        const ts_mig_profile *p = ms->prof[ms->order[k]];
        int same = 1;
        while (k + same < ms->n && ms->prof[ms->order[k + same]] == p)
            same++;
        int w = same > 1 ? snprintf(buf + len, size - len, "%s%s x%d", k ? " + " : "",
                                    p->name, same)
                         : snprintf(buf + len, size - len, "%s%s", k ? " + " : "", p->name);
        if (w < 0 || (size_t)w >= size - len)
            return;
        len += (size_t)w;
        k += same;
    }
}

/* Why a mix that passed the count checks still has no placement. */
static int mix_refuse(const mix_search *ms, const char *mix, ts_err *err)
{
    int mem = 0;
    bool reaches_last = false;
    const ts_mig_profile *whole = NULL;
    const unsigned last = slot_bits(TS_MIG_MEM_SLICES - 1, 1);
    for (int i = 0; i < ms->n; i++) {
        mem += ms->prof[i]->mem_slices;
        for (int s = 0; s < TS_MIG_MEM_SLICES; s++)
            if ((ms->prof[i]->start_mask & (1u << s)) &&
                (slot_bits(s, ms->prof[i]->mem_slices) & last))
                reaches_last = true;
        if (ms->prof[i]->mem_slices == TS_MIG_MEM_SLICES)
            whole = ms->prof[i];
    }
    if (whole)
        return ts_err_set(err, TS_EINVAL, "no placement for %s: %s takes the whole GPU", mix,
                          whole->name);
    if (mem > TS_MIG_MEM_SLICES)
        return ts_err_set(err, TS_EINVAL, "no placement for %s: they need %d memory slices, "
                          "a GPU has %d", mix, mem, TS_MIG_MEM_SLICES);
    if (mem == TS_MIG_MEM_SLICES && !reaches_last)
        return ts_err_set(err, TS_EINVAL, "no placement for %s: they need all %d memory "
                          "slices but none of them can use slot %d (only 1gx2, 3g and 7g "
                          "reach it)", mix, TS_MIG_MEM_SLICES, TS_MIG_MEM_SLICES - 1);
    return ts_err_set(err, TS_EINVAL, "no placement for %s: no non-overlapping placement of "
                      "their memory slices exists", mix);
}

/* Count limits, checked before the search so the message names the limit. */
static int mix_check_counts(const mix_search *ms, const char *mix, ts_err *err)
{
    if (ms->n > TS_MIG_MAX_INSTANCES)
        return ts_err_set(err, TS_EINVAL, "no placement for %s: at most %d instances per GPU, "
                          "%d requested", mix, TS_MIG_MAX_INSTANCES, ms->n);
    for (int k = 0; k < ms->n;) {
        const ts_mig_profile *p = ms->prof[ms->order[k]];
        int same = 1;
        while (k + same < ms->n && ms->prof[ms->order[k + same]] == p)
            same++;
        k += same;
        if (same <= p->max_count)
            continue;
        if (p->id == TS_MIG_P_1G_ME)
            return ts_err_set(err, TS_EINVAL, "no placement for %s: at most one +me instance "
                              "per GPU, %d requested", mix, same);
        char starts[MIG_LIST_MAX];
        slot_list(p->start_mask, starts, sizeof starts);
        return ts_err_set(err, TS_EINVAL, "no placement for %s: at most %d %s per GPU, %d "
                          "requested (%s may start only at slot%s %s)", mix, p->max_count,
                          p->name, same, short_name(p->id),
                          p->start_mask == MIG_SLOTS_FIRST ? "" : "s", starts);
    }
    return 0;
}

/*
 * Every placement of the mix is searched (largest profiles first, which only
 * prunes sooner; the result does not depend on the input order). Among all
 * placements the one leaving the most free placements is kept, ties to the
 * first found (lowest starts for the largest profiles). out->inst[i] is the
 * instance of profile_ids[i]; on failure out->n is 0.
 */
int ts_mig_layout_from_profiles(int geometry, const int *profile_ids, int n,
                                ts_mig_layout *out, ts_err *err)
{
    if (out)
        out->n = 0;
    if (!geometry_ok(geometry))
        return ts_err_set(err, TS_EINVAL, "MIG layout: geometry %d is not a MIG geometry",
                          geometry);
    if (!out || n < 0 || (n > 0 && !profile_ids))
        return ts_err_set(err, TS_EINVAL, "MIG layout: bad arguments (n = %d)", n);
    if (n > MIG_REQUEST_MAX)
        return ts_err_set(err, TS_EINVAL, "no placement for %d instances: at most %d "
                          "instances per GPU", n, TS_MIG_MAX_INSTANCES);

    mix_search ms = {.geometry = geometry, .n = n, .best_room = -1};
    for (int i = 0; i < n; i++) {
        ms.prof[i] = ts_mig_profile_get(geometry, profile_ids[i]);
        if (!ms.prof[i])
            return ts_err_set(err, TS_EINVAL, "profiles[%d]: profile id %d is not a MIG "
                              "profile of %s", i, profile_ids[i], MIG_GEOMETRY_NAMES[geometry]);
        ms.order[i] = i;
    }
    /* Insertion sort, largest first; equal profiles end up adjacent. */
    for (int i = 1; i < n; i++) {
        int v = ms.order[i], j = i;
        while (j > 0 && mix_before(ms.prof[v], ms.prof[ms.order[j - 1]])) {
            ms.order[j] = ms.order[j - 1];
            j--;
        }
        ms.order[j] = v;
    }

    char mix[MIG_MIX_MAX];
    mix_name(&ms, mix, sizeof mix);
    int rc = mix_check_counts(&ms, mix, err);
    if (rc < 0)
        return rc;
    mix_place(&ms, 0, 0);
    if (ms.best_room < 0)
        return mix_refuse(&ms, mix, err);

    out->n = n;
    for (int i = 0; i < n; i++)
        out->inst[i] = (ts_mig_instance){(int8_t)ms.prof[i]->id, (int8_t)ms.best_start[i], 0};
    assert(ts_mig_layout_validate(geometry, out, NULL) == 0);
    return 0;
}
