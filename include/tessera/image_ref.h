/*
 * image_ref.h - what names a container image: host[:port]/repo[:tag] or
 * host[:port]/repo@sha256:<hex> (both may be given: the digest wins). The
 * job spec checks a job's `image:` with it, the agent pulls by it. Pure: no
 * I/O, thread-safe. docs/images.md has the rules.
 */
#ifndef TESSERA_IMAGE_REF_H
#define TESSERA_IMAGE_REF_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_IMAGE_REF_MAX 512
#define TS_IMAGE_DIGEST_MAX 72          /* "sha256:" + 64 hex + NUL */

/* host[:port]/repo[:tag][@sha256:<hex>]. */
typedef struct ts_image_ref {
    char host[256];                     /* "registry.example:5000" */
    char repo[256];                     /* "team/pytorch" */
    char tag[129];                      /* "" when only a digest was given */
    char digest[TS_IMAGE_DIGEST_MAX];   /* "" unless pinned */
} ts_image_ref;

/* Parses text (what a job spec's `image:` holds). A registry host is
 * required: no implicit default registry. field names the input in errors
 * ("image"). TS_EINVAL with the field and the reason. */
int ts_image_ref_parse(const char *text, const char *field, ts_image_ref *out, ts_err *err);

/* The reference written back in one form, "host/repo[:tag][@digest]" (a
 * reference parsed from "host/repo" has tag "latest"), into out (n bytes,
 * cut to fit): the name the controller and the agents' store listings
 * (docs/images.md) compare images by. */
void ts_image_ref_format(const ts_image_ref *r, char *out, size_t n);

/* True when s is "sha256:" and 64 lower-case hex digits. */
bool ts_image_digest_ok(const char *s);

#ifdef __cplusplus
}
#endif
#endif
