/*
 * test_task_files.c - what the launcher makes for a task outside the task's
 * reach, with real processes: the log folder is root's 0755, as the
 * agent's, and a task as another user still acknowledges its checkpoint in
 * its own folder (0700, its user's), which goes with the task, as the
 * files the agent makes there for it (step file, shim mark) do; a link, a
 * FIFO or a hard link planted where a log goes is refused, naming it,
 * before anything is created through it; the folders of tasks no record
 * holds are swept (moved aside, emptied behind by the trash thread) without
 * following links in them; where the agent is root, a task's folder is a
 * tmpfs of its own that the task fills alone (ENOSPC there, nothing on the
 * state disk) and that goes, unmounted, with the task or the sweep. Every
 * wait is bounded.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/launch.h"
#include "agent/trash.h"
#include "agent/clock.h"

#define READY_WAIT_S 15.0 /* a loaded CI machine: the shell may take seconds to start */

typedef struct fix {
    char dir[64], work[96], logs[96], recs[96];
} fix;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ts-taskfiles-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    chmod(f->dir, 0755);
    snprintf(f->work, sizeof f->work, "%s/work", f->dir);
    snprintf(f->logs, sizeof f->logs, "%s/logs", f->dir);
    snprintf(f->recs, sizeof f->recs, "%s/records", f->dir);
    assert_int_equal(mkdir(f->work, 0777), 0);
    assert_int_equal(mkdir(f->logs, 0777), 0);
    assert_int_equal(mkdir(f->recs, 0700), 0);
    chmod(f->work, 0777);
    chmod(f->logs, 0777);
    *state = f;
    return 0;
}

static int stop_recorded_task(const char *id, void *ctx)
{
    ts_task *t;
    if (agent_task_adopt(NULL, ctx, id, &t, NULL) == 0)
        agent_task_free(t);
    return 0;
}

