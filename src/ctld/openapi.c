/*
 * openapi.c - the OpenAPI 3.1 document served at /v1/openapi.json and
 * printed by `tesserad --openapi` (docs/openapi.json is that output; the
 * ctld/openapi test keeps the two equal). Its operations are the rows of the
 * route table the router dispatches from (router.h), so the document cannot
 * list a route the server lacks or miss one it has. What the table does not
 * hold lives here: the JSON Schemas of the bodies (written from what each
 * handler answers: routes.c, render.c, tokens.c, secrets_api.c, logs.c),
 * each operation's query parameters, and the links between operations.
 * The agent's discovery and health are the codec's (src/proto), written from
 * the member tables the controller decodes them with.
 */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "ctld/router.h"
#include "ctld/http.h"
#include "tessera/agent_proto.h"

#define ID_MAX_TEXT "9223372036854775807"

/* components/schemas. Objects stay open (a new field is not a break); the
 * fields every answer carries are required. */
static const struct {
    const char *name, *json;
} SCHEMAS[] = {
    {"Error",
     "{\"type\":\"object\",\"required\":[\"error\"],"
     "\"properties\":{\"error\":{\"type\":\"object\",\"required\":[\"code\",\"message\"],"
     "\"properties\":{\"code\":{\"type\":\"string\",\"examples\":[\"invalid\"]},"
     "\"message\":{\"type\":\"string\","
     "\"examples\":[\"limit: must be a decimal number 1..1000\"]},"
     "\"fields\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"path\","
     "\"reason\"],\"properties\":{\"path\":{\"type\":\"string\"},"
     "\"reason\":{\"type\":\"string\"}}}}}}}}"},
    {"JobSpec",
     "{\"type\":\"object\",\"description\":\"A job spec (docs/job-spec.md); the same "
     "document in YAML is accepted too\",\"required\":[\"tenant\",\"name\",\"tasks\"],"
     "\"properties\":{\"tasks\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}},"
     "\"examples\":[{\"tenant\":\"team-a\",\"name\":\"train\",\"tasks\":[{\"count\":1,"
     "\"gpus\":1}],\"duration\":\"1s\",\"command\":[\"true\"]}]}"},
    {"JobRank",
     "{\"type\":\"object\",\"properties\":{\"rank\":{\"type\":\"integer\"},"
     "\"node\":{\"type\":\"string\"},\"end\":{\"type\":\"string\",\"enum\":[\"exited\","
     "\"signal\",\"oom\",\"timeout\",\"launch\",\"stopped\",\"lost\",\"image_not_found\","
     "\"image_auth\",\"shim_not_loaded\",\"prolog_failed\",\"disk_pressure\"]},"
     "\"exit_code\":{\"type\":[\"integer\",\"null\"]},\"signal\":{\"type\":[\"integer\","
     "\"null\"]},\"oom_kills\":{\"type\":\"integer\"},\"reason\":{\"type\":\"string\"}}}"},
    {"Job",
     "{\"type\":\"object\",\"required\":[\"id\",\"name\",\"tenant\",\"owner\",\"state\","
     "\"tier\",\"priority\",\"gpus\",\"preemptions\"],"
     "\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":1},"
     "\"name\":{\"type\":\"string\"},\"tenant\":{\"type\":\"string\"},"
     "\"owner\":{\"type\":\"string\"},\"state\":{\"type\":\"string\",\"enum\":[\"pending\","
     "\"held\",\"running\",\"stopping\",\"completed\",\"failed\",\"cancelled\","
     "\"timeout\"]},\"tier\":{\"type\":\"string\",\"enum\":[\"guaranteed\","
     "\"opportunistic\"]},\"priority\":{\"type\":\"integer\"},"
     "\"gpus\":{\"type\":\"integer\",\"minimum\":0},\"gpu_model\":{\"type\":[\"string\","
     "\"null\"]},\"submit_time\":{\"type\":[\"number\",\"null\"]},"
     "\"start_time\":{\"type\":[\"number\",\"null\"]},\"end_time\":{\"type\":[\"number\","
     "\"null\"]},\"preemptions\":{\"type\":\"integer\",\"minimum\":0},"
     "\"restarts\":{\"type\":\"integer\",\"minimum\":0},"
     "\"reason\":{\"type\":[\"string\",\"null\"]},\"why\":{\"type\":[\"string\",\"null\"]},"
     "\"placement\":{\"type\":[\"array\",\"null\"]},\"exit_code\":{\"type\":[\"integer\","
     "\"null\"]},\"signal\":{\"type\":[\"integer\",\"null\"]},"
     "\"ranks\":{\"type\":[\"array\",\"null\"],"
     "\"items\":{\"$ref\":\"#/components/schemas/JobRank\"}},"
     "\"run_as\":{\"type\":[\"object\",\"null\"]},"
     "\"elastic\":{\"type\":[\"object\",\"null\"],\"properties\":{"
     "\"min_gpus\":{\"type\":\"integer\"},\"max_gpus\":{\"type\":\"integer\"},"
     "\"gpus\":{\"type\":\"integer\"},\"resize_to\":{\"type\":\"integer\"}}}}}"},
    {"JobOne",
     "{\"type\":\"object\",\"required\":[\"job\"],"
     "\"properties\":{\"job\":{\"$ref\":\"#/components/schemas/Job\"}}}"},
    {"JobsSubmitted",
     "{\"type\":\"object\",\"required\":[\"jobs\"],"
     "\"properties\":{\"jobs\":{\"type\":\"array\","
     "\"minItems\":1,\"items\":{\"$ref\":\"#/components/schemas/Job\"}}}}"},
    {"Cursor",
     "{\"type\":[\"string\",\"null\"],"
     "\"description\":\"the cursor of the next page; null on the last\","
     "\"pattern\":\"^(0|[1-9][0-9]*)$\"}"},
    {"JobList",
     "{\"type\":\"object\",\"required\":[\"jobs\",\"next_cursor\"],"
     "\"properties\":{\"jobs\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Job\"}},"
     "\"next_cursor\":{\"$ref\":\"#/components/schemas/Cursor\"}}}"},
    {"Event",
     "{\"type\":\"object\",\"required\":[\"id\",\"time\",\"kind\"],"
     "\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0},"
     "\"time\":{\"type\":\"number\"},\"kind\":{\"type\":\"string\"},"
     "\"detail\":{\"type\":[\"string\",\"null\"]},\"data\":{\"type\":\"object\"}}}"},
    {"JobEvents",
     "{\"type\":\"object\",\"required\":[\"events\",\"next_cursor\"],"
     "\"properties\":{\"events\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Event\"}},"
     "\"next_cursor\":{\"$ref\":\"#/components/schemas/Cursor\"}}}"},
    {"Step",
     "{\"type\":\"object\",\"required\":[\"id\",\"job\",\"name\",\"state\",\"command\","
     "\"ntasks\",\"nodes\",\"start\",\"end\",\"exit_code\",\"gpu_seconds\"],"
     "\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":0},"
     "\"job\":{\"type\":\"integer\"},\"name\":{\"type\":\"string\",\"examples\":[\"42.0\"]},"
     "\"state\":{\"type\":\"string\",\"enum\":[\"running\",\"completed\",\"failed\","
     "\"cancelled\"]},\"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
     "\"ntasks\":{\"type\":\"integer\"},\"nodes\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"}},\"start\":{\"type\":\"number\"},"
     "\"end\":{\"type\":[\"number\",\"null\"]},\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
     "\"gpu_seconds\":{\"type\":\"number\"},\"reason\":{\"type\":\"string\"},"
     "\"tasks\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}}}"},
    {"StepOne",
     "{\"type\":\"object\",\"required\":[\"step\"],"
     "\"properties\":{\"step\":{\"$ref\":\"#/components/schemas/Step\"}}}"},
    {"StepList",
     "{\"type\":\"object\",\"properties\":{\"steps\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Step\"}},"
     "\"step\":{\"$ref\":\"#/components/schemas/Step\"}}}"},
    {"StepRequest",
     "{\"type\":\"object\",\"required\":[\"command\"],\"additionalProperties\":false,"
     "\"properties\":{\"command\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":256,"
     "\"items\":{\"type\":\"string\"}},"
     "\"ntasks\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65536},"
     "\"nodes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65536},"
     "\"ntasks_per_node\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65536}}}"},
    {"JobLogs",
     "{\"type\":\"object\",\"required\":[\"job\",\"rank\",\"stream\",\"live\"],"
     "\"properties\":{\"job\":{\"type\":\"integer\"},\"rank\":{\"type\":\"integer\"},"
     "\"stream\":{\"type\":\"string\",\"enum\":[\"stdout\",\"stderr\"]},"
     "\"live\":{\"type\":\"boolean\"},\"data\":{\"type\":\"string\"},"
     "\"size\":{\"type\":[\"integer\",\"null\"],\"minimum\":0},"
     "\"offset\":{\"type\":\"integer\",\"minimum\":0},\"note\":{\"type\":\"string\"}}}"},
    {"JobExplain",
     "{\"type\":\"object\",\"required\":[\"job_id\",\"state\",\"reason\",\"explanation\","
     "\"reserved_at\"],\"properties\":{\"job_id\":{\"type\":\"integer\"},"
     "\"state\":{\"type\":\"string\"},\"reason\":{\"type\":[\"string\",\"null\"]},"
     "\"explanation\":{\"type\":[\"string\",\"null\"]},"
     "\"reserved_at\":{\"type\":[\"number\",\"null\"]}}}"},
    {"ArrayCancelled",
     "{\"type\":\"object\",\"required\":[\"array\",\"elements\",\"cancelled\"],"
     "\"properties\":{\"array\":{\"type\":\"integer\"},\"elements\":{\"type\":\"integer\"},"
     "\"cancelled\":{\"type\":\"integer\"}}}"},
    {"ArrayHeld",
     "{\"type\":\"object\",\"required\":[\"array\",\"elements\",\"held\"],"
     "\"properties\":{\"array\":{\"type\":\"integer\"},\"elements\":{\"type\":\"integer\"},"
     "\"held\":{\"type\":\"integer\"}}}"},
    {"ArrayReleased",
     "{\"type\":\"object\",\"required\":[\"array\",\"elements\",\"released\"],"
     "\"properties\":{\"array\":{\"type\":\"integer\"},\"elements\":{\"type\":\"integer\"},"
     "\"released\":{\"type\":\"integer\"}}}"},
    {"SessionRequest",
     "{\"type\":\"object\",\"description\":\"An interactive session (docs/interactive.md)\","
     "\"additionalProperties\":false,\"required\":[\"kind\"],"
     "\"properties\":{\"kind\":{\"type\":\"string\",\"enum\":[\"attach\",\"exec\",\"forward\"]},"
     "\"rank\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":65536},"
     "\"command\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":256,"
     "\"items\":{\"type\":\"string\",\"maxLength\":4096}},"
     "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
     "\"tty\":{\"type\":\"boolean\"},"
     "\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
     "\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
     "\"check\":{\"type\":\"boolean\",\"description\":\"true: make every check of the "
     "session and open none (200, no upgrade)\"}}}"},
    {"BulkCancel",
     "{\"type\":\"object\",\"description\":\"At least one filter; user is the submitting "
     "token's name\",\"additionalProperties\":false,"
     "\"properties\":{\"user\":{\"type\":[\"string\",\"null\"],\"minLength\":1},"
     "\"name\":{\"type\":[\"string\",\"null\"],\"minLength\":1},"
     "\"state\":{\"type\":[\"string\",\"null\"],"
     "\"enum\":[\"pending\",\"held\",\"running\",\"stopping\",null]},"
     "\"array\":{\"type\":[\"integer\",\"null\"],\"minimum\":1},"
     "\"tenant\":{\"type\":[\"string\",\"null\"],\"minLength\":1}},"
     "\"examples\":[{\"user\":\"alice\",\"state\":\"pending\"}]}"},
    {"JobUpdate",
     "{\"type\":\"object\",\"description\":\"At least one field; each as in the job "
     "spec (docs/job-spec.md); tasks and gpus are those of its one task group\","
     "\"additionalProperties\":false,\"minProperties\":1,"
     "\"properties\":{\"time_limit\":{\"type\":[\"number\",\"string\"]},"
     "\"tasks\":{\"type\":\"integer\",\"minimum\":1},"
     "\"gpus\":{\"type\":\"integer\",\"minimum\":0},"
     "\"priority_class\":{\"type\":\"string\"},"
     "\"nice\":{\"type\":\"integer\",\"minimum\":-10000,\"maximum\":10000},"
     "\"dependency\":{\"type\":[\"string\",\"null\"]},"
     "\"hold\":{\"type\":\"boolean\"}},"
     "\"examples\":[{\"time_limit\":\"2h\",\"tasks\":2}]}"},
    {"JobsCancelled",
     "{\"type\":\"object\",\"required\":[\"cancelled\",\"jobs\",\"elements\"],"
     "\"properties\":{\"cancelled\":{\"type\":\"integer\",\"minimum\":0},"
     "\"jobs\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
     "\"elements\":{\"type\":\"integer\",\"minimum\":0}}}"},
    {"AcctRows",
     "{\"type\":\"object\",\"required\":[\"jobs\",\"next_cursor\",\"from\",\"to\"],"
     "\"properties\":{\"jobs\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
     "\"required\":[\"id\",\"tenant\",\"user\",\"state\",\"gpus\",\"gpu_hours\"],"
     "\"properties\":{\"id\":{\"type\":\"integer\"},\"tenant\":{\"type\":\"string\"},"
     "\"user\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
     "\"tier\":{\"type\":\"string\"},\"gpu_model\":{\"type\":\"string\"},"
     "\"gpus\":{\"type\":\"integer\"},\"state\":{\"type\":\"string\"},"
     "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
     "\"signal\":{\"type\":[\"integer\",\"null\"]},\"reason\":{\"type\":[\"string\",\"null\"]},"
     "\"submit\":{\"type\":\"number\"},"
     "\"start\":{\"type\":[\"number\",\"null\"]},\"end\":{\"type\":[\"number\",\"null\"]},"
     "\"elapsed_s\":{\"type\":\"number\"},\"gpu_hours\":{\"type\":\"number\"},"
     "\"preemptions\":{\"type\":\"integer\"}}}},"
     "\"next_cursor\":{\"$ref\":\"#/components/schemas/Cursor\"},"
     "\"from\":{\"type\":\"number\"},\"to\":{\"type\":\"number\"}}}"},
    {"Node",
     "{\"type\":\"object\",\"required\":[\"name\",\"state\",\"virtual\",\"health\",\"gpus\","
     "\"gpus_free\",\"cpu_milli\",\"cpu_free_milli\",\"memory_mib\",\"memory_free_mib\","
     "\"jobs\"],\"properties\":{\"name\":{\"type\":\"string\"},"
     "\"state\":{\"type\":\"string\",\"enum\":[\"up\",\"drained\"]},"
     "\"drain_reason\":{\"type\":[\"string\",\"null\"]},\"virtual\":{\"type\":\"boolean\"},"
     "\"health\":{\"type\":\"object\",\"required\":[\"state\",\"source\"],"
     "\"properties\":{\"state\":{\"type\":\"string\",\"enum\":[\"ok\",\"degraded\","
     "\"failed\",\"unknown\"]},\"source\":{\"type\":\"string\"}}},"
     "\"gpu_model\":{\"type\":[\"string\",\"null\"]},\"gpus\":{\"type\":\"integer\"},"
     "\"gpus_free\":{\"type\":\"integer\"},\"cpu_milli\":{\"type\":\"integer\"},"
     "\"cpu_free_milli\":{\"type\":\"integer\"},\"memory_mib\":{\"type\":\"integer\"},"
     "\"memory_free_mib\":{\"type\":\"integer\"},\"jobs\":{\"type\":\"array\","
     "\"items\":{\"type\":\"integer\"}}}}"},
    {"NodeOne",
     "{\"type\":\"object\",\"required\":[\"node\"],"
     "\"properties\":{\"node\":{\"$ref\":\"#/components/schemas/Node\"}}}"},
    {"NodeList",
     "{\"type\":\"object\",\"required\":[\"nodes\"],"
     "\"properties\":{\"nodes\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Node\"}}}}"},
    {"Quota",
     "{\"type\":\"object\",\"required\":[\"gpu\",\"cpu_milli\",\"memory_mib\"],"
     "\"properties\":{\"gpu\":{\"type\":\"object\","
     "\"additionalProperties\":{\"type\":\"number\"}},\"cpu_milli\":{\"type\":\"integer\"},"
     "\"memory_mib\":{\"type\":\"integer\"}}}"},
    {"Tenant",
     "{\"type\":\"object\",\"required\":[\"name\",\"parent\",\"weight\",\"guaranteed\","
     "\"usage\",\"share\",\"usage_share\",\"order\"],"
     "\"properties\":{\"name\":{\"type\":\"string\"},\"parent\":{\"type\":[\"string\","
     "\"null\"]},\"weight\":{\"type\":\"number\"},"
     "\"guaranteed\":{\"$ref\":\"#/components/schemas/Quota\"},"
     "\"usage\":{\"$ref\":\"#/components/schemas/Quota\"},\"share\":{\"type\":\"number\"},"
     "\"usage_share\":{\"type\":\"number\"},\"order\":{\"type\":\"string\"}}}"},
    {"TenantList",
     "{\"type\":\"object\",\"required\":[\"tenants\"],"
     "\"properties\":{\"tenants\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Tenant\"}}}}"},
    {"TenantsDoc",
     "{\"type\":\"object\","
     "\"description\":\"The tenants file (docs/tenants.md) as JSON, or the same in YAML\","
     "\"required\":[\"tenants\"],\"properties\":{\"tenants\":{\"type\":\"array\","
     "\"items\":{\"type\":\"object\"}}}}"},
    {"Usage",
     "{\"type\":\"object\",\"required\":[\"usage\",\"from\",\"to\"],"
     "\"properties\":{\"usage\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
     "\"required\":[\"tenant\",\"tier\",\"gpu_model\",\"gpu_hours\"],"
     "\"properties\":{\"tenant\":{\"type\":\"string\"},\"tier\":{\"type\":\"string\","
     "\"enum\":[\"guaranteed\",\"opportunistic\"]},\"gpu_model\":{\"type\":\"string\"},"
     "\"gpu_hours\":{\"type\":\"number\"}}}},\"from\":{\"type\":\"number\"},"
     "\"to\":{\"type\":\"number\"}}}"},
    {"Token",
     "{\"type\":\"object\",\"required\":[\"name\",\"role\",\"tenant\",\"created\","
     "\"revoked\"],\"properties\":{\"name\":{\"type\":\"string\"},"
     "\"role\":{\"type\":\"string\",\"enum\":[\"admin\",\"tenant-admin\",\"user\","
     "\"viewer\",\"cluster-viewer\",\"node\",\"scrape\"]},\"tenant\":{\"type\":[\"string\","
     "\"null\"]},\"created\":{\"type\":\"number\"},\"revoked\":{\"type\":[\"number\","
     "\"null\"]},\"unix_user\":{\"type\":[\"string\",\"null\"]},"
     "\"uid\":{\"type\":[\"integer\",\"null\"]},\"expires\":{\"type\":[\"number\","
     "\"null\"]}}}"},
    {"TokenList",
     "{\"type\":\"object\",\"required\":[\"tokens\"],"
     "\"properties\":{\"tokens\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Token\"}}}}"},
    {"TokenRequest",
     "{\"type\":\"object\",\"required\":[\"name\",\"role\"],"
     "\"additionalProperties\":false,\"properties\":{\"name\":{\"type\":\"string\","
     "\"pattern\":\"^[A-Za-z0-9._-]{1,63}$\"},\"role\":{\"type\":\"string\","
     "\"enum\":[\"admin\",\"tenant-admin\",\"user\",\"viewer\",\"cluster-viewer\",\"node\","
     "\"scrape\"]},\"tenant\":{\"type\":[\"string\",\"null\"]},"
     "\"unix_user\":{\"type\":\"string\"},\"uid\":{\"type\":\"integer\",\"minimum\":0},"
     "\"expires\":{\"type\":\"string\",\"examples\":[\"90d\",\"2027-01-31T12:00:00Z\"]}},"
     "\"examples\":[{\"name\":\"alice\",\"role\":\"user\",\"tenant\":\"team-a\","
     "\"unix_user\":\"alice\",\"uid\":1001}]}"},
    {"TokenCreated",
     "{\"type\":\"object\",\"required\":[\"token\"],"
     "\"properties\":{\"token\":{\"allOf\":[{\"$ref\":\"#/components/schemas/Token\"},"
     "{\"type\":\"object\",\"required\":[\"secret\"],"
     "\"properties\":{\"secret\":{\"type\":\"string\",\"pattern\":\"^tsk_\"}}}]}}}"},
    {"Reservation",
     "{\"type\":\"object\",\"required\":[\"name\",\"nodes\",\"start\",\"end\","
     "\"tenant\",\"users\",\"maintenance\",\"created\",\"state\"],"
     "\"properties\":{\"name\":{\"type\":\"string\"},\"nodes\":{\"type\":\"string\"},"
     "\"start\":{\"type\":\"number\"},\"end\":{\"type\":\"number\"},"
     "\"tenant\":{\"type\":[\"string\",\"null\"]},\"users\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"}},\"maintenance\":{\"type\":\"boolean\"},"
     "\"created\":{\"type\":\"number\"},\"state\":{\"type\":\"string\","
     "\"enum\":[\"waiting\",\"active\",\"ended\"]}}}"},
    {"ReservationList",
     "{\"type\":\"object\",\"required\":[\"reservations\"],"
     "\"properties\":{\"reservations\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Reservation\"}}}}"},
    {"ReservationRequest",
     "{\"type\":\"object\",\"required\":[\"name\",\"nodes\",\"start\"],"
     "\"additionalProperties\":false,\"properties\":{\"name\":{\"type\":\"string\","
     "\"pattern\":\"^[A-Za-z0-9._-]{1,63}$\"},\"nodes\":{\"type\":\"string\","
     "\"examples\":[\"r-[1-2]\"]},\"start\":{\"type\":[\"number\",\"string\"],"
     "\"examples\":[\"10s\",\"2027-01-31T12:00:00Z\"]},\"duration\":{\"type\":"
     "[\"number\",\"string\"],\"examples\":[\"2h\"]},\"end\":{\"type\":[\"number\","
     "\"string\"]},\"tenant\":{\"type\":[\"string\",\"null\"]},\"users\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"string\"}},\"maintenance\":{\"type\":"
     "\"boolean\"}},\"examples\":[{\"name\":\"train-a\",\"nodes\":\"r-1\","
     "\"start\":\"1h\",\"duration\":\"2h\",\"tenant\":\"team-a\"}]}"},
    {"ReservationCreated",
     "{\"type\":\"object\",\"required\":[\"reservation\"],"
     "\"properties\":{\"reservation\":{\"$ref\":\"#/components/schemas/Reservation\"}}}"},
    {"Whoami",
     "{\"type\":\"object\",\"required\":[\"name\",\"role\",\"tenant\",\"unix_user\",\"uid\","
     "\"expires\"],\"properties\":{\"name\":{\"type\":\"string\"},"
     "\"role\":{\"type\":\"string\"},\"tenant\":{\"type\":[\"string\",\"null\"]},"
     "\"unix_user\":{\"type\":[\"string\",\"null\"]},\"uid\":{\"type\":[\"integer\","
     "\"null\"]},\"expires\":{\"type\":[\"number\",\"null\"]}}}"},
    {"Secret",
     "{\"type\":\"object\",\"required\":[\"name\",\"scope\"],"
     "\"properties\":{\"name\":{\"type\":\"string\"},\"scope\":{\"type\":\"string\","
     "\"enum\":[\"user\",\"tenant\"]}}}"},
    {"SecretList",
     "{\"type\":\"object\",\"required\":[\"secrets\"],"
     "\"properties\":{\"secrets\":{\"type\":\"array\","
     "\"items\":{\"$ref\":\"#/components/schemas/Secret\"}}}}"},
    {"SecretRequest",
     "{\"type\":\"object\",\"required\":[\"value\"],"
     "\"additionalProperties\":false,\"properties\":{\"value\":{\"type\":\"string\"},"
     "\"scope\":{\"type\":\"string\",\"enum\":[\"user\",\"tenant\"]},"
     "\"tenant\":{\"type\":\"string\"}},\"examples\":[{\"value\":\"s3cr3t\","
     "\"scope\":\"user\"}]}"},
    {"SecretSet",
     "{\"type\":\"object\",\"required\":[\"secret\"],"
     "\"properties\":{\"secret\":{\"$ref\":\"#/components/schemas/Secret\"}}}"},
    {"SecretEvents",
     "{\"type\":\"object\",\"required\":[\"events\",\"next_cursor\"],"
     "\"properties\":{\"events\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
     "\"next_cursor\":{\"$ref\":\"#/components/schemas/Cursor\"}}}"},
    {"AgentMessage",
     "{\"type\":\"object\",\"description\":\"docs/agent-protocol.md: register carries "
     "discovery, sync gen and health; both carry what runs\",\"required\":[\"node\"],"
     "\"properties\":{\"node\":{\"type\":\"string\"},\"gen\":{\"type\":\"integer\"},"
     "\"discovery\":{\"$ref\":\"#/components/schemas/Discovery\"},"
     "\"health\":{\"$ref\":\"#/components/schemas/NodeHealth\"},"
     "\"tasks\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
     "\"job\":{\"type\":\"integer\"},\"rank\":{\"type\":\"integer\"},"
     "\"state\":{\"type\":\"string\"}}}},\"logs\":{\"type\":\"array\"},"
     "\"wait_s\":{\"type\":\"number\"},\"images\":{\"type\":\"array\",\"description\":"
     "\"the image store: digest, refs, bytes of each image\",\"items\":{\"type\":"
     "\"object\"}}}}"},
    {"AgentReply",
     "{\"type\":\"object\",\"description\":\"docs/agent-protocol.md\"}"},
    {"P2PAnnounce",
     "{\"type\":\"object\",\"description\":\"docs/images.md Peer-to-peer: have holds one "
     "0 or 1 per piece of 4 MiB\",\"required\":[\"node\",\"url\",\"blob\",\"size\","
     "\"have\"],\"properties\":{\"node\":{\"type\":\"string\"},\"url\":{\"type\":"
     "\"string\"},\"blob\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
     "\"have\":{\"type\":\"string\"},\"hashes\":{\"type\":\"object\"},\"bad\":{"
     "\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"missing\":{"
     "\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"fetching\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"integer\"}}}}"},
    {"P2PAnswer",
     "{\"type\":\"object\",\"required\":[\"piece_bytes\",\"peers\",\"hashes\","
     "\"grant\",\"token\",\"key\"],\"properties\":{\"piece_bytes\":{\"type\":"
     "\"integer\"},\"peers\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
     "\"hashes\":{\"type\":\"array\"},\"grant\":{\"type\":\"integer\"},\"token\":{"
     "\"type\":\"string\"},\"key\":{\"type\":\"string\"},\"granted\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"object\"}}}}"},
    {"P2PLive",
     "{\"type\":\"object\",\"description\":\"docs/images.md Peer-to-peer: a node "
     "serving pieces is alive\",\"required\":[\"node\",\"url\"],\"properties\":{"
     "\"node\":{\"type\":\"string\"},\"url\":{\"type\":\"string\"}}}"},
    {"P2PLiveAnswer",
     "{\"type\":\"object\",\"required\":[\"holder\",\"every_ms\"],\"properties\":{"
     "\"holder\":{\"type\":\"boolean\"},\"every_ms\":{\"type\":\"integer\"}}}"},
    {"OpenAPI",
     "{\"type\":\"object\",\"required\":[\"openapi\",\"paths\"]}"},
    {"Text",
     "{\"type\":\"string\"}"},
};

