/*
 * fake_mps_control.c - a stand-in for nvidia-cuda-mps-control, built as
 * ${build}/fakes/nvidia-cuda-mps-control, for tests of src/agent/mps.c.
 *
 * Like the real one (gpu-facts.md 4.1-4.3): `-d` starts the control daemon in
 * the background and it writes nvidia-cuda-mps-control.pid in
 * $CUDA_MPS_PIPE_DIRECTORY; without -d the program is the client: it sends
 * its stdin lines to the daemon and prints the answers; `quit` ends the
 * daemon. The daemon logs to $CUDA_MPS_LOG_DIRECTORY/control.log: first its
 * environment ("env CUDA_VISIBLE_DEVICES=..." for the three MPS variables),
 * then "cmd <line>" for every command, so tests can read what the agent sent.
 *
 * Not like the real one: the wire is our own (a UNIX socket "control" in the
 * pipe directory, one reply line per command, empty when there is nothing to
 * say); it checks the syntax of the commands it knows from gpu-facts.md 4.2
 * and answers "error: ..." (the client then exits 1); there are no MPS
 * servers. Test hooks, read by the daemon from its environment:
 * FAKE_MPS_FAIL_START=<text> makes `-d` print <text> and exit 1 without
 * starting; FAKE_MPS_IGNORE_QUIT=1 makes it answer quit and keep running.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define PID_FILE "nvidia-cuda-mps-control.pid"
#define SOCKET_NAME "control"
#define LOG_NAME "control.log"
#define DEFAULT_PIPE_DIR "/tmp/nvidia-mps"
#define DEFAULT_LOG_DIR "/var/log/nvidia-mps"
#define LINE_MAX_BYTES 512
#define PATH_BYTES 512
#define PCT_MAX 100

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static int socket_addr(struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path, sizeof sa->sun_path, "%s/%s",
                     env_or("CUDA_MPS_PIPE_DIRECTORY", DEFAULT_PIPE_DIR), SOCKET_NAME);
    return n > 0 && (size_t)n < sizeof sa->sun_path ? 0 : -1;
}

static void pid_path(char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", env_or("CUDA_MPS_PIPE_DIRECTORY", DEFAULT_PIPE_DIR), PID_FILE);
}

static void log_line(const char *fmt, const char *a, const char *b)
{
    char path[PATH_BYTES];
    snprintf(path, sizeof path, "%s/%s", env_or("CUDA_MPS_LOG_DIRECTORY", DEFAULT_LOG_DIR),
             LOG_NAME);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}

static bool is_uint(const char *s, long min, long max)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno == 0 && *end == '\0' && v >= min && v <= max && s[0] != '-' && s[0] != '+';
}

/* "<integer>G" or "<integer>M" (gpu-facts.md 4.2). */
static bool is_mem_value(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 2 || (s[n - 1] != 'G' && s[n - 1] != 'M'))
        return false;
    char num[32];
    if (n - 1 >= sizeof num)
        return false;
    memcpy(num, s, n - 1);
    num[n - 1] = '\0';
    return is_uint(num, 0, 1L << 40);
}

struct state {
    char thread_pct[16];
    char mem_limit[64]; /* "<dev> <value>" */
};

/* Answers one command into reply; returns true when the daemon should quit. */
static bool handle(struct state *st, char *line, char *reply, size_t len)
{
    reply[0] = '\0';
    log_line("cmd %s%s", line, "");
    char *save = NULL;
    char *cmd = strtok_r(line, " \t", &save);
    char *a1 = strtok_r(NULL, " \t", &save);
    char *a2 = strtok_r(NULL, " \t", &save);
    char *extra = strtok_r(NULL, " \t", &save);
    if (!cmd) {
        snprintf(reply, len, "error: empty command");
    } else if (strcmp(cmd, "quit") == 0) {
        return !getenv("FAKE_MPS_IGNORE_QUIT");
    } else if (strcmp(cmd, "set_default_active_thread_percentage") == 0) {
        if (!is_uint(a1, 1, PCT_MAX) || a2)
            snprintf(reply, len, "error: usage: set_default_active_thread_percentage <1..100>");
        else
            snprintf(st->thread_pct, sizeof st->thread_pct, "%s", a1);
    } else if (strcmp(cmd, "get_default_active_thread_percentage") == 0) {
        snprintf(reply, len, "%s", st->thread_pct);
    } else if (strcmp(cmd, "set_default_device_pinned_mem_limit") == 0) {
        if (!a1 || !is_mem_value(a2) || extra)
            snprintf(reply, len,
                     "error: usage: set_default_device_pinned_mem_limit <dev> <N>G|<N>M");
        else
            snprintf(st->mem_limit, sizeof st->mem_limit, "%s %s", a1, a2);
    } else if (strcmp(cmd, "get_default_device_pinned_mem_limit") == 0) {
        snprintf(reply, len, "%s", st->mem_limit);
    } else if (strcmp(cmd, "get_server_list") == 0) {
        /* no servers in the fake */
    } else {
        snprintf(reply, len, "error: unknown command %s", cmd);
    }
    return false;
}

