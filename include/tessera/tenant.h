/*
 * tenant.h - who may use how much: the tenant tree (organisation > teams),
 * quotas per resource dimension, admission of work against them in two tiers,
 * borrowing of idle guarantees, and weighted fair share with decayed usage.
 *
 * Resource dimensions are CPU milli-cores, memory MiB and milli-GPU per GPU
 * model (one slot per model id of ts_gpu_model_lookup). The guarantees are the
 * capacity the quota layer hands out: idle capacity that is nobody's guarantee
 * is not lent by quota (placement still decides what physically fits). A
 * dimension in which no tenant is guaranteed anything (CPU and memory in a
 * GPU-only tenants file, a GPU model nobody has quota on) is not managed:
 * admission lets any demand in it through and nothing counts as borrowed.
 *
 * Ownership: a ts_tenants owns its tenants; a ts_quota reads (and keeps a
 * pointer to) the ts_tenants it was made from, which must outlive it and not
 * change while it lives. Nothing here is thread-safe; the shells own the locks.
 * Time is the caller's `now` in seconds; the core reads no clock.
 */
#ifndef TESSERA_TENANT_H
#define TESSERA_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"
#include "tessera/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- resource dimensions ------------------------------------------------ */

enum { TS_RES_CPU = 0, TS_RES_MEM = 1, TS_RES_GPU0 = 2 };
#define TS_RES_DIMS (TS_RES_GPU0 + TS_MAX_GPU_MODELS)

static inline int ts_res_gpu(int model) { return TS_RES_GPU0 + model; }

/* "cpu_milli", "mem_mib" or "gpu[A100-80GB]" into buf (always terminated). */
void ts_res_name(int dim, char *buf, size_t size);

/* ---- the tenant tree ---------------------------------------------------- */

/* Which Unix identities the tenant's tasks may run as (docs/tenants-format.md
 * "Identity"): the mappings its tenant-admin may give its tokens, and
 * whether uid 0 may run at all. Zeroed: none, and never root. A team that
 * does not state allow_root takes its parent's; the lists are its own. */
#define TS_TENANT_UNIX_USERS_BYTES 256
typedef struct ts_tenant_identity {
    bool allow_root;
    bool allow_root_set;      /* stated by the tenant itself (else inherited) */
    /* whether its jobs may ask for the node's network (docs/network.md) */
    bool allow_host_network;
    bool allow_host_network_set; /* stated by the tenant itself (else inherited) */
    /* the Unix user names a tenant-admin may map, comma-separated ("" = none) */
    char unix_users[TS_TENANT_UNIX_USERS_BYTES];
    /* the uids a tenant-admin may map, inclusive, when has_uid_range */
    bool has_uid_range;
    int64_t uid_min, uid_max;
} ts_tenant_identity;

#define TS_TENANT_REGISTRIES_BYTES 512
#define TS_TENANT_MOUNTS_MAX 8
#define TS_MOUNT_PATH_MAX 256

/* A host folder a tenant's container tasks may mount (docs/images.md). */
typedef struct ts_tenant_mount {
    char path[TS_MOUNT_PATH_MAX];   /* absolute, no "." or ".." component, no trailing / */
    bool write;                     /* may be mounted read-write */
} ts_tenant_mount;

/* Organisation plus up to three levels of teams. */
#define TS_TENANT_MAX_DEPTH 4
#define TS_TENANT_MAX 4096
/* A borrowing or lending limit with no bound. */
#define TS_QUOTA_UNLIMITED INT64_MAX
/* Largest finite quota or usage in one dimension: sums over every tenant stay
 * far inside int64_t. */
#define TS_QUOTA_MAX ((int64_t)100000000000000LL)

