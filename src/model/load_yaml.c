/*
 * load_yaml.c - the cluster YAML (docs/cluster-format.md) into a ts_cluster.
 *
 * libyaml's document API builds the whole tree first, which keeps the loader a
 * plain walk over three sections (topology, node_classes, nodes) and gives
 * every node a start mark, so each error can say "file:line: key.path: why".
 * The schema is closed: every mapping checks its keys against a fixed list, so
 * a typo ("gpu_mdoe") is an error rather than a silently ignored default.
 *
 * Node classes are resolved into node specs in the loader (labels merged, MIG
 * layout built once per class); ts_cluster_add_node then does the model-level
 * checks. Each node's GPUs become vertices of the topology tree under the
 * node's path. The loader builds a fresh cluster and hands it over only when
 * everything succeeded; on any error it frees all it made and *out stays NULL.
 */
#include "tessera/load.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/name_range.h"
#include "model/yaml_doc.h"
#include "tessera/grow.h"

#define YAML_MAX_CLASSES 4096        /* distinct node classes in one file */
#define YAML_MAX_NODES 100000        /* nodes in one file, all entries together */
#define YAML_PATH_MAX 160

typedef struct yclass {
    const char *name;
    int line;
    const char *gpu_model; /* NULL: CPU-only */
    int ngpu;
    int64_t cpu_milli;
    int64_t mem_mib;
    int gpu_mode;
    ts_mig_layout mig;
    bool has_mig;
    ts_label labels[TS_NODE_MAX_LABELS];
    int nlabels;
    int64_t net_mbit; /* 0: not given */
} yclass;

typedef struct loader {
    ts_yaml_doc y; /* file name, document, error: see yaml_doc.h */
    ts_cluster *c;
    ts_topo *topo; /* == c->topo once attached */
    int nlevels;
    yclass *classes;
    int nclasses;
    int *node_line;  /* per cluster node: the line of the entry that made it */
    int *node_entry; /* per cluster node: its index in `nodes` */
    int node_cap;
    int *name_hash;  /* open addressing over node indices, -1 = empty */
    int name_hash_cap;
} loader;

/* ---- small helpers -------------------------------------------------------- */

/* Adds "file:line: path: " in front of a message that a lower layer wrote. */
static int fail_prefix(const loader *L, const yaml_node_t *at, const char *path, int code)
{
    if (L->y.err) {
        L->y.err->code = code;
        ts_err_prefix(L->y.err, "%s:%d: %s: ", L->y.fname, model_yaml_line(at), path);
    }
    return code;
}

static int get_name(const loader *L, const yaml_node_t *n, const char *path, size_t max,
                    const char **out)
{
    const char *s = ts_yaml_scalar(n);
    if (!s || !ts_yaml_name_ok(s, max)) {
        char want[96];
        snprintf(want, sizeof want, "a name of 1..%zu characters from [A-Za-z0-9._-]",
                 max - 1);
        return ts_yaml_fail_got(&L->y, n, path, want);
    }
    *out = s;
    return 0;
}

/* ---- network ---------------------------------------------------------------- */

/* Reads a {bandwidth_mbit: N} mapping (a class's or a node's `network`):
 * the link its pulls share, in Mbit/s. */
static int get_network(const loader *L, const yaml_node_t *map, const char *path,
                       int64_t *mbit)
{
    enum { K_BW, K_N };
    static const char *const keys[K_N] = {"bandwidth_mbit"};
    yaml_node_t *v[K_N];
    char sub[YAML_PATH_MAX + 32], want[64];
    int rc = ts_yaml_map_fields(&L->y, map, path, keys, K_N, v);
    if (rc < 0)
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.bandwidth_mbit", path);
    if (!v[K_BW])
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: required", sub);
    snprintf(want, sizeof want, "an integer 1..%d (Mbit/s)", TS_NODE_NET_MBIT_MAX);
    return ts_yaml_get_int(&L->y, v[K_BW], sub, 1, TS_NODE_NET_MBIT_MAX, want, mbit);
}

