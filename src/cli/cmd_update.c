/*
 * cmd_update.c - `tessera update`: changes a job after its submission
 * (PATCH /v1/jobs/{id}, docs/cli.md "update"), in tessera's flags or in
 * Slurm's `scontrol update job` words (JobId=5 TimeLimit=1:00:00
 * NumTasks=2 Dependency=afterok:4). Values are sent as given: the server
 * checks them as it checks a submission and names the field it refuses.
 * Slurm's TimeLimit is read with sbatch's time formats and sent in seconds.
 */
#include "cli/cli.h"
#include "tessera/sbatch.h"
#include "tessera/spec.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define UPDATE_WORDS_MAX 8 /* JOB and Slurm KEY=VALUE words */
#define SECONDS_PER_MINUTE 60

/* Sets one field of body from an integer flag value; false after a usage error. */
static bool put_count(const struct cli_cmd *cmd, json_t *body, const char *field,
                      const char *flag, const char *v, long lo, int *rc)
{
    long n;
    if (!cli_parse_long(v, lo, INT_MAX, &n)) {
        *rc = cli_usage_error(cmd, "%s must be an integer %ld.., got '%s'", flag, lo, v);
        return false;
    }
    json_object_set_new(body, field, json_integer(n));
    return true;
}

/* A nice value (Slurm's: positive lowers the job's priority). */
static bool put_nice(const struct cli_cmd *cmd, json_t *body, const char *flag, const char *v,
                     int *rc)
{
    long n;
    if (!cli_parse_long(v, TS_SPEC_NICE_MIN, TS_SPEC_NICE_MAX, &n)) {
        *rc = cli_usage_error(cmd, "%s must be an integer %d..%d, got '%s'", flag,
                              TS_SPEC_NICE_MIN, TS_SPEC_NICE_MAX, v);
        return false;
    }
    json_object_set_new(body, "nice", json_integer(n));
    return true;
}

/* Slurm's TimeLimit (minutes, HH:MM:SS, D-HH...) as seconds. */
static bool put_slurm_time(const struct cli_cmd *cmd, json_t *body, const char *v, int *rc)
{
    int64_t min = ts_sbatch_time_min(v);
    if (min <= 0) {
        *rc = cli_usage_error(cmd, "TimeLimit must be a Slurm time (minutes, HH:MM:SS, "
                              "D-HH:MM...) above 0, got '%s'", v);
        return false;
    }
    json_object_set_new(body, "time_limit", json_integer(min * SECONDS_PER_MINUTE));
    return true;
}

static void put_dependency(json_t *body, const char *v)
{
    bool none = !*v || strcasecmp(v, "none") == 0;
    json_object_set_new(body, "dependency", none ? json_null() : json_string(v));
}

/* One Slurm "Key=Value" word of scontrol update into body (JobId into *job). */
static bool put_slurm_word(const struct cli_cmd *cmd, json_t *body, const char *w,
                           const char **job, int *rc)
{
    const char *eq = strchr(w, '=');
    if (!eq) {
        *rc = cli_usage_error(cmd, "'%s': expected KEY=VALUE (JobId, TimeLimit, NumTasks, "
                              "Gres, Priority, Nice, Dependency)", w);
        return false;
    }
    size_t kl = (size_t)(eq - w);
    const char *v = eq + 1;
#define KEY_IS(k) (kl == strlen(k) && strncasecmp(w, k, kl) == 0)
    if (KEY_IS("JobId") || KEY_IS("Job")) {
        *job = v;
        return true;
    }
    if (KEY_IS("TimeLimit"))
        return put_slurm_time(cmd, body, v, rc);
    if (KEY_IS("NumTasks"))
        return put_count(cmd, body, "tasks", "NumTasks", v, 1, rc);
    if (KEY_IS("Dependency")) {
        put_dependency(body, v);
        return true;
    }
    if (KEY_IS("Nice"))
        return put_nice(cmd, body, "Nice", v, rc);
    if (KEY_IS("Priority") || KEY_IS("PriorityClass")) {
        json_object_set_new(body, "priority_class", json_string(v));
        return true;
    }
    if (KEY_IS("Gres") || KEY_IS("TresPerTask")) { /* gpu:N or gres/gpu:N, per task */
        const char *n = strrchr(v, ':');
        return put_count(cmd, body, "gpus", "Gres", n ? n + 1 : v, 0, rc);
    }
#undef KEY_IS
    *rc = cli_usage_error(cmd, "'%.*s': not a key tessera updates (JobId, TimeLimit, NumTasks, "
                          "Gres, Priority, Nice, Dependency)", (int)kl, w);
    return false;
}

