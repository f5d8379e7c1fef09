/*
 * test_image_rootfs.c - an image's root kept as one EROFS image and mounted
 * (issue 28 item 4, src/agent/image_rootfs.c), through the store's own
 * preparation from layer blobs built here: the mounted root holds what the
 * checked unpack made (set-id bits cleared, no device node, links as links)
 * and is read-only, nodev and nosuid; a hostile layer still fails the image
 * and leaves nothing mounted; eviction unmounts; a store reopened (an agent
 * restart) unmounts images no task uses and keeps those in use; the loop
 * device path (kernels before 6.12) mounts and frees its device; a store
 * that keeps unpacked roots still works. Needs root, mkfs.erofs and erofs in
 * the kernel: skipped otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/image.h"
#include "agent/image_rootfs.h"
#include "agent/image_store.h"

static char top[64], store_dir[96];
static ts_image_store st;

typedef struct tarbuf {
    unsigned char *b;
    size_t n;
} tarbuf;

static void tb_put(tarbuf *t, const void *p, size_t n)
{
    t->b = realloc(t->b, t->n + n);
    assert_non_null(t->b);
    memcpy(t->b + t->n, p, n);
    t->n += n;
}

static void tb_entry(tarbuf *t, const char *name, char type, unsigned mode, const char *data,
                     size_t len, const char *link)
{
    unsigned char h[512];
    memset(h, 0, sizeof h);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", mode);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011lo", (unsigned long)len & 077777777777UL); /* 11 octal digits */
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (unsigned char)type;
    if (link)
        snprintf((char *)h + 157, 100, "%s", link);
    memcpy(h + 257, "ustar\0" "00", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    tb_put(t, h, 512);
    if (len) {
        tb_put(t, data, len);
        static const unsigned char zero[512];
        tb_put(t, zero, (512 - len % 512) % 512);
    }
}

/* Ends the tar, writes it gzip-compressed into the store's blobs, names
 * its digest in out. */
static void tb_blob(tarbuf *t, char *out)
{
    static const unsigned char zero[1024];
    tb_put(t, zero, sizeof zero);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s/layer.tar.gz", top);
    gzFile g = gzopen(tmp, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, t->b, (unsigned)t->n), (int)t->n);
    gzclose(g);
    free(t->b);
    t->b = NULL;
    t->n = 0;
    ts_err err = {0};
    assert_int_equal(agent_image_file_digest(tmp, out, &err), 0);
    char dst[800];
    image_blob_path(&st, out, dst, sizeof dst);
    assert_int_equal(rename(tmp, dst), 0);
}

static void config_blob(char *out)
{
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s/config.json", top);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs("{\"config\": {}}", f);
    fclose(f);
    ts_err err = {0};
    assert_int_equal(agent_image_file_digest(tmp, out, &err), 0);
    char dst[800];
    image_blob_path(&st, out, dst, sizeof dst);
    assert_int_equal(rename(tmp, dst), 0);
}

/* Prepares an image of one layer holding a file whose text is tag; the
 * image's digest (made up, distinct per tag) into digest. */
static int prepare(const char *tag, char *digest, ts_image *img, ts_err *err)
{
    tarbuf t = {0};
    tb_entry(&t, "bin/", '5', 0755, NULL, 0, NULL);
    tb_entry(&t, "bin/tool", '0', 04755, tag, strlen(tag), NULL);   /* setuid: cleared */
    tb_entry(&t, "bin/sh", '2', 0777, NULL, 0, "/bin/tool");
    tb_entry(&t, "bin/tool2", '1', 0755, NULL, 0, "bin/tool");
    tb_entry(&t, "dev/sda", '4', 0666, NULL, 0, NULL);            /* not made */
    char layer[TS_IMAGE_DIGEST_MAX], cfg[TS_IMAGE_DIGEST_MAX];
    tb_blob(&t, layer);
    config_blob(cfg);
    snprintf(digest, TS_IMAGE_DIGEST_MAX, "sha256:%064x", (unsigned)tag[0]);
    const char *layers[] = {layer};
    char manifest[600];
    int n = snprintf(manifest, sizeof manifest,
                     "{\"config\": {\"digest\": \"%s\"}, \"layers\": [{\"digest\": \"%s\"}]}",
                     cfg, layer);
    int lk = image_store_lock(&st, err);
    assert_true(lk >= 0);
    int rc = image_store_prepare(&st, digest, manifest, (size_t)n, cfg, layers, 1, NULL, img, err);
    image_store_unlock(lk);
    return rc;
}