/* The error answers: status, what it means here. */
static const struct {
    int status;
    const char *meaning;
} ERRORS[] = {
    {400, "Bad input: the message names the field (or parameter) and the reason"},
    {401, "No token, or one that is unknown, revoked or expired"},
    {403, "The caller's role or tenant may not do this"},
    {404, "No such object (or one the caller may not see)"},
    {405, "The path exists but not with this method (the Allow header lists those it has)"},
    {409, "The object's state does not allow it"},
    {413, "The request body is larger than the controller accepts"},
    {422, "Idempotency-Key already used for another body"},
    {429, "Rate, connection or queue limit (Retry-After where a wait helps)"},
    {502, "The node's agent did not answer as it should"},
    {503, "Store unavailable, or the controller is starting or stopping"},
    {504, "The agent or the store took too long"},
};

/* Every operation with a token may answer these. */
static const int TOKEN_ERRORS[] = {400, 401, 403, 404, 413, 429, 503};

static json_t *param(const char *name, const char *in, bool required, json_t *schema)
{
    return json_pack("{s:s,s:s,s:b,s:o}", "name", name, "in", in, "required", required,
                     "schema", schema);
}

static json_t *limit_schema(void)
{
    return json_pack("{s:s,s:i,s:i}", "type", "integer", "minimum", 1, "maximum", 1000);
}

