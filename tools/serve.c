/* odp-rusage --serve: the resident helper on a board (docs/helper-protocol.md). One request at a time from stdin
 * (runs may queue behind the one going), its answer on stdout; the frames are src/helper/frame.c, the device
 * state src/helper/state.c, both shared with odp. Every length is checked; an unknown or malformed request gets
 * an error answer; a frame odp could not have sent (bad magic, over 1 MiB) ends the helper, since the stream can
 * no longer be trusted. When stdin closes the helper kills what it runs and exits: nothing it started outlives
 * odp's channel. */
#include "odp-rusage.h"
#include "memwatch.h"
#include "sample.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/helper/frame.h"
#include "../src/helper/lz4.h"
#include "../src/helper/state.h"
#include "../src/util/sha256.h"

#define CHUNK 65536            /* output of a run per frame */
#define SMALL_FILE_MAX (ODP_FRAME_MAX - 64)
#define MAX_ARGS 1024
#define KILL_GRACE_S 2.0

static odp_frame_dec in;
static int sigchld_pipe[2] = {-1, -1};

/* Runs asked for while one is going (protocol 6): they start in order, each as soon as the one before it has
 * its 'D', so odp's next request need not wait for that answer to cross the link. A 'Z' drops those asked
 * for before it: each is answered '!' EAGAIN (not run: send it again) in its turn, since a point stopped by a
 * timeout must not cancel the next one. */
#define QUEUED_RUNS_MAX 4
/* bytes of requests on the command line (`--serve FIRST`, hex): one argument stays far below Linux's 128 KiB */
#define FIRST_MAX 16384
static struct {
    uint8_t *payload; /* a copy: the decoder's buffer moves on */
    uint32_t len, nfields;
    unsigned long number;
    int dropped;
} queued[QUEUED_RUNS_MAX];
static int nqueued;
/* Runs are numbered in the order they arrive (1, 2, ...: odp counts the same), and a 'Z' names the run it stops:
 * one that comes as its run ends, when the next one has started, must not stop that one. */
static unsigned long runs_received, run_going;

static void on_sigchld(int sig)
{
    (void)sig;
    int e = errno;
    ssize_t w = write(sigchld_pipe[1], "c", 1);
    (void)w;
    errno = e;
}

/* Writes all of p to stdout; a reader gone (EPIPE) ends the helper: there is no one to answer. */
static void write_out(const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(1, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(0);
        c += w;
        n -= (size_t)w;
    }
}

/* While a run goes its frames are held up to HOLD_MS (HOLD_MAX bytes at most) and written together, its 'D'
 * with what came just before it: on adb the device sends each read of the helper's stdout as a message and waits
 * for odp's acknowledgement before the next, so a run's last output written apart from its 'D' cost a round trip
 * of the link more. The times in 'O' frames are taken when the output is read, so holding moves none of them. */
#define HOLD_MS 50
#define HOLD_MAX (4 * CHUNK)
static odp_buf held;
static int holding;     /* a run is going: frames are held */
static double held_at;  /* when the oldest held byte came */

static void release_held(void)
{
    if (held.len)
        write_out(held.data, held.len);
    held.len = 0;
}

static void send_all(const void *p, size_t n)
{
    if (!holding) {
        release_held();
        write_out(p, n);
        return;
    }
    if (!held.len)
        held_at = now();
    if (odp_buf_append(&held, p, n)) {
        release_held(); /* out of memory: write in place, in order */
        write_out(p, n);
    } else if (held.len >= HOLD_MAX)
        release_held();
}

/* Writes the held frames once HOLD_MS has passed since the oldest came. -> milliseconds until they must go, for
 * the run's poll (-1: none held, or just written). */
static int release_held_when_due(void)
{
    if (!held.len)
        return -1;
    int left = (int)((held_at + HOLD_MS / 1000.0 - now()) * 1000) + 1;
    if (left > 0)
        return left;
    release_held();
    return -1;
}

/* A frame of fields; NULL ends the list, lengths from strlen. */
static void answer(uint8_t type, const char *a, const char *b)
{
    odp_buf f = {0};
    size_t at = odp_frame_begin(&f, type);
    if (a)
        odp_frame_add_str(&f, a);
    if (a && b)
        odp_frame_add_str(&f, b);
    if (odp_frame_end(&f, at) == 0)
        send_all(f.data, f.len);
    odp_buf_free(&f);
}

static void answer_bytes(uint8_t type, const void *p, size_t n)
{
    odp_buf f = {0};
    size_t at = odp_frame_begin(&f, type);
    odp_frame_add(&f, p, n);
    if (odp_frame_end(&f, at) == 0)
        send_all(f.data, f.len);
    odp_buf_free(&f);
}

static void fail(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    answer('!', code, msg);
}

static const char *errno_code(int e)
{
    return e == ENOENT || e == ENOTDIR ? "ENOTFOUND" : e == EACCES || e == EPERM ? "EACCES" : "EIO";
}

/* Fields of a frame as NUL-terminated strings (copies), at most max; a field holding a NUL is refused
 * (argv, paths). Returns the count, or -1. */
static int fields(const odp_frame *f, char **out, int max, int binary_last)
{
    uint32_t pos = 0, n;
    const uint8_t *p;
    int k = 0;
    while (odp_frame_field(f, &pos, &p, &n)) {
        if (k >= max || (memchr(p, 0, n) && !(binary_last && (uint32_t)k + 1 == f->nfields)))
            goto bad;
        if (!(out[k] = malloc(n + 1)))
            goto bad;
        memcpy(out[k], p, n);
        out[k][n] = 0;
        k++;
    }
    return k;
bad:
    while (k--)
        free(out[k]);
    return -1;
}

static void free_fields(char **f, int n)
{
    for (int k = 0; k < n; k++)
        free(f[k]);
}

/* Reads stdin into the decoder until a frame is there (1), stdin closed (0) or the stream is malformed (-1). */
static int next_request(odp_frame *f)
{
    for (;;) {
        int r = odp_frame_next(&in, f);
        if (r)
            return r;
        char buf[CHUNK];
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        if (odp_frame_dec_feed(&in, buf, (size_t)n))
            return -1;
    }
}

/* ---- run ---- */

