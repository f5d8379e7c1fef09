/*
 * conformance_main.c - the conformance test: the checks themselves are
 * compile-time (conf_*.c stop the build on any difference from NVIDIA's
 * headers); this program reports how many were made and runs the two that
 * need run time: the pointer-valued constants, and that every NVML export the
 * agent's table names (TS_NVML_FUNCS) was among those checked.
 *
 * Built once per header set found (TS_CONF_CUDA: cuda.h + cudaTypedefs.h,
 * TS_CONF_NVML: nvml.h); CMake registers a skipping case where one is missing.
 */
#include <stdio.h>
#include <string.h>

#include "agent/nvml.h"
#include "conformance/conformance.h"

int main(void)
{
    int bad = 0;
#ifdef TS_CONF_CUDA
    int shim_layout = conf_shim_layout_checks();
    int api = conf_shim_api_checks();
    if (shim_layout < 0) {
        printf("FAIL: a TS_CU_* pointer constant differs from cuda.h\n");
        bad++;
    }
    printf("conformance cuda.h: driver types %d checks (the shim's, the fake's and the "
           "allocator's), driver prototypes (shim, fake, allocator) %d: %d differences\n",
           shim_layout, api, bad);
#endif
#ifdef TS_CONF_NVML
    static const char *const names[] = {
#define CONF_NAMES(field, args, req, names) names,
        TS_NVML_FUNCS(CONF_NAMES)
#undef CONF_NAMES
    };
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        const char *checked = conf_nvml_checked_names(i);
        if (!checked || strcmp(checked, names[i]) != 0) {
            printf("FAIL: TS_NVML_FUNCS entry %d names \"%s\", the conformance list \"%s\"\n", i,
                   names[i], checked ? checked : "(none)");
            bad++;
        }
    }
    printf("conformance nvml.h: NVML types %d checks, NVML prototypes %d: %d differences\n",
           conf_nvml_layout_checks(), conf_nvml_api_checks(), bad);
#endif
    return bad ? 1 : 0;
}
