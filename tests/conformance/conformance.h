/*
 * conformance.h - the checks every conformance translation unit makes, and
 * the counters the test program prints.
 *
 * A check is a _Static_assert: a difference between a hand declaration and
 * NVIDIA's header stops the build with the name of the type, field, value or
 * function that differs. Each check also adds one enumerator to the unit's
 * count (__COUNTER__), so the test can say how many it made: the numbers in
 * docs/sharing.md (Conformance) come from its output.
 *
 * In the layout units the project's declarations carry the prefix prj_
 * (tests/conformance/rename_*.h), NVIDIA's their own names.
 */
#ifndef TS_CONFORMANCE_H
#define TS_CONFORMANCE_H

#include <stddef.h>

#define CONF_CAT2(a, b) a##b
#define CONF_CAT(a, b) CONF_CAT2(a, b)
#define CONF_TICK enum { CONF_CAT(conf_tick_, __COUNTER__) = 0 }

/* Same size and alignment of a type. */
#define SAME_TYPE_SIZE(T)                                                                    \
    _Static_assert(sizeof(prj_##T) == sizeof(T) && _Alignof(prj_##T) == _Alignof(T),          \
                   #T ": size or alignment differs from NVIDIA's");                          \
    CONF_TICK
/* Same offset and size of a field. */
#define SAME_FIELD(T, f)                                                                     \
    _Static_assert(offsetof(prj_##T, f) == offsetof(T, f) &&                                 \
                       sizeof(((prj_##T *)0)->f) == sizeof(((T *)0)->f),                     \
                   #T "." #f ": offset or size differs from NVIDIA's");                      \
    CONF_TICK
/* Same value of an enumerator or a macro (captured as prj_NAME). */
#define SAME_VALUE(E)                                                                        \
    _Static_assert((long long)(prj_##E) == (long long)(E), #E ": value differs from NVIDIA's"); \
    CONF_TICK
/* A scalar or handle typedef that must be the very same type. */
#define SAME_SCALAR(T)                                                                       \
    _Static_assert(__builtin_types_compatible_p(prj_##T, T), #T ": not NVIDIA's type");      \
    CONF_TICK
/* A function pointer type and NVIDIA's declaration of the export. */
#define SAME_FUNCTION(ours, export)                                                          \
    _Static_assert(__builtin_types_compatible_p(ours, __typeof__(&export)),                  \
                   #export ": our prototype differs from NVIDIA's");                         \
    CONF_TICK

int conf_shim_layout_checks(void);
int conf_shim_api_checks(void);
int conf_nvml_layout_checks(void);
int conf_nvml_api_checks(void);
/* Each NVML table entry's export names as the api unit checked them,
 * space-separated, in TS_NVML_FUNCS order; NULL past the end. */
const char *conf_nvml_checked_names(int i);

#endif