int cli_cmd_update(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *limit = NULL, *tasks = NULL, *gpus = NULL, *prio = NULL, *dep = NULL;
    const char *nice = NULL;
    bool hold = false, release = false;
    const struct cli_opt opts[] = {{"time-limit", 't', &limit, NULL},
                                   {"tasks", 'n', &tasks, NULL},
                                   {"gpus", 0, &gpus, NULL},
                                   {"priority", 0, &prio, NULL},
                                   {"nice", 0, &nice, NULL},
                                   {"dependency", 'd', &dep, NULL},
                                   {"hold", 0, NULL, &hold},
                                   {"release", 0, NULL, &release},
                                   {NULL, 0, NULL, NULL}};
    const char *pos[UPDATE_WORDS_MAX] = {0};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, pos, 1, UPDATE_WORDS_MAX);
    if (rc != CLI_CONTINUE)
        return rc;
    json_t *body = json_object();
    const char *job = NULL;
    for (int i = 0; i < UPDATE_WORDS_MAX && pos[i]; i++) {
        /* "job" as scontrol's first word; a bare number is the job */
        if (i == 0 && strcasecmp(pos[i], "job") == 0)
            continue;
        if (!strchr(pos[i], '=') && !job) {
            job = pos[i];
            continue;
        }
        if (!put_slurm_word(cmd, body, pos[i], &job, &rc)) {
            json_decref(body);
            return rc;
        }
    }
    bool ok = true;
    if (limit)
        json_object_set_new(body, "time_limit", json_string(limit));
    if (tasks)
        ok = put_count(cmd, body, "tasks", "--tasks", tasks, 1, &rc);
    if (ok && gpus)
        ok = put_count(cmd, body, "gpus", "--gpus", gpus, 0, &rc);
    if (ok && prio)
        json_object_set_new(body, "priority_class", json_string(prio));
    if (ok && nice)
        ok = put_nice(cmd, body, "--nice", nice, &rc);
    if (ok && dep)
        put_dependency(body, dep);
    if (ok && hold && release)
        ok = (rc = cli_usage_error(cmd, "--hold and --release exclude each other")) == 0;
    if (ok && (hold || release))
        json_object_set_new(body, "hold", json_boolean(hold));
    long id;
    if (ok && !job)
        ok = (rc = cli_usage_error(cmd, "the job's id is required (ID or JobId=ID)")) == 0;
    if (ok && (rc = cli_job_id(cmd, job, &id)) != CLI_CONTINUE)
        ok = false;
    if (ok && json_object_size(body) == 0)
        ok = (rc = cli_usage_error(cmd, "nothing to change: give --time-limit, --tasks, "
                                   "--gpus, --priority, --nice, --dependency, --hold or "
                                   "--release")) == 0;
    if (!ok) {
        json_decref(body);
        return rc;
    }
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%ld", id);
    struct cli_resp resp;
    json_t *j;
    rc = cli_send_member(ctx, "PATCH", path, body, "job", JSON_OBJECT, &resp, &j);
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, resp.json)) {
        char state[CLI_CELL_MAX];
        printf("job %ld: updated (%s)\n", id, cli_str(j, "state", state, sizeof state));
    }
    cli_resp_free(&resp);
    return rc;
}
