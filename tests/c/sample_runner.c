/* A runner with symbols whose time is known, for odp's sampler (tests/lua/sample_test.lua): each of N
 * "executes" runs three ops, each spinning in its own function for a known share of the time:
 *   op_alpha -> spin_alpha 50%, op_beta -> spin_beta 30%, op_gamma -> spin_gamma 20%
 * Its clock is ExecuTorch's posix PAL's: CLOCK_MONOTONIC ns since its start (et_pal_init), and it logs in
 * ExecuTorch's format ("I 00:00:00.012967 file:line] text", stderr, one write per line), so odp aligns it as it
 * aligns a real runner. It prints on stdout what a real runner keeps in its ETDump, and its clock's origin as
 * the oracle of that alignment:
 *   T0 <CLOCK_MONOTONIC ns at its start>
 *   OP <name> <start> <end> <cpu>    (ns since T0; cpu: the CPU time the op had, which is what samples of
 *                                    cpu-clock measure: on a loaded machine it is less than end - start)
 *   EXECUTE <start> <end>
 * Flags: --num_executions N (default 100), --ms X (one execute's length, default 10), --fork (a child spins in
 * spin_child during the run), --exit-after N (_exit(3) in the middle of execute N), and executor_runner's
 * --model_path/--etdump_path (ignored) so that odp's executorch flow can run it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t t0;

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t ticks(void) { return mono() - t0; }

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void logline(const char *fmt, int a, int b)
{
    uint64_t t = ticks() / 1000;
    char msg[128], line[256];
    snprintf(msg, sizeof msg, fmt, a, b);
    int n = snprintf(line, sizeof line, "I %02u:%02u:%02u.%06u sample_runner.c:1] %s\n", (unsigned)(t / 3600000000u),
                     (unsigned)(t / 60000000u % 60), (unsigned)(t / 1000000u % 60), (unsigned)(t % 1000000u), msg);
    if (write(2, line, (size_t)n) < 0) {}
}

static volatile double sink;

/* the same loop in each function but for a constant (identical bodies would be folded into one by GCC's
 * identical-code folding, -fipa-icf); the clock is read once per 4000 steps (~1% of the time) */
#define SPIN(fn, c)                                                                                               \
    __attribute__((noinline)) static void fn(uint64_t until)                                                      \
    {                                                                                                             \
        double x = sink;                                                                                          \
        do {                                                                                                      \
            for (int k = 0; k < 4000; k++)                                                                        \
                x = x * 1.0000001 + c;                                                                            \
        } while (ticks() < until);                                                                                \
        sink = x;                                                                                                 \
    }
SPIN(spin_alpha, 1e-9)
SPIN(spin_beta, 2e-9)
SPIN(spin_gamma, 3e-9)
SPIN(spin_child, 4e-9)

int main(int argc, char **argv)
{
    t0 = mono();
    int n = 100, fork_child = 0, exit_after = -1;
    double ms = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--num_executions") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
            ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--fork"))
            fork_child = 1;
        else if (!strcmp(argv[i], "--exit-after") && i + 1 < argc)
            exit_after = atoi(argv[++i]);
        else if ((!strcmp(argv[i], "--model_path") || !strcmp(argv[i], "--etdump_path")) && i + 1 < argc)
            i++;
        else {
            fprintf(stderr, "sample_runner: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    printf("T0 %llu\n", (unsigned long long)t0);
    fflush(stdout);
    pid_t child = -1;
    if (fork_child && (child = fork()) == 0) {
        spin_child(ticks() + (uint64_t)(n * ms * 1e6));
        _exit(0);
    }
    logline("Model loaded in %d.%d ms.", 0, 1);
    static const struct {
        const char *name;
        void (*fn)(uint64_t);
        double share;
    } ops[] = {{"op_alpha", spin_alpha, 0.5}, {"op_beta", spin_beta, 0.3}, {"op_gamma", spin_gamma, 0.2}};
    for (int it = 1; it <= n; it++) {
        uint64_t e0 = ticks();
        for (int k = 0; k < 3; k++) {
            uint64_t a = ticks(), c = cpu_ns();
            if (it == exit_after && k == 1)
                _exit(3);
            ops[k].fn(a + (uint64_t)(ms * ops[k].share * 1e6));
            uint64_t b = ticks();
            printf("OP %s %llu %llu %llu\n", ops[k].name, (unsigned long long)a, (unsigned long long)b,
                   (unsigned long long)(cpu_ns() - c));
        }
        uint64_t e1 = ticks();
        printf("EXECUTE %llu %llu\n", (unsigned long long)e0, (unsigned long long)e1);
        logline("Iteration %d of %d", it, n);
    }
    fflush(stdout);
    if (child > 0)
        waitpid(child, NULL, 0);
    logline("Model executed successfully %d time(s) in %d ms.", n, (int)(n * ms));
    return 0;
}