static int teardown(void **state)
{
    fix *f = *state;
    char cmd[128];
    agent_task_records(f->logs, stop_recorded_task, f->logs, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static ts_task_spec sh_spec(const fix *f, const char *id, const char *const *argv)
{
    ts_task_spec s;
    memset(&s, 0, sizeof s);
    s.task_id = id;
    s.argv = argv;
    s.workdir = f->work;
    s.log_dir = f->logs;
    s.term_grace_s = 0.5;
    return s;
}

static void wait_for_file(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    double end = agent_mono_s() + READY_WAIT_S;
    while (access(path, F_OK) != 0) {
        assert_true(agent_mono_s() < end);
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The agent's log folder is root's 0755 (agent.c): a task as another user
 * still acknowledges its checkpoint, in its own folder (0700, its user's),
 * which goes with the task. */
static void nonroot_task_acks_in_its_own_folder(void **state)
{
    fix *f = *state;
    struct passwd *pw = getpwnam("nobody");
    if (geteuid() != 0 || pw == NULL)
        skip();
    char logs[128];
    snprintf(logs, sizeof logs, "%s/agentlogs", f->dir);
    assert_int_equal(mkdir(logs, 0755), 0);
    chmod(logs, 0755);
    const char *argv[] = {"/bin/sh", "-c",
                          "trap 'echo done > \"$TESSERA_CHECKPOINT_DONE\" && exit 0; exit 9' USR1; "
                          "touch ready; while :; do sleep 0.05; done", NULL};
    ts_task_spec s = sh_spec(f, "n1", argv);
    s.log_dir = logs;
    s.user = "nobody";
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    wait_for_file(f->work, "ready");
    char dir[768];
    snprintf(dir, sizeof dir, "%s", agent_task_info_get(t)->ack_path);
    *strrchr(dir, '/') = '\0';
    struct stat sb;
    assert_int_equal(lstat(dir, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0700);
    assert_int_equal(sb.st_uid, pw->pw_uid);
    ts_stop_outcome out;
    assert_int_equal(agent_task_preempt(t, 0, 3.0, &out, &err), 0);
    assert_int_equal(out, TS_STOP_CHECKPOINTED);
    agent_task_free(t);
    assert_int_not_equal(lstat(dir, &sb), 0);
    agent_task_records(logs, stop_recorded_task, logs, NULL);
}

/* The files the agent makes for a task (its step file, its shim's mark)
 * are in its own folder, not in a folder shared with other tasks: made
 * there before the task starts, its user's (who writes them), 0600, their
 * identity given back; they go with the folder. A name that is not one
 * component fails the start, naming it. */
static void task_files_are_made_in_its_own_folder(void **state)
{
    fix *f = *state;
    struct passwd *pw = getpwnam("nobody");
    if (geteuid() != 0 || pw == NULL)
        skip();
    const char *argv[] = {"/bin/sh", "-c",
                          "d=$(dirname \"$TESSERA_CHECKPOINT_DONE\"); echo 0.5 >> $d/step-times && "
                          "echo 1 >> $d/shim-loaded && touch ready; sleep 5", NULL};
    ts_task_spec s = sh_spec(f, "tf1", argv);
    s.user = "nobody";
    dev_t dev[2] = {0, 0};
    ino_t ino[2] = {0, 0};
    ts_task_file files[] = {{"step-times", &dev[0], &ino[0]}, {"shim-loaded", &dev[1], &ino[1]}};
    s.task_files = files;
    s.ntask_files = 2;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    wait_for_file(f->work, "ready");
    const char *dir = agent_task_info_get(t)->task_dir;
    for (int i = 0; i < 2; i++) {
        char p[900];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
        assert_int_equal(lstat(p, &sb), 0);
        assert_true(S_ISREG(sb.st_mode));
        assert_int_equal(sb.st_uid, pw->pw_uid);
        assert_int_equal(sb.st_mode & 07777, 0600);
        assert_true(sb.st_dev == dev[i] && sb.st_ino == ino[i]);
        assert_true(sb.st_size > 0); /* the task's user wrote it */
    }
    char kept[768];
    snprintf(kept, sizeof kept, "%s", dir);
    agent_task_free(t);
    assert_false(file_exists(kept));

    ts_task_file bad[] = {{"../x", NULL, NULL}};
    s = sh_spec(f, "tf2", argv);
    s.task_files = bad;
    s.ntask_files = 1;
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "\"../x\""));
    char p[256];
    snprintf(p, sizeof p, "%s/tasks/x", f->logs);
    assert_false(file_exists(p));
    snprintf(p, sizeof p, "%s/tasks/tf2", f->logs);
    assert_false(file_exists(p));
}

/* A link or a FIFO put where a task's log goes is refused, naming it: the
 * agent (root) never creates or chowns a file through it. */
static void planted_log_link_refused(void **state)
{
    fix *f = *state;
    char victim[160], link_path[160];
    snprintf(victim, sizeof victim, "%s/victim", f->dir);
    snprintf(link_path, sizeof link_path, "%s/l1.out", f->logs);
    assert_int_equal(symlink(victim, link_path), 0);
    const char *argv[] = {"/bin/true", NULL};
    ts_task_spec s = sh_spec(f, "l1", argv);
    ts_task *t = NULL;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EIO);
    assert_null(t);
    assert_non_null(strstr(err.msg, link_path));
    assert_non_null(strstr(err.msg, "a symbolic link, not followed"));
    assert_int_equal(access(victim, F_OK), -1);

    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/l2.err", f->logs);
    assert_int_equal(mkfifo(fifo, 0666), 0);
    s = sh_spec(f, "l2", argv);
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EIO); /* at once, no reader */
    assert_non_null(strstr(err.msg, fifo));

    char hard[160];
    snprintf(hard, sizeof hard, "%s/l3.out", f->logs);
    fclose(fopen(victim, "w"));
    assert_int_equal(link(victim, hard), 0);
    s = sh_spec(f, "l3", argv);
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "hard-linked elsewhere; refused"));
}

/* What an agent that died left in its task folders: a folder whose task no
 * record holds goes, with what is in it (never what a link in it points
 * to); one whose record is there stays. */