typedef struct ts_tenant {
    char name[TS_NAME_MAX];   /* unique over the whole tree */
    int parent;               /* index, -1 for an organisation */
    int depth;                /* 0 for an organisation */
    int nchildren;
    double weight;            /* fair-share weight, > 0 (default 1) */
    int order;                /* its jobs' order (enum ts_order, cycle.h); 0 = its
                               * parent's, and an organisation's 0 the scheduler's */
    int admins_see_jobs;      /* privacy.admins_see_jobs: whether its tenant-admins read
                               * its jobs' env, command and output (docs/secrets.md);
                               * TS_PRIVACY_* below, 0 = its parent's (an organisation's:
                               * no) */
    /* per dimension; defaults: guaranteed 0, borrow and lend unlimited */
    int64_t guaranteed[TS_RES_DIMS];
    /* how much this subtree may take from idle capacity outside itself */
    int64_t borrow_limit[TS_RES_DIMS];
    /* how much of this subtree's idle guarantee others may take */
    int64_t lend_limit[TS_RES_DIMS];
    ts_tenant_identity identity;
    /* the registries its jobs' images may come from (docs/images.md),
     * host[:port] comma-separated; not stated: its parent's; an
     * organisation that does not state it: any registry */
    char registries[TS_TENANT_REGISTRIES_BYTES];
    bool registries_set;
    /* host folders its jobs may mount into their images; not stated: its
     * parent's; an organisation that does not state it: none */
    ts_tenant_mount mounts[TS_TENANT_MOUNTS_MAX];
    int nmounts;
    bool mounts_set;
} ts_tenant;

/* Whether a job of tenant t may use an image from host ("host[:port]"). */
bool ts_tenant_registry_ok(const ts_tenant *t, const char *host);

/* Whether a job of tenant t may mount host_path (absolute, clean: see
 * ts_mount_path_ok) into its image, read-write when write. */
bool ts_tenant_mount_ok(const ts_tenant *t, const char *host_path, bool write);

/* Whether a container task of the tenant's may run as uid:gid inside its
 * image (a job's `user`, docs/images.md), its job submitted by a token
 * mapped to submitter_uid (-1: none): a root submitter may name anyone; uid
 * or gid 0 needs allow_root; otherwise the submitter's own uid, or one of
 * the tenant's uid_range. Pure. */
bool ts_tenant_container_user_ok(const ts_tenant_identity *id, int64_t submitter_uid,
                                 int64_t uid, int64_t gid);

/* Parses "uid[:gid]" (decimal, each 0..2^31-1; gid defaults to uid) into
 * uid, gid; false when s is not that. Pure. */
bool ts_container_user_parse(const char *s, int64_t *uid, int64_t *gid);

/* The user an MPS server sees for a share of job job_id (the share key of an
 * MPS node, ts_request.share_key): its run-as uid (run_uid, -1 unmapped: the
 * agent's own, root) + 1; in an image with a `user` (container_user: "uid[:gid]"
 * or "image"), the uid inside, + 1, or for "image" (the image's User, known
 * on the node only) a key of the job's own, -(job_id + 1), that shares a GPU
 * with no other job. Pure. */
int64_t ts_share_user_key(int64_t run_uid, const char *container_user, int64_t job_id);

/* An absolute path under TS_MOUNT_PATH_MAX bytes with no empty, "." or ".."
 * component and no trailing "/" (except "/" itself). */
bool ts_mount_path_ok(const char *p);

#define TS_PRIVACY_INHERIT 0
#define TS_PRIVACY_YES 1
#define TS_PRIVACY_NO 2

/* Tenants in insertion order; a parent always has a smaller index than its
 * children (a parent must exist before its children are added). */
typedef struct ts_tenants {
    ts_tenant *t;
    int n;
    int cap;
} ts_tenants;

/* NULL on allocation failure. ts_tenants_free(NULL) is a no-op. */
ts_tenants *ts_tenants_new(void);
void ts_tenants_free(ts_tenants *ts);

/* Adds a tenant under `parent` (NULL or "" for an organisation); returns its
 * index, or TS_EEXIST (name taken), TS_ENOENT (no such parent), TS_EINVAL
 * (bad name, tree too deep, too many tenants), TS_ENOMEM. */