static void image_dir_of(const char *digest, char *dir, size_t n)
{
    image_dir(&st, digest, dir, n);
}

static bool loop_backed(const char *mnt)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    assert_non_null(f);
    char line[2048];
    bool loop = false;
    while (fgets(line, sizeof line, f)) {
        char *m = strstr(line, mnt);
        if (m && m[strlen(mnt)] == ' ' && strstr(line, " - erofs /dev/loop"))
            loop = true;
    }
    fclose(f);
    return loop;
}

static int setup(void **state)
{
    (void)state;
    if (geteuid() != 0)
        return 0;
    snprintf(top, sizeof top, "/tmp/ts-rootfs-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(store_dir, sizeof store_dir, "%s/store", top);
    ts_err err = {0};
    assert_int_equal(agent_image_store_open(&st, store_dir, 0, &err), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (!top[0])
        return 0;
    agent_image_evict(&st, 0); /* unmounts what no task uses */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "umount -R %s/store/images/*/rootfs 2>/dev/null; rm -rf %s", top,
             top);
    if (system(cmd) != 0)
        return -1;
    top[0] = 0;
    return 0;
}

static void need_erofs(void)
{
    if (geteuid() != 0 || !image_rootfs_can_pack(&st)) {
        fprintf(stderr, "skipped: needs root, mkfs.erofs and erofs in the kernel\n");
        skip();
    }
}

/* The test image's /bin/tool, read through the image's root, holds want. */
static void tool_says(const ts_image *img, const char *want)
{
    char p[900], text[32] = "";
    snprintf(p, sizeof p, "%s/bin/tool", img->rootfs);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    assert_non_null(fgets(text, sizeof text, f));
    fclose(f);
    assert_string_equal(text, want);
}

static void packed_root_mounted_as_checked(void **state)
{
    (void)state;
    need_erofs();
    char digest[TS_IMAGE_DIGEST_MAX], dir[700], p[900];
    ts_image img;
    ts_err err = {0};
    assert_int_equal(prepare("a-image", digest, &img, &err), 0);
    image_dir_of(digest, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/" IMAGE_ROOTFS_FILE, dir);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_true(image_rootfs_mounted(dir));
    assert_true(img.size_bytes > 0 && img.size_bytes <= (long long)sb.st_blocks * 512);
    /* what the unpack made, and only that */
    tool_says(&img, "a-image");
    snprintf(p, sizeof p, "%s/bin/tool", img.rootfs);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0755);
    ino_t ino = sb.st_ino;
    snprintf(p, sizeof p, "%s/bin/tool2", img.rootfs);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_ino, ino);
    char target[64] = "";
    snprintf(p, sizeof p, "%s/bin/sh", img.rootfs);
    assert_true(readlink(p, target, sizeof target - 1) > 0);
    assert_string_equal(target, "/bin/tool");
    snprintf(p, sizeof p, "%s/dev/sda", img.rootfs);
    assert_int_not_equal(lstat(p, &sb), 0);
    /* read-only, no device, no set-id honoured */
    struct statvfs vfs;
    assert_int_equal(statvfs(img.rootfs, &vfs), 0);
    assert_true(vfs.f_flag & ST_RDONLY);
    assert_true(vfs.f_flag & ST_NOSUID);
    assert_true(vfs.f_flag & ST_NODEV);
    snprintf(p, sizeof p, "%s/new", img.rootfs);
    assert_int_equal(open(p, O_WRONLY | O_CREAT, 0644), -1);
    assert_int_equal(errno, EROFS);
    /* found again: the same mount, not a second one */
    ts_image again;
    int lk = image_store_lock(&st, &err);
    assert_true(image_store_find(&st, digest, &again));
    image_store_unlock(lk);
    assert_true(again.cached);
    assert_string_equal(again.rootfs, img.rootfs);
}

/* An image of more entries than mkfs.erofs may take (its memory grows by
 * ~4.6 KB an entry, in the agent's cgroup) keeps its unpacked tree as its
 * root, as on a node without EROFS, and runs the same. */
