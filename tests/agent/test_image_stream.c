/*
 * test_image_stream.c - a layer unpacked as its pieces arrive
 * (src/agent/image_stream.c, docs/images.md "Unpacked as the pieces come"):
 * the unpack follows the bytes written in order, before the last of them
 * lands; what it made is used only when the bytes it read have the layer's
 * digest, so a corrupt piece (even one written again correctly after the
 * unpack read it, as a refetch does) or a failed fetch leaves no staging
 * tree, and the image is then made from the verified blob. Layers that did
 * not come piece by piece are applied in order from their blobs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>
#include <gnutls/crypto.h>

#include "agent/image_store.h"

#define FILE_BYTES 200000
#define WAIT_MS 5000
#define IMAGE_DIGEST "sha256:1111111111111111111111111111111111111111111111111111111111111111"

typedef struct tarbuf {
    unsigned char *b;
    size_t n;
} tarbuf;

static char top[64], store_dir[96];
static ts_image_store st;

static void tb_put(tarbuf *t, const void *p, size_t n)
{
    t->b = realloc(t->b, t->n + n);
    assert_non_null(t->b);
    memcpy(t->b + t->n, p, n);
    t->n += n;
}

static void tb_file(tarbuf *t, const char *name, const char *data, size_t len)
{
    unsigned char h[512];
    memset(h, 0, sizeof h);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011lo", (unsigned long)len);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar\0" "00", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    tb_put(t, h, 512);
    static const unsigned char zero[512];
    tb_put(t, data, len);
    tb_put(t, zero, (512 - len % 512) % 512);
}

static void tb_end(tarbuf *t)
{
    static const unsigned char zero[1024];
    tb_put(t, zero, sizeof zero);
}

/* The layer "a" (FILE_BYTES of 'a'), "b" (FILE_BYTES of 'b'), ended. */
static tarbuf two_files(void)
{
    tarbuf t = {0};
    char *d = malloc(FILE_BYTES);
    assert_non_null(d);
    memset(d, 'a', FILE_BYTES);
    tb_file(&t, "a", d, FILE_BYTES);
    memset(d, 'b', FILE_BYTES);
    tb_file(&t, "b", d, FILE_BYTES);
    free(d);
    tb_end(&t);
    return t;
}

