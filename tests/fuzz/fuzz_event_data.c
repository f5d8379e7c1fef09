/*
 * fuzz_event_data.c - libFuzzer target for the event detail parser
 * (src/ctld/events.c), which turns the controller's stored detail text into
 * an event's typed `data`. The input is a kind, a NUL, then the detail; both
 * may be anything (a detail written by an older or newer controller). The
 * parser must never crash, leak or read past the detail, and must always
 * answer an object whose members are numbers, strings, booleans or (a
 * start's "nodes") arrays of strings, and whose tier, when present, is a
 * name. Build with -DTS_FUZZ=ON (clang).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/ctld/events.c"

#define FUZZ_EVENT_MAX_BYTES 4096 /* details are a line; longer teaches nothing */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_EVENT_MAX_BYTES)
        return 0;
    char *buf = malloc(size + 2);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = '\0';
    const char *kind = buf, *detail = buf + strlen(buf) + 1;
    if (detail > buf + size) /* no NUL: a kind alone, no detail */
        detail = NULL;
    json_t *d = ctld_event_data(kind, detail);
    if (!d || !json_is_object(d))
        abort();
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v)
    {
        if (json_is_array(v)) { /* only "nodes", and only names */
            size_t i;
            json_t *e;
            if (strcmp(k, "nodes") != 0)
                abort();
            json_array_foreach(v, i, e)
            {
                if (!json_is_string(e))
                    abort();
            }
            continue;
        }
        if (!json_is_number(v) && !json_is_string(v) && !json_is_boolean(v))
            abort();
        if (strcmp(k, "tier") == 0 && !json_is_string(v))
            abort();
    }
    char *text = json_dumps(d, JSON_COMPACT);
    if (!text)
        abort();
    free(text);
    json_decref(d);
    free(buf);
    return 0;
}
