/* mem_phases: a program that prints executor_runner's lines (stderr, one write each, as the real runner) around
 * allocations of known sizes, the oracle of the memory-by-phase tests (tests/lua/memory_test.lua):
 *   load:   8 MiB allocated and touched, kept                          -> "Model file m.pte is loaded."
 *   method: 24 MiB touched and freed ("planning")                      -> "Model loaded in 1.0 ms."
 *   first:  40 MiB touched and freed during the first iteration        -> "Iteration 1 of N: 1.0 ms"
 *   steady: 4 MiB more touched and kept per later iteration            -> "Iteration i of N: 1.0 ms"
 *   then "Model executed successfully N time(s) in 1.0 ms." and an output line on stdout.
 * Its stdout's first line is its own resident size before any of that (baseline_kb=N, from /proc/self/status),
 * so each phase's peak is known: baseline + 8, + 32, + 48, + 8 + 4 (N - 1) MiB.
 *   mem_phases [--gap MS] [--no-lines] [--exit-in load|method] [--undumpable] [--fork MB] N
 * (or executor_runner's --model_path P --num_executions N: the model is not read)
 * --gap MS: a pause after each line (default 20), standing for the work a runner does between a line and its
 *   next allocation: a boundary is read when its line arrives, so what the program allocates before the
 *   helper's read counts in the phase before (docs/memory.md); 0 shows that.
 * --no-lines: the same allocations, none of the lines. --exit-in load: exits 1 while loading (before its first
 *   line); method: after its first line, in the middle of planning. --undumpable: PR_SET_DUMPABLE 0 (its
 *   /proc files then belong to root: another user cannot write its clear_refs). --fork MB: in the second
 *   iteration, a child that touches MB and exits, waited for. Static (Makefile): no loader in its baseline. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static long gap_ms = 20;

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts)) {}
}

static void say(int lines, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int lines, const char *fmt, ...)
{
    if (lines) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        if (write(2, buf, (size_t)n) != n)
            exit(3);
    }
    pause_ms(gap_ms);
}

/* n bytes, every page written: resident now (mmap, so munmap gives them back at once) */
static char *touch(size_t n)
{
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mem_phases: mmap");
        exit(1);
    }
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (char)(i | 1);
    return p;
}

static long own_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

#define LOG "I 00:00:00.000000 executorch:executor_runner.cpp:%d] "

int main(int argc, char **argv)
{
    int lines = 1, n = -1;
    long fork_mb = 0;
    const char *exit_in = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gap") && i + 1 < argc)
            gap_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--no-lines"))
            lines = 0;
        else if (!strcmp(argv[i], "--exit-in") && i + 1 < argc)
            exit_in = argv[++i];
        else if (!strcmp(argv[i], "--undumpable"))
            prctl(PR_SET_DUMPABLE, 0);
        else if (!strcmp(argv[i], "--fork") && i + 1 < argc)
            fork_mb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--num_executions") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if ((!strcmp(argv[i], "--model_path") || !strcmp(argv[i], "--data_path")) && i + 1 < argc)
            i++; /* executor_runner's flags, so odp's flow can run it as its runner */
        else if (argv[i][0] != '-')
            n = atoi(argv[i]);
        else
            n = -1, i = argc;
    }
    if (n < 1) {
        fprintf(stderr, "usage: mem_phases [--gap MS] [--no-lines] [--exit-in load|method] [--undumpable] "
                        "[--fork MB] N\n");
        return 2;
    }
    printf("baseline_kb=%ld\n", own_rss_kb());
    fflush(stdout);
    char *program = touch(8 * MIB);
    if (exit_in && !strcmp(exit_in, "load"))
        return 1;
    say(lines, LOG "Model file m.pte is loaded.\n", 476);
    say(lines, LOG "Using method forward\n", 486);
    say(lines, LOG "Setting up CPU planned buffer 0, size %d.\n", 556, 24 * MIB);
    char *plan = touch(24 * MIB);
    if (exit_in && !strcmp(exit_in, "method")) {
        fprintf(stderr, "E 00:00:00.000000 executorch:executor_runner.cpp:600] Loading of method forward failed "
                        "with status 0x21\n");
        return 1;
    }
    munmap(plan, 24 * MIB);
    say(lines, LOG "Model loaded in 1.000000 ms.\n", 624);
    char *first = touch(40 * MIB);
    /* held a few sampling periods before it goes: the ~1 kHz timeline sees the top only if it lasts (freed the
     * instant its last page was touched, a sample could fall 1 ms short of it, a MiB or more below VmHWM's) */
    pause_ms(5);
    munmap(first, 40 * MIB);
    say(lines, LOG "Iteration 1 of %d: 1.000000 ms\n", 779, n);
    for (int i = 2; i <= n; i++) {
        touch(4 * MIB); /* kept: steady state grows */
        if (fork_mb && i == 2) {
            pid_t c = fork();
            if (c == 0) {
                touch((size_t)fork_mb * MIB);
                pause_ms(50);
                _exit(0);
            }
            while (c > 0 && waitpid(c, NULL, 0) < 0) {}
        }
        say(lines, LOG "Iteration %d of %d: 1.000000 ms\n", 779, i, n);
    }
    say(lines, LOG "Model executed successfully %d time(s) in %d.000000 ms.\n", 789, n, n);
    printf("OutputX 0: tensor(sizes=[3], [2., 2., 2.])\n");
    (void)program;
    return 0;
}
