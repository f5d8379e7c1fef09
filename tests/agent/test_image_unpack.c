/*
 * test_image_unpack.c - hostile image layers (issue 26): each case a layer
 * built here, byte by byte, as an attacker would, unpacked by the agent's
 * unpacker into a root next to an "outside" directory that must stay
 * untouched. Path traversal, a symbolic link that leads out (absolute and
 * relative), a hard link out of the layer, a device node, set-id bits, a
 * whiteout that escapes, a decompression bomb; and the ordinary cases (PAX
 * long names, whiteouts, opaque directories, links inside) still work.
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/image.h"

static char top[64], root[96], outside[96], layer[96];
static int root_fd = -1;

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

static void tb_file(tarbuf *t, const char *name, const char *text)
{
    tb_entry(t, name, '0', 0644, text, strlen(text), NULL);
}

/* Writes the tar, ended, gzip-compressed, to `layer`. */
static void tb_write(tarbuf *t)
{
    static const unsigned char zero[1024];
    tb_put(t, zero, sizeof zero);
    gzFile g = gzopen(layer, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, t->b, (unsigned)t->n), (int)t->n);
    gzclose(g);
    free(t->b);
    t->b = NULL;
    t->n = 0;
}

static int unpack(ts_unpack_stats *st, long long max_bytes, ts_err *err)
{
    ts_unpack_limits lim = {.max_bytes = max_bytes};
    return agent_image_unpack_layer(root_fd, layer, &lim, st, err);
}

static bool exists(const char *dir, const char *name)
{
    char p[1024];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &sb) == 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/ts-unpack-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(root, sizeof root, "%s/root", top);
    snprintf(outside, sizeof outside, "%s/outside", top);
    snprintf(layer, sizeof layer, "%s/layer.tar.gz", top);
    assert_int_equal(mkdir(root, 0755), 0);
    assert_int_equal(mkdir(outside, 0755), 0);
    root_fd = open(root, O_RDONLY | O_DIRECTORY);
    assert_true(root_fd >= 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close(root_fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", top);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void ordinary_layers_unpack(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_entry(&t, "./bin/", '5', 0755, NULL, 0, NULL);
    tb_file(&t, "./bin/hello", "hi\n");
    tb_entry(&t, "bin/sh", '2', 0777, NULL, 0, "/bin/hello");
    tb_entry(&t, "bin/hello2", '1', 0644, NULL, 0, "bin/hello");
    tb_file(&t, "etc/gone", "x");
    tb_entry(&t, "opq/", '5', 0755, NULL, 0, NULL);
    tb_file(&t, "opq/old", "x");
    /* a name longer than ustar's 100 characters, as a PAX header */
    char longname[200], pax[300];
    memset(longname, 'a', 150);
    longname[150] = 0;
    int len = snprintf(pax, sizeof pax, "xxx path=d/%s\n", longname);
    char rec[320];
    snprintf(rec, sizeof rec, "%03d path=d/%s\n", len, longname);
    tb_entry(&t, "PaxHeader", 'x', 0644, rec, strlen(rec), NULL);
    tb_file(&t, "ignored-short-name", "long\n");
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, 0, &err), 0);
    char p[512];
    snprintf(p, sizeof p, "d/%s", longname);
    assert_true(exists(root, p));
    assert_true(exists(root, "bin/hello2"));
    struct stat a, b;
    snprintf(p, sizeof p, "%s/bin/hello", root);
    assert_int_equal(stat(p, &a), 0);
    snprintf(p, sizeof p, "%s/bin/hello2", root);
    assert_int_equal(stat(p, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);

    /* the next layer: a whiteout, an opaque directory, a replaced file */
    tb_file(&t, "etc/.wh.gone", "");
    tb_entry(&t, "opq/.wh..wh..opq", '0', 0644, NULL, 0, NULL);
    tb_file(&t, "opq/new", "y");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), 0);
    assert_false(exists(root, "etc/gone"));
    assert_false(exists(root, "opq/old"));
    assert_true(exists(root, "opq/new"));
    assert_true(exists(root, "etc"));

    /* a link and a file the next layer makes directories (a /lib -> usr/lib
     * link later a folder): each is replaced by a directory with the entry's
     * mode, and what goes in it lands there, not through the old link */
    tb_entry(&t, "lib", '2', 0777, NULL, 0, "usr/lib");
    tb_file(&t, "was-file", "x");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), 0);
    tb_entry(&t, "lib/", '5', 0755, NULL, 0, NULL);
    tb_file(&t, "lib/libc.so", "elf");
    tb_entry(&t, "was-file/", '5', 0750, NULL, 0, NULL);
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), 0);
    struct stat sb;
    snprintf(p, sizeof p, "%s/lib", root);
    assert_int_equal(lstat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0755);
    assert_true(exists(root, "lib/libc.so"));
    assert_false(exists(root, "usr/lib/libc.so"));
    snprintf(p, sizeof p, "%s/was-file", root);
    assert_int_equal(lstat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0750);
}