static int env_name_is(const char *entry, const char *name, size_t len)
{
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

/* environ with sets ("K=V") and unsets ("K") applied; NULL when out of memory. */
static char **make_env(char **sets, int nsets, char **unsets, int nunsets)
{
    extern char **environ;
    int n = 0;
    while (environ[n])
        n++;
    char **env = calloc((size_t)(n + nsets + 1), sizeof *env);
    if (!env)
        return NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        int drop = 0;
        for (int j = 0; j < nunsets && !drop; j++)
            drop = env_name_is(environ[i], unsets[j], strlen(unsets[j]));
        for (int j = 0; j < nsets && !drop; j++)
            drop = env_name_is(environ[i], sets[j], strcspn(sets[j], "="));
        if (!drop)
            env[k++] = environ[i];
    }
    for (int j = 0; j < nsets; j++)
        env[k++] = sets[j];
    return env;
}

static pid_t watched;

static void watchdog_fire(int sig)
{
    (void)sig;
    kill(-watched, SIGKILL);
    _exit(0);
}

/* A process that outlives the helper by a moment: should the helper die, even by SIGKILL (adbd and the adb
 * emulator kill the shell's process group when the stream closes), the kernel sends it SIGTERM
 * (PR_SET_PDEATHSIG) and it KILLs the run's whole process group, so nothing the run started is left behind.
 * In a group of its own, so a kill of the helper's group does not take it first. -1 when it cannot be made. */
static pid_t watchdog(pid_t group, int keep_a, int keep_b)
{
    pid_t helper = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setpgid(0, 0);
    watched = group;
    struct sigaction sa = {0};
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGCHLD, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != helper)
        watchdog_fire(0);
    /* hold nothing of the helper's: its channel must close when it dies */
    close(0), close(1), close(2), close(keep_a), close(keep_b), close(sigchld_pipe[0]), close(sigchld_pipe[1]);
    for (int fd = 3; fd < 1024; fd++)
        close(fd); /* and whatever else it holds for the run: the sampler's copy of the program's stderr pipe */
    for (;;)
        pause();
}

static struct memwatch watch; /* the run's memory by phase, when asked (memory=BYTES) */

/* The run's timeline goes back to odp as 'T' frames, on the channel it already reads: no file on the board, no
 * transfer of its own. memwatch writes whole lines, bounded; stdio hands them here a buffer at a time. */
static char timeline_buf[CHUNK];

static ssize_t timeline_frames_write(void *cookie, const char *p, size_t n)
{
    (void)cookie;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        answer_bytes('T', p + done, k);
        done += k;
    }
    return (ssize_t)n;
}

static FILE *timeline_frames(void)
{
    cookie_io_functions_t io = {.write = timeline_frames_write};
    FILE *f = fopencookie(NULL, "w", io);
    if (f)
        setvbuf(f, timeline_buf, _IOFBF, sizeof timeline_buf);
    return f;
}

/* Output of the run's pipe fd as frames of type t (its lines marking the memory phases first); 0 at its end.
 * Each 'O' also says when it was read: CLOCK_MONOTONIC µs since the program's start (t0), taken here on the board,
 * so the link's jitter never enters the times between an LLM runner's generated pieces (docs/llm.md). */
static int relay(int fd, uint8_t t, double t0)
{
    char buf[CHUNK];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0)
        return 0;
    double at = now();
    memwatch_output(&watch, t == 'E', buf, (size_t)n);
    odp_buf f = {0};
    size_t start = odp_frame_begin(&f, t);
    odp_frame_add(&f, buf, (size_t)n);
    if (t == 'O') {
        char us[24];
        snprintf(us, sizeof us, "%lld", (long long)((at - t0) * 1e6));
        odp_frame_add_str(&f, us);
    }
    if (odp_frame_end(&f, start) == 0)
        send_all(f.data, f.len);
    odp_buf_free(&f);
    return 1;
}

/* A 'Z' {signal, run number}: -1 when malformed; 0 with *sig set, 0 for a number that is not the run going's
 * (its run ended as the Z crossed its answer: nothing to stop). */
static int stop_request(const odp_frame *z, int *sig)
{
    char *sf[2];
    if (fields(z, sf, 2, 0) != 2)
        return -1;
    *sig = strtoul(sf[1], NULL, 10) == run_going && run_going ? atoi(sf[0]) : 0;
    free_fields(sf, 2);
    return 0;
}

/* A frame taken while a run is going: 'Z' for it signals its group (and drops the runs queued so far), 'R' is
 * queued. -1 for anything else, or one run too many: odp broke the protocol. */
static int take_during_run(const odp_frame *z, pid_t group, int reaped, double *kill_at)
{
    if (z->type == 'R') {
        if (nqueued == QUEUED_RUNS_MAX || !(queued[nqueued].payload = malloc(z->len ? z->len : 1)))
            return -1;
        memcpy(queued[nqueued].payload, z->payload, z->len);
        queued[nqueued].len = z->len;
        queued[nqueued].nfields = z->nfields;
        queued[nqueued].number = ++runs_received;
        queued[nqueued++].dropped = 0;
        return 0;
    }
    int sig;
    if (z->type != 'Z' || stop_request(z, &sig))
        return -1;
    if (!sig)
        return 0;
    for (int k = 0; k < nqueued; k++)
        queued[k].dropped = 1;
    if (sig > 0 && sig < 65 && !reaped) {
        kill(-group, sig);
        if (sig != SIGKILL && *kill_at == 0)
            *kill_at = now() + KILL_GRACE_S;
    }
    return 0;
}

/* The frames the decoder holds now, taken as take_during_run says; 0 when odp broke the protocol. */
static int take_held(pid_t group, int reaped, double *kill_at)
{
    odp_frame z;
    int r;
    while ((r = odp_frame_next(&in, &z)) != 0)
        if (r < 0 || take_during_run(&z, group, reaped, kill_at))
            return 0;
    return 1;
}

/* Run request: options ("cwd=DIR", "env=K=V", "unset=K", "cpus=LIST", "counters=LEVEL", "memory=BYTES",
 * "mark=EVENT=GLOB", "memory_file=MODEL", "sample=HZ,FILE", "state_*=", "rm=PATH", "leases=DIR"), "--", argv.
 * Answers: 'O'/'E' output frames and, with memory=BYTES, 'T' timeline frames (at most BYTES in all,
 * MEMWATCH_TIMELINE_MAX at most) as it goes, then 'D' {status, report[, signal name, state before, state
 * after[, board]]}: the ODP-MEMORY/ODP-COUNTERS/ODP-RUSAGE lines of exec mode (status: what exec mode would exit
 * with when the program never ran, 127 or 125, else its own); board with rm= or leases= (board_after_run).
 * While it runs, stdin may carry 'Z' {signal, run number}: sent to the program's process group, and further
 * 'R's: queued (take_during_run). */
