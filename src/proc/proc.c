#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/wait.h"

extern char **environ;

/* After the child has exited, its output pipes are drained for this long at most: a grandchild that
 * keeps them open must not hold the run hostage. */
#define DRAIN_GRACE_S 1.0

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* odp's lifeline: a pipe whose write end only this process holds (close-on-exec, never closed). Kept
 * above the low descriptors so that a dup2 onto the child's lifeline_fd is never a dup2 onto itself. */
static int lifeline_read_end(void)
{
    static int read_end = -1;
    if (read_end < 0) {
        int p[2];
        if (pipe2(p, O_CLOEXEC))
            return -1;
        int r = fcntl(p[0], F_DUPFD_CLOEXEC, 64), w = fcntl(p[1], F_DUPFD_CLOEXEC, 64);
        close(p[0]);
        close(p[1]);
        if (r < 0 || w < 0) {
            if (r >= 0)
                close(r);
            if (w >= 0)
                close(w);
            return -1;
        }
        read_end = r; /* w stays open, unreferenced, until the process ends: that is the point */
    }
    return read_end;
}

void odp_spawnattr_child(posix_spawnattr_t *attr)
{
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGQUIT);
    posix_spawnattr_init(attr);
    posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(attr, 0);
    posix_spawnattr_setsigmask(attr, &none);
    posix_spawnattr_setsigdefault(attr, &defaults);
}

static int spawn(const odp_proc_opts *o, int out[2], int errp[2], int in[2], pid_t *pid, odp_err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    if (in[0] >= 0)
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    if (o->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, o->cwd);
    if (o->lifeline_fd > 2) {
        int lifeline = lifeline_read_end();
        if (lifeline < 0) {
            posix_spawn_file_actions_destroy(&fa);
            return odp_fail_errno(err, ODP_EIO, errno, "cannot make odp's lifeline pipe");
        }
        posix_spawn_file_actions_adddup2(&fa, lifeline, o->lifeline_fd);
    }
    odp_spawnattr_child(&attr);

    int rc = posix_spawnp(pid, o->argv[0], &fa, &attr, (char *const *)o->argv, o->envp ? o->envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc == 0)
        return 0;
    if (rc == ENOENT && o->cwd && access(o->cwd, F_OK) != 0)
        return odp_fail_errno(err, ODP_ENOTFOUND, rc, "cannot start %s in %s", o->argv[0], o->cwd);
    return odp_fail_errno(err, rc == ENOENT ? ODP_ENOTFOUND : ODP_EIO, rc, "cannot start %s", o->argv[0]);
}

/* Keeps when a stdout chunk was read: o->out_times_max of them at most, the rest (or what memory refused)
 * counted in cut, so a runner that floods stdout in tiny writes is bounded. */
static void time_chunk(const odp_proc_opts *o, odp_proc_result *r, double t0, size_t n)
{
    odp_chunk_times *c = &r->out_times;
    long long t = (long long)((odp_now() - t0) * 1e6);
    if (c->n == c->cap && c->cap < o->out_times_max) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        if (cap > o->out_times_max)
            cap = o->out_times_max;
        long long *tt = realloc(c->t_us, cap * sizeof *tt);
        if (tt)
            c->t_us = tt;
        unsigned long long *ee = tt ? realloc(c->ends, cap * sizeof *ee) : NULL;
        if (ee) {
            c->ends = ee;
            c->cap = cap;
        }
    }
    c->bytes += n;
    if (c->n == c->cap) {
        c->cut++;
        return;
    }
    c->t_us[c->n] = t;
    c->ends[c->n] = c->bytes;
    c->n++;
}

