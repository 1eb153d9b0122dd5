/* odp-rusage: run a program and report how it ended and what it used, for boards without GNU time.
 *   odp-rusage [-o FILE] [-g] [--cpus LIST] [--counters none|basic|all] [--] PROGRAM [ARGS...]
 * --cpus LIST ("4-7", "0,2"): the program runs pinned to those CPUs (sched_setaffinity in the child before
 * exec, inherited by its threads), so placement works where taskset is absent; a CPU that is absent or
 * offline is refused by the kernel: exit 125 with the reason.
 * --counters basic|all: perf_event_open counters on the program, opened before its exec (enable_on_exec) and
 * inherited by its threads and children, like `perf stat`: basic = task-clock, context-switches,
 * cpu-migrations, page-faults (software, always there), cycles, instructions (where the PMU has them); all adds
 * branches, branch-misses, cache-references, cache-misses. They are reported on a line before ODP-RUSAGE:
 *   ODP-COUNTERS paranoid=2 task-clock=451234567,451300000,451300000 cycles=unsupported instructions=denied
 * name=value,time_enabled_ns,time_running_ns (raw: a counter multiplexed off the PMU has running < enabled
 * and the reader scales it), or why it has none: unsupported (no such event here, e.g. a VM without a PMU),
 * denied (kernel.perf_event_paranoid; kernel-side counting is dropped first: user_only=1 says so).
 * The program runs in its own process group; SIGTERM/SIGHUP/SIGINT are forwarded to that group (and a
 * KILL follows 2 s later if it is still there, or as soon as the program itself has exited); the program
 * also gets SIGTERM if odp-rusage dies. If odp-rusage's own parent dies (odp killed outright, a board's
 * session dropped), the program's group is killed at once and odp-rusage exits: nothing outlives the run. With -g
 * the program stays in odp-rusage's process group and nothing is forwarded: the caller signals that group
 * itself (odp's host target, whose process runner already kills a run's whole group). After
 * wait4, one line goes to stderr (or FILE):
 *   ODP-RUSAGE status=0 signal=0 core=0 maxrss_kb=43600 utime_s=1.450000 stime_s=0.020000 wall_s=0.451234
 *              minflt=1234 majflt=0 nvcsw=10 nivcsw=3
 * (one line; maxrss_kb is the program's own peak RSS in KiB, as wait4 reports it). odp-rusage then ends the
 * way the program did: same exit status, or the same signal (without a core dump), so SSH's exit-status /
 * exit-signal stay true. Exit 127 when the program cannot be started, 125 on usage errors.
 * --memory CSV [--mark EVENT=GLOB]... [--memory-file MODEL]: memory by phase (tools/memwatch.c, docs/memory.md):
 * the program's output comes through odp-rusage, each line matching a mark is a phase boundary (VmHWM read,
 * then reset), /proc/PID/statm is sampled at 1 kHz into CSV; ODP-MEMORY-MARK and ODP-MEMORY lines precede
 * ODP-RUSAGE in the report.
 * odp-rusage --serve: the resident helper (docs/helper-protocol.md, tools/serve.c). Started once per board
 * session; framed requests on stdin (run measured as above, device state, sha256, free space, small files,
 * kill), answers on stdout; it exits when stdin closes, killing a run still going.
 * Built statically for every target (Makefile: odp-rusage-x86_64, odp-rusage-aarch64); not linked into odp. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rusage.h"
#include "memwatch.h"
#include "sample.h"

#define KILL_AFTER_S 2

static volatile pid_t child;
static volatile sig_atomic_t stopping;
static int same_group;

static void forward(int sig)
{
    if (child > 0 && !same_group) {
        stopping = 1;
        kill(-child, sig);
        alarm(KILL_AFTER_S);
    }
}

/* The parent (odp on this machine; on a board the SSH or adb session that ran us) is gone: nobody will read
 * the report or stop the run, so the run ends now, whole group at once (with -g that group is ours). */
static void orphaned(int sig)
{
    (void)sig;
    if (child > 0)
        kill(same_group ? 0 : -child, SIGKILL);
    _exit(128 + SIGKILL);
}

static void escalate(int sig)
{
    (void)sig;
    if (child > 0 && !same_group)
        kill(-child, SIGKILL);
}

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

/* "0-3,6" -> set; 0 on success, -1 for anything else (a CPU id above CPU_SETSIZE - 1 included). */
static int parse_cpus(const char *s, cpu_set_t *set)
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

#define USAGE                                                                                                  \
    "usage: odp-rusage [-o FILE] [-g] [--cpus LIST] [--counters none|basic|all]\n"                             \
    "                  [--memory CSV [--mark EVENT=GLOB]... [--memory-file MODEL]]\n"                          \
    "                  [--sample HZ --sample-out FILE [--sample-ring PAGES]] [--] PROGRAM [ARGS...]\n"

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

int rusage_parse_cpus(const char *s, cpu_set_t *set) { return parse_cpus(s, set); }

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