/* ---- labels ---------------------------------------------------------------- */

/* Reads a {key: value} mapping into labels[], replacing values of keys already
 * there (so node labels go over class labels). */
static int get_labels(const loader *L, const yaml_node_t *map, const char *path,
                      ts_label *labels, int *nlabels)
{
    if (map->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&L->y, map, path, "a mapping of label: value");
    bool mine[TS_NODE_MAX_LABELS] = {false}; /* set by this mapping: a repeat is a typo */
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = ts_yaml_node(&L->y, p->key), *v = ts_yaml_node(&L->y, p->value);
        const char *ks = ts_yaml_scalar(k), *vs = ts_yaml_scalar(v);
        char sub[YAML_PATH_MAX];
        if (!ks || !*ks || strlen(ks) >= TS_NAME_MAX) {
            char want[64];
            snprintf(want, sizeof want, "label keys of 1..%d characters", TS_NAME_MAX - 1);
            return ts_yaml_fail_got(&L->y, k, path, want);
        }
        ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, ks);
        if (!vs || strlen(vs) >= TS_NAME_MAX) {
            char want[64];
            snprintf(want, sizeof want, "a value of 0..%d characters", TS_NAME_MAX - 1);
            return ts_yaml_fail_got(&L->y, v, sub, want);
        }
        int at = -1;
        for (int i = 0; i < *nlabels; i++)
            if (strcmp(labels[i].key, ks) == 0)
                at = i;
        if (at >= 0 && mine[at])
            return ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: key given twice", sub);
        if (at < 0) {
            if (*nlabels == TS_NODE_MAX_LABELS)
                return ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: more than %d labels", path,
                            TS_NODE_MAX_LABELS);
            at = (*nlabels)++;
            memcpy(labels[at].key, ks, strlen(ks) + 1);
        }
        memcpy(labels[at].value, vs, strlen(vs) + 1);
        mine[at] = true;
    }
    return 0;
}

/* ---- topology -------------------------------------------------------------- */

static int load_topology(loader *L, const yaml_node_t *top)
{
    static const char *const keys[] = {"levels"};
    yaml_node_t *v[1];
    int rc = ts_yaml_map_fields(&L->y, top, "topology", keys, 1, v);
    if (rc < 0)
        return rc;
    yaml_node_t *lv = v[0];
    if (!lv)
        return ts_yaml_fail(&L->y, top, TS_EINVAL, "topology.levels: required");
    int n = lv->type == YAML_SEQUENCE_NODE
                ? (int)(lv->data.sequence.items.top - lv->data.sequence.items.start)
                : -1;
    if (n < 2 || n > TS_TOPO_MAX_LEVELS) {
        char want[80];
        snprintf(want, sizeof want, "a list of 2..%d level names ending in gpu",
                 TS_TOPO_MAX_LEVELS);
        return ts_yaml_fail_got(&L->y, lv, "topology.levels", want);
    }
    const char *names[TS_TOPO_MAX_LEVELS];
    for (int i = 0; i < n; i++) {
        yaml_node_t *item = ts_yaml_node(&L->y, lv->data.sequence.items.start[i]);
        char path[48];
        ts_yaml_pathf(path, sizeof path, "topology.levels[%d]", i);
        if ((rc = get_name(L, item, path, TS_TOPO_NAME_MAX, &names[i])) < 0)
            return rc;
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return ts_yaml_fail(&L->y, item, TS_EINVAL, "%s: level \"%s\" named twice", path,
                            names[i]);
        if ((i == n - 1) != (strcmp(names[i], "gpu") == 0))
            return ts_yaml_fail(&L->y, item, TS_EINVAL,
                                "%s: the last level, and only the last, must be "
                                "\"gpu\", got \"%s\"",
                                path, names[i]);
    }
    ts_err sub;
    L->topo = ts_topo_new(names, n, &sub);
    if (!L->topo)
        return ts_yaml_fail(&L->y, lv, sub.code, "%s", sub.msg);
    L->c->topo = L->topo;
    L->nlevels = n;
    return 0;
}