static json_t *cursor_schema(void)
{
    return json_pack("{s:s,s:s,s:i}", "type", "string", "pattern", "^(0|[1-9][0-9]*)$",
                     "maxLength", 19);
}

/* The query parameters and headers an operation reads (ctld_query). */
static void add_query(const ctld_route_def *rt, json_t *params)
{
    const char *id = rt->op_id;
    if (strcmp(id, "submitJob") == 0)
        json_array_append_new(params,
                              param("Idempotency-Key", "header", false,
                                    json_pack("{s:s,s:i,s:i,s:s}", "type", "string", "minLength",
                                              1, "maxLength", 255, "pattern", "^[!-~]+$")));
    bool acct = strcmp(id, "listAcct") == 0;
    if (strcmp(id, "listJobs") == 0 || acct) {
        json_array_append_new(params, param("tenant", "query", false, json_pack("{s:s}", "type",
                                                                                "string")));
        json_array_append_new(params, param("owner", "query", false, json_pack("{s:s}", "type",
                                                                               "string")));
        /* one state or several joined by commas (ctld_states_of) */
#define STATE_RE "(pending|held|running|stopping|completed|failed|cancelled|timeout)"
        json_array_append_new(
            params, param("state", "query", false,
                          json_pack("{s:s,s:s}", "type", "string", "pattern",
                                    "^" STATE_RE "(," STATE_RE ")*$")));
#undef STATE_RE
    }
    if (strcmp(id, "listJobs") == 0 || strcmp(id, "listJobEvents") == 0 ||
        strcmp(id, "listSecretEvents") == 0 || acct) {
        json_array_append_new(params, param("limit", "query", false, limit_schema()));
        json_array_append_new(params, param("cursor", "query", false, cursor_schema()));
    }
    if (strcmp(id, "getJobLogs") == 0) {
        json_array_append_new(params, param("rank", "query", false,
                                            json_pack("{s:s,s:i}", "type", "integer", "minimum",
                                                      0)));
        json_array_append_new(params, param("stream", "query", false,
                                            json_pack("{s:s,s:[ss]}", "type", "string", "enum",
                                                      "stdout", "stderr")));
        json_array_append_new(params, param("tail", "query", false,
                                            json_pack("{s:s,s:i}", "type", "integer", "minimum",
                                                      1)));
        json_array_append_new(params, param("offset", "query", false,
                                            json_pack("{s:s,s:i}", "type", "integer", "minimum",
                                                      0)));
    }
    if (strcmp(id, "listJobs") == 0) /* newest: by id descending, the cursor lists below */
        json_array_append_new(params, param("order", "query", false,
                                            json_pack("{s:s,s:[ss]}", "type", "string", "enum",
                                                      "oldest", "newest")));
    if (strcmp(id, "listJobSteps") == 0)
        json_array_append_new(params, param("step", "query", false,
                                            json_pack("{s:s,s:i,s:i}", "type", "integer",
                                                      "minimum", 0, "maximum", 4096)));
    if (acct)
        json_array_append_new(params, param("steps", "query", false,
                                            json_pack("{s:s,s:[ss]}", "type", "string", "enum",
                                                      "true", "false")));
    if (acct)
        json_array_append_new(params, param("format", "query", false,
                                            json_pack("{s:s,s:[ss]}", "type", "string", "enum",
                                                      "json", "csv")));
    if (strcmp(id, "getUsage") == 0 || acct)
        for (int k = 0; k < 2; k++)
            json_array_append_new(params, param(k ? "to" : "from", "query", false,
                                                json_pack("{s:s,s:i,s:f}", "type", "number",
                                                          "minimum", 0, "maximum", 1e11)));
    if (strncmp(rt->pattern, "/v1/secrets", 11) == 0 && strcmp(rt->method, "PUT") != 0)
        json_array_append_new(params, param("tenant", "query", false, json_pack("{s:s}", "type",
                                                                                "string")));
    if (strcmp(id, "deleteSecret") == 0)
        json_array_append_new(params, param("scope", "query", false,
                                            json_pack("{s:s,s:[ss]}", "type", "string", "enum",
                                                      "user", "tenant")));
}

