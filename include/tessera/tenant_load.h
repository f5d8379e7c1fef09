/*
 * tenant_load.h - the tenant tree (tenant.h) from Tessera's tenants YAML
 * (docs/tenants-format.md): organisations and their teams as nested mappings,
 * each with a fair-share weight and guaranteed / borrowing / lending quotas in
 * CPU milli-cores, memory MiB and whole GPUs per GPU model.
 *
 * Like the cluster loader (load.h) it parses from memory and does no file I/O;
 * fname is only used in messages (NULL reads as "<tenants yaml>"). An
 * invalid file returns TS_EINVAL (TS_ENOMEM when allocation fails), and
 * every error in it is found in one load, each a message naming file, line
 * and key path, e.g. "tenants.yaml:12:
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

/* err gets the first error (by line), followed by "(and N more errors)"
 * where there are more. */
int ts_load_tenants_yaml(const char *buf, size_t len, const char *fname, ts_tenants **out,
                         ts_err *err);
/* The same, with every error in errs (NULL: none kept): the first
 * TS_ERRS_MAX in the order of their lines, the rest counted. */
int ts_load_tenants_yaml_all(const char *buf, size_t len, const char *fname, ts_tenants **out,
                             ts_errs *errs);

#ifdef __cplusplus
}
#endif
#endif