/* ---- node classes ---------------------------------------------------------- */

static int load_mig_layout(loader *L, yclass *k, const yaml_node_t *seq, const char *path)
{
    if (seq->type != YAML_SEQUENCE_NODE)
        return ts_yaml_fail_got(&L->y, seq, path, "a list of MIG profiles");
    int geom = ts_mig_geometry_of(k->gpu_model);
    int n = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > TS_MIG_MAX_INSTANCES)
        return ts_yaml_fail(&L->y, seq, TS_EINVAL, "%s: at most %d instances per GPU, got %d", path,
                    TS_MIG_MAX_INSTANCES, n);
    int ids[TS_MIG_MAX_INSTANCES];
    int nnames = 0;
    memset(&k->mig, 0, sizeof k->mig);
    for (int i = 0; i < n; i++) {
        yaml_node_t *item = ts_yaml_node(&L->y, seq->data.sequence.items.start[i]);
        char ipath[YAML_PATH_MAX];
        ts_yaml_pathf(ipath, sizeof ipath, "%s[%d]", path, i);
        const char *pname = ts_yaml_scalar(item);
        yaml_node_t *start = NULL, *pnode = item;
        if (item->type == YAML_MAPPING_NODE) {
            static const char *const keys[] = {"profile", "start"};
            yaml_node_t *v[2];
            int rc = ts_yaml_map_fields(&L->y, item, ipath, keys, 2, v);
            if (rc < 0)
                return rc;
            if (!v[0] || !v[1])
                return ts_yaml_fail(&L->y, item, TS_EINVAL, "%s: needs both profile and start",
                                    ipath);
            pnode = v[0];
            start = v[1];
            pname = ts_yaml_scalar(v[0]);
        } else if (!pname) {
            return ts_yaml_fail_got(&L->y, item, ipath, "a profile name or {profile, start}");
        }
        if (i > 0 && (start != NULL) != (nnames == 0))
            return ts_yaml_fail(&L->y, item, TS_EINVAL,
                                "%s: mixes profile names and {profile, start} "
                                "entries; use one form for the whole layout",
                                ipath);
        if (!pname)
            return ts_yaml_fail_got(&L->y, pnode, ipath, "a profile name");
        int id = ts_mig_profile_parse(geom, pname, L->y.err);
        if (id < 0)
            return fail_prefix(L, pnode, ipath, id);
        if (!start) {
            ids[nnames++] = id;
            continue;
        }
        int64_t s;
        char spath[YAML_PATH_MAX + 8];
        ts_yaml_pathf(spath, sizeof spath, "%s.start", ipath);
        int rc = ts_yaml_get_int(&L->y, start, spath, 0, TS_MIG_MEM_SLICES - 1,
                         "a memory slot 0..7", &s);
        if (rc < 0)
            return rc;
        k->mig.inst[k->mig.n].profile_id = (int8_t)id;
        k->mig.inst[k->mig.n].start = (int8_t)s;
        k->mig.inst[k->mig.n].busy = 0;
        k->mig.n++;
    }
    int rc = nnames ? ts_mig_layout_from_profiles(geom, ids, nnames, &k->mig, L->y.err)
                    : ts_mig_layout_validate(geom, &k->mig, L->y.err);
    if (rc < 0)
        return fail_prefix(L, seq, path, rc);
    k->has_mig = true;
    return 0;
}

