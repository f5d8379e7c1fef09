/*
 * name_list.h - whether a name is one of a comma-separated list's entries
 * ("a,b,c"): a tenant's registries, the agent's plain-HTTP registries and a
 * task's published ports, the controller's user and tenant lists.
 *
 * Pure and thread-safe; nothing is allocated or written.
 */
#ifndef TESSERA_NAME_LIST_H
#define TESSERA_NAME_LIST_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether name is a whole entry of list, byte for byte (no space is
 * trimmed, no case folded). A NULL or empty list names nothing; an empty
 * name is listed only where the list has an empty entry (",a" or "a,,b"),
 * so a caller for which an empty name is never listed says so itself. */
bool ts_name_listed(const char *list, const char *name);

#ifdef __cplusplus
}
#endif
#endif