static void gather_state(const char *const state[3], odp_buf *text);
/* each of a run's two device states, and what it says of the board after it (the files it removed, the leases):
 * all three, the report and the status fit one frame (ODP_FRAME_MAX) */
#define STATE_IN_RUN_MAX (ODP_FRAME_MAX / 4)
#define BOARD_IN_RUN_MAX (ODP_FRAME_MAX / 8)
#define RM_MAX 16

/* Whether path names a file directly in dir (its run's cwd): the only files a run may have removed. */
static int directly_in(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (!n || strncmp(path, dir, n) || path[n] != '/')
        return 0;
    const char *name = path + n + 1;
    return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/* After a run, what a second request used to do (docs/devices.md "A shared board"): the leases on the board
 * (odp_leases_gather) when leases names its remote dir, then its files removed (only when the program exited:
 * what a crash left is looked for, by odp's requests of its own) with a line "unremoved PATH: WHY" for each one
 * that could not be (one already absent is not). */
static void board_after_run(char *const rm[], int nrm, const char *leases, int exited, odp_buf *text)
{
    if (leases)
        odp_leases_gather(leases, text);
    for (int k = 0; k < nrm && exited; k++) {
        if (unlink(rm[k]) == 0 || errno == ENOENT)
            continue;
        char line[PATH_MAX + 128];
        int len = snprintf(line, sizeof line, "unremoved %s: %s\n", rm[k], strerror(errno));
        odp_buf_append(text, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    }
}

static void serve_run(const odp_frame *f)
{
    char *fl[MAX_ARGS + 16];
    int n = fields(f, fl, MAX_ARGS + 16, 0);
    if (n < 0) {
        fail("EPROTO", "run: more than %d fields, or a NUL inside one", MAX_ARGS + 16);
        return;
    }
    char *sets[64], *unsets[64], *argv[MAX_ARGS + 1];
    int nsets = 0, nunsets = 0, argc = 0, dashes = -1;
    struct rusage_spawn sp = {.fd_in = -1, .fd_out = -1, .fd_err = -1};
    cpu_set_t cpus;
    const char *memory_file = NULL;
    size_t memory = 0; /* memory=BYTES: the timeline's bound; 0: no memory by phase */
    /* state_root=, state_cpu=, state_props=: the device state ('S''s three fields), read just before the program
     * starts and just after it ended, comes back in its 'D': no request of its own before and after a point */
    const char *state[3] = {NULL, NULL, NULL};
    /* rm=PATH (RM_MAX at most, each directly in cwd=) and leases=REMOTE_DIR: the end of the run's point on the
     * board, in its 'D' (board_after_run): no request of its own after a point */
    char *rm[RM_MAX];
    int nrm = 0;
    const char *leases = NULL;
    odp_buf state_before = {.limit = STATE_IN_RUN_MAX}, state_after = {.limit = STATE_IN_RUN_MAX};
    memset(&watch, 0, sizeof watch);
    for (int k = 0; k < n; k++) {
        char *a = fl[k];
        if (dashes >= 0)
            argv[argc++] = a;
        else if (strcmp(a, "--") == 0)
            dashes = k;
        else if (!strncmp(a, "cwd=", 4))
            sp.cwd = a + 4;
        else if (!strncmp(a, "env=", 4) && strchr(a + 4, '=') && nsets < 64)
            sets[nsets++] = a + 4;
        else if (!strncmp(a, "unset=", 6) && nunsets < 64)
            unsets[nunsets++] = a + 6;
        else if (!strncmp(a, "cpus=", 5)) {
            sp.cpus_text = a + 5;
            if (rusage_parse_cpus(a + 5, &cpus)) {
                fail("EUSAGE", "cpus=%s: not a CPU list like 4-7 or 0,2", a + 5);
                goto out;
            }
            sp.cpus = &cpus;
        } else if (!strncmp(a, "counters=", 9) && rusage_level(a + 9) >= 0)
            sp.level = rusage_level(a + 9);
        else if (!strncmp(a, "memory=", 7)) {
            char *end;
            errno = 0;
            unsigned long long bytes = strtoull(a + 7, &end, 10);
            if (a[7] < '0' || a[7] > '9' || *end || errno || !bytes) {
                fail("EUSAGE", "memory=%.100s: the timeline's bound in bytes (1 or more)", a + 7);
                goto out;
            }
            memory = bytes < MEMWATCH_TIMELINE_MAX ? (size_t)bytes : MEMWATCH_TIMELINE_MAX;
        } else if (!strncmp(a, "memory_file=", 12))
            memory_file = a + 12;
        else if (!strncmp(a, "state_root=", 11))
            state[0] = a + 11;
        else if (!strncmp(a, "state_cpu=", 10))
            state[1] = a + 10;
        else if (!strncmp(a, "state_props=", 12))
            state[2] = a + 12;
        else if (!strncmp(a, "rm=", 3)) {
            if (nrm == RM_MAX) {
                fail("EUSAGE", "run: more than %d rm= files", RM_MAX);
                goto out;
            }
            rm[nrm++] = a + 3;
        } else if (!strncmp(a, "leases=", 7))
            leases = a + 7;
        else if (!strncmp(a, "mark=", 5)) {
            if (memwatch_add_mark(&watch, a + 5)) {
                fail("EUSAGE", "mark=%.100s: EVENT=GLOB (EVENT [a-z0-9_], at most %d marks)", a + 5, MEMWATCH_MARKS);
                goto out;
            }
        } else if (!strncmp(a, "sample=", 7) && !sp.sampler) {
            if (!(sp.sampler = sampler_request(a + 7))) {
                fail("EUSAGE", "sample=%.100s: HZ,FILE (1 to 100000 samples per second, a writable file)", a + 7);
                goto out;
            }
        } else {
            fail("EPROTO", "run: unknown option '%.100s'", a);
            goto out;
        }
    }
    if (argc == 0) {
        fail("EPROTO", "run: no program (options, \"--\", argv)");
        goto out;
    }
    if ((state[0] || state[1] || state[2]) && !(state[0] && state[1] && state[2])) {
        fail("EPROTO", "run: state_root=, state_cpu= and state_props= go together");
        goto out;
    }
    for (int k = 0; k < nrm; k++) {
        if (!sp.cwd || !directly_in(rm[k], sp.cwd)) {
            fail("EUSAGE", "rm=%.200s: not a file directly in the run's cwd=", rm[k]);
            goto out;
        }
    }
    argv[argc] = NULL;
    sp.argv = argv;
    if (state[0])
        gather_state(state, &state_before);
    char **env = (nsets || nunsets) ? make_env(sets, nsets, unsets, nunsets) : NULL;
    sp.envp = env;
    int po[2], pe[2], devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(po, O_CLOEXEC)) {
        fail("EIO", "run: %s", strerror(errno));
        if (devnull >= 0)
            close(devnull);
        free(env);
        goto out;
    }
    if (pipe2(pe, O_CLOEXEC)) {
        fail("EIO", "run: %s", strerror(errno));
        close(devnull), close(po[0]), close(po[1]);
        free(env);
        goto out;
    }
    sp.fd_in = devnull, sp.fd_out = po[1], sp.fd_err = pe[1];
    struct rusage_child ch;
    int rc = rusage_spawn(&sp, &ch);
    int spawn_errno = errno;
    close(devnull), close(po[1]), close(pe[1]);
    free(env);
    if (rc || ch.stage) {
        close(po[0]), close(pe[0]);
        if (sp.sampler)
            sampler_finish(sp.sampler);
        sp.sampler = NULL;
        if (rc) {
            fail("EIO", "run: cannot fork: %s", strerror(spawn_errno));
            goto out;
        }
        char *msg = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&msg, &len);
        if (m) {
            rusage_spawn_failure(m, &sp, &ch);
            fclose(m);
            answer_bytes('E', msg, len);
            free(msg);
        }
        answer('D', ch.stage == RUSAGE_STAGE_EXEC ? "127" : "125", "");
        goto out;
    }
    holding = 1;
    FILE *timeline = memory ? timeline_frames() : NULL;
    if (timeline)
        memwatch_start(&watch, ch.pid, ch.t0, timeline, memory, memory_file);
    else if (memory) {
        char msg[256];
        int len = snprintf(msg, sizeof msg, "odp-rusage: cannot keep the memory timeline: %s\n", strerror(errno));
        answer_bytes('E', msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1);
    }
    pid_t dog = watchdog(ch.pid, po[0], pe[0]);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    int out_open = 1, err_open = 1, reaped = 0, st = 0;
    double kill_at = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    /* frames that came with this run's own, in one read: a 'Z' among them must not wait for more bytes */
    int in_open = take_held(ch.pid, 0, &kill_at);
    if (!in_open)
        kill(-ch.pid, SIGKILL); /* odp broke the protocol: end the run and the helper */
    while (!reaped || out_open || err_open) {
        struct pollfd p[4] = {{po[0], out_open ? POLLIN : 0, 0}, {pe[0], err_open ? POLLIN : 0, 0},
                              {sigchld_pipe[0], POLLIN, 0}, {0, in_open ? POLLIN : 0, 0}};
        int timeout = kill_at > 0 ? 100 : reaped ? 50 : -1, due = reaped ? -1 : memwatch_timeout_ms(&watch);
        if (due >= 0 && (timeout < 0 || due < timeout))
            timeout = due;
        due = release_held_when_due();
        if (due >= 0 && (timeout < 0 || due < timeout))
            timeout = due;
        int pr = poll(p, 4, timeout);
        if (pr < 0 && errno != EINTR)
            break;
        if (p[2].revents) {
            char c[64];
            while (read(sigchld_pipe[0], c, sizeof c) > 0) {}
        }
        if (!reaped)
            memwatch_tick(&watch);
        if (!reaped && wait4(ch.pid, &st, WNOHANG, &ru) == ch.pid) {
            reaped = 1;
            memwatch_gone(&watch);
        }
        if (out_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            out_open = relay(po[0], 'O', ch.t0);
        if (err_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            err_open = relay(pe[0], 'E', ch.t0);
        if (reaped && pr == 0)
            break; /* the program is gone and its pipes stay quiet: what it left behind holds them */
        if (in_open && (p[3].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[CHUNK];
            ssize_t k = read(0, buf, sizeof buf);
            /* odp gone (nothing may outlive it), or odp broke the protocol: end the run and the helper */
            if (k <= 0 || odp_frame_dec_feed(&in, buf, (size_t)k) || !take_held(ch.pid, reaped, &kill_at)) {
                in_open = 0;
                kill(-ch.pid, SIGKILL);
            }
        }
        if (kill_at > 0 && now() >= kill_at && !reaped) {
            kill(-ch.pid, SIGKILL);
            kill_at = -1;
        }
    }
    if (!reaped)
        while (wait4(ch.pid, &st, 0, &ru) < 0 && errno == EINTR) {}
    double wall = now() - ch.t0;
    int sample_whole = sp.sampler ? sampler_finish(sp.sampler) == 0 : 1;
    sp.sampler = NULL;
    if (kill_at != 0)
        kill(-ch.pid, SIGKILL); /* stopped: what the program left in its group (one that ignored TERM) goes too */
    if (dog > 0) {
        kill(dog, SIGKILL);
        while (waitpid(dog, NULL, 0) < 0 && errno == EINTR) {}
    }
    close(po[0]), close(pe[0]);
    if (!in_open)
        _exit(0);
    char *rep = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&rep, &len);
    if (m) {
        memwatch_report(&watch, m);
        rusage_report(m, sp.level, st, &ru, wall);
        if (!sample_whole)
            fprintf(m, "odp-rusage: the sample stream could not be written whole\n");
        fclose(m);
    }
    char status[16];
    snprintf(status, sizeof status, "%d", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    odp_buf d = {0};
    size_t at = odp_frame_begin(&d, 'D');
    odp_frame_add_str(&d, status);
    odp_frame_add_str(&d, rep ? rep : "");
    const char *signame = WIFSIGNALED(st) ? sigabbrev_np(WTERMSIG(st)) : NULL;
    int board = nrm || leases;
    if (signame || state[0] || board)
        odp_frame_add_str(&d, signame ? signame : ""); /* as SSH names it: "ABRT" */
    if (state[0])
        gather_state(state, &state_after);
    if (state[0] || board) {
        odp_frame_add(&d, state_before.data ? state_before.data : "", state_before.len);
        odp_frame_add(&d, state_after.data ? state_after.data : "", state_after.len);
    }
    if (board) {
        odp_buf text = {.limit = BOARD_IN_RUN_MAX};
        board_after_run(rm, nrm, leases, WIFEXITED(st), &text);
        odp_frame_add(&d, text.data ? text.data : "", text.len);
        odp_buf_free(&text);
    }
    if (odp_frame_end(&d, at) == 0)
        send_all(d.data, d.len);
    holding = 0;
    release_held(); /* the 'D' in the same write as the output held before it */
    odp_buf_free(&d);
    free(rep);
out:
    if (sp.sampler)
        sampler_finish(sp.sampler); /* a request refused after its sampler was made */
    odp_buf_free(&state_before);
    odp_buf_free(&state_after);
    free_fields(fl, n);
}

/* ---- the small requests ---- */

#define STATE_CMD_TIMEOUT_S 10.0

/* The gatherer's commands (getprop, dumpsys): at most max bytes of stdout kept, the rest read and dropped;
 * one that outlasts STATE_CMD_TIMEOUT_S is killed. */
static int state_run(void *ctx, const char *const argv[], size_t max, odp_buf *out)
{
    (void)ctx;
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]), close(p[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0), dup2(p[1], 1), dup2(null, 2);
        signal(SIGPIPE, SIG_DFL);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t limit = out->limit, dropped = out->dropped;
    out->limit = out->len + max < out->len ? 0 : out->len + max;
    double until = now() + STATE_CMD_TIMEOUT_S;
    char buf[CHUNK];
    for (;;) {
        struct pollfd q = {p[0], POLLIN, 0};
        int left = (int)((until - now()) * 1000);
        if (left <= 0 || poll(&q, 1, left) == 0) {
            kill(pid, SIGKILL);
            break;
        }
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        odp_buf_append(out, buf, (size_t)n);
    }
    out->limit = limit;
    out->dropped = dropped;
    close(p[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    return 0;
}

/* The device-state text for root, cpu files and properties (at most SMALL_FILE_MAX bytes) into text. */
static void gather_state(const char *const state[3], odp_buf *text)
{
    odp_state_opts o = {state[0], state[1], state[2], state_run, NULL};
    odp_state_gather(&o, text);
}

static void serve_state(char **a, int n)
{
    if (n != 3) {
        fail("EPROTO", "state: root, cpu files, properties");
        return;
    }
    odp_buf text = {.limit = SMALL_FILE_MAX};
    gather_state((const char *const *)a, &text);
    answer_bytes('A', text.data ? text.data : "", text.len);
    odp_buf_free(&text);
}

/* ---- sha256, remembered across sessions ----
 * A board keeps the same runner and model from one session to the next; hashing megabytes with portable code on
 * every hash-skip check would cost more than the round trips the helper saves. So the helper remembers the
 * hashes it computed in <its dir>/sha256-cache, each with the file's device, inode, size, mtime and ctime: a
 * file written, renamed over, truncated or chmod'ed since gets a new ctime (no user can set ctime), so a match
 * of all five is the same bytes. At most CACHE_ENTRIES lines, newest first; written to a temporary name and
 * renamed. A cache that cannot be read or written only costs the hashing. */
#define CACHE_ENTRIES 256
#define CACHE_LINE 4400

static char cache_path[PATH_MAX];

static void cache_locate(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash && snprintf(cache_path, sizeof cache_path, "%.*s/sha256-cache", (int)(slash - self), self) >=
                     (int)sizeof cache_path)
        cache_path[0] = 0;
}

/* The identity a cache line records: "dev ino size mtime.ns ctime.ns". */
static void file_identity(const struct stat *st, char *out, size_t n)
{
    snprintf(out, n, "%llu %llu %lld %lld.%09ld %lld.%09ld", (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
             st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Looks path up (or, with hex given, records it): 1 when found (hex filled), 0 otherwise. */
static int cache_use(const char *path, const char *identity, char hex[65], int record)
{
    if (!cache_path[0])
        return 0;
    FILE *f = fopen(cache_path, "re");
    char line[CACHE_LINE];
    char *keep[CACHE_ENTRIES];
    int nkeep = 0, found = 0;
    size_t id_len = strlen(identity);
    while (f && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n')
            break; /* cut short: the rest is not trusted */
        line[--len] = 0;
        /* identity, ' ', 64 hex, ' ', path */
        char *h = strchr(line, ' ');
        for (int k = 0; h && k < 4; k++)
            h = strchr(h + 1, ' ');
        if (!h || len < (size_t)(h - line) + 67 || h[65] != ' ')
            continue;
        int same = strcmp(h + 66, path) == 0;
        if (same && !record && (size_t)(h - line) == id_len && !memcmp(line, identity, id_len)) {
            memcpy(hex, h + 1, 64);
            hex[64] = 0;
            found = 1;
            break;
        }
        if (record && !same && nkeep < CACHE_ENTRIES - 1)
            keep[nkeep++] = strdup(line);
    }
    if (f)
        fclose(f);
    if (record) {
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof tmp, "%s.%d", cache_path, (int)getpid());
        FILE *w = fopen(tmp, "we");
        if (w) {
            fprintf(w, "%s %s %s\n", identity, hex, path);
            for (int k = 0; k < nkeep; k++)
                if (keep[k])
                    fprintf(w, "%s\n", keep[k]);
            if (fclose(w) || rename(tmp, cache_path))
                unlink(tmp);
        }
        for (int k = 0; k < nkeep; k++)
            free(keep[k]);
    }
    return found;
}

/* The sha256 of the regular file at path into hex, remembered (cache_use): 0, 1 when there is no such regular
 * file, or -1 with errno when it could not be read. */
static int file_sha256(const char *path, char hex[65])
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return 1;
    }
    char identity[160];
    file_identity(&st, identity, sizeof identity);
    if (strchr(path, '\n') == NULL && cache_use(path, identity, hex, 0)) {
        close(fd);
        return 0;
    }
    sha256_ctx c;
    sha256_init(&c);
    char buf[CHUNK];
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0)
            sha256_update(&c, buf, (size_t)r);
    int e = errno;
    close(fd);
    if (r < 0) {
        errno = e;
        return -1;
    }
    sha256_hex(&c, hex);
    /* the file may have changed while it was read: remembered only if it is still the one that was hashed */
    struct stat after;
    char identity_after[160];
    if (strchr(path, '\n') == NULL && stat(path, &after) == 0) {
        file_identity(&after, identity_after, sizeof identity_after);
        if (strcmp(identity, identity_after) == 0)
            cache_use(path, identity, hex, 1);
    }
    return 0;
}

/* Hash request: path[, mode]. With a mode (octal), a regular file there also gets it, and only when it has another
 * one: a chmod changes the ctime, which would make the next session hash the file again (cache_use). */
static void serve_hash(char **a, int n)
{
    char *end = NULL;
    unsigned long mode = n == 2 ? strtoul(a[1], &end, 8) : 0;
    if ((n != 1 && n != 2) || (n == 2 && (!a[1][0] || *end || mode > 07777))) {
        fail("EPROTO", "hash: a path and, optionally, an octal mode");
        return;
    }
    char hex[65];
    int rc = file_sha256(a[0], hex);
    struct stat st;
    if (rc == 0 && n == 2 && stat(a[0], &st) == 0 && (st.st_mode & 07777) != mode && chmod(a[0], (mode_t)mode))
        rc = -1;
    if (rc < 0) {
        int e = errno;
        fail(errno_code(e), "hash %s: %s", a[0], strerror(e));
    } else
        answer('A', rc == 0 ? hex : NULL, NULL); /* no such regular file: no hash */
}

static void serve_free(char **a, int n)
{
    if (n != 1 || a[0][0] != '/') {
        fail("EPROTO", "free: one absolute path");
        return;
    }
    /* the file system of the path, or of its nearest existing parent */
    char *p = a[0];
    struct statvfs v;
    while (statvfs(p, &v)) {
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) {
            p = "/";
            if (statvfs(p, &v)) {
                fail("EIO", "free: %s", strerror(errno));
                return;
            }
            break;
        }
        *slash = 0;
    }
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v.f_bavail * (unsigned long long)v.f_frsize);
    answer('A', num, NULL);
}

