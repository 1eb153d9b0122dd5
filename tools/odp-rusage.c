/* odp-rusage: run a program and report how it ended and what it used, for boards without GNU time.
 *   odp-rusage [-o FILE] [--cpus LIST] [--] PROGRAM [ARGS...]
 * --cpus LIST ("4-7", "0,2"): the program runs pinned to those CPUs (sched_setaffinity in the child before
 * exec, inherited by its threads), so placement works where taskset is absent; a CPU that is absent or
 * offline is refused by the kernel: exit 125 with the reason.
 * The program runs in its own process group; SIGTERM/SIGHUP/SIGINT are forwarded to that group (and a
 * KILL follows 2 s later if it is still there); the program also gets SIGTERM if odp-rusage dies. After
 * wait4, one line goes to stderr (or FILE):
 *   ODP-RUSAGE status=0 signal=0 core=0 maxrss_kb=43600 utime_s=1.450000 stime_s=0.020000 wall_s=0.451234
 *              minflt=1234 majflt=0 nvcsw=10 nivcsw=3
 * (one line; maxrss_kb is the program's own peak RSS in KiB, as wait4 reports it). odp-rusage then ends the
 * way the program did: same exit status, or the same signal (without a core dump), so SSH's exit-status /
 * exit-signal stay true. Exit 127 when the program cannot be started, 125 on usage errors.
 * Built statically for every target (Makefile: odp-rusage-x86_64, odp-rusage-aarch64); not linked into odp. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
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

#define KILL_AFTER_S 2

static volatile pid_t child;

static void forward(int sig)
{
    if (child > 0) {
        kill(-child, sig);
        alarm(KILL_AFTER_S);
    }
}

static void escalate(int sig)
{
    (void)sig;
    if (child > 0)
        kill(-child, SIGKILL);
}

static double now(void)
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

#define USAGE "usage: odp-rusage [-o FILE] [--cpus LIST] [--] PROGRAM [ARGS...]\n"

int main(int argc, char **argv)
{
    const char *out = NULL, *cpus = NULL;
    cpu_set_t cpuset;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--cpus") == 0 && i + 1 < argc) {
            cpus = argv[++i];
            if (parse_cpus(cpus, &cpuset)) {
                fprintf(stderr, "odp-rusage: --cpus %s: not a CPU list like 4-7 or 0,2\n", cpus);
                return 125;
            }
        } else {
            fprintf(stderr, USAGE);
            return 125;
        }
    }
    if (i >= argc) {
        fprintf(stderr, USAGE);
        return 125;
    }
    int errpipe[2]; /* reports an exec failure from the child */
    if (pipe2(errpipe, O_CLOEXEC)) {
        perror("odp-rusage: pipe");
        return 125;
    }
    pid_t parent = getpid();
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("odp-rusage: fork");
        return 125;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (cpus && sched_setaffinity(0, sizeof cpuset, &cpuset)) {
            int e = -errno; /* negative: the affinity, not the exec, failed */
            ssize_t w = write(errpipe[1], &e, sizeof e);
            (void)w;
            _exit(125);
        }
        execvp(argv[i], argv + i);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    setpgid(pid, pid);
    child = pid;
    close(errpipe[1]);
    struct sigaction sa = {0};
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = escalate;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int e = 0;
    ssize_t r;
    while ((r = read(errpipe[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    close(errpipe[0]);
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {}
    double wall = now() - t0;
    if (r == (ssize_t)sizeof e && e < 0) {
        fprintf(stderr, "odp-rusage: cannot pin to CPUs %s: %s\n", cpus, strerror(-e));
        return 125;
    }
    if (r == (ssize_t)sizeof e) {
        fprintf(stderr, "odp-rusage: cannot run %s: %s\n", argv[i], strerror(e));
        return 127;
    }
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 0, sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    FILE *f = stderr;
    if (out && !(f = fopen(out, "w"))) {
        fprintf(stderr, "odp-rusage: cannot write %s: %s\n", out, strerror(errno));
        f = stderr;
    }
    fprintf(f,
            "ODP-RUSAGE status=%d signal=%d core=%d maxrss_kb=%ld utime_s=%.6f stime_s=%.6f wall_s=%.6f "
            "minflt=%ld majflt=%ld nvcsw=%ld nivcsw=%ld\n",
            status, sig, sig && WCOREDUMP(st) ? 1 : 0, ru.ru_maxrss, tv(ru.ru_utime), tv(ru.ru_stime), wall,
            ru.ru_minflt, ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw);
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
    return status;
}