static json_t *ref(const char *kind, const char *name)
{
    char buf[128];
    snprintf(buf, sizeof buf, "#/components/%s/%s", kind, name);
    return json_pack("{s:s}", "$ref", buf);
}

static json_t *content(const char *schema)
{
    if (strcmp(schema, "AcctRows") == 0) /* ?format=csv: the same rows as RFC 4180 CSV */
        return json_pack("{s:{s:o},s:{s:{s:s}}}", "application/json", "schema",
                         ref("schemas", schema), "text/csv", "schema", "type", "string");
    if (strcmp(schema, "Text") == 0)
        return json_pack("{s:{s:o}}", "text/plain", "schema", ref("schemas", schema));
    return json_pack("{s:{s:o}}", "application/json", "schema", ref("schemas", schema));
}

/* Links: where an answer's values feed the next operation (the stateful
 * phase of a property-based tester follows them). */
static void add_links(const ctld_route_def *rt, json_t *ok)
{
    static const struct {
        const char *from, *to, *param, *value;
    } LINKS[] = {
        {"submitJob", "getJob", "id", "$response.body#/jobs/0/id"},
        {"submitJob", "cancelJob", "id", "$response.body#/jobs/0/id"},
        {"submitJob", "holdJob", "id", "$response.body#/jobs/0/id"},
        {"submitJob", "listJobEvents", "id", "$response.body#/jobs/0/id"},
        {"submitJob", "explainJob", "id", "$response.body#/jobs/0/id"},
        {"submitJob", "getJobLogs", "id", "$response.body#/jobs/0/id"},
        {"submitJob", "listJobSteps", "id", "$response.body#/jobs/0/id"},
        {"holdJob", "releaseJob", "id", "$response.body#/job/id"},
        {"getJob", "cancelJob", "id", "$response.body#/job/id"},
        {"createToken", "revokeToken", "name", "$response.body#/token/name"},
        {"setSecret", "deleteSecret", "name", "$request.path.name"},
        {"listNodes", "getNode", "name", "$response.body#/nodes/0/name"},
    };
    json_t *links = NULL;
    for (size_t i = 0; i < sizeof LINKS / sizeof LINKS[0]; i++) {
        if (strcmp(LINKS[i].from, rt->op_id) != 0)
            continue;
        if (!links)
            links = json_object();
        char name[64];
        snprintf(name, sizeof name, "%c%s", toupper((unsigned char)LINKS[i].to[0]),
                 LINKS[i].to + 1);
        json_object_set_new(links, name,
                            json_pack("{s:s,s:{s:s}}", "operationId", LINKS[i].to, "parameters",
                                      LINKS[i].param, LINKS[i].value));
    }
    if (links)
        json_object_set_new(ok, "links", links);
}

