/*
 * image_start.c - what running a task in an image costs once the image is
 * on the node (bench/image-start; docs/images.md), measured side by side in
 * one run:
 *  - warm start: agent_task_start to the task's exit for `true`, as a bare
 *    process and in a busybox image through runc (overlay mount, bundle,
 *    runtime create/start/delete), ROUNDS of each interleaved; medians, p99,
 *    and the container's p99 minus the bare p99 (target: <= 150 ms);
 *  - the root filesystem: an overlay over one unpacked root (what the store
 *    prepares) against an overlay over LAYERS unpacked layers (what a
 *    layer-per-directory store would mount): the mount and unmount, and a
 *    walk of lookups of names in no layer (each layer is searched), medians.
 * Needs root, runc and busybox-static. Prints figures; asserts nothing.
 *
 *   tessera-bench-image [ROUNDS] [LAYERS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/image.h"
#include "agent/launch.h"

#define ROUNDS_DEFAULT 30
#define LAYERS_DEFAULT 20
#define FILES_PER_LAYER 200
#define LOOKUPS 20000
#define WAIT_S 60.0

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
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

/* mkdir root/bin and logs; busybox in root with `true` through it */
static int make_root(const char *root, const char *logs)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/bin %s && cp /bin/busybox %s/bin/ && "
             "ln -s busybox %s/bin/true", root, logs, root, root);
    return system(cmd);
}

static double run_one(ts_task_spec *s)
{
    ts_task *t;
    ts_err err;
    ts_task_state st;
    double t0 = now_ms();
    if (agent_task_start(NULL, s, &t, &err) != 0) {
        fprintf(stderr, "start: %s\n", err.msg);
        exit(1);
    }
    if (agent_task_wait(t, WAIT_S, &st, &err) != 0 || st.exit_code != 0) {
        fprintf(stderr, "task %s did not end well\n", s->task_id);
        exit(1);
    }
    double ms = now_ms() - t0;
    agent_task_free(t);
    if (s->bundle_dir)
        agent_bundle_remove(s->bundle_dir);
    return ms;
}

