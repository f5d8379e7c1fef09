/*
 * task_secrets.c - the secrets a task receives when it starts
 * (docs/secrets.md, docs/agent-protocol.md "secrets").
 *
 * The controller sends a task's secret values only in the desired state of
 * a rank that has not started yet: [{"env": VAR, "value"} | {"file": NAME,
 * "value"}]. Variables join the task's environment (they live in the task's
 * process and nowhere on disk: the record of a task, launch_record.c, keeps
 * its ids, paths and meta, never its environment). Files go to the task's
 * private folder <state_dir>/secrets/j<job>-r<rank> (0500, owned by the
 * task's user, under a 0711 parent nobody may list), each 0400 owned by
 * the task's user, named in $TESSERA_SECRETS_DIR; the folder is removed
 * when the agent is done with the task, and at start for tasks no record
 * adopts: moved into secrets/.trash at once, emptied by the agent's trash
 * thread (the task's user may have filled it). An adopted task keeps its
 * folder until it ends.
 *
 * Files are created without following links (O_NOFOLLOW|O_EXCL in a
 * folder only root writes), and nothing here prints a value.
 */
#define _DEFAULT_SOURCE /* getpwnam, fchown */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/trash.h"

#define SECRETS_TRASH_DIR ".trash" /* secrets/.trash: removed folders, emptied behind */

static void dir_of(const ts_agent *a, int64_t job, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s/secrets/j%lld-r%d", a->cfg.state_dir, (long long)job, rank);
}

/* Removes a task's folder in place: files only, what the agent put there;
 * only where it cannot be moved aside. */
static void remove_dir_now(const char *dir)
{
    chmod(dir, 0700); /* a 0500 folder: a non-root agent could not empty it */
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

/* Removes a task's folder. It is the task user's, who may fill it with
 * millions of files and folders: it is moved into secrets/.trash at once
 * and removed behind (trash.h), never here on the main loop. */
static void remove_dir(const ts_agent *a, const char *dir)
{
    char trash[760];
    snprintf(trash, sizeof trash, "%s/secrets/" SECRETS_TRASH_DIR, a->cfg.state_dir);
    if (agent_trash_put(dir, trash) != 0)
        remove_dir_now(dir);
}

void agent_secrets_remove(const ts_agent *a, int64_t job, int rank)
{
    char dir[800];
    dir_of(a, job, rank, dir, sizeof dir);
    remove_dir(a, dir);
}

void agent_secrets_sweep(const ts_agent *a)
{
    char base[700];
    snprintf(base, sizeof base, "%s/secrets", a->cfg.state_dir);
    DIR *d = opendir(base);
    if (!d)
        return;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        long long job;
        int rank, used = 0;
        if (sscanf(e->d_name, "j%lld-r%d%n", &job, &rank, &used) != 2 || e->d_name[used])
            continue;
        bool adopted = false;
        for (int i = 0; i < a->ntasks && !adopted; i++)
            adopted = a->tasks[i].job == job && a->tasks[i].rank == rank;
        if (!adopted) {
            char dir[1400];
            snprintf(dir, sizeof dir, "%s/%s", base, e->d_name);
            remove_dir(a, dir);
        }
    }
    closedir(d);
    snprintf(base, sizeof base, "%s/secrets/" SECRETS_TRASH_DIR, a->cfg.state_dir);
    agent_trash_sweep(base); /* what an ended agent had not finished removing */
}

static bool write_file(int dfd, const char *name, const char *v, size_t len, uid_t uid,
                       gid_t gid, bool own)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
    if (fd < 0)
        return false;
    bool ok = (size_t)write(fd, v, len) == len && (!own || fchown(fd, uid, gid) == 0) &&
              fchmod(fd, 0400) == 0;
    return close(fd) == 0 && ok;
}

/* The task's folder with its files; false and why on failure. */
static bool put_files(const ts_agent *a, const local_task *lt, const ts_desired_task *d,
                      const char *user, char *dir, size_t dsize, char *why, size_t wsize)
{
    char base[700];
    snprintf(base, sizeof base, "%s/secrets", a->cfg.state_dir);
    mkdir(base, 0711);
    chmod(base, 0711);
    dir_of(a, lt->job, lt->rank, dir, dsize);
    remove_dir(a, dir); /* an earlier run's */
    struct passwd *pw = user && a->caps.root ? getpwnam(user) : NULL;
    bool own = pw != NULL;
    if (mkdir(dir, 0700) != 0) {
        snprintf(why, wsize, "secrets: cannot create %s: %s", dir, strerror(errno));
        return false;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    bool ok = dfd >= 0;
    for (int i = 0; ok && i < d->nsecrets; i++) {
        const ts_desired_secret *s = &d->secrets[i];
        const char *f = s->file;
        if (!f)
            continue;
        if (strchr(f, '/') || !write_file(dfd, f, s->value, s->value_len,
                                          own ? pw->pw_uid : 0, own ? pw->pw_gid : 0, own)) {
            snprintf(why, wsize, "secrets: cannot write the file %s", f);
            ok = false;
        }
    }
    if (ok && (fchmod(dfd, 0500) != 0 || (own && fchown(dfd, pw->pw_uid, pw->pw_gid) != 0))) {
        snprintf(why, wsize, "secrets: cannot hand %s to user %s", dir, user);
        ok = false;
    }
    if (dfd >= 0)
        close(dfd);
    if (!ok)
        remove_dir(a, dir);
    return ok;
}

bool agent_secrets_put(const ts_agent *a, const local_task *lt, const ts_desired_task *d,
                       json_t *envj, char *why, size_t wsize)
{
    if (d->secrets_error) { /* the controller could not give one (deleted since submission) */
        snprintf(why, wsize, "%s", d->secrets_error);
        return false;
    }
    bool files = false;
    for (int i = 0; i < d->nsecrets; i++) {
        const ts_desired_secret *s = &d->secrets[i];
        files = files || s->file;
        if (!s->env)
            continue;
        size_t n = strlen(s->env) + strlen(s->value) + 2;
        char *kv = malloc(n);
        if (!kv) {
            snprintf(why, wsize, "secrets: out of memory");
            return false;
        }
        snprintf(kv, n, "%s=%s", s->env, s->value);
        json_array_append_new(envj, json_string(kv));
        explicit_bzero(kv, n);
        free(kv);
    }
    if (!files)
        return true;
    char dir[800], kv[820];
    if (!put_files(a, lt, d, d->user, dir, sizeof dir, why, wsize))
        return false;
    snprintf(kv, sizeof kv, "TESSERA_SECRETS_DIR=%s", dir);
    json_array_append_new(envj, json_string(kv));
    return true;
}