static void an_image_of_many_entries_stays_a_tree(void **state)
{
    (void)state;
    need_erofs();
    st.pack_entries_max = 3; /* the test image has five */
    char digest[TS_IMAGE_DIGEST_MAX], dir[700], p[900];
    ts_image img;
    ts_err err = {0};
    int rc = prepare("m-image", digest, &img, &err);
    st.pack_entries_max = 0;
    assert_int_equal(rc, 0);
    image_dir_of(digest, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/" IMAGE_ROOTFS_FILE, dir);
    struct stat sb;
    assert_int_not_equal(stat(p, &sb), 0);
    assert_false(image_rootfs_mounted(dir));
    tool_says(&img, "m-image");
    assert_true(img.size_bytes > 0);
}

static void hostile_layer_leaves_nothing_mounted(void **state)
{
    (void)state;
    need_erofs();
    tarbuf t = {0};
    tb_entry(&t, "ok", '0', 0644, "x", 1, NULL);
    tb_entry(&t, "../evil", '0', 0644, "x", 1, NULL);
    char layer[TS_IMAGE_DIGEST_MAX], cfg[TS_IMAGE_DIGEST_MAX];
    tb_blob(&t, layer);
    config_blob(cfg);
    const char *layers[] = {layer};
    const char *digest = "sha256:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
    ts_image img;
    ts_err err = {0};
    int lk = image_store_lock(&st, &err);
    int rc = image_store_prepare(&st, digest, "{}", 2, cfg, layers, 1, NULL, &img, &err);
    image_store_unlock(lk);
    assert_int_equal(rc, TS_EINVAL);
    assert_non_null(strstr(err.msg, "../evil"));
    char dir[700], p[900];
    image_dir_of(digest, dir, sizeof dir);
    struct stat sb;
    assert_int_not_equal(stat(dir, &sb), 0);
    snprintf(p, sizeof p, "%s/evil", store_dir);
    assert_int_not_equal(stat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/tmp/evil", store_dir);
    assert_int_not_equal(stat(p, &sb), 0);
}

static void eviction_and_restart_unmount_unused(void **state)
{
    (void)state;
    need_erofs();
    char used[TS_IMAGE_DIGEST_MAX], idle[TS_IMAGE_DIGEST_MAX], dused[700], didle[700];
    ts_image img;
    ts_err err = {0};
    assert_int_equal(prepare("used", used, &img, &err), 0);
    assert_int_equal(prepare("idle", idle, &img, &err), 0);
    image_dir_of(used, dused, sizeof dused);
    image_dir_of(idle, didle, sizeof didle);
    assert_int_equal(agent_image_use(&st, used, "task-1", &err), 0);
    assert_true(image_rootfs_mounted(dused) && image_rootfs_mounted(didle));

    /* an agent restarted: the image its adopted task runs on stays mounted */
    ts_image_store again;
    assert_int_equal(agent_image_store_open(&again, store_dir, 0, &err), 0);
    assert_true(image_rootfs_mounted(dused));
    assert_false(image_rootfs_mounted(didle));
    /* the idle one is mounted again when a task wants it */
    int lk = image_store_lock(&st, &err);
    assert_true(image_store_find(&st, idle, &img));
    image_store_unlock(lk);
    assert_true(image_rootfs_mounted(didle));
    /* an agent stopping: the same, no mount left but those tasks sit on */
    agent_image_store_close(&st);
    assert_true(image_rootfs_mounted(dused));
    assert_false(image_rootfs_mounted(didle));
    lk = image_store_lock(&st, &err);
    assert_true(image_store_find(&st, idle, &img));
    image_store_unlock(lk);

    /* eviction: the unused image is unmounted and goes; the used one stays */
    agent_image_evict(&st, 0);
    struct stat sb;
    assert_int_not_equal(stat(didle, &sb), 0);
    assert_true(image_rootfs_mounted(dused));
    agent_image_release(&st, used, "task-1");
    agent_image_evict(&st, 0);
    assert_int_not_equal(stat(dused, &sb), 0);
}

/* Whether dir/boot is gone within 10 s (the seal's thread flushed the image). */
static bool sealed_soon(const char *dir)
{
    char p[900];
    snprintf(p, sizeof p, "%s/boot", dir);
    for (int i = 0; i < 200; i++) {
        if (access(p, F_OK) != 0)
            return true;
        usleep(50000);
    }
    return false;
}

static void write_boot(const char *dir, const char *id)
{
    char p[900];
    snprintf(p, sizeof p, "%s/boot", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(id, f);
    fclose(f);
}

/* A prepared image carries this boot's id until its bytes are flushed; one
 * found at open naming another boot (a power loss before the flush) goes,
 * one naming this boot (the agent restarted, not the machine) is sealed. */
static void unsealed_image_of_another_boot_goes(void **state)
{
    (void)state;
    need_erofs();
    char first[TS_IMAGE_DIGEST_MAX], second[TS_IMAGE_DIGEST_MAX], d1[700], d2[700], id[64] = "";
    ts_image img;
    ts_err err = {0};
    assert_int_equal(prepare("first", first, &img, &err), 0);
    image_dir_of(first, d1, sizeof d1);
    assert_true(sealed_soon(d1));
    assert_int_equal(prepare("second", second, &img, &err), 0);
    image_dir_of(second, d2, sizeof d2);
    assert_true(sealed_soon(d2));
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    assert_non_null(f);
    assert_non_null(fgets(id, sizeof id, f));
    fclose(f);
    write_boot(d1, "00000000-0000-0000-0000-000000000000");
    write_boot(d2, id);
    /* a task of the other boot named as its user: it cannot be running now */
    assert_int_equal(agent_image_use(&st, first, "task-1", &err), 0);
    ts_image_store again;
    assert_int_equal(agent_image_store_open(&again, store_dir, 0, &err), 0);
    struct stat sb;
    assert_int_not_equal(stat(d1, &sb), 0); /* another boot's: may have lost bytes */
    assert_int_equal(stat(d2, &sb), 0);     /* this boot's: flushed now, and kept */
    assert_true(sealed_soon(d2));
    int lk = image_store_lock(&st, &err);
    assert_false(image_store_find(&st, first, &img));
    assert_true(image_store_find(&st, second, &img));
    image_store_unlock(lk);
}

static void loop_device_path_mounts_and_frees(void **state)
{
    (void)state;
    need_erofs();
    if (access("/dev/loop-control", W_OK) != 0) {
        fprintf(stderr, "skipped: no /dev/loop-control\n");
        skip();
    }
    char digest[TS_IMAGE_DIGEST_MAX], dir[700];
    ts_image img;
    ts_err err = {0};
    assert_int_equal(prepare("loop", digest, &img, &err), 0);
    image_dir_of(digest, dir, sizeof dir);
    image_rootfs_unmount(dir);
    assert_false(image_rootfs_mounted(dir));
    assert_int_equal(image_rootfs_mount_loop(dir, &err), 0);
    assert_true(image_rootfs_mounted(dir));
    assert_true(loop_backed(img.rootfs));
    char p[900];
    snprintf(p, sizeof p, "%s/bin/tool", img.rootfs);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    image_rootfs_unmount(dir);
    assert_false(image_rootfs_mounted(dir));
    assert_false(loop_backed(img.rootfs));
}

static void unpacked_roots_still_work(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    st.unpacked_roots = true;
    char digest[TS_IMAGE_DIGEST_MAX], dir[700], p[900];
    ts_image img;
    ts_err err = {0};
    assert_int_equal(prepare("plain", digest, &img, &err), 0);
    st.unpacked_roots = false;
    image_dir_of(digest, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/" IMAGE_ROOTFS_FILE, dir);
    struct stat sb;
    assert_int_not_equal(stat(p, &sb), 0);
    assert_false(image_rootfs_mounted(dir));
    snprintf(p, sizeof p, "%s/bin/tool", img.rootfs);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0755);
    /* found as it is: an unpacked image is not packed after the fact */
    int lk = image_store_lock(&st, &err);
    assert_true(image_store_find(&st, digest, &img));
    image_store_unlock(lk);
    assert_false(image_rootfs_mounted(dir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(packed_root_mounted_as_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(an_image_of_many_entries_stays_a_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(hostile_layer_leaves_nothing_mounted, setup, teardown),
        cmocka_unit_test_setup_teardown(eviction_and_restart_unmount_unused, setup, teardown),
        cmocka_unit_test_setup_teardown(unsealed_image_of_another_boot_goes, setup, teardown),
        cmocka_unit_test_setup_teardown(loop_device_path_mounts_and_frees, setup, teardown),
        cmocka_unit_test_setup_teardown(unpacked_roots_still_work, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