/* A {name}: a token's and a secret's as their handlers check them
 * (docs/api.md "Limits on input"), a node's as the cluster file allows. */
static json_t *name_schema(const char *pattern)
{
    if (strncmp(pattern, "/v1/tokens/", 11) == 0)
        return json_pack("{s:s,s:s}", "type", "string", "pattern",
                         "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$");
    if (strncmp(pattern, "/v1/secrets/", 12) == 0)
        return json_pack("{s:s,s:s}", "type", "string", "pattern", "^[A-Za-z_][A-Za-z0-9_]{0,62}$");
    return json_pack("{s:s,s:i,s:i}", "type", "string", "minLength", 1, "maxLength", 63);
}

static json_t *operation(const ctld_route_def *rt)
{
    json_t *params = json_array();
    if (strstr(rt->pattern, "{id}"))
        json_array_append_new(params, param("id", "path", true,
                                            json_pack("{s:s,s:i,s:I}", "type", "integer",
                                                      "minimum", 1, "maximum",
                                                      (json_int_t)INT64_MAX)));
    if (strstr(rt->pattern, "{name}"))
        json_array_append_new(params, param("name", "path", true, name_schema(rt->pattern)));
    add_query(rt, params);
    json_t *responses = json_object();
    char code[16];
    snprintf(code, sizeof code, "%d", rt->ok);
    json_t *ok = json_pack("{s:s}", "description", "OK");
    if (rt->response)
        json_object_set_new(ok, "content", content(rt->response));
    add_links(rt, ok);
    json_object_set_new(responses, code, ok);
    /* the extra statuses of this row, then the common ones */
    for (const char *p = rt->errors; p && *p;) {
        int st = 0;
        while (*p == ' ')
            p++;
        while (*p >= '0' && *p <= '9')
            st = st * 10 + (*p++ - '0');
        if (!st)
            break;
        snprintf(code, sizeof code, "%d", st);
        if (st < 400) { /* another success with the same body (a replay, a replace) */
            json_t *alt = json_pack("{s:s}", "description", "OK");
            if (rt->response)
                json_object_set_new(alt, "content", content(rt->response));
            json_object_set_new(responses, code, alt);
        } else if (rt->response && strcmp(rt->response, "Text") == 0) {
            json_object_set_new(responses, code, json_pack("{s:s,s:{s:{s:{s:s}}}}",
                                                           "description", "Not ready",
                                                           "content", "text/plain", "schema",
                                                           "type", "string"));
        } else {
            json_object_set_new(responses, code, ref("responses", code));
        }
    }
    if (rt->roles != CTLD_ROLES_PUBLIC)
        for (size_t i = 0; i < sizeof TOKEN_ERRORS / sizeof TOKEN_ERRORS[0]; i++) {
            snprintf(code, sizeof code, "%d", TOKEN_ERRORS[i]);
            if (!json_object_get(responses, code))
                json_object_set_new(responses, code, ref("responses", code));
        }
    json_t *o = json_pack("{s:s,s:s,s:o,s:o}", "operationId", rt->op_id, "summary", rt->summary,
                          "parameters", params, "responses", responses);
    if (rt->request)
        json_object_set_new(o, "requestBody",
                            json_pack("{s:b,s:o}", "required", 1, "content",
                                      content(rt->request)));
    if (rt->roles != CTLD_ROLES_PUBLIC)
        json_object_set_new(o, "security", json_pack("[{s:[]}]", "bearer"));
    else
        json_object_set_new(o, "security", json_array());
    return o;
}

