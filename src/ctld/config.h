/*
 * config.h - internal: tesserad's configuration (config.c; the keys: docs/tesserad.md).
 */
#ifndef TS_CTLD_CONFIG_H
#define CTLD_HOOK_ALLOW_MAX 32 /* webhooks.allow entries */
#define TS_CTLD_CONFIG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "io/dest.h"
#include "tessera/cycle.h"
#include "tessera/spec.h"
#include "tessera/store.h"
#include "tessera/tenant.h"

#define CTLD_PORT_DEFAULT 8460
#define CTLD_PATH_MAX 1024
#define CTLD_MAX_PRIORITY_CLASSES 32
#define CTLD_BODY_MAX_BYTES (1 << 20)
/* limits.queued_spec_mib_per_tenant: a tenant's queued jobs' specs, each
 * array element counted (a cancel or an update writes each one's row) */
#define CTLD_QUEUED_SPEC_MIB_DEFAULT 1024

/* ---- configuration (config.c) ------------------------------------------- */

typedef struct ctld_priority_class {
    char name[TS_SPEC_NAME_MAX];
    int value;
} ctld_priority_class;

#define CTLD_MAX_QOS 64
typedef struct ctld_qos {
    char tenant[TS_NAME_MAX];   /* a tenant or organisation; "default" for the rest */
    int tc, sl;                 /* NCCL_IB_TC, NCCL_IB_SL; -1 = not set */
} ctld_qos;

/* OpenID Connect sign-in (oidc.c, docs/tesserad.md "oidc"): ID tokens from
 * one issuer, verified against its keys, their claims mapped to a caller. */
#define CTLD_OIDC_URL_MAX 512
#define CTLD_OIDC_CLAIM_MAX 64
#define CTLD_OIDC_USERS_MAX 256
typedef struct ctld_oidc_config {
    bool on;
    char issuer[CTLD_OIDC_URL_MAX];
    char audience[CTLD_OIDC_URL_MAX];
    char jwks_file[CTLD_PATH_MAX];      /* or */
    char jwks_url[CTLD_OIDC_URL_MAX];   /* or neither: the issuer's discovery document */
    char user_claim[CTLD_OIDC_CLAIM_MAX];      /* "sub" */
    char tenant_claim[CTLD_OIDC_CLAIM_MAX];    /* "tenant" */
    char role_claim[CTLD_OIDC_CLAIM_MAX];      /* "" = every ID token is role user */
    char unix_user_claim[CTLD_OIDC_CLAIM_MAX]; /* "" = ID tokens map no Unix user */
    /* the Unix users a claim may name, with their uids (the administrator's
     * mapping: a name not listed maps nobody) */
    char (*unix_users)[TS_STORE_NAME_MAX];
    int64_t *unix_uids;
    int nunix;
} ctld_oidc_config;

#define CTLD_NET_SERVICES_MAX 32
#define CTLD_NET_PKEY_MAX 0x7ffe /* InfiniBand partition keys: 15 bits, 0x7fff the default's */
#define CTLD_NET_SERVICE_TENANTS_BYTES 256
#define CTLD_NET_PUBLISH_FROM_MAX 32
#define CTLD_NET_PUBLISH_LO 30000 /* network.publish_ports' default: Kubernetes' NodePorts */
#define CTLD_NET_PUBLISH_HI 32767
#define CTLD_NET_IB_SERVICE_PORTS_MAX 64