static int load_class(loader *L, yclass *k, const yaml_node_t *map)
{
    enum { K_MODEL, K_GPUS, K_CPU, K_MEM, K_MODE, K_MIG, K_LABELS, K_NET, K_N };
    static const char *const keys[K_N] = {"gpu_model", "gpus", "cpu_milli", "memory_mib",
                                          "gpu_mode", "mig_layout", "labels", "network"};
    yaml_node_t *v[K_N];
    char path[YAML_PATH_MAX], sub[YAML_PATH_MAX + 16];
    ts_yaml_pathf(path, sizeof path, "node_classes.%s", k->name);
    int rc = ts_yaml_map_fields(&L->y, map, path, keys, K_N, v);
    if (rc < 0)
        return rc;

    if (v[K_MODEL]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.gpu_model", path);
        const char *m = ts_yaml_scalar(v[K_MODEL]);
        if (!m || ts_gpu_model_lookup(m) < 0) {
            char known[256] = "", gotd[TS_YAML_GOT_MAX];
            for (int i = 0; i < ts_gpu_model_count(); i++) {
                size_t used = strlen(known);
                snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                         ts_gpu_model_get(i)->name);
            }
            model_yaml_describe(v[K_MODEL], gotd, sizeof gotd);
            return ts_yaml_fail(&L->y, v[K_MODEL], TS_EINVAL,
                                "%s: unknown GPU model %s (known: %s)", sub, gotd, known);
        }
        k->gpu_model = m;
    }
    int64_t x = 0;
    ts_yaml_pathf(sub, sizeof sub, "%s.gpus", path);
    if (k->gpu_model) {
        char want[48];
        snprintf(want, sizeof want, "an integer 1..%d", TS_NODE_MAX_GPUS);
        if (!v[K_GPUS])
            return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: required with gpu_model", sub);
        if ((rc = ts_yaml_get_int(&L->y, v[K_GPUS], sub, 1, TS_NODE_MAX_GPUS, want, &x)) < 0)
            return rc;
    } else if (v[K_GPUS] && (rc = ts_yaml_get_int(&L->y, v[K_GPUS], sub, 0, 0,
                                          "0 without gpu_model", &x)) < 0) {
        return rc;
    }
    k->ngpu = (int)x;

    ts_yaml_pathf(sub, sizeof sub, "%s.cpu_milli", path);
    if (!v[K_CPU])
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: required", sub);
    if ((rc = ts_yaml_get_int(&L->y, v[K_CPU], sub, 0, INT64_MAX,
                              "a non-negative integer (milli-cores)", &k->cpu_milli)) < 0)
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.memory_mib", path);
    if (!v[K_MEM])
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: required", sub);
    if ((rc = ts_yaml_get_int(&L->y, v[K_MEM], sub, 0, INT64_MAX, "a non-negative integer (MiB)",
                      &k->mem_mib)) < 0)
        return rc;

    k->gpu_mode = TS_GPU_WHOLE;
    if (v[K_MODE]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.gpu_mode", path);
        const char *m = ts_yaml_scalar(v[K_MODE]);
        k->gpu_mode = m ? ts_gpu_mode_parse(m) : -1;
        if (k->gpu_mode < 0)
            return ts_yaml_fail_got(&L->y, v[K_MODE], sub, "one of whole, shared, mig");
        if (!k->gpu_model)
            return ts_yaml_fail(&L->y, v[K_MODE], TS_EINVAL, "%s: needs gpu_model", sub);
        if (k->gpu_mode == TS_GPU_MIG && ts_mig_geometry_of(k->gpu_model) == TS_MIG_NONE)
            return ts_yaml_fail(&L->y, v[K_MODE], TS_EINVAL, "%s: %s is not MIG capable", sub,
                        k->gpu_model);
    }
    if (v[K_MIG]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.mig_layout", path);
        if (k->gpu_mode != TS_GPU_MIG)
            return ts_yaml_fail(&L->y, v[K_MIG], TS_EINVAL, "%s: only allowed with gpu_mode: mig",
                                sub);
        if ((rc = load_mig_layout(L, k, v[K_MIG], sub)) < 0)
            return rc;
    }
    if (v[K_LABELS]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.labels", path);
        if ((rc = get_labels(L, v[K_LABELS], sub, k->labels, &k->nlabels)) < 0)
            return rc;
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.network", path);
    return v[K_NET] ? get_network(L, v[K_NET], sub, &k->net_mbit) : 0;
}