/* Reads what is there; returns 1 at end of file. */
static int pump(const odp_proc_opts *o, odp_proc_result *r, int *fd, int stream, double t0)
{
    char chunk[65536];
    for (;;) {
        ssize_t n = read(*fd, chunk, sizeof chunk);
        if (n > 0) {
            odp_buf *b = stream == 1 ? &r->out : &r->err;
            if (stream == 1 && o->out_times_max)
                time_chunk(o, r, t0, (size_t)n);
            odp_buf_append(b, chunk, (size_t)n);
            if (o->on_output && !r->aborted && o->on_output(o->ctx, stream, chunk, (size_t)n))
                r->aborted = 1;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        close_fd(fd);
        return 1;
    }
}

/* Orphans of a killed group are re-parented to us rather than to init, so that we can reap them and a
 * run that returns after a kill has left nothing behind (not even a zombie). */
static void become_subreaper(void)
{
    static int done;
    if (!done) {
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        done = 1;
    }
}

/* The children odp waits for itself (odp_child_track); a full table makes odp_reap_orphans reap nothing. */
#define TRACKED_MAX 1024
static pid_t tracked[TRACKED_MAX];
static int ntracked, tracked_overflow;

void odp_child_track(pid_t pid)
{
    if (ntracked < TRACKED_MAX)
        tracked[ntracked++] = pid;
    else
        tracked_overflow++;
}

void odp_child_untrack(pid_t pid)
{
    for (int i = 0; i < ntracked; i++)
        if (tracked[i] == pid) {
            tracked[i] = tracked[--ntracked];
            return;
        }
    if (tracked_overflow > 0)
        tracked_overflow--;
}

static int is_tracked(pid_t pid)
{
    for (int i = 0; i < ntracked; i++)
        if (tracked[i] == pid)
            return 1;
    return 0;
}

/* Whether pid is a zombie ('Z' after the command's closing parenthesis in /proc/PID/stat). */
static int is_zombie(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

int odp_reap_orphans(void)
{
    if (tracked_overflow)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "re");
    if (!f)
        return 0; /* a kernel without CONFIG_PROC_CHILDREN: they are reaped when odp ends */
    int reaped = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        if (!is_tracked((pid_t)pid) && is_zombie((pid_t)pid) && waitpid((pid_t)pid, NULL, WNOHANG) == (pid_t)pid)
            reaped++;
    fclose(f);
    return reaped;
}

/* Reaps what is left of a group we killed (SIGKILL makes this prompt). */
static void reap_group(pid_t pgid)
{
    while (waitpid(-pgid, NULL, 0) > 0 || errno == EINTR) {}
}

int odp_proc_run(const odp_proc_opts *o, odp_proc_result *r, odp_err *err)
{
    memset(r, 0, sizeof *r);
    become_subreaper();
    odp_reap_orphans();
    r->out.limit = r->err.limit = o->capture_limit;
    int out[2] = {-1, -1}, errp[2] = {-1, -1}, in[2] = {-1, -1}, pidfd = -1;
    int rc = 0;
    pid_t spawned = 0; /* tracked from its spawn to done, where it has been reaped */
    if (pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC) || (o->stdin_data && pipe2(in, O_CLOEXEC))) {
        rc = odp_fail_errno(err, ODP_EIO, errno, "pipe");
        goto done;
    }
    double t0 = odp_now();
    pid_t pid;
    rc = spawn(o, out, errp, in, &pid, err);
    if (rc == 0)
        odp_child_track(spawned = pid);
    close_fd(&out[1]);
    close_fd(&errp[1]);
    close_fd(&in[0]);
    if (rc)
        goto done;
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        rc = odp_fail_errno(err, ODP_EIO, errno, "pidfd_open");
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        goto done;
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(errp[0], F_SETFL, O_NONBLOCK);
    if (in[1] >= 0)
        fcntl(in[1], F_SETFL, O_NONBLOCK);

    size_t in_off = 0;
    int reaped = 0, stopping = 0, killed = 0;
    double kill_at = ODP_FOREVER, drain_until = ODP_FOREVER;
    int wstatus = 0;
    while (!reaped || out[0] >= 0 || errp[0] >= 0) {
        if (reaped && (odp_now() >= drain_until || odp_cancel_requested()))
            break;
        if (!reaped && odp_cancel_requested()) {
            /* Ctrl-C: the user wants out now, so no grace; keep what was read so far. */
            r->canceled = 1;
            kill(-pid, SIGKILL);
            wait4(pid, &wstatus, 0, &r->ru);
            r->wall_s = odp_now() - t0;
            if (out[0] >= 0)
                pump(o, r, &out[0], 1, t0);
            if (errp[0] >= 0)
                pump(o, r, &errp[0], 2, t0);
            break;
        }
        if (!stopping && (r->aborted || odp_now() >= o->deadline)) {
            /* The whole group: the runner and anything it started. */
            stopping = 1;
            r->timed_out = !r->aborted;
            kill(-pid, SIGTERM);
            kill_at = odp_now() + (o->kill_grace > 0 ? o->kill_grace : 0);
            close_fd(&in[1]);
        }
        if (stopping && !killed && odp_now() >= kill_at) {
            killed = 1;
            kill(-pid, SIGKILL);
        }
        struct pollfd p[4];
        nfds_t n = 0;
        int idx_out = -1, idx_err = -1, idx_in = -1, idx_pid = -1;
        if (out[0] >= 0) { idx_out = (int)n; p[n++] = (struct pollfd){out[0], POLLIN, 0}; }
        if (errp[0] >= 0) { idx_err = (int)n; p[n++] = (struct pollfd){errp[0], POLLIN, 0}; }
        if (in[1] >= 0) { idx_in = (int)n; p[n++] = (struct pollfd){in[1], POLLOUT, 0}; }
        if (!reaped) { idx_pid = (int)n; p[n++] = (struct pollfd){pidfd, POLLIN, 0}; }
        double until = reaped ? drain_until : stopping ? (killed ? ODP_FOREVER : kill_at) : o->deadline;
        odp_err werr;
        int w = odp_wait(p, n, until, &werr);
        if (w == ODP_ETIMEDOUT || w == ODP_ECANCELED)
            continue; /* handled at the top of the loop */
        if (w) {
            *err = werr;
            rc = w;
            kill(-pid, SIGKILL);
            if (!reaped)
                waitpid(pid, NULL, 0);
            goto done;
        }
        if (idx_out >= 0 && p[idx_out].revents)
            pump(o, r, &out[0], 1, t0);
        if (idx_err >= 0 && p[idx_err].revents)
            pump(o, r, &errp[0], 2, t0);
        if (idx_in >= 0 && p[idx_in].revents) {
            ssize_t k = write(in[1], o->stdin_data + in_off, o->stdin_len - in_off);
            if (k > 0)
                in_off += (size_t)k;
            if ((k < 0 && errno != EAGAIN && errno != EINTR) || in_off == o->stdin_len)
                close_fd(&in[1]);
        }
        if (idx_pid >= 0 && p[idx_pid].revents) {
            if (wait4(pid, &wstatus, WNOHANG, &r->ru) == pid) {
                reaped = 1;
                r->wall_s = odp_now() - t0;
                close_fd(&in[1]);
                if (stopping)
                    kill(-pid, SIGKILL); /* grandchildren that ignored SIGTERM */
                drain_until = odp_now() + DRAIN_GRACE_S;
            }
        }
    }
    if (stopping || r->canceled) {
        kill(-pid, SIGKILL);
        reap_group(pid);
    }
    if (WIFEXITED(wstatus)) {
        r->status = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        r->signal = WTERMSIG(wstatus);
        r->core_dumped = WCOREDUMP(wstatus) != 0;
    }
done:
    close_fd(&out[0]);
    close_fd(&out[1]);
    close_fd(&errp[0]);
    close_fd(&errp[1]);
    close_fd(&in[0]);
    close_fd(&in[1]);
    close_fd(&pidfd);
    if (spawned)
        odp_child_untrack(spawned);
    odp_reap_orphans();
    if (rc)
        odp_proc_result_free(r);
    return rc;
}

void odp_proc_result_free(odp_proc_result *r)
{
    odp_buf_free(&r->out);
    odp_buf_free(&r->err);
    free(r->out_times.t_us);
    free(r->out_times.ends);
    r->out_times.t_us = NULL;
    r->out_times.ends = NULL;
}
