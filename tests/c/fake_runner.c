/* A stand-in for ExecuTorch's executor_runner, for end-to-end tests of the flows on this machine.
 * It takes the real runner's flags and, by default, behaves like the real one built with logging and the
 * event tracer (messages copied from real transcripts, tests/fixtures/transcripts/): checks the model's
 * ET12 identifier, prints the POSIX log lines on stderr and the output tensor on stdout, writes an ETDump.
 * Environment knobs (also accepted as flags --fake_<name>=<value> after the real ones):
 *   ODP_FAKE_REPLAY=PREFIX   write PREFIX.stdout / PREFIX.stderr verbatim, exit as PREFIX.rc says (rc=N)
 *   ODP_FAKE_TOUCH_MB=N      allocate and touch N MB (peak RSS tests)
 *   ODP_FAKE_ITER_US=N       busy work per execution, microseconds (default 200)
 *   ODP_FAKE_FLOOD_MB=N      print N MiB of debug lines on stdout and N MiB on stderr before the executions
 *   ODP_FAKE_WAIT_US=N       then a sleep per execution, microseconds (default 0): time on "the device" that
 *                            costs this machine no CPU, for benches of many loopback boards at once
 *   ODP_FAKE_ETDUMP=FILE     copy FILE to --etdump_path (else a small placeholder ETDump is not written)
 *   ODP_FAKE_ETDUMP_BYTES=N  write only its first N bytes (a runner that dies while writing it: *_late modes)
 *   ODP_FAKE_CORE=1          raise its own core size limit to the hard limit (a crash then dumps core where
 *                            the kernel's core_pattern says, whatever limit the session it runs in set)
 *   ODP_FAKE_MODE=hang|hang_tree|segv|abort|segv_late|abort_late|garbage|silent|old
 *       segv_late, abort_late: crash after the runs, once the ETDump is written (or its first N bytes);
 *       hang: sleep forever; hang_tree: also leave a grandchild sleeping (process-group kill tests);
 *       silent: a Release build without logging (only the tensor on stdout); old: the older spelling
 *       without timestamps (the vendor guide's Raspberry Pi 5 example, docs/sources.md §8).
 *   A knob may also be written into the program file itself, as a line `ODP_FAKE_<NAME>=<value>` appended to
 *   its end (an ELF runs with bytes after its sections): two copies of one name that behave differently, as
 *   two builds of a runner do (tests/lua/shared_board_test.lua). Flags and the environment come first. */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static struct timespec t_start;
static const char *mode = "";

static double since_start(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t_start.tv_sec) + (double)(t.tv_nsec - t_start.tv_nsec) * 1e-9;
}