static void task_dirs_sweep_keeps_recorded_ones(void **state)
{
    fix *f = *state;
    char root[128], cmd[1024], outside[128], p[256];
    snprintf(root, sizeof root, "%s/tasks", f->dir);
    snprintf(outside, sizeof outside, "%s/outside", f->dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/ghost/sub %s/live && touch %s/ghost/sub/x %s && "
             "ln -s %s %s/ghost/link && touch %s/live.task",
             root, root, root, outside, outside, root, f->recs);
    assert_int_equal(system(cmd), 0);
    agent_task_dirs_sweep(root, f->recs);
    snprintf(p, sizeof p, "%s/ghost", root);
    assert_false(file_exists(p));
    snprintf(p, sizeof p, "%s/live", root);
    assert_true(file_exists(p));
    /* moved into tasks/.trash at once, emptied there by the trash thread */
    assert_true(agent_trash_idle(5000));
    snprintf(cmd, sizeof cmd, "test -d %s/.trash && test -z \"$(ls -A %s/.trash)\"", root, root);
    assert_int_equal(system(cmd), 0);
    assert_true(file_exists(outside));
    snprintf(p, sizeof p, "%s/live.task", f->recs);
    unlink(p);
}

#define TMPFS_MAGIC_NUMBER 0x01021994 /* statfs f_type of a tmpfs */

/* Whether path is a mount point in this process's view. */
static bool mounted_at(const char *path)
{
    FILE *m = fopen("/proc/self/mountinfo", "re");
    char line[4096], mp[2048];
    bool found = false;
    while (m && !found && fgets(line, sizeof line, m))
        found = sscanf(line, "%*s %*s %*s %*s %2047s", mp) == 1 && strcmp(mp, path) == 0;
    if (m)
        fclose(m);
    return found;
}

/* A task that fills its own folder fills a tmpfs of its own (64 MiB):
 * its write ends in ENOSPC and the state disk gets none of it; the
 * folder's filesystem goes with the task, and the sweep unmounts what an
 * agent that died left mounted. */
static void task_folder_is_a_filesystem_of_its_own(void **state)
{
    fix *f = *state;
    struct passwd *pw = getpwnam("nobody");
    if (geteuid() != 0 || pw == NULL)
        skip();
    const char *argv[] = {"/bin/sh", "-c",
                          "d=$(dirname \"$TESSERA_CHECKPOINT_DONE\"); "
                          "head -c 100000000 /dev/zero > $d/fill; echo $? > filled; sleep 5",
                          NULL};
    ts_task_spec s = sh_spec(f, "tf3", argv);
    s.user = "nobody";
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    wait_for_file(f->work, "filled");
    const char *dir = agent_task_info_get(t)->task_dir;
    char p[900];
    struct statfs fs;
    struct stat sb, disk;
    assert_int_equal(statfs(dir, &fs), 0);
    assert_true((unsigned long)fs.f_type == TMPFS_MAGIC_NUMBER);
    snprintf(p, sizeof p, "%s/fill", dir);
    assert_int_equal(lstat(p, &sb), 0);
    assert_int_equal(stat(f->dir, &disk), 0);
    assert_true(sb.st_dev != disk.st_dev);           /* not on the state disk */
    assert_true(sb.st_size <= 64LL * 1024 * 1024);   /* stopped at its size */
    snprintf(p, sizeof p, "%s/filled", f->work);
    FILE *rc = fopen(p, "re");
    int code = 0;
    assert_non_null(rc);
    assert_int_equal(fscanf(rc, "%d", &code), 1);
    fclose(rc);
    assert_int_not_equal(code, 0);                   /* the task's write failed */
    char kept[768];
    snprintf(kept, sizeof kept, "%s", dir);
    assert_true(mounted_at(kept));
    agent_task_free(t);
    assert_false(mounted_at(kept));
    assert_false(file_exists(kept));

    char root[128];
    snprintf(root, sizeof root, "%s/tasks", f->dir);
    snprintf(p, sizeof p, "%s/ghost", root);
    assert_int_equal(mkdir(root, 0711) == 0 || errno == EEXIST, 1);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(mount("t", p, "tmpfs", 0, "size=1m"), 0);
    agent_task_dirs_sweep(root, f->recs);
    bool left = mounted_at(p);
    if (left)
        umount2(p, MNT_DETACH);
    assert_false(left);
    assert_false(file_exists(p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(nonroot_task_acks_in_its_own_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(task_files_are_made_in_its_own_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(planted_log_link_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(task_dirs_sweep_keeps_recorded_ones, setup, teardown),
        cmocka_unit_test_setup_teardown(task_folder_is_a_filesystem_of_its_own, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
