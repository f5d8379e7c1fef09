/*
 * image_mount.c - what preparing a large image's root costs on this node,
 * and how fast a task starts in it once it is there (bench/image-mount;
 * docs/images.md "One filesystem image per image"), side by side in one run
 * through the store's own code (image_store_prepare):
 *  - prepare: the layers unpacked into a tree (the hostile-layer checks),
 *    against unpacked then packed into lz4 EROFS and mounted (what the store
 *    does), medians of PREP_ROUNDS interleaved runs; on the same checked tree, mkfs.erofs without compression and
 *    mksquashfs (gzip, every core): time and size of each;
 *  - warm start, start to exit of `true` in the image through runc: the root
 *    already mounted, and first unmounted (an agent restarted, a node
 *    rebooted: the mount is part of the start); medians and p99;
 *  - eviction: removing the unpacked tree against unmounting and unlinking
 *    the image file;
 *  - optionally a prebuilt EROFS image (--warm IMAGE, e.g. a 10 GB-class one
 *    the script makes) placed in the store: its warm start, mount included.
 * The layers must hold /bin/busybox and /bin/true. Needs root, runc,
 * mkfs.erofs and mksquashfs. Prints figures; asserts nothing.
 *
 *   tessera-bench-image-mount WORKDIR ROUNDS LAYER.tar.gz... [--warm IMAGE.erofs]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/image.h"
#include "agent/image_rootfs.h"
#include "agent/image_store.h"
#include "agent/launch.h"

#define LAYERS_MAX 16
#define PREP_ROUNDS 3
#define WAIT_S 120.0
#define MIB (1024.0 * 1024.0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[(int)(p * (n - 1) + 0.5)];
}

static void die(const char *what, const ts_err *err)
{
    fprintf(stderr, "image-mount: %s: %s\n", what, err ? err->msg : strerror(errno));
    exit(1);
}

static long long file_bytes(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long long)sb.st_blocks * 512 : 0;
}

/* Puts src into the store as a blob (a hard link, else a copy). */
static void add_blob(ts_image_store *st, const char *src, char *digest)
{
    ts_err err = {0};
    if (agent_image_file_digest(src, digest, &err) != 0)
        die(src, &err);
    char dst[800], cmd[2000];
    image_blob_path(st, digest, dst, sizeof dst);
    if (link(src, dst) != 0 && errno != EEXIST) {
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
        if (system(cmd) != 0)
            die("copy a layer", NULL);
    }
}

static double prepare(ts_image_store *st, const char *digest, const char *cfg,
                      const char *const *layers, int n, ts_image *img)
{
    char manifest[4096];
    int len = snprintf(manifest, sizeof manifest, "{\"config\": {\"digest\": \"%s\"}, "
                       "\"layers\": [", cfg);
    for (int i = 0; i < n; i++)
        len += snprintf(manifest + len, sizeof manifest - (size_t)len, "%s{\"digest\": \"%s\"}",
                        i ? ", " : "", layers[i]);
    len += snprintf(manifest + len, sizeof manifest - (size_t)len, "]}");
    ts_err err = {0};
    int lk = image_store_lock(st, &err);
    double t0 = now_ms();
    if (image_store_prepare(st, digest, manifest, (size_t)len, cfg, layers, (size_t)n, NULL,
                            img, &err) != 0)
        die("prepare", &err);
    double ms = now_ms() - t0;
    image_store_unlock(lk);
    return ms;
}

static double timed_system(const char *cmd)
{
    double t0 = now_ms();
    if (system(cmd) != 0) {
        fprintf(stderr, "image-mount: failed: %s\n", cmd);
        exit(1);
    }
    return now_ms() - t0;
}

/* One task running `true` in img: start to exit. */
static double run_true(const ts_image *img, const char *top)
{
    char logs[400], bundle[400];
    snprintf(logs, sizeof logs, "%s/logs", top);
    snprintf(bundle, sizeof bundle, "%s/bundle", top);
    mkdir(logs, 0755);
    const char *argv[] = {"true", NULL};
    ts_task_spec s = {.task_id = "bench-mount", .argv = argv, .log_dir = logs, .image = img,
                      .bundle_dir = bundle};
    ts_task *t;
    ts_task_state ts;
    ts_err err = {0};
    double t0 = now_ms();
    if (agent_task_start(NULL, &s, &t, &err) != 0)
        die("task start", &err);
    if (agent_task_wait(t, WAIT_S, &ts, &err) != 0 || ts.exit_code != 0)
        die("task in the image did not end well", NULL);
    double ms = now_ms() - t0;
    agent_task_free(t);
    agent_bundle_remove(bundle);
    return ms;
}

