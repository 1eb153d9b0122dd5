/* odp-rusage's one-shot mode: run a program and report how it ended and what it used, for boards without GNU
 * time (the spawn itself is tools/spawn.c, shared with the resident helper, tools/serve.c).
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
 * then reset), /proc/PID/statm is sampled at 1 kHz into CSV (64 MiB at most: a longer timeline is cut,
 * timeline=cut); ODP-MEMORY-MARK and ODP-MEMORY lines precede ODP-RUSAGE in the report. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "odp-rusage.h"
#include "memwatch.h"
#include "sample.h"
#include "spawn.h"

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

#define USAGE                                                                                                  \
    "usage: odp-rusage [-o FILE] [-g] [--cpus LIST] [--counters none|basic|all]\n"                             \
    "                  [--memory CSV [--mark EVENT=GLOB]... [--memory-file MODEL]]\n"                          \
    "                  [--sample HZ --sample-out FILE [--sample-ring PAGES]] [--] PROGRAM [ARGS...]\n"

int rusage_exec(int argc, char **argv)
{
    const char *out = NULL, *cpus = NULL, *memory = NULL, *memory_file = NULL, *sample_out = NULL;
    static struct memwatch mw;
    int level = 0;
    unsigned long sample_hz = 0, sample_ring = 0;
    cpu_set_t cpuset;
    int i = 1;
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
            if (rusage_parse_cpus(cpus, &cpuset)) {
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
        FILE *timeline = ch.stage ? NULL : fopen(memory, "we");
        if (timeline)
            memwatch_start(&mw, ch.pid, ch.t0, timeline, MEMWATCH_TIMELINE_MAX, memory_file);
        else if (!ch.stage)
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
