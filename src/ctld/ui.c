/*
 * ui.c - serves the web console (docs/console.md) under /ui/: static files
 * compiled into the binary (ui/ -> ui_files.c by ui/embed.cmake), so nothing
 * is read from disk or fetched at run time and the console always matches
 * the daemon it came with.
 *
 * The files are public (they hold no data); every view fetches the API with
 * the token the user signs in with, so a view shows exactly what that
 * token's role and tenant may see. Each answer carries a strict
 * Content-Security-Policy (scripts, styles and connections to this origin
 * only, no inline code, no framing), nosniff, no referrer, and an ETag (a hash of
 * the file's bytes, taken at build time) so a polling browser revalidates for a 304 and the
 * console costs the daemon almost nothing after the first load.
 */
#include <string.h>

#include "ctld/ui.h"

#define UI_CSP                                                                             \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "    \
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "          \
    "frame-ancestors 'none'"

bool ctld_ui_is(const char *url) { return strncmp(url, "/ui", 3) == 0 && (!url[3] || url[3] == '/'); }

const ctld_ui_file *ctld_ui_find(const char *url)
{
    if (strcmp(url, "/ui/") == 0)
        url = "/ui/index.html";
    for (int i = 0; i < ctld_ui_nfiles; i++)
        if (strcmp(ctld_ui_files[i].path, url) == 0)
            return &ctld_ui_files[i];
    return NULL;
}

static enum MHD_Result queue(struct MHD_Connection *conn, ctld *c, unsigned status,
                             struct MHD_Response *resp, const char *type)
{
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Content-Security-Policy", UI_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    __atomic_add_fetch(&c->m.http_requests[status / 100], 1, __ATOMIC_RELAXED);
    return ret;
}

enum MHD_Result ctld_ui_send(struct MHD_Connection *conn, ctld *c, const char *url,
                             const char *method)
{
    static const char not_found[] = "not found\n", moved[] = "see /ui/\n",
                      no_method[] = "method not allowed\n";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(
            sizeof no_method - 1, (void *)no_method, MHD_RESPMEM_PERSISTENT);
        if (r)
            MHD_add_response_header(r, "Allow", "GET, HEAD");
        return queue(conn, c, 405, r, "text/plain");
    }
    if (strcmp(url, "/ui") == 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(sizeof moved - 1, (void *)moved,
                                                                 MHD_RESPMEM_PERSISTENT);
        if (r)
            MHD_add_response_header(r, "Location", "/ui/");
        return queue(conn, c, 301, r, "text/plain");
    }
    const ctld_ui_file *f = ctld_ui_find(url);
    if (!f)
        return queue(conn, c, 404,
                     MHD_create_response_from_buffer(sizeof not_found - 1, (void *)not_found,
                                                     MHD_RESPMEM_PERSISTENT),
                     "text/plain");
    const char *etag = f->etag;
    const char *inm = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
    bool same = inm && strcmp(inm, etag) == 0;
    struct MHD_Response *r =
        same ? MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT)
             : MHD_create_response_from_buffer(f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (r)
        MHD_add_response_header(r, "ETag", etag);
    return queue(conn, c, same ? 304 : 200, r, f->content_type);
}