static int load_classes(loader *L, const yaml_node_t *map)
{
    if (map->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&L->y, map, "node_classes", "a mapping of class name: class");
    int n = (int)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (n > YAML_MAX_CLASSES)
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "node_classes: more than %d classes",
                            YAML_MAX_CLASSES);
    L->classes = calloc((size_t)(n ? n : 1), sizeof *L->classes);
    if (!L->classes)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    for (int i = 0; i < n; i++) {
        yaml_node_pair_t *p = &map->data.mapping.pairs.start[i];
        yaml_node_t *kn = ts_yaml_node(&L->y, p->key);
        yclass *k = &L->classes[i];
        int rc = get_name(L, kn, "node_classes", TS_NAME_MAX, &k->name);
        if (rc < 0)
            return rc;
        for (int j = 0; j < i; j++)
            if (strcmp(L->classes[j].name, k->name) == 0)
                return ts_yaml_fail(&L->y, kn, TS_EINVAL,
                                    "node_classes.%s: defined twice (first at line %d)", k->name,
                                    L->classes[j].line);
        k->line = model_yaml_line(kn);
        L->nclasses = i + 1;
        if ((rc = load_class(L, k, ts_yaml_node(&L->y, p->value))) < 0)
            return rc;
    }
    return 0;
}

/* ---- nodes ------------------------------------------------------------------ */

typedef struct node_entry {
    int index;                 /* in `nodes` */
    const yaml_node_t *at;
    const yclass *k;
    ts_label labels[TS_NODE_MAX_LABELS];
    int nlabels;
    int64_t net_mbit;          /* the node's own, else its class's */
    const char *place[TS_TOPO_MAX_LEVELS]; /* names above the GPU level, NULL = default */
} node_entry;

static int load_node_topology(loader *L, node_entry *e, const yaml_node_t *map,
                              const char *path)
{
    int above = L->nlevels - 1; /* levels above the GPU */
    char sub[YAML_PATH_MAX + TS_TOPO_NAME_MAX];
    if (map && !L->topo)
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: no topology.levels declared in this file",
                            path);
    if (!L->topo)
        return 0;
    if (map) {
        if (map->type != YAML_MAPPING_NODE)
            return ts_yaml_fail_got(&L->y, map, path, "a mapping of level: name");
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
             p < map->data.mapping.pairs.top; p++) {
            yaml_node_t *k = ts_yaml_node(&L->y, p->key);
            const char *ks = ts_yaml_scalar(k);
            int lv = ks ? ts_topo_level_index(L->topo, ks) : -1;
            if (lv < 0 || lv >= above) {
                char got[TS_YAML_GOT_MAX], expect[TS_TOPO_MAX_LEVELS * TS_TOPO_NAME_MAX];
                model_yaml_describe(k, got, sizeof got);
                expect[0] = '\0';
                for (int i = 0; i < above; i++) {
                    size_t used = strlen(expect);
                    snprintf(expect + used, sizeof expect - used, "%s%s", i ? ", " : "",
                             ts_topo_level_name(L->topo, i));
                }
                return ts_yaml_fail(&L->y, k, TS_EINVAL,
                                    "%s: unknown level %s (expected one of: %s)", path, got,
                                    expect);
            }
            ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, ks);
            if (e->place[lv])
                return ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: key given twice", sub);
            int rc =
                get_name(L, ts_yaml_node(&L->y, p->value), sub, TS_TOPO_NAME_MAX, &e->place[lv]);
            if (rc < 0)
                return rc;
        }
    }
    /* every level but the one directly above the GPUs must be placed */
    for (int lv = 0; lv < above - 1; lv++)
        if (!e->place[lv])
            return ts_yaml_fail(&L->y, map ? map : e->at, TS_EINVAL, "%s.%s: required", path,
                        ts_topo_level_name(L->topo, lv));
    return 0;
}

