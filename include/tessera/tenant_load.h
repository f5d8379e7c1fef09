/*
 * tenant_load.h - the tenant tree (tenant.h) from Tessera's tenants YAML
 * (docs/tenants-format.md): organisations and their teams as nested mappings,
 * each with a fair-share weight and guaranteed / borrowing / lending quotas in
 * CPU milli-cores, memory MiB and whole GPUs per GPU model.
 *
 * Like the cluster loader (load.h) it parses from memory and does no file I/O;
 * fname is only used in messages (NULL reads as "<tenants yaml>"). Every error
 * returns TS_EINVAL (TS_ENOMEM when allocation fails) with a message naming
 * file, line and key path, e.g. "tenants.yaml:12:
 * tenants.research.teams.vision.guaranteed.gpu.T4: must be ...". On success
 * *out owns a new, validated tree (free it with ts_tenants_free); on failure
 * *out is NULL and nothing was allocated that outlives the call. Pure and
 * reentrant: no global state.
 */
#ifndef TESSERA_TENANT_LOAD_H
#define TESSERA_TENANT_LOAD_H

#include <stddef.h>

#include "tessera/error.h"
#include "tessera/tenant.h"

#ifdef __cplusplus
extern "C" {
#endif

int ts_load_tenants_yaml(const char *buf, size_t len, const char *fname, ts_tenants **out,
                         ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
