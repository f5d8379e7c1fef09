/*
 * main.c - `tessera`, the command-line client of tesserad: the command
 * table, global help and the dispatch to cmd_*.c.
 *
 *   tessera [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]
 *
 * Each command is one row of COMMANDS: its synopsis, its help and the
 * function that runs it; two-word commands ("quota set", "tokens create")
 * are rows of their own and win over their one-word prefix. The exit code
 * is the command's, except that output which could not be written (a full
 * disk, a closed pipe) turns success into CLI_EXIT_LOCAL: a script must
 * never take a truncated listing for a whole one.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

static const struct cli_cmd COMMANDS[] = {
    {"submit", "submit -f FILE [--idempotency-key K] | submit SCRIPT (as sbatch)",
     "Submits the job spec in FILE (YAML or JSON; '-' reads stdin) as it is and prints\n"
     "the id of every job it created, one a line. Without -f, submits a Slurm batch\n"
     "script as 'sbatch' does. A random idempotency key is sent\n"
     "unless given, so re-running a submit that timed out with the same --idempotency-key\n"
     "cannot create the jobs twice.\n\n"
     "  -f, --file FILE          the spec; .json is sent as JSON, .yaml/.yml as YAML,\n"
     "                           anything else by its first character\n"
     "  --idempotency-key K      the key of this submission",
     cli_cmd_submit},
    {"sbatch", "sbatch [--tenant T] [--slurm-map F] [--dry-run] [OPTIONS] SCRIPT [ARGS] | --wrap=CMD",
     "Submits a Slurm batch script: its #SBATCH lines and the sbatch OPTIONS given here\n"
     "(which override them) become a job spec (docs/slurm.md). Prints the job ids, one a\n"
     "line; '" CLI_PROG " submit SCRIPT' does the same. Options after SCRIPT are its own.\n\n"
     "  --tenant T          the tenant, instead of --account / --partition\n"
     "  --slurm-map F       names mapped to tiers and tenants (else $TESSERA_SLURM_MAP,\n"
     "                      else ~/.config/tessera/slurm-map if present)\n"
     "  --dry-run           print the spec and its interpretation; submit nothing\n"
     "  --idempotency-key K the key of this submission\n"
     "  -o, -e here are sbatch's --output / --error; give tessera's -o before the command",
     cli_cmd_sbatch},
    {"steps run", "steps run [-n N] [-N N] [--ntasks-per-node N] [-l] CMD [ARGS]",
     "Inside a batch job's script (what the `srun` on its PATH runs, with srun's\n"
     "options): runs CMD as a step in the job's own tasks through the controller,\n"
     "prints their output when the step ends and exits with its status (the tasks'\n"
     "highest). docs/slurm.md, \"Steps\".",
     cli_cmd_srun},
    {"steps", "steps ID",
     "Lists a job's steps (srun in its script), as sacct's JOB.STEP rows: state, exit\n"
     "status, tasks, nodes, start, elapsed, GPU-seconds and command.",
     cli_cmd_steps},
    {"jobs", "jobs [--tenant T] [--state S] [--owner O] [--limit N] [--all]",
     "Lists jobs the token may see, newest first as the server orders them.\n\n"
     "  --tenant T, --state S, --owner O   only those jobs\n"
     "  --limit N                          jobs per page, 1..1000 (server default 100)\n"
     "  --all                              follow the pages to the end",
     cli_cmd_jobs},
    {"show", "show ID", "Shows one job: state, times, reason and placement.", cli_cmd_show},
    {"cancel", "cancel ID... (ID, ARRAY_ID, ARRAY_ID_INDEX or ARRAY_ID[INDEX])\n"
     "       tessera cancel [-u USER] [-n NAME] [-t STATE] [--array ID] [--tenant T]",
     "Cancels a job (stops it if running). An array's id (its first element's, as\n"
     "TESSERA_ARRAY_JOB_ID shows it) cancels every element still active, as Slurm's\n"
     "scancel; ID_INDEX or ID[INDEX] cancels that element only; several ids, each.\n"
     "With filters instead of ids it cancels, in one call, every active job they all\n"
     "match that the caller may see (an admin's: across tenants), as scancel -u/--name/--state:\n\n"
     "  -u, --user USER    submitted by token USER\n"
     "  -n, --name NAME    named NAME (an array NAME's elements too)\n"
     "  -t, --state STATE  pending, held, running or stopping\n"
     "  --array ID         elements of the array ID\n"
     "  --tenant T         of tenant T (admin)",
     cli_cmd_cancel},
    {"hold", "hold ID... (ID, ARRAY_ID, ARRAY_ID_INDEX or ARRAY_ID[INDEX])",
     "Holds pending jobs: the scheduler skips each (reason 'held') until released. An\n"
     "array's id holds every pending element, as Slurm's scontrol hold; ID_INDEX one.\n"
     "Every ID is tried; the exit code is the last failure's.",
     cli_cmd_job_action},
    {"release", "release ID... (as hold)", "Releases held jobs (an array's id: every element).",
     cli_cmd_job_action},
    {"update", "update ID [--time-limit D] [--tasks N] [--gpus N] [--priority CLASS]\n"
     "       [--nice N] [--dependency DEP] [--hold | --release]\n"
     "       tessera update [job] JobId=ID [TimeLimit=T] [NumTasks=N] [Gres=gpu:N]\n"
     "       [Priority=CLASS] [Nice=N] [Dependency=DEP]",
     "Changes a job (as Slurm's scontrol update job): a pending or held job's time limit,\n"
     "size, priority class or dependency, checked as a submission is; a running job may\n"
     "only lower its time limit. A user may lower its job's class; raising it is for its\n"
     "tenant's admins.\n\n"
     "  -t, --time-limit D   a duration as in the spec (90m, 2h, 3600)\n"
     "  -n, --tasks N        tasks of its one task group\n"
     "  --gpus N             GPUs per task of its one task group\n"
     "  --priority CLASS     a priority class of the configuration\n"
     "  --nice N             taken from its class's priority (-10000..10000; below 0\n"
     "                       for the tenant's admins), as Slurm's nice\n"
     "  -d, --dependency DEP afterok:ID... as sbatch --dependency; '' or none: no longer\n"
     "  --hold, --release    hold it, or release it\n"
     "  Slurm's TimeLimit takes its time forms (minutes, HH:MM:SS, D-HH:MM)",
     cli_cmd_update},
    {"requeue", "requeue ID", "Stops a job and puts it back in the queue.", cli_cmd_job_action},
    {"explain", "explain ID",
     "Says why a job waits: its reason, the scheduler's explanation and the time its\n"
     "reservation starts, if it has one.",
     cli_cmd_explain},
    {"events", "events ID", "Lists a job's events, oldest first (all pages).", cli_cmd_events},
    {"logs", "logs ID [--rank N] [--stderr] [--tail BYTES] [-f|--follow]",
     "Prints a task's output: fetched from its node's agent while the job runs, else\n"
     "the last 4 KiB its agent reported when the task ended.\n\n"
     "  --rank N       the rank (default 0)\n"
     "  --stderr       standard error instead of standard output\n"
     "  --tail BYTES   how much from the end, 1..1048576 (default 65536)\n"
     "  -f, --follow   then print new output as it comes (polled each second), waiting\n"
     "                 while the job is pending, until the job ends (exit 0); Ctrl-C\n"
     "                 stops (exit 130)",
     cli_cmd_logs},
    {"run", "run [--tenant T] [--gpus N] [--name N] [--idle D] [-f SPEC] [-T] -- COMMAND [ARGS...]",
     "Submits an interactive job (allocated like any job: quotas, tiers, topology,\n"
     "preemption) whose rank 0 runs COMMAND with this terminal (a PTY on the node:\n"
     "raw keys, ^C, window size) or, without one, with stdin/stdout streamed; waits\n"
     "for it to start, attaches, and exits with the job's exit status. Everything\n"
     "goes through the controller (docs/interactive.md).\n\n"
     "  --tenant T       the tenant (default: the token's)\n"
     "  --gpus N         GPUs for the task, 0..64 (default 0)\n"
     "  --name N, --tier T, --time-limit D, --image REF   as in the job spec\n"
     "  --idle D         idle.timeout: reaped (stopped, held) when its GPUs idle this long\n"
     "  -f FILE          start from this JSON job spec\n"
     "  -T, --no-tty     stream stdin/stdout even on a terminal",
     cli_cmd_run},
    {"srun", "srun [--pty] [SLURM JOB OPTIONS] [run's flags] COMMAND [ARGS...]",
     "The same as run, read as Slurm's srun: --pty (a terminal is the default where\n"
     "there is one), Slurm's job options as tessera sbatch reads them (-p, -A, -t,\n"
     "-c, --mem, -J, --gres=gpu:[TYPE:]N, -N 1, -n 1, ...: one task), and the command\n"
     "from the first word on (no --): tessera srun -p gpu -t 60 --gres=gpu:1 --pty bash.",
     cli_cmd_run},
    {"salloc", "salloc [SLURM JOB OPTIONS] [run's flags] COMMAND [ARGS...]",
     "The same as srun: an allocation whose first task runs COMMAND (no shell is\n"
     "assumed: name it, e.g. tessera salloc bash), a Slurm job: SLURM_* variables set\n"
     "and srun running steps in it.", cli_cmd_run},
    {"exec", "exec JOB [RANK] [-T] -- COMMAND [ARGS...]",
     "Runs COMMAND in a running task (default rank 0): its cgroup, namespaces, user,\n"
     "working directory and environment; on a PTY when this is a terminal (-T: never);\n"
     "exits with COMMAND's exit status.",
     cli_cmd_exec},
    {"attach", "attach JOB",
     "Attaches this terminal to an interactive job's session (rank 0); exits with the\n"
     "job's exit status once it ends. One attach at a time.",
     cli_cmd_attach},
    {"port-forward", "port-forward JOB [RANK] LOCAL:REMOTE",
     "Listens on 127.0.0.1:LOCAL (0: any free port, printed) and relays each connection\n"
     "through the controller to 127.0.0.1:REMOTE in the task's network namespace\n"
     "(default rank 0), until interrupted.",
     cli_cmd_port_forward},
    {"nodes", "nodes", "Lists the nodes with free/total GPUs, CPU and memory.", cli_cmd_nodes},
    {"node", "node NAME", "Shows one node: resources, MIG instances, jobs and labels.",
     cli_cmd_node},
    {"drain", "drain NAME", "Drains a node: no new jobs are placed on it (admin).",
     cli_cmd_node_action},
    {"resume", "resume NAME",
     "Puts a drained node back in service (admin). Exits 4, saying why, when the node\n"
     "stays drained (its health still fails, no agent serves it).",
     cli_cmd_node_action},
    {"tenants", "tenants",
     "Lists the tenants: parent, weight, fair share (SHARE, decayed, as the scheduler\n"
     "orders them), share of what they use now (NOW), guarantee and usage.",
     cli_cmd_tenants},
    {"quota", "quota",
     "Shows each tenant's guaranteed GPUs next to the GPUs it uses, per GPU model.",
     cli_cmd_quota},
    {"quota set", "quota set -f TENANTS.yaml",
     "Replaces the tenants and their quotas with the file (docs/tenants-format.md; admin)\n"
     "and prints the result as 'quota' does.\n\n"
     "  -f, --file FILE   the tenants file (YAML or JSON; '-' reads stdin)",
     cli_cmd_quota_set},
    {"usage", "usage [--from WHEN] [--to WHEN]",
     "GPU-hours per tenant, tier and GPU model over a period.\n\n"
     "  --from WHEN, --to WHEN   YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (local, or with Z or\n"
     "                           +HH:MM), Unix seconds, 'now', or -7d / -12h / -30m",
     cli_cmd_usage},
    {"acct", "acct [--user U] [--tenant T] [--state S] [--from WHEN] [--to WHEN]\n"
     "           [--format table|csv|json] [--steps]",
     "One row per job that waited or ran in the period (default: all time): tenant,\n"
     "user, tier, GPU model, GPUs, state, exit code, times and the GPU-hours it used\n"
     "inside the period. A user sees its own jobs; a tenant-admin its tenant's.\n\n"
     "  -u, --user U     jobs submitted by token U\n"
     "  -t, --tenant T   jobs of tenant T\n"
     "  -s, --state S    pending, held, running, stopping, completed, failed,\n"
     "                   cancelled or timeout\n"
     "  --from WHEN, --to WHEN   as for 'usage'\n"
     "  --format F       table (default), csv (RFC 4180, every column) or json\n"
     "  --steps          each job's steps (srun in its script) after it, as sacct's\n"
     "                   JOB.STEP rows: state, exit code, start, elapsed, GPU-hours",
     cli_cmd_acct},
    {"shares", "shares [--since WHEN]",
     "Fair share by tenant and user (Slurm's sshare): each tenant's weight, decayed\n"
     "share (SHARE, what the scheduler orders tenants by), share now (NOW) and job\n"
     "order, then each of its users' GPU-hours since WHEN (default -7d) and their\n"
     "part of the tenant's. Rows are those the caller may see in 'acct'.\n\n"
     "  --since WHEN   as for 'usage' (default -7d, the default half-life)",
     cli_cmd_shares},
    {"prio", "prio [--tenant T]",
     "What orders the pending jobs (Slurm's sprio): each job's priority, its tenant's\n"
     "fair share and job order, its LAS level and attained GPU-hours, and its place\n"
     "in its tenant's queue and in the cluster's.\n\n"
     "  -t, --tenant T   pending jobs of tenant T only",
     cli_cmd_prio},
    {"reservation list", "reservation list",
     "Lists the reservations: nodes kept for a tenant's jobs (or, maintenance, for none)\n"
     "from START to END, and whether each is waiting, active or ended.",
     cli_cmd_resv_list},
    {"reservation create",
     "reservation create NAME --nodes HOSTS --start WHEN (--duration D | --end WHEN)\n"
     "    [--tenant T] [--users U1,U2] [--maintenance]",
     "Creates a reservation (admin): from --start to --end (or for --duration) only\n"
     "the jobs that name it (spec 'reservation: NAME', sbatch --reservation) start on\n"
     "its nodes, and no other job whose time limit runs into the window starts there.\n\n"
     "  -w, --nodes HOSTS  a host list (r-[1-4],r-7)\n"
     "  --start WHEN       Unix seconds, RFC 3339 or a duration from now (30s, 2h)\n"
     "  --duration D       its length (2h), or --end WHEN\n"
     "  -t, --tenant T     the tenant whose jobs may use it (required unless maintenance)\n"
     "  --users U1,U2      only these users of T\n"
     "  --maintenance      a maintenance window: it takes no jobs; its nodes drain ahead",
     cli_cmd_resv_create},
    {"reservation delete", "reservation delete NAME", "Deletes a reservation (admin).",
     cli_cmd_resv_delete},
    {"tokens", "tokens", "Lists the API tokens the caller may see.", cli_cmd_tokens},
    {"tokens create",
     "tokens create NAME --role ROLE [--tenant T] [--unix-user U --uid N] [--expires WHEN]",
     "Creates a token and prints its secret on stdout. The secret is shown only this\n"
     "once; store it now.\n\n"
     "  --role ROLE      admin, tenant-admin, user, viewer or node (a node agent's\n"
     "                   credential, named after its node)\n"
     "  --tenant T       the tenant it acts for (not for admin)\n"
     "  --unix-user U    the Unix user its jobs' tasks run as, with --uid N, the uid U has\n"
     "                   on every node (admin; a tenant-admin within its tenant's\n"
     "                   unix_users / uid_range). Without one its jobs cannot run tasks.\n"
     "  --expires WHEN   2027-01-31T12:00:00Z (RFC 3339) or a duration such as 90d",
     cli_cmd_tokens_create},
    {"login", "login --id-token FILE",
     "Signs in with an OpenID Connect ID token from FILE ('-' reads stdin): the server\n"
     "checks it, and it is kept (0600) in $XDG_CONFIG_HOME/tessera/id-token or\n"
     "~/.config/tessera/id-token, used when no --token, $TESSERA_TOKEN or config file\n"
     "token is given.",
     cli_cmd_login},
    {"tokens revoke", "tokens revoke NAME", "Revokes a token (admin).", cli_cmd_tokens_revoke},
    {"secrets", "secrets [--tenant T]",
     "Lists the secrets the caller may name in a job: names, scopes and times, never\n"
     "values (docs/secrets.md).\n\n"
     "  --tenant T   the tenant (admin only: other tokens read their own)",
     cli_cmd_secrets},
    {"secrets set", "secrets set NAME [--scope user|tenant] [--from-file F] [--tenant T]",
     "Sets a secret, encrypted by the controller and never shown again. The value is read\n"
     "from stdin (one final newline dropped) or from --from-file F (as is); never give it\n"
     "as an argument. A job names it in its spec: secrets: [NAME].\n\n"
     "  --scope S       user (default: yours alone) or tenant (tenant-admin, admin)\n"
     "  --from-file F   the value is F's bytes (at most 16 KiB)\n"
     "  --tenant T      the tenant (admin only)",
     cli_cmd_secrets_set},
    {"secrets rm", "secrets rm NAME [--scope user|tenant] [--tenant T]",
     "Deletes a secret (jobs that name it and have not started fail to start).",
     cli_cmd_secrets_rm},
    {"secrets events", "secrets events [--tenant T]",
     "The secrets' audit: every set and delete, who did it and when, oldest first\n"
     "(admin: every tenant's, or T's; tenant-admin: its tenant's).",
     cli_cmd_secrets_events},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void print_overview(FILE *f)
{
    fprintf(f, "usage: " CLI_PROG " [GLOBAL FLAGS] COMMAND [ARGS]\n\n"
               "The command-line client of tesserad, the Tessera controller.\n\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %s\n", COMMANDS[i].usage);
    fprintf(f,
            "\nGlobal flags (before or after the command):\n"
            "  --server URL[,URL...]  the controller, or up to 8: a leader and its\n"
            "                   standbys, the leader found among them (else $TESSERA_URL,\n"
            "                   the config file, " CLI_DEFAULT_SERVER ")\n"
            "  --token T        the API token (else $TESSERA_TOKEN, the config file)\n"
            "  --config PATH    config file (default $XDG_CONFIG_HOME/tessera/config.yaml\n"
            "                   or ~/.config/tessera/config.yaml; keys server, token, ca)\n"
            "  --ca FILE        trust this CA for https (PEM)\n"
            "  -o, --output F   table (default), json or yaml\n"
            "  --timeout S      give up on a request after S seconds (default 30)\n"
            "  -h, --help       help; '" CLI_PROG " COMMAND --help' for one command\n"
            "  --version        the version\n\n"
            "Exit codes: 0 done, 2 usage, 3 not found, 4 refused, 5 unauthenticated or\n"
            "forbidden, 6 server unreachable, 7 server error, 1 local failure.\n"
            "See docs/cli.md.\n");
}

/* The command named by argv[*i] (and argv[*i + 1] for two words); advances *i. */
static const struct cli_cmd *find_command(int argc, char **argv, int *i)
{
    if (*i + 1 < argc) {
        for (size_t c = 0; c < NCOMMANDS; c++) {
            const char *name = COMMANDS[c].name;
            size_t n = strlen(argv[*i]);
            if (strncmp(name, argv[*i], n) == 0 && name[n] == ' ' &&
                strcmp(name + n + 1, argv[*i + 1]) == 0) {
                *i += 2;
                return &COMMANDS[c];
            }
        }
    }
    for (size_t c = 0; c < NCOMMANDS; c++) {
        if (strcmp(COMMANDS[c].name, argv[*i]) == 0) {
            *i += 1;
            return &COMMANDS[c];
        }
    }
    return NULL;
}