static size_t name_slot(const loader *L, const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    size_t mask = (size_t)L->name_hash_cap - 1;
    size_t i = h & mask;
    while (L->name_hash[i] >= 0 && strcmp(L->c->nodes[L->name_hash[i]].name, name) != 0)
        i = (i + 1) & mask;
    return i;
}

/* The node already called name, or -1 (the loader's own index, so a file of
 * many thousand nodes loads in linear time whatever the model's lookup costs). */
static int node_named(const loader *L, const char *name)
{
    return L->name_hash_cap ? L->name_hash[name_slot(L, name)] : -1;
}

/* Remembers where node idx came from (for duplicate messages) and its name. */
static int node_record(loader *L, int idx, const node_entry *e)
{
    ts_block_part parts[] = {TS_GROW_PART(L->node_line), TS_GROW_PART(L->node_entry)};
    if (ts_grow_parts(parts, 2, &L->node_cap, idx + 1, 64) != 0)
        return TS_ENOMEM;
    L->node_line[idx] = model_yaml_line(e->at);
    L->node_entry[idx] = e->index;
    if ((idx + 1) * 2 > L->name_hash_cap) {
        int ncap = L->name_hash_cap ? L->name_hash_cap * 2 : 128;
        int *nh = malloc((size_t)ncap * sizeof *nh);
        if (!nh)
            return TS_ENOMEM;
        memset(nh, -1, (size_t)ncap * sizeof *nh);
        free(L->name_hash);
        L->name_hash = nh;
        L->name_hash_cap = ncap;
        for (int i = 0; i < idx; i++)
            L->name_hash[name_slot(L, L->c->nodes[i].name)] = i;
    }
    L->name_hash[name_slot(L, L->c->nodes[idx].name)] = idx;
    return 0;
}

/* Adds one node named name from entry e, and its GPUs to the topology. */
static int add_node(loader *L, const node_entry *e, const yaml_node_t *name_at,
                    const char *name)
{
    char path[YAML_PATH_MAX];
    ts_yaml_pathf(path, sizeof path, "nodes[%d]", e->index);
    if (!ts_yaml_name_ok(name, TS_NAME_MAX))
        return ts_yaml_fail(&L->y, name_at, TS_EINVAL,
                            "%s: node name \"%.*s\" must be 1..%d characters "
                            "from [A-Za-z0-9._-]",
                            path, TS_YAML_SHOW_MAX, name, TS_NAME_MAX - 1);
    if (L->c->nnodes >= YAML_MAX_NODES)
        return ts_yaml_fail(&L->y, name_at, TS_EINVAL, "%s: more than %d nodes in one file", path,
                    YAML_MAX_NODES);
    int dup = node_named(L, name);
    if (dup >= 0)
        return ts_yaml_fail(&L->y, name_at, TS_EINVAL,
                            "%s: duplicate node name \"%s\" (first defined by "
                            "nodes[%d] at line %d)",
                            path, name, L->node_entry[dup], L->node_line[dup]);
    const yclass *k = e->k;
    ts_node_spec spec = {
        .name = name,
        .gpu_model = k->gpu_model,
        .ngpu = k->ngpu,
        .cpu_milli = k->cpu_milli,
        .mem_mib = k->mem_mib,
        .gpu_mode = k->gpu_mode,
        .mig_layout = k->has_mig ? &k->mig : NULL,
        .per_gpu_mig = NULL,
        .labels = e->labels,
        .nlabels = e->nlabels,
        .net_mbit = e->net_mbit,
    };
    int idx = ts_cluster_add_node(L->c, &spec, L->y.err);
    if (idx < 0) {
        char where[YAML_PATH_MAX + TS_NAME_MAX + 8];
        snprintf(where, sizeof where, "%s (%s)", path, name);
        return fail_prefix(L, name_at, where, idx);
    }
    if (node_record(L, idx, e) < 0)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    ts_node *node = &L->c->nodes[idx];
    node->topo_vertex = -1;
    for (int g = 0; g < node->ngpu; g++)
        node->gpu[g].topo_vertex = -1;
    if (!L->topo)
        return 0;

    int above = L->nlevels - 1;
    const char *names[TS_TOPO_MAX_LEVELS];
    char gpu_name[TS_TOPO_NAME_MAX + 16];
    for (int lv = 0; lv < above; lv++)
        names[lv] = e->place[lv];
    if (!names[above - 1])
        names[above - 1] = name; /* the NVLink domain defaults to the node itself */
    if (strlen(names[above - 1]) >= TS_TOPO_NAME_MAX)
        return ts_yaml_fail(&L->y, name_at, TS_EINVAL,
                            "%s.topology: node name \"%s\" too long for a "
                            "topology vertex (at most %d characters)",
                            path, name, TS_TOPO_NAME_MAX - 1);
    int v = ts_topo_path(L->topo, names, above, L->y.err);
    if (v < 0)
        return fail_prefix(L, name_at, path, v);
    node->topo_vertex = v;
    for (int g = 0; g < node->ngpu; g++) {
        snprintf(gpu_name, sizeof gpu_name, "%s/gpu%d", name, g);
        if (strlen(gpu_name) >= TS_TOPO_NAME_MAX)
            return ts_yaml_fail(&L->y, name_at, TS_EINVAL,
                                "%s: GPU vertex name \"%s\" longer than %d "
                                "characters; use a shorter node name",
                                path, gpu_name, TS_TOPO_NAME_MAX - 1);
        names[above] = gpu_name;
        int gv = ts_topo_path(L->topo, names, L->nlevels, L->y.err);
        if (gv < 0)
            return fail_prefix(L, name_at, path, gv);
        node->gpu[g].topo_vertex = gv;
    }
    return 0;
}