static void path_traversal_refused(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_file(&t, "../outside/evil", "pwned");
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "../outside/evil"));
    assert_non_null(strstr(err.msg, ".."));
    assert_false(exists(outside, "evil"));
    /* a leading / is the image's root, not the host's */
    tb_file(&t, "/abs-file", "ok");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), 0);
    assert_true(exists(root, "abs-file"));
}

static void escaping_symlinks_never_followed(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_entry(&t, "abs", '2', 0777, NULL, 0, outside);    /* absolute, to the host's dir */
    tb_entry(&t, "rel", '2', 0777, NULL, 0, "../outside");
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, 0, &err), 0);  /* the links themselves are harmless */
    tb_file(&t, "abs/evil1", "pwned");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "symbolic link"));
    tb_file(&t, "rel/evil2", "pwned");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    /* replacing the link by a file writes the file in the root, not through it */
    tb_file(&t, "abs", "plain");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), 0);
    assert_false(exists(outside, "evil1"));
    assert_false(exists(outside, "evil2"));
    assert_false(exists(outside, "abs"));
    struct stat sb;
    char p[160];
    snprintf(p, sizeof p, "%s/abs", root);
    assert_int_equal(lstat(p, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
}

static void hard_links_out_refused(void **state)
{
    (void)state;
    char secret[160];
    snprintf(secret, sizeof secret, "%s/secret", outside);
    FILE *f = fopen(secret, "w");
    assert_non_null(f);
    fputs("host secret", f);
    fclose(f);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    tarbuf t = {0};
    tb_entry(&t, "l1", '1', 0644, NULL, 0, "../outside/secret");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "outside the image"));
    /* an absolute target is looked up in the image, where it is not */
    tb_entry(&t, "l2", '1', 0644, NULL, 0, secret);
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "not a file already in the image"));
    /* nor through a link the layer made */
    tb_entry(&t, "out", '2', 0777, NULL, 0, outside);
    tb_entry(&t, "l3", '1', 0644, NULL, 0, "out/secret");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_false(exists(root, "l1"));
    assert_false(exists(root, "l2"));
    assert_false(exists(root, "l3"));
    struct stat sb;
    assert_int_equal(stat(secret, &sb), 0);
    assert_int_equal(sb.st_nlink, 1);
}

static void device_nodes_not_made(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_entry(&t, "dev/sda", '4', 0666, NULL, 0, NULL);
    tb_entry(&t, "dev/mem", '3', 0666, NULL, 0, NULL);
    tb_file(&t, "after", "still unpacked");
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, 0, &err), 0);
    assert_int_equal(st.devices_skipped, 2);
    assert_false(exists(root, "dev/sda"));
    assert_false(exists(root, "dev/mem"));
    assert_true(exists(root, "after"));
}

static void setid_bits_cleared(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_entry(&t, "suid", '0', 04755, "x", 1, NULL);
    tb_entry(&t, "sgid-dir", '5', 02775, NULL, 0, NULL);
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, 0, &err), 0);
    assert_int_equal(st.setid_cleared, 2);
    struct stat sb;
    char p[160];
    snprintf(p, sizeof p, "%s/suid", root);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0755);
    snprintf(p, sizeof p, "%s/sgid-dir", root);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0775);
}

static void escaping_whiteouts_refused(void **state)
{
    (void)state;
    char keep[160];
    snprintf(keep, sizeof keep, "%s/keep", outside);
    FILE *f = fopen(keep, "w");
    assert_non_null(f);
    fclose(f);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    tarbuf t = {0};
    tb_file(&t, ".wh...", "");          /* removes ".." */
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "whiteout"));
    tb_file(&t, "../outside/.wh.keep", "");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    tb_entry(&t, "out", '2', 0777, NULL, 0, outside);
    tb_file(&t, "out/.wh.keep", "");
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    tb_file(&t, ".wh.out", "");         /* the link itself goes, not what it names */
    tb_write(&t);
    assert_int_equal(unpack(&st, 0, &err), 0);
    assert_true(exists(outside, "keep"));
    assert_false(exists(root, "out"));
}