int ts_tenant_add(ts_tenants *ts, const char *name, const char *parent, ts_err *err);
/* Index of a tenant by name, or -1. */
int ts_tenant_find(const ts_tenants *ts, const char *name);

/* Whether s is a Unix user name as useradd takes it: [a-z_][a-z0-9_-]*, at
 * most 32 characters (tenants' unix_users, tokens' unix_user). */
bool ts_unix_name_ok(const char *s);

/* Sets one dimension's quota of tenant t. guaranteed in 0..TS_QUOTA_MAX;
 * borrow and lend in 0..TS_QUOTA_MAX or TS_QUOTA_UNLIMITED. TS_EINVAL naming
 * the field, e.g. "tenants.team-a.borrow.cpu_milli: must be >= 0". */
int ts_tenant_set_quota(ts_tenants *ts, int t, int dim, int64_t guaranteed, int64_t borrow,
                        int64_t lend, ts_err *err);
int ts_tenant_set_weight(ts_tenants *ts, int t, double weight, ts_err *err);
/* order: 0 (inherit), 1 (las) or 2 (fifo), as enum ts_order in cycle.h. */
int ts_tenant_set_order(ts_tenants *ts, int t, int order, ts_err *err);

/* Whole-tree checks: in every dimension the children's guarantees fit in the
 * parent's, e.g. "tenants.team-a.guaranteed.gpu[A100-80GB]: children's
 * guarantees (96) exceed the parent's (64)". */
int ts_tenants_validate(const ts_tenants *ts, ts_err *err);
/* The same checks, going on past each error: on_error (may be NULL) gets
 * every one with the tenant it names (e's message as err would hold it),
 * err the first. Returns 0 or the first error's code. */
typedef void (*ts_tenants_error_fn)(void *ctx, int tenant, const ts_err *e);
int ts_tenants_validate_all(const ts_tenants *ts, ts_tenants_error_fn on_error, void *ctx,
                            ts_err *err);

/* ---- quota accounting and admission ------------------------------------ */

/* guaranteed: must fit the tenant's guarantee and every ancestor's, and is
 * never taken back for another tenant. opportunistic: may borrow idle
 * guarantees (siblings' first, then further up the tree) within the lending
 * and borrowing limits; what a tenant borrows is what reclaim takes back. */
/* How fast past usage is forgotten in fair share, unless configured. */
#define TS_HALF_LIFE_DEFAULT_S (7.0 * 86400.0)

enum ts_tier { TS_TIER_GUARANTEED = 0, TS_TIER_OPPORTUNISTIC = 1 };
#define TS_TIERS 2

enum ts_quota_status {
    TS_QUOTA_OK = 0,
    /* guaranteed work within its guarantee, but others borrow the capacity it
     * needs: reclaim `over` first, then it fits */
    TS_QUOTA_RECLAIM = 1,
    TS_QUOTA_REFUSED = 2,
};

/* The limit that stopped a request. */
enum ts_quota_limit {
    TS_QLIM_NONE = 0,
    TS_QLIM_GUARANTEE = 1,  /* guaranteed work above `tenant`'s guarantee */
    TS_QLIM_BORROW = 2,     /* `tenant` would borrow beyond its borrowing limit */
    TS_QLIM_LEND = 3,       /* idle guarantee exists, lending limits hold it back */
    TS_QLIM_IDLE = 4,       /* no idle guarantee left anywhere to borrow */
};

typedef struct ts_quota_verdict {
    int status;      /* enum ts_quota_status */
    int limit;       /* enum ts_quota_limit; TS_QLIM_NONE when OK */
    int tenant;      /* whose limit (for LEND/IDLE: the requester's organisation) */
    int dim;         /* the first dimension (lowest index) that does not fit */
    int64_t over;    /* by how much that limit is exceeded */
} ts_quota_verdict;

/* "team-a: gpu[A100-80GB]: borrowing limit exceeded by 2000" into buf. */
void ts_quota_explain(const ts_tenants *ts, const ts_quota_verdict *v, char *buf, size_t size);

