/*
 * topology.c - the cluster network as a tree of named vertices.
 *
 * Vertices live in one growable array and are referred to by index, so a
 * vertex id stays valid for the life of the tree (vertices are never removed)
 * and a whole tree clones with a few memcpy-like copies. Each vertex stores its
 * parent and depth; distances walk both vertices up to their lowest common
 * ancestor, which is O(depth) and depth is at most TS_TOPO_MAX_LEVELS.
 *
 * Finding a child by name (the only lookup ts_topo_path needs) goes through an
 * open-addressing hash keyed on (parent, name), so loading a cluster of many
 * thousand GPUs stays linear. Names are copied into fixed-size vertex slots
 * (TS_TOPO_NAME_MAX), which keeps ownership trivial: the tree owns everything.
 */
#include "tessera/topology.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_VERTICES_INITIAL 64
#define TOPO_HASH_INITIAL 128 /* power of two */

typedef struct topo_vertex {
    int parent;
    int depth;
    char name[TS_TOPO_NAME_MAX];
} topo_vertex;

struct ts_topo {
    int nlevels;
    char levels[TS_TOPO_MAX_LEVELS][TS_TOPO_NAME_MAX];
    topo_vertex *v;
    int nv;
    int cap;
    int *hash;     /* vertex id or -1; hash_cap slots */
    int hash_cap;  /* power of two, kept at least twice nv */
};

static uint32_t topo_key_hash(int parent, const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    h ^= (uint32_t)(parent + 1) * 2654435761u;
    return h;
}

static int check_name(const char *what, const char *name, ts_err *err)
{
    if (!name || !name[0])
        return ts_err_set(err, TS_EINVAL, "%s: name must not be empty", what);
    if (strlen(name) >= TS_TOPO_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "%s: name \"%.32s...\" longer than %d characters",
                          what, name, TS_TOPO_NAME_MAX - 1);
    return 0;
}

/* t's vertex array and hash table at t's capacities, their contents the
 * caller's (they grow apart later, so they are two allocations); false,
 * neither kept, when memory is short. */
static bool topo_alloc_arrays(ts_topo *t)
{
    t->v = malloc((size_t)t->cap * sizeof *t->v);
    t->hash = malloc((size_t)t->hash_cap * sizeof *t->hash);
    if (t->v && t->hash)
        return true;
    free(t->v);
    free(t->hash);
    return false;
}

ts_topo *ts_topo_new(const char *const *levels, int nlevels, ts_err *err)
{
    if (!levels || nlevels < 2 || nlevels > TS_TOPO_MAX_LEVELS) {
        ts_err_set(err, TS_EINVAL, "topology.levels: must have 2..%d levels, got %d",
                   TS_TOPO_MAX_LEVELS, nlevels);
        return NULL;
    }
    for (int i = 0; i < nlevels; i++) {
        if (check_name("topology.levels", levels[i], err) < 0)
            return NULL;
        for (int j = 0; j < i; j++) {
            if (strcmp(levels[i], levels[j]) == 0) {
                ts_err_set(err, TS_EINVAL, "topology.levels: level \"%s\" named twice",
                           levels[i]);
                return NULL;
            }
        }
    }
    ts_topo *t = calloc(1, sizeof *t);
    if (!t) {
        ts_err_set(err, TS_ENOMEM, "topology: out of memory");
        return NULL;
    }
    t->nlevels = nlevels;
    for (int i = 0; i < nlevels; i++)
        memcpy(t->levels[i], levels[i], strlen(levels[i]) + 1);
    t->cap = TOPO_VERTICES_INITIAL;
    t->hash_cap = TOPO_HASH_INITIAL;
    if (!topo_alloc_arrays(t)) {
        free(t);
        ts_err_set(err, TS_ENOMEM, "topology: out of memory");
        return NULL;
    }
    memset(t->hash, -1, (size_t)t->hash_cap * sizeof *t->hash);
    return t;
}

void ts_topo_free(ts_topo *topo)
{
    if (!topo)
        return;
    free(topo->v);
    free(topo->hash);
    free(topo);
}

ts_topo *ts_topo_clone(const ts_topo *topo)
{
    if (!topo)
        return NULL;
    ts_topo *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    *t = *topo;
    if (!topo_alloc_arrays(t)) {
        free(t);
        return NULL;
    }
    memcpy(t->v, topo->v, (size_t)topo->nv * sizeof *t->v);
    memcpy(t->hash, topo->hash, (size_t)topo->hash_cap * sizeof *t->hash);
    return t;
}

int ts_topo_nlevels(const ts_topo *topo) { return topo->nlevels; }

const char *ts_topo_level_name(const ts_topo *topo, int level)
{
    if (level < 0 || level >= topo->nlevels)
        return NULL;
    return topo->levels[level];
}

int ts_topo_level_index(const ts_topo *topo, const char *name)
{
    for (int i = 0; i < topo->nlevels; i++)
        if (strcmp(topo->levels[i], name) == 0)
            return i;
    return -1;
}

