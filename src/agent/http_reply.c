/*
 * http_reply.c - the answers of the agent's HTTP servers (http_reply.h).
 */
#include "agent/http_reply.h"

#include <stdlib.h>
#include <string.h>

static enum MHD_Result agent_queue(struct MHD_Connection *conn, unsigned status, void *body,
                                   size_t len, const char *type, const char *allow)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (allow)
        MHD_add_response_header(resp, "Allow", allow);
    enum MHD_Result ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result agent_reply(struct MHD_Connection *conn, unsigned status, void *body, size_t len,
                            const char *type)
{
    return agent_queue(conn, status, body, len, type, NULL);
}

static enum MHD_Result agent_text(struct MHD_Connection *conn, unsigned status, const char *s,
                                  const char *allow)
{
    char *body = strdup(s);
    return body ? agent_queue(conn, status, body, strlen(body), "text/plain; charset=utf-8", allow)
                : MHD_NO;
}

enum MHD_Result agent_reply_text(struct MHD_Connection *conn, unsigned status, const char *s)
{
    return agent_text(conn, status, s, NULL);
}

enum MHD_Result agent_reply_method(struct MHD_Connection *conn, const char *allow, const char *s)
{
    return agent_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, s, allow);
}
