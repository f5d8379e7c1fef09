/*
 * test_image_run.c - tasks in containers, for real: an image root made here
 * from Debian's static busybox, run through the keeper with Debian's runc.
 * What the keeper does for a bare task stays true: the exit status, the
 * logs, the checkpoint signal and its acknowledgement, grace then kill,
 * adoption by a new handle, the TESSERA_* environment; and the task sees the
 * image's files, not the node's, and runs under its memory and pids limits
 * (the runtime's cgroup, v1 here). Skipped, saying so, where runc or busybox
 * is not installed or the test is not root.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/image.h"
#include "agent/launch.h"

#define BUSYBOX "/bin/busybox"
#define WAIT_S 60.0

static char top[64], rootfs[128], logs[128], bundles[128], cfg[128];
static ts_image img;

static void sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

static bool runnable(void)
{
    if (geteuid() != 0 || access("/usr/sbin/runc", X_OK) != 0 || access(BUSYBOX, X_OK) != 0) {
        fprintf(stderr, "skipped: needs root, runc and busybox-static (scripts/install-deps)\n");
        return false;
    }
    return true;
}

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/ts-imgrun-XXXXXX");
    assert_non_null(mkdtemp(top));
    snprintf(rootfs, sizeof rootfs, "%s/image/rootfs", top);
    snprintf(logs, sizeof logs, "%s/logs", top);
    snprintf(bundles, sizeof bundles, "%s/bundles", top);
    snprintf(cfg, sizeof cfg, "%s/image/config.json", top);
    sh("mkdir -p %s/bin %s/etc %s/tmp %s %s && chmod 1777 %s/tmp", rootfs, rootfs, rootfs, logs,
       bundles, rootfs);
    sh("cp %s %s/bin/busybox && for a in sh cat echo sleep ls test id touch; do "
       "ln -s busybox %s/bin/$a; done", BUSYBOX, rootfs, rootfs);
    sh("echo 'from the image' > %s/etc/marker", rootfs);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fputs("{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\","
          "\"IMAGE_VAR=set-by-image\"],\"Cmd\":[\"/bin/sh\",\"-c\",\"echo default-cmd\"],"
          "\"WorkingDir\":\"/tmp\"}}",
          f);
    fclose(f);
    memset(&img, 0, sizeof img);
    snprintf(img.rootfs, sizeof img.rootfs, "%s", rootfs);
    snprintf(img.config_path, sizeof img.config_path, "%s", cfg);
    snprintf(img.digest, sizeof img.digest, "sha256:%064d", 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    /* a failed case leaves its overlay mounted */
    sh("awk '$2 ~ \"^%s/\" {print $2}' /proc/mounts | xargs -r umount -l; rm -rf %s", top,
       top);
    return 0;
}

static ts_task_spec spec(const char *id, const char *const *argv, char *bundle, size_t n)
{
    ts_task_spec s;
    memset(&s, 0, sizeof s);
    s.task_id = id;
    s.argv = argv;
    s.log_dir = logs;
    s.image = &img;
    snprintf(bundle, n, "%s/%s", bundles, id);
    s.bundle_dir = bundle;
    return s;
}