/* Slot holding (parent, name), or the empty slot where it would go. */
static size_t hash_slot(const ts_topo *t, int parent, const char *name)
{
    size_t mask = (size_t)t->hash_cap - 1;
    size_t i = topo_key_hash(parent, name) & mask;
    for (;;) {
        int id = t->hash[i];
        if (id < 0 || (t->v[id].parent == parent && strcmp(t->v[id].name, name) == 0))
            return i;
        i = (i + 1) & mask;
    }
}

static int hash_grow(ts_topo *t)
{
    int ncap = t->hash_cap * 2;
    int *nh = malloc((size_t)ncap * sizeof *nh);
    if (!nh)
        return TS_ENOMEM;
    memset(nh, -1, (size_t)ncap * sizeof *nh);
    free(t->hash);
    t->hash = nh;
    t->hash_cap = ncap;
    for (int id = 0; id < t->nv; id++)
        t->hash[hash_slot(t, t->v[id].parent, t->v[id].name)] = id;
    return 0;
}

static int child_find(const ts_topo *t, int parent, const char *name)
{
    return t->hash[hash_slot(t, parent, name)];
}

static int child_add(ts_topo *t, int parent, int depth, const char *name, ts_err *err)
{
    if (t->nv == t->cap) {
        int ncap = t->cap * 2;
        topo_vertex *nv = realloc(t->v, (size_t)ncap * sizeof *nv);
        if (!nv)
            return ts_err_set(err, TS_ENOMEM, "topology: out of memory");
        t->v = nv;
        t->cap = ncap;
    }
    /* Grow before inserting so the probe below lands in the final table. */
    if ((t->nv + 1) * 2 > t->hash_cap && hash_grow(t) < 0)
        return ts_err_set(err, TS_ENOMEM, "topology: out of memory");
    int id = t->nv++;
    topo_vertex *v = &t->v[id];
    v->parent = parent;
    v->depth = depth;
    memcpy(v->name, name, strlen(name) + 1);
    t->hash[hash_slot(t, parent, name)] = id;
    return id;
}

static int path_check(const ts_topo *topo, const char *const *names, int n, ts_err *err)
{
    if (!names || n < 1 || n > topo->nlevels)
        return ts_err_set(err, TS_EINVAL, "topology: path must have 1..%d names, got %d",
                          topo->nlevels, n);
    for (int i = 0; i < n; i++) {
        int rc = check_name(topo->levels[i], names[i], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ts_topo_path(ts_topo *topo, const char *const *names, int n, ts_err *err)
{
    int rc = path_check(topo, names, n, err);
    if (rc < 0)
        return rc;
    int parent = -1;
    for (int i = 0; i < n; i++) {
        int id = child_find(topo, parent, names[i]);
        if (id < 0) {
            id = child_add(topo, parent, i, names[i], err);
            if (id < 0)
                return id;
        }
        parent = id;
    }
    return parent;
}

int ts_topo_find(const ts_topo *topo, const char *const *names, int n)
{
    if (path_check(topo, names, n, NULL) < 0)
        return TS_EINVAL;
    int parent = -1;
    for (int i = 0; i < n; i++) {
        parent = child_find(topo, parent, names[i]);
        if (parent < 0)
            return TS_ENOENT;
    }
    return parent;
}

int ts_topo_nvertices(const ts_topo *topo) { return topo->nv; }

int ts_topo_parent(const ts_topo *topo, int vertex)
{
    if (vertex < 0 || vertex >= topo->nv)
        return -1;
    return topo->v[vertex].parent;
}

int ts_topo_depth(const ts_topo *topo, int vertex)
{
    if (vertex < 0 || vertex >= topo->nv)
        return -1;
    return topo->v[vertex].depth;
}

const char *ts_topo_name(const ts_topo *topo, int vertex)
{
    if (vertex < 0 || vertex >= topo->nv)
        return NULL;
    return topo->v[vertex].name;
}

int ts_topo_ancestor(const ts_topo *topo, int vertex, int depth)
{
    if (vertex < 0 || vertex >= topo->nv || depth < 0 || depth > topo->v[vertex].depth)
        return -1;
    while (topo->v[vertex].depth > depth)
        vertex = topo->v[vertex].parent;
    return vertex;
}

int ts_topo_distance(const ts_topo *topo, int a, int b)
{
    if (a < 0 || a >= topo->nv || b < 0 || b >= topo->nv)
        return TS_EINVAL;
    int da = topo->v[a].depth, db = topo->v[b].depth;
    int from = da > db ? da : db;
    while (da > db) {
        a = topo->v[a].parent;
        da--;
    }
    while (db > da) {
        b = topo->v[b].parent;
        db--;
    }
    /* Same depth now; climb together. Distinct top vertices meet at the
     * implicit root, one above depth 0. */
    while (a != b) {
        a = topo->v[a].parent;
        b = topo->v[b].parent;
        da--;
        if (a < 0 || b < 0)
            return from + 1;
    }
    return from - da;
}