json_t *ctld_openapi(void)
{
    size_t n;
    const ctld_route_def *t = ctld_routes(&n);
    json_t *paths = json_object();
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object_get(paths, t[i].pattern);
        if (!p) {
            p = json_object();
            json_object_set_new(paths, t[i].pattern, p);
        }
        char m[8];
        size_t k = 0;
        for (; t[i].method[k] && k < sizeof m - 1; k++)
            m[k] = (char)tolower((unsigned char)t[i].method[k]);
        m[k] = '\0';
        json_object_set_new(p, m, operation(&t[i]));
    }
    json_t *errors = json_object();
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++) {
        char code[16];
        snprintf(code, sizeof code, "%d", ERRORS[i].status);
        json_t *r = json_pack("{s:s,s:o}", "description", ERRORS[i].meaning, "content",
                              content("Error"));
        if (ERRORS[i].status == 405)
            json_object_set_new(r, "headers", json_pack("{s:{s:s,s:{s:s}}}", "Allow",
                                                        "description", "the path's methods",
                                                        "schema", "type", "string"));
        if (ERRORS[i].status == 429)
            json_object_set_new(r, "headers", json_pack("{s:{s:s,s:{s:s}}}", "Retry-After",
                                                        "description", "seconds to wait",
                                                        "schema", "type", "string"));
        json_object_set_new(errors, code, r);
    }
    json_t *schemas = json_object();
    for (size_t i = 0; i < sizeof SCHEMAS / sizeof SCHEMAS[0]; i++) {
        json_error_t je;
        json_t *one = json_loads(SCHEMAS[i].json, 0, &je);
        assert(one); /* a literal of this file: tested by ctld/openapi */
        json_object_set_new(schemas, SCHEMAS[i].name, one);
    }
    /* the agent's documents, from the codec's member tables (src/proto) */
    json_object_set_new(schemas, "Discovery", ts_discovery_schema());
    json_object_set_new(schemas, "NodeHealth", ts_node_health_schema());
    return json_pack("{s:s,s:{s:s,s:s,s:s},s:o,s:{s:{s:{s:s,s:s}},s:o,s:o}}", "openapi",
                     "3.1.0", "info", "title", "Tessera controller API", "version", "1",
                     "description", "docs/api.md. A path the API does not have answers 404; "
                     "a path it has with another method answers 405 with Allow.",
                     "paths", paths, "components", "securitySchemes", "bearer", "type", "http",
                     "scheme", "bearer", "responses", errors, "schemas",
                     schemas);
}