static void log_line(char level, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void log_line(char level, const char *file, int line, const char *fmt, ...)
{
    if (strcmp(mode, "silent") == 0)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (strcmp(mode, "old") == 0) {
        fprintf(stderr, "%c executorch:%s:%d] %s\n", level, file, line, msg);
    } else {
        double t = since_start();
        int s = (int)t;
        fprintf(stderr, "%c %02d:%02d:%02d.%06d executorch:%s:%d] %s\n", level, s / 3600, s / 60 % 60, s % 60,
                (int)((t - s) * 1e6), file, line, msg);
    }
    fflush(stderr);
}

/* The value of a line "NAME=value" among the last 4 KiB of this program's own file, or NULL. */
static const char *trailer_knob(const char *name)
{
    static char tail[4097];
    static int read_done;
    if (!read_done) {
        read_done = 1;
        FILE *f = fopen("/proc/self/exe", "rb");
        if (f) {
            if (fseek(f, -4096L, SEEK_END) != 0)
                rewind(f);
            size_t n = fread(tail, 1, sizeof tail - 1, f);
            tail[n] = 0;
            for (size_t i = 0; i < n; i++)
                if (tail[i] == 0)
                    tail[i] = 1; /* the ELF's own bytes: no line can start in them by accident below */
            fclose(f);
        }
    }
    char key[80];
    snprintf(key, sizeof key, "\n%s=", name);
    char *at = strstr(tail, key);
    if (!at)
        return NULL;
    static char value[64];
    at += strlen(key);
    size_t len = strcspn(at, "\n");
    if (len >= sizeof value)
        return NULL;
    memcpy(value, at, len);
    value[len] = 0;
    return value;
}

static const char *knob(int argc, char **argv, const char *name)
{
    char flag[64];
    snprintf(flag, sizeof flag, "--fake_%s=", name);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], flag, strlen(flag)) == 0)
            return argv[i] + strlen(flag);
    char env[64];
    snprintf(env, sizeof env, "ODP_FAKE_%s", name);
    for (char *p = env; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    if (getenv(env))
        return getenv(env);
    return trailer_knob(env);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static int replay(const char *prefix)
{
    char path[4096];
    size_t n;
    snprintf(path, sizeof path, "%s.stdout", prefix);
    char *out = slurp(path, &n);
    if (out) {
        fwrite(out, 1, n, stdout);
        fflush(stdout);
        free(out);
    }
    snprintf(path, sizeof path, "%s.stderr", prefix);
    char *err = slurp(path, &n);
    if (err) {
        fwrite(err, 1, n, stderr);
        free(err);
    }
    snprintf(path, sizeof path, "%s.rc", prefix);
    char *rc = slurp(path, &n);
    int code = 0;
    if (rc) {
        sscanf(rc, "rc=%d", &code);
        free(rc);
    }
    if (code == 134)
        abort();
    if (code == 139)
        raise(SIGSEGV);
    return code;
}

static volatile unsigned busy_sink; /* keeps the busy loop from being optimised away */

static void busy_us(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (int i = 0; i < 1000; i++)
            busy_sink += (unsigned)i * 2654435761u;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

int main(int argc, char **argv)
{
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    const char *model = NULL, *etdump = NULL, *print_output = "summary";
    long n = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : (i + 1 < argc ? argv[i + 1] : "");
        int inline_v = strchr(a, '=') != NULL;
        if (strncmp(a, "--fake_", 7) == 0)
            continue;
#define FLAG(name) (strncmp(a, "--" name, strlen("--" name)) == 0 && (a[strlen("--" name)] == 0 || a[strlen("--" name)] == '='))
        if (FLAG("model_path")) model = v;
        else if (FLAG("num_executions")) n = atol(v);
        else if (FLAG("etdump_path")) etdump = v;
        else if (FLAG("print_output")) print_output = v;
        else if (FLAG("data_path") || FLAG("cpu_threads") || FLAG("method_name") || FLAG("inputs") || FLAG("output_file")) {}
        else {
            fprintf(stderr, "ERROR: unknown command line flag '%s'\n", a + 2);
            return 1;
        }
        if (!inline_v)
            i++;
    }
    mode = knob(argc, argv, "mode") ? knob(argc, argv, "mode") : "";
    const char *rp = knob(argc, argv, "replay");
    if (rp)
        return replay(rp);
    if (!model)
        model = "model.pte";

    const char *touch = knob(argc, argv, "touch_mb");
    if (touch) {
        size_t bytes = (size_t)atol(touch) << 20;
        volatile char *mem = malloc(bytes); /* volatile: the pages must really be touched */
        for (size_t i = 0; mem && i < bytes; i += 4096)
            mem[i] = (char)i;
    }
    if (strcmp(mode, "garbage") == 0) {
        srand(7);
        for (int i = 0; i < 20000; i++) {
            putchar(rand() & 0xff);
            fputc(rand() & 0xff, stderr);
        }
        return 0;
    }
    size_t len;
    char *pte = slurp(model, &len);
    if (!pte) {
        log_line('E', "file_data_loader.cpp", 110, "Failed to open %s: %s (%d)", model, strerror(errno), errno);
        log_line('F', "executor_runner.cpp", 461,
             "In function main(), assert failed (file_loader.ok()): FileDataLoader::from() failed: 0x22");
        abort();
    }
    if (len < 8 || memcmp(pte + 4, "ET12", 4) != 0) {
        if (len >= 8)
            log_line('E', "program.cpp", 121, "Program identifier '%.4s' != expected 'ET12'", pte + 4);
        log_line('E', "executor_runner.cpp", 473, "Failed to parse model file %s", model);
        return 1;
    }
    if (strcmp(mode, "old") == 0) {
        log_line('I', "executor_runner.cpp", 203, "Resetting threadpool with num threads = 4");
        log_line('I', "executor_runner.cpp", 352, "Model file %s is loaded.", model);
        log_line('I', "executor_runner.cpp", 361, "Using method forward");
        log_line('I', "executor_runner.cpp", 412, "Setting up planned buffer 0, size 32.");
        log_line('I', "executor_runner.cpp", 440, "Method loaded.");
    } else {
        log_line('I', "executor_runner.cpp", 476, "Model file %s is loaded.", model);
        log_line('I', "executor_runner.cpp", 486, "Using method forward");
        log_line('I', "executor_runner.cpp", 556, "Setting up CPU planned buffer 0, size 32.");
        log_line('I', "executor_runner.cpp", 624, "Model loaded in %f ms.", since_start() * 1e3);
    }
    if (strcmp(mode, "segv") == 0)
        raise(SIGSEGV);
    if (strcmp(mode, "abort") == 0) {
        log_line('E', "executor_runner.cpp", 640, "Execution of method forward failed with status 0x14");
        abort();
    }
    if (strcmp(mode, "hang") == 0 || strcmp(mode, "hang_tree") == 0) {
        if (strcmp(mode, "hang_tree") == 0 && fork() == 0) {
            signal(SIGTERM, SIG_IGN); /* only SIGKILL of the group ends it */
            for (;;)
                pause();
        }
        for (;;)
            pause();
    }
    const char *flood = knob(argc, argv, "flood_mb");
    if (flood) {
        /* 64-byte lines, as a debug build's prints: neither a log line nor an output line */
        static const char line[] = "debug: tensor arena scan 0123456789abcdef0123456789abcdef......\n";
        long lines = atol(flood) * (1L << 20) / (long)(sizeof line - 1);
        for (long i = 0; i < lines; i++) {
            fputs(line, stdout);
            fputs(line, stderr);
        }
        fflush(stdout);
    }
    const char *iter = knob(argc, argv, "iter_us");
    long iter_us = iter ? atol(iter) : 200;
    const char *wait = knob(argc, argv, "wait_us");
    long wait_us = wait ? atol(wait) : 0;
    double total = 0;
    for (long i = 1; i <= n; i++) {
        double a = since_start();
        busy_us(iter_us);
        if (wait_us > 0) {
            struct timespec w = {wait_us / 1000000, (wait_us % 1000000) * 1000};
            while (nanosleep(&w, &w) != 0 && errno == EINTR) {}
        }
        double ms = (since_start() - a) * 1e3;
        total += ms;
        if (strcmp(mode, "old") != 0)
            log_line('I', "executor_runner.cpp", 779, "Iteration %ld of %ld: %f ms", i, n, ms);
    }
    log_line('I', "executor_runner.cpp", 789, "Model executed successfully %ld time(s) in %f ms.", n, total);
    log_line('I', "executor_runner.cpp", 798, "1 outputs: ");
    if (strcmp(print_output, "all") == 0) {
        for (int j = 0; j < 3; j++)
            printf("Output[0][%d]: (float) 2.000000\n", j);
    } else if (strcmp(print_output, "none") != 0) {
        printf(strcmp(mode, "old") == 0 ? "Output 0: tensor(sizes=[3], [2., 2., 2.])\n"
                                        : "OutputX 0: tensor(sizes=[3], [2., 2., 2.])\n");
    }
    fflush(stdout);
    const char *src = knob(argc, argv, "etdump");
    if (etdump && src) {
        size_t elen;
        char *data = slurp(src, &elen);
        FILE *f = data ? fopen(etdump, "wb") : NULL;
        if (!f) {
            log_line('E', "executor_runner.cpp", 255, "Failed to open ETDump file at %s.", etdump);
            abort();
        }
        const char *cut = knob(argc, argv, "etdump_bytes");
        if (cut && (size_t)atol(cut) < elen)
            elen = (size_t)atol(cut);
        fwrite(data, 1, elen, f);
        fclose(f);
        free(data);
        log_line('I', "executor_runner.cpp", 261, "ETDump written to file '%s'.", etdump);
    }
    const char *core = knob(argc, argv, "core");
    if (core && strcmp(core, "1") == 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_CORE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_CORE, &rl);
        }
    }
    if (strcmp(mode, "segv_late") == 0)
        raise(SIGSEGV);
    if (strcmp(mode, "abort_late") == 0)
        abort();
    free(pte);
    return 0;
}