/* Reads newline-terminated commands from one client; true on quit. */
static bool serve_client(int fd, struct state *st)
{
    FILE *in = fdopen(fd, "r");
    if (!in) {
        close(fd);
        return false;
    }
    char line[LINE_MAX_BYTES], reply[LINE_MAX_BYTES];
    bool quit = false;
    while (!quit && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\r\n")] = '\0';
        quit = handle(st, line, reply, sizeof reply);
        size_t n = strlen(reply);
        reply[n++] = '\n';
        if (write(fd, reply, n) != (ssize_t)n)
            break;
    }
    fclose(in);
    return quit;
}

static int daemon_main(bool background)
{
    const char *fail = getenv("FAKE_MPS_FAIL_START");
    if (fail) {
        fprintf(stderr, "%s\n", fail);
        return 1;
    }
    char pidfile[PATH_BYTES];
    pid_path(pidfile, sizeof pidfile);
    FILE *pf = fopen(pidfile, "r");
    if (pf) {
        long old = 0;
        if (fscanf(pf, "%ld", &old) == 1 && old > 0 && kill((pid_t)old, 0) == 0) {
            fclose(pf);
            fprintf(stderr, "An instance of this daemon is already running (pid %ld)\n", old);
            return 1;
        }
        fclose(pf);
    }
    struct sockaddr_un sa;
    if (socket_addr(&sa) != 0) {
        fprintf(stderr, "pipe directory too long for a socket path\n");
        return 1;
    }
    unlink(sa.sun_path);
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 8) != 0) {
        fprintf(stderr, "cannot listen on %s: %s\n", sa.sun_path, strerror(errno));
        return 1;
    }
    if (background) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid > 0)
            return 0; /* the launcher: the socket is listening already */
        setsid();
        int dn = open("/dev/null", O_RDWR);
        if (dn >= 0) {
            dup2(dn, STDIN_FILENO);
            dup2(dn, STDOUT_FILENO);
            dup2(dn, STDERR_FILENO);
            if (dn > STDERR_FILENO)
                close(dn);
        }
    }
    signal(SIGPIPE, SIG_IGN);
    static const char *const vars[] = {"CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY",
                                       "CUDA_MPS_LOG_DIRECTORY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        log_line("env %s=%s", vars[i], env_or(vars[i], ""));
    char tmp[PATH_BYTES + 8];
    snprintf(tmp, sizeof tmp, "%s.new", pidfile);
    pf = fopen(tmp, "w");
    if (pf) {
        fprintf(pf, "%ld\n", (long)getpid());
        fclose(pf);
        rename(tmp, pidfile); /* whole or absent, never half-written */
    }
    struct state st = {"100", ""};
    bool quit = false;
    while (!quit) {
        int c = accept(ls, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        quit = serve_client(c, &st);
    }
    log_line("%s%s", "exit", "");
    close(ls);
    unlink(sa.sun_path);
    unlink(pidfile);
    return 0;
}

static int client_main(void)
{
    struct sockaddr_un sa;
    if (socket_addr(&sa) != 0) {
        fprintf(stderr, "pipe directory too long for a socket path\n");
        return 1;
    }
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "Cannot find MPS control daemon process (%s: %s)\n", sa.sun_path,
                strerror(errno));
        return 1;
    }
    FILE *replies = fdopen(s, "r");
    if (!replies)
        return 1;
    char line[LINE_MAX_BYTES], reply[LINE_MAX_BYTES];
    int rc = 0;
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') {
            if (n + 1 >= sizeof line)
                break;
            line[n++] = '\n';
            line[n] = '\0';
        }
        if (write(s, line, n) != (ssize_t)n)
            return 1;
        if (!fgets(reply, sizeof reply, replies))
            break; /* the daemon went away (quit) */
        if (strncmp(reply, "error:", 6) == 0) {
            fputs(reply, stderr);
            rc = 1;
        } else if (reply[0] != '\n') {
            fputs(reply, stdout);
        }
    }
    fclose(replies);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "-d") == 0)
        return daemon_main(true);
    if (argc > 1 && strcmp(argv[1], "-f") == 0)
        return daemon_main(false);
    if (argc > 1) {
        fprintf(stderr, "usage: %s [-d | -f]\n", argv[0]);
        return 2;
    }
    return client_main();
}
