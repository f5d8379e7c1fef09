/*
 * name_list.c - a name among a comma-separated list's entries
 * (tessera/name_list.h).
 */
#include "tessera/name_list.h"

#include <string.h>

bool ts_name_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}