static int run(struct cli_ctx *ctx, int argc, char **argv)
{
    int i = 1;
    if (cli_parse_globals(ctx, argc, argv, &i) != CLI_CONTINUE)
        return CLI_EXIT_USAGE;
    if (i >= argc) {
        if (ctx->flags.version) {
            printf(CLI_PROG " " CLI_VERSION "\n");
            return CLI_EXIT_OK;
        }
        print_overview(ctx->flags.help ? stdout : stderr);
        return ctx->flags.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (strcmp(argv[i], "help") == 0) {
        i++;
        if (i >= argc) {
            print_overview(stdout);
            return CLI_EXIT_OK;
        }
        ctx->flags.help = true;
    }
    const struct cli_cmd *cmd = find_command(argc, argv, &i);
    if (!cmd)
        return cli_usage_error(NULL, "unknown command '%s'", argv[i]);
    return cmd->run(ctx, cmd, argc - i, argv + i);
}

int main(int argc, char **argv)
{
    struct cli_ctx ctx = {0};
    ctx.now = time(NULL);
    tzset();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        cli_errorf("cannot start libcurl");
        return CLI_EXIT_LOCAL;
    }
    int rc = run(&ctx, argc, argv);
    cli_ctx_free(&ctx);
    curl_global_cleanup();
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == CLI_EXIT_OK) {
            cli_errorf("cannot write the output");
            rc = CLI_EXIT_LOCAL;
        }
    }
    return rc;
}