static void serve_read(char **a, int n)
{
    long max = n == 2 ? atol(a[1]) : -1;
    if (n != 2 || max < 0 || max > (long)SMALL_FILE_MAX) {
        fail("EPROTO", "read: path, max bytes (at most %u)", SMALL_FILE_MAX);
        return;
    }
    int fd = open(a[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(errno_code(errno), "read %s: %s", a[0], strerror(errno));
        return;
    }
    char *buf = malloc((size_t)max + 1);
    size_t got = 0;
    ssize_t r = 0;
    while (buf && got < (size_t)max && ((r = read(fd, buf + got, (size_t)max - got)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            got += (size_t)r;
    close(fd);
    if (!buf || r < 0)
        fail("EIO", "read %s: %s", a[0], buf ? strerror(errno) : "out of memory");
    else
        answer_bytes('A', buf, got);
    free(buf);
}

/* ---- uploads ----
 * 'P' path, mode (octal), offset, sha256, raw, bytes: one chunk of a file; raw is "" when bytes are the file's
 * own, else the decimal length of what bytes decode to as an LZ4 block (src/helper/lz4.c: odp compresses with
 * liblz4 where that saves; at most UPLOAD_RAW_MAX). Offsets and the sha256 are of the file's own bytes.
 * Offset 0 starts the file (an upload left unfinished is dropped); every later chunk must name the same path and
 * start where the file so far ends. The bytes go to path.odp-part-PID (the helper's PID), hashed as they come;
 * the chunk with a sha256 is the last: the whole file must have that hash, then it is fsync'd, given its mode and
 * renamed, so a partial or corrupted file never appears under the path. An upload is one request: only its last chunk is answered, with the
 * first failure of any of its chunks (the part is dropped at once, the later chunks ignored). odp sends all the
 * chunks of a file without waiting: a file costs about one round trip, not one a chunk. */
static struct {
    int fd; /* -1: no part open */
    char path[PATH_MAX], part[PATH_MAX + 32];
    unsigned long long size;
    sha256_ctx c;
    int failed; /* the upload of path failed: code and msg are its answer */
    char code[16], msg[768];
} up = {.fd = -1};

static void upload_drop(void)
{
    if (up.fd >= 0) {
        close(up.fd);
        unlink(up.part);
    }
    up.fd = -1;
}

/* The upload of path failed: answered now when this is its last chunk, else remembered for that one (the first
 * failure is kept). */
static void upload_fail(const char *path, int last, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void upload_fail(const char *path, int last, const char *code, const char *fmt, ...)
{
    upload_drop();
    if (!up.failed || strcmp(up.path, path)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(up.msg, sizeof up.msg, fmt, ap);
        va_end(ap);
        snprintf(up.code, sizeof up.code, "%s", code);
        snprintf(up.path, sizeof up.path, "%s", path);
        up.failed = 1;
    }
    if (last) {
        answer('!', up.code, up.msg);
        up.failed = 0;
    }
}

/* An unsigned decimal or octal number filling s, at most max: 0 and *v set, else -1. */
static int parse_num(const char *s, int base, unsigned long long max, unsigned long long *v)
{
    char *end;
    if (*s < '0' || *s > (base == 8 ? '7' : '9'))
        return -1;
    errno = 0;
    *v = strtoull(s, &end, base);
    return *end || errno || *v > max ? -1 : 0;
}

static int is_sha256(const char *s)
{
    return strspn(s, "0123456789abcdef") == 64 && !s[64];
}

#define UPLOAD_RAW_MAX (1u << 20) /* a compressed chunk's decoded bytes: odp's chunks are under 1 MiB */

static void serve_write(const odp_frame *f)
{
    char *a[6];
    int n = fields(f, a, 6, 1);
    unsigned long long mode = 0, offset = 0, raw = 0;
    if (n != 6 || parse_num(a[1], 8, 07777, &mode) || parse_num(a[2], 10, ULLONG_MAX, &offset) ||
        (a[3][0] && !is_sha256(a[3])) || (a[4][0] && parse_num(a[4], 10, UPLOAD_RAW_MAX, &raw))) {
        /* which upload it belonged to cannot be trusted: answered at once */
        upload_drop();
        up.failed = 0;
        fail("EPROTO", "write: path, mode (octal), offset, sha256 (64 lowercase hex, or empty), raw length (decimal, "
                       "at most %u, or empty), bytes", UPLOAD_RAW_MAX);
        if (n > 0)
            free_fields(a, n);
        return;
    }
    int last = a[3][0] != 0;
    uint32_t pos = 0, len = 0;
    const uint8_t *data = NULL;
    /* a compressed chunk is decoded into pages mapped for it and unmapped once written: the helper's resident size
     * is every program's peak RSS until it execs (a forked child's high-water mark starts at its parent's), so it
     * keeps none of an upload's memory */
    uint8_t *decoded = NULL;
    for (int k = 0; k < 6; k++)
        odp_frame_field(f, &pos, &data, &len);
    if (offset == 0) {
        upload_drop();
        up.failed = 0;
        if (strlen(a[0]) >= sizeof up.path ||
            snprintf(up.part, sizeof up.part, "%s.odp-part-%ld", a[0], (long)getpid()) >= (int)sizeof up.part) {
            upload_fail(a[0], last, "EUSAGE", "write: path too long");
            goto out;
        }
        strcpy(up.path, a[0]);
        up.fd = open(up.part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (up.fd < 0) {
            upload_fail(a[0], last, errno_code(errno), "write %s: %s", a[0], strerror(errno));
            goto out;
        }
        up.size = 0;
        sha256_init(&up.c);
    } else if (up.failed && !strcmp(up.path, a[0])) {
        if (last)
            upload_fail(a[0], 1, up.code, "%s", up.msg); /* its failure, said at its end */
        goto out;
    } else if (up.fd < 0 || strcmp(up.path, a[0]) || offset != up.size) {
        /* a chunk lost or out of order: the file cannot be whole */
        upload_fail(a[0], last, "EPROTO", "write %s: a chunk at %llu of no upload in progress there", a[0], offset);
        goto out;
    }
    if (a[4][0]) {
        if (raw) {
            void *m = mmap(NULL, (size_t)raw, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) {
                upload_fail(a[0], last, "EIO", "write %s: %s", a[0], strerror(errno));
                goto out;
            }
            decoded = m;
        }
        long got = odp_lz4_decode(data, len, decoded, (size_t)raw);
        if (got < 0 || (unsigned long long)got != raw) {
            upload_fail(a[0], last, "EPROTO", "write %s: the chunk at %llu is not an LZ4 block of %llu bytes", a[0],
                        offset, raw);
            goto out;
        }
        data = decoded;
        len = (uint32_t)got;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(up.fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            upload_fail(a[0], last, e == ENOSPC ? "ENOSPC" : "EIO", "write %s: %s", a[0], strerror(e));
            goto out;
        }
        done += (size_t)w;
    }
    sha256_update(&up.c, data, len);
    up.size += len;
    if (!last)
        goto out;
    char hex[65];
    sha256_hex(&up.c, hex);
    if (strcmp(hex, a[3])) {
        upload_fail(a[0], 1, "ECRC", "write %s: the %llu bytes received have sha256 %s, not %s", a[0], up.size, hex,
                    a[3]);
        goto out;
    }
    int fd = up.fd;
    up.fd = -1;
    if (fsync(fd) || fchmod(fd, (mode_t)mode) || close(fd) || rename(up.part, a[0])) {
        int e = errno;
        close(fd); /* EBADF when it was closed already: nothing else to undo */
        unlink(up.part);
        fail(e == ENOSPC ? "ENOSPC" : "EIO", "write %s: %s", a[0], strerror(e));
        goto out;
    }
    /* its hash is known: the hash check of the next session need not read it back */
    struct stat st;
    char identity[160];
    if (strchr(a[0], '\n') == NULL && stat(a[0], &st) == 0) {
        file_identity(&st, identity, sizeof identity);
        cache_use(a[0], identity, hex, 1);
    }
    answer('A', NULL, NULL);
out:
    if (decoded)
        munmap(decoded, (size_t)raw);
    free_fields(a, 6);
}

/* Link request: source, destination: the destination becomes a hard link to the source (as `ln -f`, through a
 * temporary name renamed over it: the destination is never missing on the way). */
static void serve_link(char **a, int n)
{
    char tmp[PATH_MAX + 32];
    if (n != 2 || snprintf(tmp, sizeof tmp, "%s.odp-part-%ld", a[1], (long)getpid()) >= (int)sizeof tmp) {
        fail("EPROTO", "link: source, destination (not too long)");
        return;
    }
    unlink(tmp);
    if (link(a[0], tmp) || rename(tmp, a[1])) {
        int e = errno;
        unlink(tmp);
        fail(errno_code(e), "link %s %s: %s", a[0], a[1], strerror(e));
        return;
    }
    answer('A', NULL, NULL);
}

static void serve_kill(char **a, int n)
{
    long pgid = n == 2 ? atol(a[0]) : 0;
    int sig = n == 2 ? atoi(a[1]) : 0;
    if (pgid <= 1 || sig <= 0 || sig > 64) {
        fail("EPROTO", "kill: process group (> 1), signal (1..64)");
        return;
    }
    if (kill(-(pid_t)pgid, sig) && errno != ESRCH)
        fail("EIO", "kill -%d -%ld: %s", sig, pgid, strerror(errno));
    else
        answer('A', NULL, NULL);
}

static void serve_mkdir(char **a, int n)
{
    if (n != 1 || a[0][0] != '/') {
        fail("EPROTO", "mkdir: one absolute path");
        return;
    }
    for (char *p = a[0] + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(a[0], 0755) && errno != EEXIST) {
                fail(errno_code(errno), "mkdir %s: %s", a[0], strerror(errno));
                return;
            }
            *p = c;
            if (!c)
                break;
        }
    }
    answer('A', NULL, NULL);
}

/* 'U' remove a board session's own directory (`<remote dir>/.odp/runs/<owner>`) as the session ends. Only a
 * directory directly in a `.odp/runs`, no link followed, no other file system entered: a confused request cannot
 * take more than a run directory with it. odp need not wait for the answer: the helper reads its stdin to the
 * end, so a `U` written just before the channel closes is still done (docs/helper-protocol.md). */
static int remove_errno;
static char remove_failed[PATH_MAX];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT && !remove_errno) {
        remove_errno = errno;
        snprintf(remove_failed, sizeof remove_failed, "%s", path);
    }
    return 0;
}

static int is_run_dir(const char *p)
{
    const char *name = strrchr(p, '/');
    if (p[0] != '/' || strstr(p, "/../") || strstr(p, "/./") || !name[1] || strcmp(name, "/.") == 0 ||
        strcmp(name, "/..") == 0)
        return 0;
    return name - p >= 10 && memcmp(name - 10, "/.odp/runs", 10) == 0;
}

static void serve_remove_run_dir(char **a, int n)
{
    if (n != 1 || !is_run_dir(a[0])) {
        fail("EPROTO", "remove: one absolute path of a directory directly in a .odp/runs");
        return;
    }
    struct stat st;
    if (lstat(a[0], &st)) {
        if (errno == ENOENT)
            answer('A', NULL, NULL);
        else
            fail(errno_code(errno), "remove %s: %s", a[0], strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        fail("EPROTO", "remove %s: not a directory", a[0]);
        return;
    }
    remove_errno = 0;
    if (nftw(a[0], remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) && !remove_errno) {
        remove_errno = errno;
        snprintf(remove_failed, sizeof remove_failed, "%s", a[0]);
    }
    if (remove_errno)
        fail(errno_code(remove_errno), "remove %s: %s", remove_failed, strerror(remove_errno));
    else
        answer('A', NULL, NULL);
}

static void serve_chmod(char **a, int n)
{
    if (n != 2) {
        fail("EPROTO", "chmod: path, mode (octal)");
        return;
    }
    if (chmod(a[0], (mode_t)strtol(a[1], NULL, 8) & 07777))
        fail(errno_code(errno), "chmod %s: %s", a[0], strerror(errno));
    else
        answer('A', NULL, NULL);
}

/* The requests odp put in the helper's command line (hex, as `--serve FIRST`), fed to the decoder ahead of stdin:
 * a board session's first flight leaves with its exec request, and its answers come back behind the hello, with
 * no round trip of their own (docs/helper-protocol.md, "Bring-up"). Malformed hex is a malformed request. */
static int feed_first(const char *hex)
{
    size_t len = strlen(hex);
    if (len % 2 || len / 2 > FIRST_MAX)
        return -1;
    unsigned char buf[256];
    for (size_t i = 0; i < len;) {
        size_t k = 0;
        for (; k < sizeof buf && i < len; k++, i += 2) {
            int v = 0;
            for (int j = 0; j < 2; j++) {
                char c = hex[i + (size_t)j];
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
                if (d < 0)
                    return -1;
                v = v * 16 + d;
            }
            buf[k] = (unsigned char)v;
        }
        if (odp_frame_dec_feed(&in, buf, k))
            return -1;
    }
    return 0;
}

int rusage_serve(const char *first_hex)
{
    signal(SIGPIPE, SIG_IGN);
    if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK))
        return 125;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    odp_frame_dec_init(&in);
    cache_locate();
    struct utsname u;
    char proto[16];
    snprintf(proto, sizeof proto, "%d", ODP_HELPER_PROTO);
    uname(&u);
    /* hello: who answers, and in which protocol */
    odp_buf h = {0};
    size_t at = odp_frame_begin(&h, 'H');
    odp_frame_add_str(&h, "odp-helper");
    odp_frame_add_str(&h, proto);
    odp_frame_add_str(&h, u.machine);
    /* its own file's sha256: odp uses a helper only when it is odp's own build, and need not ask (one round trip) */
    char self[PATH_MAX], hex[65];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0)
        self[n] = 0;
    odp_frame_add_str(&h, n > 0 && file_sha256(self, hex) == 0 ? hex : "");
    odp_frame_end(&h, at);
    send_all(h.data, h.len);
    odp_buf_free(&h);
    if (first_hex && feed_first(first_hex)) {
        fail("EPROTO", "malformed request: the first flight on the command line is not hex of at most %d bytes",
             FIRST_MAX);
        return 2;
    }
    for (;;) {
        if (nqueued) {
            /* the oldest run queued behind the one that just ended: its turn */
            odp_frame q = {'R', queued[0].nfields, queued[0].payload, queued[0].len};
            int dropped = queued[0].dropped;
            uint8_t *payload = queued[0].payload;
            run_going = queued[0].number;
            memmove(queued, queued + 1, (size_t)--nqueued * sizeof *queued);
            if (dropped)
                fail("EAGAIN", "run: not run, dropped by the signal to the run before it: send it again");
            else
                serve_run(&q);
            run_going = 0;
            free(payload);
            continue;
        }
        odp_frame f;
        int r = next_request(&f);
        if (r <= 0)
            upload_drop(); /* odp is gone: the upload it left unfinished too */
        if (r == 0)
            return 0;
        if (r < 0) {
            fail("EPROTO", "malformed request: %s", in.error ? in.error : "out of memory");
            return 2;
        }
        if (f.type == 'R') {
            run_going = ++runs_received;
            serve_run(&f);
            run_going = 0;
            continue;
        }
        int sig;
        if (f.type == 'Z' && stop_request(&f, &sig) == 0)
            continue; /* its run ended as it came: nothing to stop, nothing to answer */
        if (f.type == 'P') {
            serve_write(&f);
            continue;
        }
        char *a[4];
        int n = fields(&f, a, 4, 0);
        if (n < 0) {
            fail("EPROTO", "request '%c': too many fields, or a NUL inside one", f.type);
            continue;
        }
        switch (f.type) {
        case 'S': serve_state(a, n); break;
        case 'X': serve_hash(a, n); break;
        case 'F': serve_free(a, n); break;
        case 'G': serve_read(a, n); break;
        case 'K': serve_kill(a, n); break;
        case 'M': serve_mkdir(a, n); break;
        case 'U': serve_remove_run_dir(a, n); break;
        case 'C': serve_chmod(a, n); break;
        case 'L': serve_link(a, n); break;
        default: fail("EPROTO", "unknown request type 0x%02x", f.type);
        }
        free_fields(a, n);
    }
}
