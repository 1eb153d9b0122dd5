/* The "run one program and measure it" core of odp-rusage, used by both its modes (tools/exec.c: one program
 * measured and its report printed; tools/serve.c: the resident helper's run request): the fork and exec with
 * its CPU placement, working directory and environment, the perf counters opened on the child before its exec,
 * the sampler attached (tools/sample.h), the report lines of an ended program. See spawn.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"
#include "sample.h"

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

int rusage_parse_cpus(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    if (!*s)
        return -1;
    while (*s) {
        char *end;
        errno = 0;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || errno || a < 0)
            return -1;
        s = end;
        if (*s == '-') {
            s++;
            b = strtol(s, &end, 10);
            if (end == s || errno || b < a)
                return -1;
            s = end;
        }
        if (b >= CPU_SETSIZE)
            return -1;
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, set);
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            return -1;
    }
    return 0;
}

struct counter {
    const char *name;
    uint32_t type;
    uint64_t config;
    int level; /* 1: basic, 2: all */
    int fd, err;
};

static struct counter counters[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 1, -1, 0},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 1, -1, 0},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, 1, -1, 0},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, 1, -1, 0},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 1, -1, 0},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 1, -1, 0},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 2, -1, 0},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, 2, -1, 0},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, 2, -1, 0},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, 2, -1, 0},
};
#define NCOUNTERS (int)(sizeof counters / sizeof counters[0])

static int user_only;

/* Opens the counters of the given level on pid (stopped before its exec), counting from its exec on. */
static void open_counters(pid_t pid, int level)
{
    for (int k = 0; k < NCOUNTERS; k++) {
        struct counter *c = &counters[k];
        if (c->level > level)
            continue;
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = c->type;
        a.config = c->config;
        a.disabled = 1;
        a.enable_on_exec = 1;
        a.inherit = 1;
        a.exclude_hv = 1;
        a.exclude_kernel = (unsigned)user_only;
        a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        long fd = syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0 && (errno == EACCES || errno == EPERM) && !user_only) {
            /* perf_event_paranoid >= 2 forbids kernel-side counting to unprivileged users: count user space */
            a.exclude_kernel = 1;
            fd = syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
            if (fd >= 0)
                user_only = 1;
        }
        c->fd = (int)fd;
        c->err = fd < 0 ? errno : 0;
    }
}

static void print_counters(FILE *f, int level)
{
    long paranoid = -9;
    FILE *p = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    if (p) {
        if (fscanf(p, "%ld", &paranoid) != 1)
            paranoid = -9;
        fclose(p);
    }
    fprintf(f, "ODP-COUNTERS");
    if (paranoid != -9)
        fprintf(f, " paranoid=%ld", paranoid);
    if (user_only)
        fprintf(f, " user_only=1");
    for (int k = 0; k < NCOUNTERS; k++) {
        struct counter *c = &counters[k];
        if (c->level > level)
            continue;
        uint64_t v[3];
        if (c->fd >= 0 && read(c->fd, v, sizeof v) == (ssize_t)sizeof v)
            fprintf(f, " %s=%llu,%llu,%llu", c->name, (unsigned long long)v[0], (unsigned long long)v[1],
                    (unsigned long long)v[2]);
        else if (c->fd >= 0)
            fprintf(f, " %s=unreadable", c->name);
        else
            fprintf(f, " %s=%s", c->name, c->err == EACCES || c->err == EPERM ? "denied" : "unsupported");
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
    }
    fprintf(f, "\n");
}

void rusage_report(FILE *f, int level, int st, const struct rusage *ru, double wall)
{
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 0, sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (level)
        print_counters(f, level);
    fprintf(f,
            "ODP-RUSAGE status=%d signal=%d core=%d maxrss_kb=%ld utime_s=%.6f stime_s=%.6f wall_s=%.6f "
            "minflt=%ld majflt=%ld nvcsw=%ld nivcsw=%ld\n",
            status, sig, sig && WCOREDUMP(st) ? 1 : 0, ru->ru_maxrss, tv(ru->ru_utime), tv(ru->ru_stime), wall,
            ru->ru_minflt, ru->ru_majflt, ru->ru_nvcsw, ru->ru_nivcsw);
}

int rusage_level(const char *l)
{
    return strcmp(l, "none") == 0 ? 0 : strcmp(l, "basic") == 0 ? 1 : strcmp(l, "all") == 0 ? 2 : -1;
}

