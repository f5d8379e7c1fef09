/*
 * fuzz_alloc_trace.c - libFuzzer target for the allocator trace reader and
 * the three allocators behind tessera-alloc-replay.
 *
 * The input is written to a file (the reader takes paths) and loaded as an
 * events CSV. A failure must be TS_EINVAL or TS_ENOMEM with a terminated
 * message naming the file. A trace that loads is replayed through the
 * tessera, PyTorch and PyTorch-expandable allocators on the simulated
 * device, with a small capacity so out-of-memory paths run too; each replay
 * must either succeed with consistent figures (when it did not run out of
 * memory: peak reserved >= peak requested, fragmentation in [0, 1)) or
 * fail with a named error. Seeds: the trace excerpts in tests/data/alloc.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAPACITY_BYTES (256ull << 20)
#define MAX_INPUT_BYTES (1 << 20)

static char path[64];

static void check_error(int rc, const ts_err *err)
{
    if ((rc != TS_EINVAL && rc != TS_ENOMEM && rc != TS_ENOSPC && rc != TS_EIO) ||
        memchr(err->msg, '\0', sizeof err->msg) == NULL || err->msg[0] == '\0')
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT_BYTES)
        return 0;
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/fuzz_alloc_trace.%d.csv", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    ts_memtrace t;
    ts_err err = {0};
    int rc = ts_memtrace_load(path, NULL, NULL, &t, &err);
    if (rc != 0) {
        check_error(rc, &err);
        if (strncmp(err.msg, path, strlen(path)) != 0)
            abort();
        return 0;
    }
    static const ts_memalloc_kind kinds[] = {TS_MEMALLOC_TESSERA, TS_MEMALLOC_PYTORCH,
                                             TS_MEMALLOC_PYTORCH_EXPANDABLE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ts_memreplay_opts o = {.kind = kinds[k], .capacity_bytes = CAPACITY_BYTES};
        ts_memreplay_result r;
        memset(&r, 0, sizeof r);
        rc = ts_memreplay_run(&t, &o, &r, &err);
        if (rc != 0) {
            check_error(rc, &err);
            continue;
        }
        if (!r.oom && (r.peak_reserved < r.peak_requested || r.fragmentation < 0.0 ||
                       r.fragmentation >= 1.0))
            abort();
    }
    ts_memtrace_free(&t);
    return 0;
}
