/*
 * router.h - the controller's one route table: every HTTP operation as a row
 * (method, path pattern, handler, the roles that may call it, and what the
 * OpenAPI document says of it). The router (router.c) dispatches from these
 * rows and openapi.c writes the document from the same rows, so a route
 * cannot exist in one without the other.
 *
 * The table itself lives with the handlers it names (routes.c); it is
 * static, read-only and safe to read from any thread.
 */
#ifndef TS_CTLD_ROUTER_H
#define TS_CTLD_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

#define CTLD_ROLE(r) (1u << (r))
#define CTLD_ROLES_READ                                                                      \
    (CTLD_ROLE(TS_ROLE_ADMIN) | CTLD_ROLE(TS_ROLE_TENANT_ADMIN) | CTLD_ROLE(TS_ROLE_USER) |    \
     CTLD_ROLE(TS_ROLE_VIEWER))
#define CTLD_ROLES_WRITE                                                                     \
    (CTLD_ROLE(TS_ROLE_ADMIN) | CTLD_ROLE(TS_ROLE_TENANT_ADMIN) | CTLD_ROLE(TS_ROLE_USER))
#define CTLD_ROLES_ADMIN CTLD_ROLE(TS_ROLE_ADMIN)
#define CTLD_ROLES_TENANT_ADMIN (CTLD_ROLE(TS_ROLE_ADMIN) | CTLD_ROLE(TS_ROLE_TENANT_ADMIN))
#define CTLD_ROLES_NODE CTLD_ROLE(TS_ROLE_NODE)
#define CTLD_ROLES_PUBLIC 0u /* no token needed: http.c answers these before authenticating */

typedef void (*ctld_handler)(ctld *c, const ctld_request *rq, ctld_reply *r);

typedef struct ctld_route_def {
    const char *method;    /* "GET", "POST", "PUT", "DELETE" */
    const char *pattern;   /* "/v1/jobs/{id}/cancel": {id} a job id, {name} a name */
    ctld_handler handler;  /* NULL: answered by http.c itself (health, readiness, metrics) */
    unsigned roles;        /* CTLD_ROLE bits that may call it; CTLD_ROLES_PUBLIC: anyone */
    const char *op_id;     /* OpenAPI operationId */
    const char *summary;
    const char *request;   /* components/schemas name of the JSON body; NULL: none */
    int ok;                /* the success status */
    const char *response;  /* components/schemas name of the success body; NULL: none */
    const char *errors;    /* error statuses beyond the common ones, "409 422" */
} ctld_route_def;

/* The table (routes.c) and its length. */
const ctld_route_def *ctld_routes(size_t *n);

enum { CTLD_ROUTE_FOUND = 0, CTLD_ROUTE_NO_PATH = 404, CTLD_ROUTE_NO_METHOD = 405 };

/* Finds the row for method and path (a literal segment beats a parameter).
 * CTLD_ROUTE_FOUND and *out; CTLD_ROUTE_NO_METHOD and the path's methods in
 * allow ("GET, POST"); CTLD_ROUTE_NO_PATH. Parameters are not parsed here. */
int ctld_route_find(const char *method, const char *path, const ctld_route_def **out,
                    char *allow, size_t allow_size);

/* Answers 404 or 405 (with Allow) for a path/method ctld_route_find did
 * not find; st is what it returned. */
void ctld_route_refuse(ctld_reply *r, int st, const char *method, const char *path,
                       const char *allow);

/* A decimal number as this API writes them: digits only, no sign, space or
 * leading zero, min..max. False, and a 400 naming param, otherwise. */
bool ctld_parse_number(const char *s, const char *param, int64_t min, int64_t max,
                       int64_t *out, ctld_reply *r);

/* The state query parameter: one state or several, comma-separated
 * ("pending,running"), into a set (ts_job_states_parse); NULL: any (0).
 * False, and a 400 naming the unknown state, otherwise. */
bool ctld_states_of(const char *s, unsigned *set, ctld_reply *r);

#endif