int rusage_spawn(const struct rusage_spawn *sp, struct rusage_child *ch)
{
    memset(ch, 0, sizeof *ch);
    int errpipe[2]; /* reports a failure before the exec (stage, errno) from the child */
    int gopipe[2];  /* holds the child before its exec until its counters are open */
    if (pipe2(errpipe, O_CLOEXEC))
        return -1;
    if (pipe2(gopipe, O_CLOEXEC)) {
        close(errpipe[0]);
        close(errpipe[1]);
        return -1;
    }
    int fd_err = sp->fd_err; /* sampled: the program's stderr passes through the sampler (tools/sample.h) */
    if (sp->sampler && (fd_err = sampler_stderr_pipe(sp->sampler, sp->fd_err)) < 0) {
        close(errpipe[0]), close(errpipe[1]), close(gopipe[0]), close(gopipe[1]);
        return -1;
    }
    pid_t parent = getpid();
    ch->t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(errpipe[0]), close(errpipe[1]), close(gopipe[0]), close(gopipe[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        if (!sp->same_group)
            setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        close(gopipe[1]);
        char go;
        while (read(gopipe[0], &go, 1) < 0 && errno == EINTR) {}
        int fail[2] = {0, 0};
        if (sp->fd_in >= 0)
            dup2(sp->fd_in, 0);
        if (sp->fd_out >= 0)
            dup2(sp->fd_out, 1);
        if (fd_err >= 0)
            dup2(fd_err, 2);
        signal(SIGPIPE, SIG_DFL);
        if (sp->cpus && sched_setaffinity(0, sizeof *sp->cpus, sp->cpus))
            fail[0] = RUSAGE_STAGE_CPUS;
        else if (sp->cwd && chdir(sp->cwd))
            fail[0] = RUSAGE_STAGE_CWD;
        else {
            if (sp->envp)
                environ = sp->envp;
            execvp(sp->argv[0], sp->argv);
            fail[0] = RUSAGE_STAGE_EXEC;
        }
        fail[1] = errno;
        ssize_t w = write(errpipe[1], fail, sizeof fail);
        (void)w;
        _exit(fail[0] == RUSAGE_STAGE_EXEC ? 127 : 125);
    }
    if (!sp->same_group)
        setpgid(pid, pid);
    ch->pid = pid;
    close(errpipe[1]);
    close(gopipe[0]);
    user_only = 0;
    if (sp->level)
        open_counters(pid, sp->level);
    if (sp->sampler && sampler_attach(sp->sampler, pid, ch->why, sizeof ch->why)) {
        kill(pid, SIGKILL); /* it waits for the go, before its exec: nothing of it ran */
        close(gopipe[1]);
        close(errpipe[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        ch->stage = RUSAGE_STAGE_SAMPLE;
        for (int k = 0; k < NCOUNTERS; k++)
            if (counters[k].fd >= 0) {
                close(counters[k].fd);
                counters[k].fd = -1;
            }
        return 0;
    }
    close(gopipe[1]); /* go: the child execs */
    int fail[2] = {0, 0};
    ssize_t r;
    while ((r = read(errpipe[0], fail, sizeof fail)) < 0 && errno == EINTR) {}
    close(errpipe[0]);
    if (r == (ssize_t)sizeof fail) {
        ch->stage = fail[0];
        ch->err = fail[1];
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        for (int k = 0; k < NCOUNTERS; k++)
            if (counters[k].fd >= 0) {
                close(counters[k].fd);
                counters[k].fd = -1;
            }
    }
    return 0;
}

void rusage_spawn_failure(FILE *f, const struct rusage_spawn *sp, const struct rusage_child *ch)
{
    if (ch->stage == RUSAGE_STAGE_CPUS)
        fprintf(f, "odp-rusage: cannot pin to CPUs %s: %s\n", sp->cpus_text, strerror(ch->err));
    else if (ch->stage == RUSAGE_STAGE_SAMPLE)
        fprintf(f, "odp-rusage: %s\n", ch->why);
    else if (ch->stage == RUSAGE_STAGE_CWD)
        fprintf(f, "odp-rusage: cannot change to %s: %s\n", sp->cwd, strerror(ch->err));
    else
        fprintf(f, "odp-rusage: cannot run %s: %s\n", sp->argv[0], strerror(ch->err));
}