static int load_node(loader *L, int index, const yaml_node_t *map)
{
    enum { K_NAME, K_NAMES, K_CLASS, K_TOPO, K_LABELS, K_NET, K_N };
    static const char *const keys[K_N] = {"name", "names", "class", "topology", "labels",
                                          "network"};
    yaml_node_t *v[K_N];
    char path[YAML_PATH_MAX], sub[YAML_PATH_MAX + 16];
    ts_yaml_pathf(path, sizeof path, "nodes[%d]", index);
    int rc = ts_yaml_map_fields(&L->y, map, path, keys, K_N, v);
    if (rc < 0)
        return rc;
    if (!v[K_NAME] == !v[K_NAMES])
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: needs exactly one of name or names", path);
    node_entry e;
    memset(&e, 0, sizeof e);
    e.index = index;
    e.at = map;

    ts_yaml_pathf(sub, sizeof sub, "%s.class", path);
    if (!v[K_CLASS])
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: required", sub);
    const char *cname = ts_yaml_scalar(v[K_CLASS]);
    for (int i = 0; cname && i < L->nclasses; i++)
        if (strcmp(L->classes[i].name, cname) == 0)
            e.k = &L->classes[i];
    if (!e.k) {
        char got[TS_YAML_GOT_MAX];
        model_yaml_describe(v[K_CLASS], got, sizeof got);
        return ts_yaml_fail(&L->y, v[K_CLASS], TS_EINVAL,
                            "%s: class %s is not defined in node_classes", sub, got);
    }
    memcpy(e.labels, e.k->labels, sizeof e.labels);
    e.nlabels = e.k->nlabels;
    if (v[K_LABELS]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.labels", path);
        if ((rc = get_labels(L, v[K_LABELS], sub, e.labels, &e.nlabels)) < 0)
            return rc;
    }
    e.net_mbit = e.k->net_mbit;
    ts_yaml_pathf(sub, sizeof sub, "%s.network", path);
    if (v[K_NET] && (rc = get_network(L, v[K_NET], sub, &e.net_mbit)) < 0)
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.topology", path);
    if ((rc = load_node_topology(L, &e, v[K_TOPO], sub)) < 0)
        return rc;

    if (v[K_NAME]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.name", path);
        const char *name = NULL;
        if ((rc = get_name(L, v[K_NAME], sub, TS_NAME_MAX, &name)) < 0)
            return rc;
        return add_node(L, &e, v[K_NAME], name);
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.names", path);
    const char *pattern = ts_yaml_scalar(v[K_NAMES]);
    if (!pattern)
        return ts_yaml_fail_got(&L->y, v[K_NAMES], sub, "a name pattern such as node-[001-016]");
    ts_name_range r;
    if ((rc = ts_name_range_parse(pattern, &r, L->y.err)) < 0)
        return fail_prefix(L, v[K_NAMES], sub, rc);
    /* one byte over TS_NAME_MAX, so a name just too long reaches add_node's check */
    char name[TS_NAME_MAX + 1];
    for (long i = 0; i < r.count; i++) {
        if (!ts_name_range_name(&r, i, name, sizeof name))
            return ts_yaml_fail(&L->y, v[K_NAMES], TS_EINVAL, "%s: expanded name longer than %d "
                        "characters", sub, TS_NAME_MAX - 1);
        if ((rc = add_node(L, &e, v[K_NAMES], name)) < 0)
            return rc;
    }
    return 0;
}

static int load_nodes(loader *L, const yaml_node_t *seq)
{
    if (seq->type != YAML_SEQUENCE_NODE)
        return ts_yaml_fail_got(&L->y, seq, "nodes", "a list of nodes");
    int n = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n == 0)
        return ts_yaml_fail(&L->y, seq, TS_EINVAL, "nodes: must list at least one node");
    for (int i = 0; i < n; i++) {
        int rc = load_node(L, i, ts_yaml_node(&L->y, seq->data.sequence.items.start[i]));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- entry point ------------------------------------------------------------ */

static int load_document(void *ctx)
{
    loader *L = ctx;
    yaml_node_t *root = yaml_document_get_root_node(L->y.doc);
    if (!root || (root->type == YAML_SCALAR_NODE && !*ts_yaml_scalar(root)))
        return ts_err_set(L->y.err, TS_EINVAL, "%s:1: empty file: expected topology, "
                          "node_classes and nodes", L->y.fname);
    static const char *const keys[] = {"topology", "node_classes", "nodes"};
    yaml_node_t *v[3];
    int rc = ts_yaml_map_fields(&L->y, root, "", keys, 3, v);
    if (rc < 0)
        return rc;
    if (!v[1])
        return ts_yaml_fail(&L->y, root, TS_EINVAL, "node_classes: required");
    if (!v[2])
        return ts_yaml_fail(&L->y, root, TS_EINVAL, "nodes: required");
    L->c = ts_cluster_new();
    if (!L->c)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    if (v[0] && (rc = load_topology(L, v[0])) < 0)
        return rc;
    if ((rc = load_classes(L, v[1])) < 0)
        return rc;
    return load_nodes(L, v[2]);
}

int ts_load_cluster_yaml(const char *buf, size_t len, const char *fname, ts_cluster **out,
                         ts_err *err)
{
    loader L;
    memset(&L, 0, sizeof L);
    L.y.fname = fname ? fname : "<cluster yaml>";
    L.y.err = err;
    if (!out)
        return ts_err_set(err, TS_EINVAL, "%s: no output cluster given", L.y.fname);
    *out = NULL;

    int rc = ts_yaml_load_one(&L.y, buf, len, load_document, &L);
    free(L.classes);
    free(L.node_line);
    free(L.node_entry);
    free(L.name_hash);
    if (rc < 0) {
        ts_cluster_free(L.c); /* frees the topology too */
        return rc;
    }
    *out = L.c;
    return 0;
}
