/*
 * fuzz_sbatch.c - libFuzzer target for the batch-script reader
 * (src/api/sbatch*.c).
 *
 * The input is a script (its #SBATCH lines are the grammar under test);
 * when it holds a line "--" the text after it is also read as a slurm map,
 * and the words of its second line are passed as command-line options, so
 * the overriding paths run too. The reader must never crash, leak or read
 * past len. On failure: no result, at least one error, every message one
 * line. On success: the spec is valid JSON that the spec parser accepts and
 * the interpretation keeps its invariants. Seed it with tests/data/sbatch.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/sbatch.h"

#define FUZZ_MAX_ARGS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t script_len = size;
    ts_sbatch_map *map = NULL;
    char *sep = memchr(text, '\0', size) ? NULL : strstr(text, "\n--\n");
    if (sep) {
        script_len = (size_t)(sep - text) + 1;
        ts_err err;
        const char *m = sep + 4;
        if (ts_sbatch_map_parse(m, strlen(m), &map, &err) != 0 && map)
            abort();
    }
    /* the second line's words as options */
    char opts[256] = "";
    const char *argv[FUZZ_MAX_ARGS];
    int argc = 0;
    const char *nl = memchr(text, '\n', script_len);
    if (nl) {
        size_t n = strcspn(nl + 1, "\n");
        if (n < sizeof opts && nl + 1 + n <= text + script_len) {
            memcpy(opts, nl + 1, n);
            opts[n] = '\0';
            for (char *t = strtok(opts, " "); t && argc < FUZZ_MAX_ARGS; t = strtok(NULL, " "))
                if (t[0] == '-')
                    argv[argc++] = t;
        }
    }
    static const char *const env[] = {"HOME=/h", "A=1", "TESSERA_TOKEN=x", NULL};
    ts_sbatch_input in = {.script_name = "fuzz.sh", .argv = argv, .argc = argc, .environ = env,
                          .submit_dir = "/s", .map = map};
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    int rc = ts_sbatch_parse(text, script_len, &in, &sb, &errs);
    if (rc != 0) {
        if (sb || errs.n < 1)
            abort();
        for (int i = 0; i < errs.n; i++)
            if (!one_line(errs.msg[i]))
                abort();
    } else {
        const ts_sbatch_shape *s = &sb->shape;
        if (!sb->spec_json || s->ntasks < 1 || s->nodes < 1 || s->nodes > s->ntasks ||
            s->cpus_per_task < 1 || s->gpus != s->gpus_per_task * s->ntasks ||
            (s->array != NULL) != (s->array_count > 0))
            abort();
        ts_job_spec *spec = NULL;
        ts_spec_errors perrs;
        if (ts_spec_parse(sb->spec_json, strlen(sb->spec_json), &spec, &perrs) != 0)
            abort();
        if (spec->array_size != (s->array_count > 0 ? s->array_count : 1))
            abort();
        for (int k = 0; s->array && k < s->array_count && k < 4; k++)
            if (ts_sbatch_array_nth(s->array, k) < 0)
                abort();
        ts_spec_free(spec);
        for (int i = 0; i < sb->nwarnings; i++)
            if (!one_line(sb->warnings[i]))
                abort();
        ts_sbatch_free(sb);
    }
    ts_sbatch_map_free(map);
    free(text);
    return 0;
}