typedef struct ctld_config {
    /* mail (docs/tesserad.md): the SMTP relay of notify.mail, "" = none;
     * STARTTLS required when mail_starttls */
    char mail_relay[256], mail_from[256];
    /* webhooks.allow: address ranges a job's notify.url may reach beyond
     * the default (webhook_dest.c: not loopback, link-local, unspecified
     * or multicast) */
    io_cidr hook_allow[CTLD_HOOK_ALLOW_MAX];
    int nhook_allow;
    bool mail_starttls;
    char mail_ca_file[CTLD_PATH_MAX]; /* "" the system's CAs verify the relay */
    char listen_addr[64];       /* "127.0.0.1" */
    int listen_port;            /* 8460 */
    char state_dir[CTLD_PATH_MAX];
    char store_url[CTLD_PATH_MAX];
    char cluster_file[CTLD_PATH_MAX];
    char tenants_file[CTLD_PATH_MAX];
    bool virtual_all;           /* every node is virtual */
    char **virtual_nodes;       /* else: these node names are virtual */
    int nvirtual;
    char tls_cert[CTLD_PATH_MAX], tls_key[CTLD_PATH_MAX]; /* "" = plain HTTP */
    char admin_token_file[CTLD_PATH_MAX];
    /* the first admin token's Unix identity, looked up when it is created ("" none) */
    char admin_unix_user[TS_STORE_NAME_MAX];
    ctld_oidc_config oidc;
    char secrets_key_file[CTLD_PATH_MAX]; /* docs/secrets.md; default state_dir/secrets.key */
    double interval_s;          /* periodic cycle */
    double half_life_s;
    ts_sched_config sched;
    ctld_priority_class classes[CTLD_MAX_PRIORITY_CLASSES];
    int nclasses;
    double rate_per_s;          /* requests per second per token */
    double rate_burst;
    /* abuse limits (http.c, routes.c; docs/tesserad.md "limits") */
    int conns_max;              /* connections in all (also capped by RLIMIT_NOFILE) */
    int conns_per_client;       /* not yet authenticated, per client address (IPv6: /64) */
    int conns_per_token;        /* open connections that showed one token */
    int conns_per_tenant;       /* and all the tokens of one tenant together */
    int tokens_per_tenant;      /* a tenant's live tokens a tenant-admin may make */
    double request_timeout_s;   /* every request must arrive whole within this */
    int queued_per_tenant;      /* pending and held jobs per tenant */
    int64_t queued_spec_bytes;  /* their specs' bytes per tenant (an array's: each element's) */
    bool metrics_public;        /* /metrics without a token */
    double node_lost_s;         /* an agent silent this long is lost */
    double idle_threshold_pct;  /* a task below this GPU utilisation is idle */
    double idle_window_s[2];    /* per tier: idle this long is reaped; 0 = never */
    char **idle_tenant;         /* tenants (or organisations) with their own window, */
    double *idle_tenant_s;      /* which beats the tier's; 0 = never */
    int nidle_tenant;
    double straggler_factor;    /* a rank this much slower than its gang's median straggles */
    double straggler_window_s;  /* for this long, before it counts */
    char **straggler_drain;     /* tenants (or their organisations) whose straggling jobs are */
    int nstraggler_drain;       /* requeued from their checkpoint and the node drained */
    char checkpoint_dir[CTLD_PATH_MAX]; /* TESSERA_CHECKPOINT_DIR root; "" none */
    /* network: (docs/network.md) a namespace per task on its tenant's overlay */
    bool net_isolation;
    uint32_t net_range;         /* host order; each tenant one block of it */
    int net_range_prefix, net_tenant_prefix, net_mtu; /* net_mtu 0: the agent's default */
    int net_vni_base;           /* the first tenant's VNI; 0: chosen at random, once (net.c) */
    char net_services[CTLD_NET_SERVICES_MAX][64]; /* "ADDR[/N]:PORT/tcp|udp" tasks may reach */
    /* per service: the tenants whose tasks may reach it, comma-separated; "" every tenant */
    char net_service_tenants[CTLD_NET_SERVICES_MAX][CTLD_NET_SERVICE_TENANTS_BYTES];
    /* where a job's published ports may be reached from ("ADDR[/N]"); none: anywhere */
    char net_publish_from[CTLD_NET_PUBLISH_FROM_MAX][24];
    int nnet_publish_from;
    /* the ports a job may publish, net_publish_lo..hi (network.publish_ports; default
     * CTLD_NET_PUBLISH_LO..HI): none a node's own service should listen on */
    int net_publish_lo, net_publish_hi;
    int nnet_services;
    bool net_ib_partitions;     /* each tenant an InfiniBand partition key (net.c) */
    char net_ib_partitions_file[CTLD_PATH_MAX]; /* OpenSM's partitions.conf, written; "" none */
    int net_ib_pkey_base;       /* the first tenant's partition key; 0: at random, once (net.c) */
    /* port GUIDs of shared services (storage, login nodes): full members of
     * the default partition, which every other port holds as a limited one */
    uint64_t net_ib_service_ports[CTLD_NET_IB_SERVICE_PORTS_MAX];
    int nnet_ib_service_ports;
    ctld_qos qos[CTLD_MAX_QOS]; /* NCCL traffic class / service level per tenant */
    int nqos;
    /* high availability (ha.c, docs/ha.md): off unless the ha: key is given */
    bool ha_on;
    double ha_lease_s;          /* the lease in the store (10 s) */
    double ha_renew_s;          /* renewed (leader) or tried (standby) this often (2 s) */
    char ha_advertise_url[256]; /* what standbys tell clients; "" = from listen */
    int64_t ha_epoch;           /* set once leader: the store fences its writes with it */
} ctld_config;

/* Reads the configuration file (paths in it are relative to its folder). */
int ctld_config_load(const char *path, ctld_config *cfg, ts_err *err);
void ctld_config_fini(ctld_config *cfg);
void ctld_oidc_config_fini(ctld_oidc_config *o);
/* "90", "90s", "15m", "2h", "7d", "1h30m" -> seconds; TS_EINVAL. */
int ctld_parse_duration(const char *s, double *out);

/* Every tenant network.services[i].tenants names is one of ts, else TS_EINVAL
 * naming the first that is not (config_net.c): checked at start, once the
 * tenants in force are read, and on each replacement of them. */
int ctld_config_services_tenants(const ctld_config *cfg, const ts_tenants *ts, ts_err *err);

#endif