static double overlay_round(const char *lower, const char *dir, double *lookup_ms)
{
    char up[600], work[600], mnt[600], opts[8192];
    snprintf(up, sizeof up, "%s/up", dir);
    snprintf(work, sizeof work, "%s/work", dir);
    snprintf(mnt, sizeof mnt, "%s/mnt", dir);
    mkdir(up, 0755);
    mkdir(work, 0755);
    mkdir(mnt, 0755);
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", lower, up, work);
    double t0 = now_ms();
    if (mount("overlay", mnt, "overlay", 0, opts) != 0) {
        fprintf(stderr, "overlay: %s\n", strerror(errno));
        exit(1);
    }
    double mount_ms = now_ms() - t0;
    struct stat sb;
    char p[700];
    t0 = now_ms();
    for (int i = 0; i < LOOKUPS; i++) {
        snprintf(p, sizeof p, "%s/d/missing-%d", mnt, i);
        stat(p, &sb);
    }
    *lookup_ms = now_ms() - t0;
    t0 = now_ms();
    umount2(mnt, 0);
    return mount_ms + (now_ms() - t0);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS_DEFAULT;
    int layers = argc > 2 ? atoi(argv[2]) : LAYERS_DEFAULT;
    if (rounds < 3 || layers < 2 || layers > 100) {
        fprintf(stderr, "usage: tessera-bench-image [ROUNDS >= 3] [LAYERS 2..100]\n");
        return 2;
    }
    if (geteuid() != 0 || access("/usr/sbin/runc", X_OK) != 0 ||
        access("/bin/busybox", X_OK) != 0) {
        fprintf(stderr, "image-start: needs root, runc and busybox-static\n");
        return 77;
    }
    char top[] = "/tmp/ts-bench-image-XXXXXX";
    if (!mkdtemp(top))
        return 1;
    char root[300], logs[300], cfgp[300];
    snprintf(root, sizeof root, "%s/rootfs", top);
    snprintf(logs, sizeof logs, "%s/logs", top);
    snprintf(cfgp, sizeof cfgp, "%s/config.json", top);
    if (make_root(root, logs) != 0)
        return 1;
    FILE *f = fopen(cfgp, "w");
    fputs("{\"config\":{\"Env\":[\"PATH=/bin\"]}}", f);
    fclose(f);
    ts_image img = {0};
    snprintf(img.rootfs, sizeof img.rootfs, "%s", root);
    snprintf(img.config_path, sizeof img.config_path, "%s", cfgp);

    double *bare = calloc((size_t)rounds, sizeof *bare), *cont = calloc((size_t)rounds, sizeof *cont);
    double *own = calloc((size_t)rounds, sizeof *own);
    const char *bare_argv[] = {"/bin/busybox", "true", NULL};
    const char *cont_argv[] = {"true", NULL};
    char bundle[400];
    snprintf(bundle, sizeof bundle, "%s/bundle", top);
    for (int i = 0; i < rounds; i++) {
        ts_task_spec b = {.task_id = "bench-bare", .argv = bare_argv, .workdir = "/",
                          .log_dir = logs};
        ts_task_spec c = {.task_id = "bench-image", .argv = cont_argv, .log_dir = logs,
                          .image = &img, .bundle_dir = bundle};
        bare[i] = run_one(&b);
        cont[i] = run_one(&c);
        /* the agent's default: the writable layer a 20 GiB filesystem of its own */
        c.container_write_mib = TS_AGENT_CONTAINER_WRITE_MIB;
        own[i] = run_one(&c);
    }
    double bp50 = pct(bare, rounds, 0.5), bp99 = pct(bare, rounds, 0.99);
    double cp50 = pct(cont, rounds, 0.5), cp99 = pct(cont, rounds, 0.99);
    double op50 = pct(own, rounds, 0.5), op99 = pct(own, rounds, 0.99);
    printf("warm start, start to exit of `true` (%d rounds each, interleaved):\n", rounds);
    printf("  bare process:  median %.1f ms  p99 %.1f ms\n", bp50, bp99);
    printf("  in the image, its layer on the state disk:  median %.1f ms  p99 %.1f ms\n", cp50,
           cp99);
    printf("  in the image, its layer its own %d MiB filesystem (the default):  median %.1f ms  "
           "p99 %.1f ms\n", TS_AGENT_CONTAINER_WRITE_MIB, op50, op99);
    printf("  container overhead (the default): median +%.1f ms, p99 +%.1f ms (target <= 150 ms "
           "p99)\n", op50 - bp50, op99 - bp99);

    /* the root: one unpacked directory against `layers` layer directories */
    char merged[300], ldirs[8192] = "", d[400], cmd[2048];
    snprintf(merged, sizeof merged, "%s/merged/d", top);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", merged);
    if (system(cmd) != 0)
        return 1;
    for (int l = 0; l < layers; l++) {
        snprintf(d, sizeof d, "%s/layer%d/d", top, l);
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cd %s && for i in $(seq %d); do "
                 "echo %d > f%d-$i; done && cp -a . %s/", d, d, FILES_PER_LAYER, l, l, merged);
        if (system(cmd) != 0)
            return 1;
        size_t n = strlen(ldirs);
        snprintf(ldirs + n, sizeof ldirs - n, "%s%s/layer%d", l ? ":" : "", top, l);
    }
    snprintf(merged, sizeof merged, "%s/merged", top);
    double m1[16], mN[16], l1[16], lN[16];
    int reps = 9;
    for (int i = 0; i < reps; i++) {
        snprintf(d, sizeof d, "%s/ov1-%d", top, i);
        mkdir(d, 0755);
        m1[i] = overlay_round(merged, d, &l1[i]);
        snprintf(d, sizeof d, "%s/ovN-%d", top, i);
        mkdir(d, 0755);
        mN[i] = overlay_round(ldirs, d, &lN[i]);
    }
    printf("root filesystem, overlay over 1 unpacked root vs %d layer directories "
           "(%d files each; medians of %d):\n", layers, FILES_PER_LAYER, reps);
    printf("  mount+umount:  1 root %.2f ms   %d layers %.2f ms\n", pct(m1, reps, 0.5), layers,
           pct(mN, reps, 0.5));
    printf("  %d lookups of absent names:  1 root %.1f ms   %d layers %.1f ms  (ratio %.2f)\n",
           LOOKUPS, pct(l1, reps, 0.5), layers, pct(lN, reps, 0.5),
           pct(lN, reps, 0.5) / pct(l1, reps, 0.5));
    snprintf(cmd, sizeof cmd, "rm -rf --one-file-system %s", top);
    if (system(cmd) != 0)
        return 1;
    free(bare);
    free(cont);
    free(own);
    return 0;
}
