/*
 * dtask.c - the storage of one desired task being written (see dtask.h).
 *
 * A bump arena: chunks of CHUNK_BYTES (or of one large item's size), each
 * filled from its start and never moved, so a pointer handed out stays
 * valid until fini. A desired task makes a dozen small strings and a few
 * lists; one chunk holds them all, so a task costs one malloc where the
 * hand-written JSON it replaces made one a value.
 */
#ifndef _DEFAULT_SOURCE /* a test that includes this file sets it first */
#define _DEFAULT_SOURCE /* explicit_bzero */
#endif
#include "ctld/dtask.h"

#include <stdarg.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES 2048

struct ctld_dtask_chunk {
    ctld_dtask_chunk *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
};

static size_t dtask_round(size_t n)
{
    return (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

/* Room for n bytes at the arena's end, a new chunk when the last is full;
 * NULL (oom set). Not yet counted as used. */
static unsigned char *dtask_room(ctld_dtask *dt, size_t n)
{
    ctld_dtask_chunk *ch = dt->chunks;
    if (ch && ch->cap - ch->used >= n)
        return ch->data + ch->used;
    size_t cap = n > CHUNK_BYTES ? dtask_round(n) : CHUNK_BYTES;
    if (!(ch = malloc(sizeof *ch + cap))) {
        dt->oom = true;
        return NULL;
    }
    ch->next = dt->chunks;
    ch->used = 0;
    ch->cap = cap;
    dt->chunks = ch;
    return ch->data;
}

void *ctld_dtask_alloc(ctld_dtask *dt, size_t n)
{
    n = dtask_round(n ? n : 1);
    unsigned char *p = dtask_room(dt, n);
    if (p) {
        memset(p, 0, n);
        dt->chunks->used += n;
    }
    return p;
}

static const char *dtask_vprintf(ctld_dtask *dt, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    ctld_dtask_chunk *ch = dt->chunks;
    size_t left = ch ? ch->cap - ch->used : 0;
    int n = vsnprintf(ch ? (char *)ch->data + ch->used : NULL, left, fmt, ap);
    char *s = NULL;
    if (n >= 0 && (size_t)n < left) {
        s = (char *)ch->data + ch->used; /* it fitted where it was written */
    } else if (n >= 0 && (s = (char *)dtask_room(dt, (size_t)n + 1)) != NULL) {
        vsnprintf(s, (size_t)n + 1, fmt, again);
    } else {
        dt->oom = true;
    }
    if (s)
        dt->chunks->used += dtask_round((size_t)n + 1);
    va_end(again);
    return s;
}

const char *ctld_dtask_printf(ctld_dtask *dt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *s = dtask_vprintf(dt, fmt, ap);
    va_end(ap);
    return s;
}

const char *ctld_dtask_secret(ctld_dtask *dt, const char *value, size_t len)
{
    dt->wipe = true; /* before the copy: a chunk it fails to fit is wiped all the same */
    char *s = ctld_dtask_alloc(dt, len + 1);
    if (s && len)
        memcpy(s, value, len);
    return s;
}

void ctld_dtask_env_init(ctld_dtask *dt, const char *const *env, int n)
{
    dt->t.env.v = ctld_dtask_alloc(dt, sizeof *dt->t.env.v * (size_t)(n + CTLD_DTASK_ENV_EXTRA));
    dt->t.env.n = 0;
    dt->env_cap = 0;
    if (!dt->t.env.v)
        return;
    if (n > 0)
        memcpy(dt->t.env.v, env, sizeof *env * (size_t)n);
    dt->t.env.n = n;
    dt->env_cap = n + CTLD_DTASK_ENV_EXTRA;
}

const char *ctld_dtask_env_add(ctld_dtask *dt, const char *fmt, ...)
{
    if (dt->t.env.n >= dt->env_cap) {
        dt->oom = true; /* a builder asked for more than CTLD_DTASK_ENV_EXTRA */
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    const char *s = dtask_vprintf(dt, fmt, ap);
    va_end(ap);
    if (s)
        dt->t.env.v[dt->t.env.n++] = s;
    return s;
}

json_t *ctld_dtask_encode(const ctld_dtask *dt)
{
    return dt->oom ? NULL : ts_desired_task_encode(&dt->t);
}

void ctld_dtask_fini(ctld_dtask *dt)
{
    for (ctld_dtask_chunk *ch = dt->chunks, *next; ch; ch = next) {
        next = ch->next;
        if (dt->wipe)
            explicit_bzero(ch->data, ch->cap);
        free(ch);
    }
    memset(dt, 0, sizeof *dt);
}