/* Warm starts of the image in dir: rounds with the root mounted, rounds
 * with it unmounted first (the mount counted). */
static void warm(const char *label, ts_image_store *st, const char *digest, int rounds,
                 const char *top)
{
    double *mounted = calloc((size_t)rounds, sizeof *mounted);
    double *cold = calloc((size_t)rounds, sizeof *cold);
    char dir[700];
    image_dir(st, digest, dir, sizeof dir);
    char img[800];
    snprintf(img, sizeof img, "%s/" IMAGE_ROOTFS_FILE, dir);
    bool packed = access(img, F_OK) == 0;
    for (int i = 0; i < rounds; i++) {
        ts_image img;
        ts_err err = {0};
        int lk = image_store_lock(st, &err);
        if (!image_store_find(st, digest, &img))
            die("find", NULL);
        image_store_unlock(lk);
        mounted[i] = run_true(&img, top);
        image_rootfs_unmount(dir);
        double t0 = now_ms();
        lk = image_store_lock(st, &err);
        if (!image_store_find(st, digest, &img)) /* mounts it again */
            die("find", NULL);
        image_store_unlock(lk);
        cold[i] = (now_ms() - t0) + run_true(&img, top);
    }
    printf("  %-34s mounted: median %.1f ms p99 %.1f ms", label, pct(mounted, rounds, 0.5),
           pct(mounted, rounds, 0.99));
    if (packed)
        printf("; mount first: median %.1f ms p99 %.1f ms", pct(cold, rounds, 0.5),
               pct(cold, rounds, 0.99));
    printf("\n");
    free(mounted);
    free(cold);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tessera-bench-image-mount WORKDIR ROUNDS LAYER.tar.gz... "
                "[--warm IMAGE.erofs]\n");
        return 2;
    }
    const char *top = argv[1], *warm_img = NULL;
    int rounds = atoi(argv[2]);
    const char *files[LAYERS_MAX];
    int n = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--warm") && i + 1 < argc)
            warm_img = argv[++i];
        else if (n < LAYERS_MAX)
            files[n++] = argv[i];
    }
    if (rounds < 3 || n == 0) {
        fprintf(stderr, "image-mount: ROUNDS >= 3 and at least one layer\n");
        return 2;
    }
    char store_dir[400];
    snprintf(store_dir, sizeof store_dir, "%s/store", top);
    ts_image_store st;
    ts_err err = {0};
    if (agent_image_store_open(&st, store_dir, 0, &err) != 0)
        die("store", &err);
    if (geteuid() != 0 || access("/usr/sbin/runc", X_OK) != 0 || !image_rootfs_can_pack(&st)) {
        fprintf(stderr, "image-mount: needs root, runc, mkfs.erofs and erofs in the kernel\n");
        return 77;
    }
    char digests[LAYERS_MAX][TS_IMAGE_DIGEST_MAX], cfg[TS_IMAGE_DIGEST_MAX], p[900];
    const char *layers[LAYERS_MAX];
    long long gz = 0;
    for (int i = 0; i < n; i++) {
        add_blob(&st, files[i], digests[i]);
        layers[i] = digests[i];
        gz += file_bytes(files[i]);
    }
    snprintf(p, sizeof p, "%s/config.json", top);
    FILE *f = fopen(p, "w");
    if (!f)
        die(p, NULL);
    fputs("{\"config\":{\"Env\":[\"PATH=/bin\"]}}", f);
    fclose(f);
    add_blob(&st, p, cfg);

    const char *d_tree = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const char *d_erofs = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
    ts_image tree, packed;
    /* PREP_ROUNDS of each, interleaved, each a fresh image (the last kept):
     * a busy disk swings one run by 2x */
    double unpack_v[PREP_ROUNDS], erofs_v[PREP_ROUNDS];
    for (int r = 0; r < PREP_ROUNDS; r++) {
        bool last = r == PREP_ROUNDS - 1;
        char dt[TS_IMAGE_DIGEST_MAX], de[TS_IMAGE_DIGEST_MAX], gone[700];
        snprintf(dt, sizeof dt, "sha256:%064d", 100 + r);
        snprintf(de, sizeof de, "sha256:%064d", 200 + r);
        st.unpacked_roots = true;
        unpack_v[r] = prepare(&st, last ? d_tree : dt, cfg, layers, n, &tree);
        st.unpacked_roots = false;
        erofs_v[r] = prepare(&st, last ? d_erofs : de, cfg, layers, n, &packed);
        if (!last) {
            image_dir(&st, dt, gone, sizeof gone);
            image_rm_tree(gone);
            image_dir(&st, de, gone, sizeof gone);
            image_rootfs_unmount(gone);
            image_rm_tree(gone);
        }
    }
    double unpack_ms = pct(unpack_v, PREP_ROUNDS, 0.5), erofs_ms = pct(erofs_v, PREP_ROUNDS, 0.5);
    char dir[700], img[800], cmd[6000];
    image_dir(&st, d_erofs, dir, sizeof dir);
    snprintf(img, sizeof img, "%s/" IMAGE_ROOTFS_FILE, dir);

    printf("image: %d layer(s), %.0f MiB gzip, %.0f MiB unpacked (%s)\n", n, gz / MIB,
           tree.size_bytes / MIB, files[0]);
    printf("prepare (the store's own code, median of %d interleaved runs each):\n", PREP_ROUNDS);
    printf("  unpack (checked) into a tree:          %7.0f ms  %6.0f MiB on disk\n", unpack_ms,
           tree.size_bytes / MIB);
    printf("  unpack + mkfs.erofs lz4 + mount:       %7.0f ms  %6.0f MiB on disk  "
           "(%+.0f ms)\n", erofs_ms, file_bytes(img) / MIB, erofs_ms - unpack_ms);
    snprintf(p, sizeof p, "%s/plain.erofs", top);
    snprintf(cmd, sizeof cmd, "mkfs.erofs --quiet '%s' '%s'", p, tree.rootfs);
    double plain_ms = timed_system(cmd);
    printf("  mkfs.erofs uncompressed, same tree:    %7.0f ms  %6.0f MiB\n", plain_ms,
           file_bytes(p) / MIB);
    unlink(p);
    snprintf(p, sizeof p, "%s/root.sqfs", top);
    snprintf(cmd, sizeof cmd, "mksquashfs '%s' '%s' -quiet -no-progress -noappend >/dev/null",
             tree.rootfs, p);
    double sq_ms = timed_system(cmd);
    printf("  mksquashfs gzip (all cores), same tree: %6.0f ms  %6.0f MiB\n", sq_ms,
           file_bytes(p) / MIB);
    unlink(p);

    printf("warm start, start to exit of `true` through runc (%d rounds):\n", rounds);
    warm("unpacked tree:", &st, d_tree, rounds, top);
    warm("lz4 EROFS:", &st, d_erofs, rounds, top);
    if (warm_img) {
        const char *d_warm =
            "sha256:3333333333333333333333333333333333333333333333333333333333333333";
        char wdir[700];
        image_dir(&st, d_warm, wdir, sizeof wdir);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/rootfs' '%s/users' && ln '%s' '%s/"
                 IMAGE_ROOTFS_FILE "' && echo -n '%s' > '%s/config' && cp '%s/manifest.json' "
                 "'%s/'", wdir, wdir, warm_img, wdir, cfg, wdir, dir, wdir);
        timed_system(cmd);
        /* its files' size, written beside it by the script (the image is lz4) */
        snprintf(p, sizeof p, "%s.content-bytes", warm_img);
        f = fopen(p, "r");
        long long content = 0;
        if (f) {
            if (fscanf(f, "%lld", &content) != 1)
                content = 0;
            fclose(f);
        }
        char label[120];
        snprintf(label, sizeof label, "prebuilt, %.1f GiB of files:", content / (MIB * 1024.0));
        warm(label, &st, d_warm, rounds, top);
        printf("  (target for a 10 GB-class image, mounted: at most 2000 ms to exec)\n");
        image_rootfs_unmount(wdir);
        image_rm_tree(wdir); /* a link: the caller's file stays */
    }

    double t0 = now_ms();
    image_dir(&st, d_tree, p, sizeof p);
    image_rm_tree(p);
    double rm_tree_ms = now_ms() - t0;
    t0 = now_ms();
    image_rootfs_unmount(dir);
    image_rm_tree(dir);
    double rm_img_ms = now_ms() - t0;
    printf("eviction: unpacked tree %.0f ms, EROFS image (unmount + unlink) %.0f ms\n",
           rm_tree_ms, rm_img_ms);
    agent_image_evict(&st, 0);
    return 0;
}
