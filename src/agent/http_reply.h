/*
 * http_reply.h - the answers of the agent's two small HTTP servers (the
 * metrics endpoint, metrics_server.c; the peer-to-peer piece server,
 * p2p_serve.c), both on libmicrohttpd: one way to queue a body, so both
 * carry the same headers. Private to src/agent.
 */
#ifndef TS_AGENT_HTTP_REPLY_H
#define TS_AGENT_HTTP_REPLY_H

#include <microhttpd.h>
#include <stddef.h>

/* Queues body (len bytes of type, malloc'd; freed here in every case) with
 * status and nosniff. */
enum MHD_Result agent_reply(struct MHD_Connection *conn, unsigned status, void *body, size_t len,
                            const char *type);

/* A plain-text answer of s (copied). */
enum MHD_Result agent_reply_text(struct MHD_Connection *conn, unsigned status, const char *s);

/* A 405 of text s naming the methods the path has (Allow: allow). */
enum MHD_Result agent_reply_method(struct MHD_Connection *conn, const char *allow, const char *s);

#endif