int main(int argc, char **argv)
{
    const char *out = NULL, *cpus = NULL, *memory = NULL, *memory_file = NULL, *sample_out = NULL;
    static struct memwatch mw;
    int level = 0;
    unsigned long sample_hz = 0, sample_ring = 0;
    cpu_set_t cpuset;
    int i = 1;
    if (argc == 2 && strcmp(argv[1], "--serve") == 0)
        return rusage_serve();
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "-g") == 0)
            same_group = 1;
        else if (strcmp(argv[i], "--cpus") == 0 && i + 1 < argc) {
            cpus = argv[++i];
            if (parse_cpus(cpus, &cpuset)) {
                fprintf(stderr, "odp-rusage: --cpus %s: not a CPU list like 4-7 or 0,2\n", cpus);
                return 125;
            }
        } else if (strcmp(argv[i], "--counters") == 0 && i + 1 < argc) {
            const char *l = argv[++i];
            level = rusage_level(l);
            if (level < 0) {
                fprintf(stderr, "odp-rusage: --counters %s: none, basic or all\n", l);
                return 125;
            }
        } else if (strcmp(argv[i], "--memory") == 0 && i + 1 < argc) {
            memory = argv[++i];
        } else if (strcmp(argv[i], "--memory-file") == 0 && i + 1 < argc) {
            memory_file = argv[++i];
        } else if (strcmp(argv[i], "--mark") == 0 && i + 1 < argc) {
            if (memwatch_add_mark(&mw, argv[++i])) {
                fprintf(stderr, "odp-rusage: --mark %s: EVENT=GLOB (EVENT [a-z0-9_], at most %d marks)\n", argv[i],
                        MEMWATCH_MARKS);
                return 125;
            }
        } else if (strcmp(argv[i], "--sample") == 0 && i + 1 < argc) {
            char *end;
            sample_hz = strtoul(argv[++i], &end, 10);
            if (*end || !sample_hz || sample_hz > 100000) {
                fprintf(stderr, "odp-rusage: --sample %s: samples per second, 1 to 100000\n", argv[i]);
                return 125;
            }
        } else if (strcmp(argv[i], "--sample-out") == 0 && i + 1 < argc) {
            sample_out = argv[++i];
        } else if (strcmp(argv[i], "--sample-ring") == 0 && i + 1 < argc) {
            char *end;
            sample_ring = strtoul(argv[++i], &end, 10);
            if (*end || !sample_ring || sample_ring > 4096 || (sample_ring & (sample_ring - 1))) {
                fprintf(stderr, "odp-rusage: --sample-ring %s: pages per CPU, a power of 2 up to 4096\n", argv[i]);
                return 125;
            }
        } else {
            fprintf(stderr, USAGE);
            return 125;
        }
    }
    if (!sample_hz != !sample_out) {
        fprintf(stderr, "odp-rusage: --sample and --sample-out go together\n");
        return 125;
    }
    if (i >= argc || ((mw.nmarks || memory_file) && !memory)) {
        fprintf(stderr, USAGE);
        return 125;
    }
    /* PR_SET_PDEATHSIG before the check: a parent that died in between is caught by getppid() */
    pid_t caller = getppid();
    struct sigaction orphan = {0};
    orphan.sa_handler = orphaned;
    sigemptyset(&orphan.sa_mask);
    sigaction(SIGUSR2, &orphan, NULL);
    prctl(PR_SET_PDEATHSIG, SIGUSR2);
    if (getppid() != caller)
        return 125;
    struct rusage_spawn sp = {.argv = argv + i, .cpus = cpus ? &cpuset : NULL, .cpus_text = cpus, .level = level,
                              .same_group = same_group, .fd_in = -1, .fd_out = -1, .fd_err = -1};
    if (sample_out && !(sp.sampler = sampler_new(sample_out, (unsigned)sample_hz, (unsigned)sample_ring))) {
        fprintf(stderr, "odp-rusage: cannot write %s: %s\n", sample_out, strerror(errno));
        return 125;
    }
    struct rusage_child ch;
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (memory) { /* the program's output comes through here, so its lines mark the phases as they arrive */
        if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
            perror("odp-rusage: pipe");
            return 125;
        }
        sp.fd_out = po[1], sp.fd_err = pe[1];
    }
    if (rusage_spawn(&sp, &ch)) {
        perror("odp-rusage: fork");
        return 125;
    }
    if (memory) {
        close(po[1]), close(pe[1]);
        if (!ch.stage && memwatch_start(&mw, ch.pid, ch.t0, memory, memory_file))
            fprintf(stderr, "odp-rusage: cannot write %s: %s\n", memory, strerror(errno));
    }
    child = ch.pid;
    struct sigaction sa = {0};
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = escalate;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (ch.stage) {
        rusage_spawn_failure(stderr, &sp, &ch);
        if (sp.sampler)
            sampler_finish(sp.sampler);
        return ch.stage == RUSAGE_STAGE_EXEC ? 127 : 125;
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (memory)
        memwatch_relay(&mw, ch.pid, po[0], pe[0], &st, &ru);
    else
        while (wait4(ch.pid, &st, 0, &ru) < 0 && errno == EINTR) {}
    double wall = now() - ch.t0;
    if (sp.sampler && sampler_finish(sp.sampler))
        fprintf(stderr, "odp-rusage: the sample stream %s could not be written whole\n", sample_out);
    /* a stopped run leaves nothing behind: what its group still holds (children that ignored the
     * forwarded signal) ends with odp-rusage, not 2 s later or never */
    if (stopping && !same_group)
        kill(-ch.pid, SIGKILL);
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    FILE *f = stderr;
    if (out && !(f = fopen(out, "w"))) {
        fprintf(stderr, "odp-rusage: cannot write %s: %s\n", out, strerror(errno));
        f = stderr;
    }
    memwatch_report(&mw, f);
    rusage_report(f, level, st, &ru, wall);
    fflush(f);
    if (f != stderr)
        fclose(f);
    if (sig) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        return 128 + sig;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}
