/*
 * mig.h - NVIDIA Multi-Instance GPU geometry: which GPU-instance mixes a MIG
 * capable GPU can hold, and where a new instance should go.
 *
 * A MIG GPU has 8 memory slices; a GPU instance (GI) occupies the contiguous
 * range [start, start + mem_slices) and may only start at the slots its profile
 * allows (gpu-facts.md section 2.3). A layout is valid iff its instances sit at
 * allowed starts without overlapping, there are at most 7 of them, at most
 * max_count of each profile, and at most one "+me" instance. Geometry for
 * A100-40GB, A100-80GB, H100-80GB and H200-141GB differs only in memory sizes
 * and SM counts; placements are the same. Everything here is pure and const:
 * the tables are static, layouts are small values owned by the caller.
 */
#ifndef TESSERA_MIG_H
#define TESSERA_MIG_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum ts_mig_geometry {
    TS_MIG_NONE = -1,
    TS_MIG_A100_40GB = 0,
    TS_MIG_A100_80GB,
    TS_MIG_H100_80GB,
    TS_MIG_H200_141GB,
    TS_MIG_NGEOMETRY
};

/* Profile IDs are NVML's GPU-instance profile info.id values. */
enum ts_mig_profile_id {
    TS_MIG_P_7G = 0,
    TS_MIG_P_4G = 5,
    TS_MIG_P_3G = 9,
    TS_MIG_P_2G = 14,
    TS_MIG_P_1G_2X = 15, /* 1 compute slice, 2 memory slices (1g.20gb on A100-80GB) */
    TS_MIG_P_1G = 19,
    TS_MIG_P_1G_ME = 20, /* 1g with media engines, at most one per GPU */
};

#define TS_MIG_MEM_SLICES 8
#define TS_MIG_MAX_INSTANCES 7
#define TS_MIG_NPROFILES 7

typedef struct ts_mig_profile {
    int id;              /* enum ts_mig_profile_id */
    const char *name;    /* e.g. "1g.10gb", "1g.10gb+me" for the geometry */
    int compute_slices;  /* g */
    int mem_slices;      /* width on the 8-slot memory axis */
    uint8_t start_mask;  /* bit s set: may start at slot s */
    int max_count;       /* per GPU */
    int64_t mem_mib;     /* nominal memory of the instance */
} ts_mig_profile;

typedef struct ts_mig_instance {
    int8_t profile_id; /* enum ts_mig_profile_id */
    int8_t start;      /* memory slot 0..7 */
    int8_t busy;       /* 1 while a task holds it (scheduler bookkeeping) */
} ts_mig_instance;

typedef struct ts_mig_layout {
    int n;
    ts_mig_instance inst[TS_MIG_MAX_INSTANCES];
} ts_mig_layout;

/* Geometry of a GPU model name ("A100-40GB", "A100-80GB", "H100-80GB",
 * "H200-141GB"); TS_MIG_NONE when the model is not MIG capable. */
int ts_mig_geometry_of(const char *gpu_model);
const char *ts_mig_geometry_name(int geometry);

/* The geometry's profiles (TS_MIG_NPROFILES entries, static storage). */
const ts_mig_profile *ts_mig_profiles(int geometry);
/* One profile by id; NULL when the id is not a profile of this geometry. */
const ts_mig_profile *ts_mig_profile_get(int geometry, int profile_id);
/* Parses "1g.10gb", "1g.10gb+me", "3g.40gb" ... (the geometry's own names) and
 * also the geometry-free short forms "1g", "1g+me", "1gx2", "2g", "3g", "4g",
 * "7g". Returns the profile id or TS_EINVAL with the reason in err. */
int ts_mig_profile_parse(int geometry, const char *name, ts_err *err);

/* Checks a layout whose starts are given. On failure returns TS_EINVAL and the
 * message names the instance and the reason ("instance 2 (3g.40gb) at slot 2:
 * 3g may start only at slots 0,4"; "instances 0 and 1 overlap at slot 4";
 * "two +me instances"; "more than 7 instances"). */
int ts_mig_layout_validate(int geometry, const ts_mig_layout *layout, ts_err *err);

/* Builds a layout for a multiset of profiles, choosing starts (search, so any
 * creatable mix is found whatever the order given). TS_EINVAL with the reason
 * when no placement exists ("4g + 4g: needs 8 memory slices at slot 0 twice"
 * or at least "no placement of 1g.10gb x8: at most 7 instances"). */
int ts_mig_layout_from_profiles(int geometry, const int *profile_ids, int n,
                                ts_mig_layout *out, ts_err *err);

/* True iff an instance of profile_id can be added to layout at start. */
bool ts_mig_can_place(int geometry, const ts_mig_layout *layout, int profile_id, int start);

/* The start for a new instance of profile_id in layout that blocks the fewest
 * possible placements of larger profiles (ties: lowest start). Returns the
 * start (0..7) or TS_ENOSPC when it fits nowhere. */
int ts_mig_best_start(int geometry, const ts_mig_layout *layout, int profile_id);

/* Number of (profile, start) placements still possible in layout: a measure
 * of how much room a layout keeps for future requests. */
int ts_mig_free_placements(int geometry, const ts_mig_layout *layout);

/* Adds an instance (validated); TS_ENOSPC if it cannot go there. */
int ts_mig_layout_add(int geometry, ts_mig_layout *layout, int profile_id, int start,
                      ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
