/*
 * body.h - an HTTP answer's body gathered in memory with a bound: curl's
 * write callback for the daemons' calls whose answer they parse whole (the
 * agent's sync answer, the controller's OIDC key set). The bound is the
 * caller's, so an answer past what its protocol allows fails the transfer
 * rather than growing without end; the buffer is kept a string so a JSON
 * parser can read it as it stands.
 */
#ifndef TS_IO_BODY_H
#define TS_IO_BODY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct io_body {
    char *p;       /* the bytes, a NUL after them; NULL before the first (caller frees) */
    size_t len;    /* bytes in p */
    size_t max;    /* the most bytes taken: one more fails the transfer */
    bool too_big;  /* the transfer failed because of max */
} io_body;

/* curl's CURLOPT_WRITEFUNCTION with an io_body as CURLOPT_WRITEDATA: appends
 * the size * n bytes at data; 0 (the transfer fails) past max or when out of
 * memory. */
size_t io_body_sink(char *data, size_t size, size_t n, void *body);

#endif
