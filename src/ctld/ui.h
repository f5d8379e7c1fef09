/*
 * ui.h - internal: the web console's files, built into tesserad (ui/ turned
 * into a C table by ui/embed.cmake at build time) and served under /ui/ by
 * ui.c without a token: the page signs in with one and calls the API.
 */
#ifndef TS_CTLD_UI_H
#define TS_CTLD_UI_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "ctld/ctld.h"

typedef struct ctld_ui_file {
    const char *path;          /* "/ui/index.html" */
    const char *content_type;
    const unsigned char *data; /* NUL-terminated, len bytes before it */
    size_t len;
    const char *etag;          /* "\"<16 hex digits of its SHA-1>\"" */
} ctld_ui_file;

/* The generated table (ui_files.c in the build folder). */
extern const ctld_ui_file ctld_ui_files[];
extern const int ctld_ui_nfiles;

/* Whether url is the console's ("/ui" or under "/ui/"). */
bool ctld_ui_is(const char *url);
/* The file for url ("/ui/" is index.html), or NULL. */
const ctld_ui_file *ctld_ui_find(const char *url);
/* Answers a console request (GET or HEAD; no token needed). */
enum MHD_Result ctld_ui_send(struct MHD_Connection *conn, ctld *c, const char *url,
                             const char *method);

#endif
