/*
 * fuzz_image_layer.c - libFuzzer target for the image layer unpacker and the
 * image reference parser (src/agent/image_unpack.c, src/model/image_ref.c).
 *
 * The bytes are a layer (tar, or gzip when they start with its magic)
 * unpacked into a fresh root beside an "outside" folder. Whatever the input,
 * the unpacker must not crash, leak or hang, must end within its limits,
 * and must leave "outside" empty: no entry may reach past the root. The same
 * bytes, as text, go to the reference parser, which must either refuse them
 * with a message naming the field or give a reference whose parts are in
 * bounds. Build with -DTS_FUZZ=ON (clang).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/image.h"

#define FUZZ_MAX_BYTES (8 << 20)
#define FUZZ_MAX_ENTRIES 2000
#define FD_LIMIT 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int rm_one(const char *p, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb, (void)f;
    if (type == FTW_DP)
        return rmdir(p);
    return unlink(p);
}

static bool empty_dir(const char *p)
{
    DIR *d = opendir(p);
    if (!d)
        return false;
    bool empty = true;
    for (struct dirent *e; empty && (e = readdir(d));)
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    ts_image_ref ref;
    ts_err err = {0};
    int rc = ts_image_ref_parse(text, "image", &ref, &err);
    free(text);
    if (rc != 0 && (rc != TS_EINVAL || strncmp(err.msg, "image: ", 7) != 0))
        abort();
    if (rc == 0 && (!ref.host[0] || !ref.repo[0] || (!ref.tag[0] && !ref.digest[0])))
        abort();

    char top[] = "/tmp/fuzz-layer-XXXXXX", root[64], out[64], layer[64];
    if (!mkdtemp(top))
        return 0;
    snprintf(root, sizeof root, "%s/root", top);
    snprintf(out, sizeof out, "%s/outside", top);
    snprintf(layer, sizeof layer, "%s/layer", top);
    mkdir(root, 0755);
    mkdir(out, 0755);
    FILE *f = fopen(layer, "w");
    if (f) {
        fwrite(data, 1, size, f);
        fclose(f);
    }
    int fd = open(root, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ts_unpack_limits lim = {.max_bytes = FUZZ_MAX_BYTES, .max_entries = FUZZ_MAX_ENTRIES};
        ts_unpack_stats st = {0};
        rc = agent_image_unpack_layer(fd, layer, &lim, &st, &err);
        close(fd);
        if (st.bytes > FUZZ_MAX_BYTES + (1 << 16) || st.entries > FUZZ_MAX_ENTRIES + 1)
            abort();
        if (rc != 0 && memchr(err.msg, '\0', sizeof err.msg) == NULL)
            abort();
    }
    if (!empty_dir(out))
        abort(); /* something escaped the root */
    nftw(top, rm_one, FD_LIMIT, FTW_DEPTH | FTW_PHYS);
    return 0;
}