typedef struct ts_quota ts_quota;

/* Validates the tree and makes empty accounting for it. half_life_s (> 0) is
 * the half-life of the usage that fair share remembers. *out is owned by the
 * caller (ts_quota_free). */
int ts_quota_new(const ts_tenants *ts, double half_life_s, ts_quota **out, ts_err *err);
void ts_quota_free(ts_quota *q);
/* Makes *dst (NULL: a new one; one of other tenants: replaced) an exact copy
 * of src, usage and decay included: what a plan charges on the copy, src
 * does not see. 0 or TS_ENOMEM (*dst then NULL). */
int ts_quota_copy(ts_quota **dst, const ts_quota *src);

/* What a request charges: cpu, memory, and num_gpu * gpu_milli of gpu_model
 * (the model of the node it lands on; a MIG instance charges its memory
 * slices' fraction of a GPU). gpu_model may be -1 for a CPU-only request. */
int ts_quota_demand(const ts_request *req, int gpu_model, int64_t demand[TS_RES_DIMS],
                    ts_err *err);

/* Would charging demand to tenant t in tier fit? Pure; fills v (not NULL) and
 * returns v->status, or TS_EINVAL for a bad tenant, tier or demand. */
int ts_quota_check(const ts_quota *q, int t, int tier, const int64_t demand[TS_RES_DIMS],
                   ts_quota_verdict *v);

/* Records work that started (charge) or finished (credit) at time now on
 * tenant t: usage counts on t and every ancestor. Charging does not check
 * admission (the shell records what runs); a credit must not exceed what t
 * holds in that tier. now must not go back. TS_EINVAL and no change else. */
int ts_quota_charge(ts_quota *q, int t, int tier, const int64_t demand[TS_RES_DIMS],
                    double now, ts_err *err);
int ts_quota_credit(ts_quota *q, int t, int tier, const int64_t demand[TS_RES_DIMS],
                    double now, ts_err *err);

/* The tenants q was made from. */
const ts_tenants *ts_quota_tenants(const ts_quota *q);

/* Usage of t's subtree (both tiers, or one tier). */
int64_t ts_quota_usage(const ts_quota *q, int t, int dim);
int64_t ts_quota_usage_tier(const ts_quota *q, int t, int tier, int dim);
/* What t's subtree takes from idle capacity outside itself: what reclaim
 * would take back from it. */
int64_t ts_quota_borrowed(const ts_quota *q, int t, int dim);
/* What t's subtree could lend outside itself now (idle, within its limit). */
int64_t ts_quota_lendable(const ts_quota *q, int t, int dim);

/* The cluster's capacity per dimension: what shares are a fraction of in a
 * dimension where nobody is guaranteed anything (else such usage would
 * count for nothing and every share read 0). Not admission: only shares. */
void ts_quota_set_capacity(ts_quota *q, const int64_t capacity[TS_RES_DIMS]);
/* Weighted dominant-resource share of t at now: over dimensions with any
 * guarantee (or a capacity set), max of decayed usage / total guarantees
 * (else capacity), divided by the weight. Usage held steadily for long
 * reads as its plain fraction; a new usage grows into it with the
 * half-life (8 of 32 GPUs for an hour, half-life 7 days: 0.001). */
double ts_quota_share(const ts_quota *q, int t, double now);
/* The dominant share of a usage now (ts_quota_usage of a tenant, per
 * dimension), undecayed and unweighted: 8 of 32 GPUs is 0.25 at once. */
double ts_quota_usage_share(const ts_quota *q, const int64_t use[TS_RES_DIMS]);
/* Sorts tenants[0..n-1] by ascending share at now (ties: lower index first):
 * who should go first. TS_ENOMEM, TS_EINVAL (bad index). */
int ts_quota_order(const ts_quota *q, double now, int *tenants, int n);

#ifdef __cplusplus
}
#endif
#endif