static tarbuf gzipped(const tarbuf *t)
{
    tarbuf z = {.n = compressBound((uLong)t->n) + 64};
    z.b = malloc(z.n);
    assert_non_null(z.b);
    z_stream s = {0};
    assert_int_equal(deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    s.next_in = t->b;
    s.avail_in = (uInt)t->n;
    s.next_out = z.b;
    s.avail_out = (uInt)z.n;
    assert_int_equal(deflate(&s, Z_FINISH), Z_STREAM_END);
    z.n = s.total_out;
    deflateEnd(&s);
    return z;
}

static void digest_of(const tarbuf *t, char out[TS_IMAGE_DIGEST_MAX])
{
    unsigned char d[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, t->b, t->n, d);
    char *q = out + sprintf(out, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
}

/* A blob file in the store's tmp/, as a fetch makes one. */
static int blob_file(char *path, size_t n)
{
    snprintf(path, n, "%s/tmp/blob-XXXXXX", store_dir);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

/* Bytes [from, to) of t written at their place, then told to the stream
 * as a fetch tells it (in order). */
static void write_span(image_stream *s, int fd, const tarbuf *t, size_t from, size_t to)
{
    assert_int_equal(pwrite(fd, t->b + from, to - from, (off_t)from), (ssize_t)(to - from));
    s->in_order.fn(s->in_order.ctx, (long long)to);
}

static long long size_of(const char *dir, const char *name)
{
    char p[1024];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* Waits until dir/name holds size bytes; false after WAIT_MS. */
static bool wait_size(const char *dir, const char *name, long long size)
{
    for (int ms = 0; ms < WAIT_MS; ms += 5) {
        if (size_of(dir, name) == size)
            return true;
        struct timespec ts = {0, 5 * 1000 * 1000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Every byte of dir/name is c, FILE_BYTES of them. */
static bool all_of(const char *dir, const char *name, char c)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f)
        return false;
    long n = 0;
    bool ok = true;
    for (int ch; (ch = fgetc(f)) != EOF; n++)
        ok = ok && ch == c;
    fclose(f);
    return ok && n == FILE_BYTES;
}

/* How many stream-* staging folders the store's tmp/ holds. */
static int staging_left(void)
{
    char p[200];
    snprintf(p, sizeof p, "%s/tmp", store_dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += !strncmp(e->d_name, "stream-", 7);
    closedir(d);
    return n;
}

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/ts-stream-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(store_dir, sizeof store_dir, "%s/store", top);
    ts_err err = {0};
    assert_int_equal(agent_image_store_open(&st, store_dir, 0, &err), 0);
    st.unpacked_roots = true; /* the trees themselves are checked */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    image_rm_tree(top);
    return 0;
}

static void the_unpack_follows_the_bytes_in_order(void **state)
{
    (void)state;
    tarbuf t = two_files();
    char digest[TS_IMAGE_DIGEST_MAX], blob[200], root[900], dest[200];
    digest_of(&t, digest);
    int fd = blob_file(blob, sizeof blob);
    image_stream s;
    image_stream_open(&st, IMAGE_DIGEST, &s);
    assert_true(s.dir[0] != 0);
    snprintf(root, sizeof root, "%s/rootfs", s.dir);
    assert_non_null(image_stream_follow(&s, 0, fd, digest, (long long)t.n));
    /* the second piece, written first, is not read before the first */
    assert_int_equal(pwrite(fd, t.b + 250000, t.n - 250000, 250000), (ssize_t)(t.n - 250000));
    write_span(&s, fd, &t, 0, 250000);
    /* "a" whole before the rest of the layer is told */
    assert_true(wait_size(root, "a", FILE_BYTES));
    s.in_order.fn(s.in_order.ctx, (long long)t.n);
    image_stream_end(&s, true);
    assert_int_equal(s.next, 1);
    snprintf(dest, sizeof dest, "%s/taken", top);
    ts_unpack_stats stats;
    long long layer_bytes = 0;
    assert_true(image_stream_take(&s, 1, dest, &stats, &layer_bytes));
    assert_int_equal(layer_bytes, (long long)t.n);
    assert_true(stats.bytes >= 2 * FILE_BYTES); /* the tar's bytes, headers and all */
    assert_true(all_of(dest, "a", 'a'));
    assert_true(all_of(dest, "b", 'b'));
    assert_int_equal(staging_left(), 0);
    image_stream_close(&s);
    close(fd);
    free(t.b);
}

static void a_corrupt_last_piece_leaves_no_tree(void **state)
{
    (void)state;
    tarbuf t = two_files();
    char digest[TS_IMAGE_DIGEST_MAX], blob[200], root[900], final[700], img[800];
    digest_of(&t, digest);
    int fd = blob_file(blob, sizeof blob);
    image_stream s;
    image_stream_open(&st, IMAGE_DIGEST, &s);
    snprintf(root, sizeof root, "%s/rootfs", s.dir);
    assert_non_null(image_stream_follow(&s, 0, fd, digest, (long long)t.n));
    /* the last piece, inside "b", corrupt: a peer lied */
    size_t last = t.n - 4096 - 1024;
    t.b[last + 10] ^= 0x20;
    write_span(&s, fd, &t, 0, t.n);
    assert_true(wait_size(root, "b", FILE_BYTES)); /* the unpack read the bad byte */
    /* the refetch writes it again as it should be: the blob now verifies */
    t.b[last + 10] ^= 0x20;
    assert_int_equal(pwrite(fd, t.b + last, t.n - last, (off_t)last), (ssize_t)(t.n - last));
    image_stream_end(&s, true);
    assert_string_equal(s.dir, "");
    assert_int_equal(staging_left(), 0);
    /* the image is made from the verified blob */
    image_blob_path(&st, digest, final, sizeof final);
    assert_int_equal(rename(blob, final), 0);
    const char *layers[] = {digest};
    ts_image out;
    ts_err err = {0};
    int lk = image_store_lock(&st, &err);
    assert_int_equal(image_store_prepare(&st, IMAGE_DIGEST, "{}", 2, digest, layers, 1, &s, &out,
                                         &err), 0);
    image_store_unlock(lk);
    image_dir(&st, IMAGE_DIGEST, img, sizeof img);
    strcat(img, "/rootfs");
    assert_true(all_of(img, "b", 'b'));
    image_stream_close(&s);
    close(fd);
    free(t.b);
}

static void a_failed_fetch_ends_the_unpack_and_drops_the_tree(void **state)
{
    (void)state;
    tarbuf t = two_files();
    char digest[TS_IMAGE_DIGEST_MAX], blob[200];
    digest_of(&t, digest);
    int fd = blob_file(blob, sizeof blob);
    image_stream s;
    image_stream_open(&st, IMAGE_DIGEST, &s);
    assert_non_null(image_stream_follow(&s, 0, fd, digest, (long long)t.n));
    write_span(&s, fd, &t, 0, t.n / 2);
    image_stream_end(&s, false); /* returns: the unpack waits for no more */
    assert_string_equal(s.dir, "");
    assert_int_equal(staging_left(), 0);
    /* nothing more is followed */
    assert_null(image_stream_follow(&s, 0, fd, digest, (long long)t.n));
    image_stream_close(&s);
    close(fd);
    free(t.b);
}

static void a_gzip_layer_is_unpacked_as_it_comes(void **state)
{
    (void)state;
    tarbuf plain = two_files();
    tarbuf t = gzipped(&plain);
    free(plain.b);
    char digest[TS_IMAGE_DIGEST_MAX], blob[200], dest[200];
    digest_of(&t, digest);
    int fd = blob_file(blob, sizeof blob);
    image_stream s;
    image_stream_open(&st, IMAGE_DIGEST, &s);
    assert_non_null(image_stream_follow(&s, 0, fd, digest, (long long)t.n));
    for (size_t at = 0; at < t.n; at += 97) /* pieces cut anywhere, even inside the magic */
        write_span(&s, fd, &t, at, at + 97 < t.n ? at + 97 : t.n);
    image_stream_end(&s, true);
    snprintf(dest, sizeof dest, "%s/taken", top);
    ts_unpack_stats stats;
    long long layer_bytes = 0;
    assert_true(image_stream_take(&s, 1, dest, &stats, &layer_bytes));
    assert_true(all_of(dest, "a", 'a'));
    assert_true(all_of(dest, "b", 'b'));
    image_stream_close(&s);
    close(fd);
    free(t.b);
}

static void layers_not_followed_are_applied_from_their_blobs_in_order(void **state)
{
    (void)state;
    /* layer 0 already in the store: "x"; layer 1 followed: "y", and x whited out */
    tarbuf l0 = {0}, l1 = {0};
    tb_file(&l0, "x", "old", 3);
    tb_end(&l0);
    tb_file(&l1, "y", "new", 3);
    tb_file(&l1, ".wh.x", "", 0);
    tb_end(&l1);
    char d0[TS_IMAGE_DIGEST_MAX], d1[TS_IMAGE_DIGEST_MAX], b0[700], blob[200], dest[200];
    digest_of(&l0, d0);
    digest_of(&l1, d1);
    image_blob_path(&st, d0, b0, sizeof b0);
    FILE *f = fopen(b0, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(l0.b, 1, l0.n, f), l0.n);
    fclose(f);
    image_stream s;
    image_stream_open(&st, IMAGE_DIGEST, &s);
    /* layer 1 is not followed while layer 0 is not applied */
    int fd = blob_file(blob, sizeof blob);
    assert_null(image_stream_follow(&s, 1, fd, d1, (long long)l1.n));
    image_stream_catch_up(&s, 0, b0);
    assert_int_equal(s.next, 1);
    assert_non_null(image_stream_follow(&s, 1, fd, d1, (long long)l1.n));
    write_span(&s, fd, &l1, 0, l1.n);
    image_stream_end(&s, true);
    image_stream_catch_up(&s, 1, blob); /* followed already: nothing more */
    assert_int_equal(s.next, 2);
    snprintf(dest, sizeof dest, "%s/taken", top);
    ts_unpack_stats stats;
    long long layer_bytes = 0;
    assert_true(image_stream_take(&s, 2, dest, &stats, &layer_bytes));
    assert_int_equal(size_of(dest, "x"), -1);
    assert_int_equal(size_of(dest, "y"), 3);
    image_stream_close(&s);
    close(fd);
    free(l0.b);
    free(l1.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(the_unpack_follows_the_bytes_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(a_corrupt_last_piece_leaves_no_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_fetch_ends_the_unpack_and_drops_the_tree, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_gzip_layer_is_unpacked_as_it_comes, setup, teardown),
        cmocka_unit_test_setup_teardown(
            layers_not_followed_are_applied_from_their_blobs_in_order, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