static void the_disk_reserve_stops_an_unpack(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_file(&t, "small", "x");
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    /* more free than any disk has: stopped at the first look */
    ts_unpack_limits lim = {.min_free_bytes = 1LL << 60};
    assert_int_equal(agent_image_unpack_layer(root_fd, layer, &lim, &st, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "disk reserve"));
    lim.min_free_bytes = 1; /* a reserve the disk keeps */
    st = (ts_unpack_stats){0};
    assert_int_equal(agent_image_unpack_layer(root_fd, layer, &lim, &st, &err), 0);
    assert_true(exists(root, "small"));
    /* a store's budget bounds what one image unpacks: past it, the image
     * could never stay */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/store", top);
    ts_image_store store;
    assert_int_equal(agent_image_store_open(&store, dir, 1LL << 20, &err), 0);
    assert_int_equal(store.limits.max_bytes, 1LL << 20);
    assert_int_equal(agent_image_store_open(&store, dir, 0, &err), 0);
    assert_int_equal(store.limits.max_bytes, 0);
}

static void decompression_bomb_stopped(void **state)
{
    (void)state;
    const long long bomb = 64LL << 20, limit = 4LL << 20;
    char hdr[512];
    tarbuf t = {0};
    tb_entry(&t, "zeros", '0', 0644, NULL, 0, NULL);
    memcpy(hdr, t.b, 512);
    free(t.b);
    t = (tarbuf){0};
    /* the header again, with the bomb's size */
    memset(hdr + 124, 0, 12);
    snprintf(hdr + 124, 12, "%011llo", bomb);
    memset(hdr + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)hdr[i];
    snprintf(hdr + 148, 8, "%06o", sum);
    gzFile g = gzopen(layer, "wb9");
    assert_non_null(g);
    gzwrite(g, hdr, 512);
    static char zero[1 << 16];
    for (long long n = 0; n < bomb; n += sizeof zero)
        gzwrite(g, zero, sizeof zero);
    gzwrite(g, zero, 1024);
    gzclose(g);
    struct stat sb;
    assert_int_equal(stat(layer, &sb), 0);
    assert_true(sb.st_size < bomb / 100);  /* a real bomb: over 100x */
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, limit, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "limit"));
    assert_true(st.bytes <= limit + (1 << 16));
    /* and the entry count */
    tb_file(&t, "a", "1");
    tb_file(&t, "b", "2");
    tb_file(&t, "c", "3");
    tb_write(&t);
    ts_unpack_limits lim = {.max_entries = 2};
    ts_unpack_stats st2 = {0};
    assert_int_equal(agent_image_unpack_layer(root_fd, layer, &lim, &st2, &err), TS_ENOSPC);
}

static void damaged_tar_refused(void **state)
{
    (void)state;
    tarbuf t = {0};
    tb_file(&t, "f", "x");
    t.b[10] ^= 1;    /* the name, so the checksum no longer holds */
    tb_write(&t);
    ts_unpack_stats st = {0};
    ts_err err = {0};
    assert_int_equal(unpack(&st, 0, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "checksum"));
}

static void references_parse(void **state)
{
    (void)state;
    ts_image_ref r;
    ts_err err = {0};
    assert_int_equal(ts_image_ref_parse("127.0.0.1:5000/team/busy:1.0", "image", &r, &err), 0);
    assert_string_equal(r.host, "127.0.0.1:5000");
    assert_string_equal(r.repo, "team/busy");
    assert_string_equal(r.tag, "1.0");
    assert_int_equal(ts_image_ref_parse("localhost/x", "image", &r, &err), 0);
    assert_string_equal(r.tag, "latest");
    char pinned[200];
    snprintf(pinned, sizeof pinned, "reg.example/x@sha256:%064d", 0);
    assert_int_equal(ts_image_ref_parse(pinned, "image", &r, &err), 0);
    assert_string_equal(r.tag, "");
    assert_int_equal(ts_image_ref_parse("busybox", "jobs[0].image", &r, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "jobs[0].image: must name the registry"));
    assert_int_equal(ts_image_ref_parse("reg.example/Upper", "image", &r, &err), TS_EINVAL);
    assert_int_equal(ts_image_ref_parse("reg.example/x:bad tag", "image", &r, &err), TS_EINVAL);
    assert_int_equal(ts_image_ref_parse("reg.example/x@sha256:12", "image", &r, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "digest"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(ordinary_layers_unpack, setup, teardown),
        cmocka_unit_test_setup_teardown(path_traversal_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(escaping_symlinks_never_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(hard_links_out_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(device_nodes_not_made, setup, teardown),
        cmocka_unit_test_setup_teardown(setid_bits_cleared, setup, teardown),
        cmocka_unit_test_setup_teardown(escaping_whiteouts_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(decompression_bomb_stopped, setup, teardown),
        cmocka_unit_test_setup_teardown(the_disk_reserve_stops_an_unpack, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_tar_refused, setup, teardown),
        cmocka_unit_test(references_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