static char *slurp(const char *path)
{
    static char buf[8192];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

static void runs_in_the_image(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    const char *argv[] = {"sh", "-c",
                          "cat /etc/marker; test -e /etc/debian_version && echo HOST-FILES; "
                          "echo var=$IMAGE_VAR job=$TESSERA_TASK_ID cwd=$(pwd); "
                          "echo oops >&2; exit 7", NULL};
    char bundle[256];
    ts_task_spec s = spec("img-run.0", argv, bundle, sizeof bundle);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    const ts_task_info *in = agent_task_info_get(t);
    char *out = slurp(in->stdout_path);
    assert_non_null(strstr(out, "from the image"));
    assert_null(strstr(out, "HOST-FILES"));
    assert_non_null(strstr(out, "var=set-by-image"));
    assert_non_null(strstr(out, "cwd=/tmp"));
    assert_non_null(strstr(slurp(in->stderr_path), "oops"));
    assert_int_equal(st.exit_code, 7);
    agent_task_free(t);
    agent_bundle_remove(bundle);
    /* the image's root was not written: a task's writes go to its own layer */
    struct stat sb;
    char p[256];
    snprintf(p, sizeof p, "%s/marker2", rootfs);
    assert_true(lstat(p, &sb) != 0);
}

static void image_command_and_writes_stay_private(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    char bundle[256];
    ts_task_spec s = spec("img-default.0", NULL, bundle, sizeof bundle);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    assert_non_null(strstr(slurp(agent_task_info_get(t)->stdout_path), "default-cmd"));
    agent_task_free(t);
    agent_bundle_remove(bundle);

    const char *w[] = {"sh", "-c", "echo x > /etc/marker2 && cat /etc/marker2", NULL};
    s = spec("img-write.0", w, bundle, sizeof bundle);
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    agent_task_free(t);
    agent_bundle_remove(bundle);
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s/etc/marker2", rootfs);
    assert_true(lstat(p, &sb) != 0);
}

/* With container_write_mib, what the task writes in its root goes to a
 * filesystem of its own of that size: a write past it fails there, none of
 * it is on the bundles' disk, and removing the bundle unmounts it. */
static void writable_layer_is_its_own_filesystem(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    if (access("/dev/loop-control", F_OK) != 0) /* the layer stays on the disk */
        skip();
    const char *w[] = {"sh", "-c",
                       "head -c 40000000 /dev/zero > /tmp/fill; echo ended-$?; sleep 30",
                       NULL};
    char bundle[256], fill[300], scratch[300];
    ts_task_spec s = spec("img-scratch.0", w, bundle, sizeof bundle);
    s.container_write_mib = 16;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    const ts_task_info *in = agent_task_info_get(t);
    for (int i = 0; i < 200 && !strstr(slurp(in->stdout_path), "ended-"); i++)
        nanosleep(&(struct timespec){0, 50000000L}, NULL);
    assert_non_null(strstr(slurp(in->stdout_path), "ended-1"));
    snprintf(fill, sizeof fill, "%s/" BUNDLE_SCRATCH_DIR "/upper/tmp/fill", bundle);
    struct stat sb, disk;
    assert_int_equal(lstat(fill, &sb), 0);
    assert_int_equal(stat(bundles, &disk), 0);
    assert_true(sb.st_size <= 16LL << 20);
    assert_true(sb.st_dev != disk.st_dev);
    agent_task_free(t);
    agent_bundle_remove(bundle);
    snprintf(scratch, sizeof scratch, "%s/" BUNDLE_SCRATCH_DIR, bundle);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -q ' %s ' /proc/self/mountinfo", scratch);
    assert_int_not_equal(system(cmd), 0); /* unmounted */
}

static void checkpoint_signal_and_ack(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    const char *argv[] = {"sh", "-c",
                          "trap 'echo got-usr1; touch $TESSERA_CHECKPOINT_DONE; exit 0' USR1; "
                          "echo ready; while :; do sleep 0.1; done", NULL};
    char bundle[256];
    ts_task_spec s = spec("img-ckpt.0", argv, bundle, sizeof bundle);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    const ts_task_info *in = agent_task_info_get(t);
    for (int i = 0; i < 200 && !strstr(slurp(in->stdout_path), "ready"); i++)
        usleep(50000);
    ts_stop_outcome oc;
    assert_int_equal(agent_task_preempt(t, 0, 20.0, &oc, &err), 0);
    assert_int_equal(oc, TS_STOP_CHECKPOINTED);
    assert_non_null(strstr(slurp(in->stdout_path), "got-usr1"));
    agent_task_free(t);
    agent_bundle_remove(bundle);
}

/* The agent's log folder (every task's output and records) is not in the
 * container: its root neither reads it nor plants a link there. A user of
 * the image's own (no user on the node, no write to the log folder) still
 * acknowledges its checkpoint, in the task's own folder. */
static void log_folder_not_in_the_container(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    char cmd[512], bundle[256];
    snprintf(cmd, sizeof cmd,
             "ls -a %s; ln -s /etc/shadow %s/img-next.0.out; "
             "echo forged > %s/img-other.0.task; id -u", logs, logs, logs);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    ts_task_spec s = spec("img-see.0", argv, bundle, sizeof bundle);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    const ts_task_info *in = agent_task_info_get(t);
    char *out = slurp(in->stdout_path);
    assert_non_null(strstr(out, "0\n")); /* root in the container */
    assert_null(strstr(out, "img-see.0.out"));
    assert_null(strstr(out, ".task"));
    /* what it wrote at those paths (if anything: the binds' parents are
     * made in its own layer) stayed in the container */
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s/img-next.0.out", logs);
    assert_int_not_equal(lstat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/img-other.0.task", logs);
    assert_int_not_equal(lstat(p, &sb), 0);
    agent_task_free(t);
    agent_bundle_remove(bundle);

    const char *ack[] = {"sh", "-c",
                         "trap 'touch $TESSERA_CHECKPOINT_DONE && exit 0; exit 9' USR1; "
                         "echo ready; while :; do sleep 0.1; done", NULL};
    s = spec("img-ack.0", ack, bundle, sizeof bundle);
    s.container_user = "4242:4243";
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    in = agent_task_info_get(t);
    for (int i = 0; i < 200 && !strstr(slurp(in->stdout_path), "ready"); i++)
        usleep(50000);
    ts_stop_outcome oc;
    assert_int_equal(agent_task_preempt(t, 0, 20.0, &oc, &err), 0);
    assert_int_equal(oc, TS_STOP_CHECKPOINTED);
    agent_task_free(t);
    agent_bundle_remove(bundle);
}

static void grace_then_kill_and_adoption(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    /* pid 1 of a container ignores what it has no handler for: only SIGKILL ends it */
    const char *argv[] = {"sh", "-c", "echo ready; while :; do sleep 0.1; done", NULL};
    char bundle[256];
    ts_task_spec s = spec("img-kill.0", argv, bundle, sizeof bundle);
    s.term_grace_s = 0.5;
    s.memory_bytes = 64LL << 20;
    s.pids_max = 50;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    /* the runtime's name for it: the task id and a hash of this agent's bundle folder */
    char pat[256], p[256] = "";
    snprintf(pat, sizeof pat, "/sys/fs/cgroup/memory/tessera-tasks/%s-*/memory.limit_in_bytes",
             s.task_id);
    if (access("/sys/fs/cgroup/memory", F_OK) != 0)
        snprintf(pat, sizeof pat, "/sys/fs/cgroup/tessera-tasks/%s-*/memory.max", s.task_id);
    /* the runtime makes the cgroup, then writes its limits: wait for both */
    for (int i = 0; i < 100 && atoll(slurp(p)) != 64LL << 20; i++) {
        glob_t g;
        if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1)
            snprintf(p, sizeof p, "%s", g.gl_pathv[0]);
        globfree(&g);
        usleep(50000);
    }
    assert_int_equal(atoll(slurp(p)), 64LL << 20);
    /* a new handle, as a restarted agent makes */
    agent_task_detach(t);
    assert_int_equal(agent_task_adopt(NULL, logs, s.task_id, &t, &err), 0);
    ts_stop_outcome oc;
    assert_int_equal(agent_task_preempt(t, 0, 0.5, &oc, &err), 0);
    assert_int_equal(oc, TS_STOP_KILLED);
    /* the runtime no longer knows the container */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "runc list -q | grep -q '^%s-'", s.task_id);
    assert_int_not_equal(system(cmd), 0);
    agent_task_free(t);
    agent_bundle_remove(bundle);
}

static void bad_container_input_named(void **state)
{
    (void)state;
    if (!runnable())
        skip();
    const char *argv[] = {"true", NULL};
    char bundle[256];
    ts_task_spec s = spec("img-bad.0", argv, bundle, sizeof bundle);
    s.workdir = "relative";
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "workdir"));
    s.workdir = NULL;
    s.runtime = "no-such-runtime";
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "no-such-runtime"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(runs_in_the_image, setup, teardown),
        cmocka_unit_test_setup_teardown(image_command_and_writes_stay_private, setup, teardown),
        cmocka_unit_test_setup_teardown(writable_layer_is_its_own_filesystem, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(checkpoint_signal_and_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(log_folder_not_in_the_container, setup, teardown),
        cmocka_unit_test_setup_teardown(grace_then_kill_and_adoption, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_container_input_named, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
