/* Process spawn with rusage. No shell: argv is executed directly (PATH lookup for argv[0]).
 * The child leads its own process group so a timeout or Ctrl-C can end it with everything it started. */
#ifndef ODP_PROC_H
#define ODP_PROC_H

#include <spawn.h>
#include <stddef.h>
#include <sys/resource.h>

#include "../util/buf.h"
#include "../util/err.h"

typedef struct {
    const char *const *argv;    /* NULL-terminated, argv[0] looked up in PATH */
    const char *cwd;            /* NULL = inherit */
    char *const *envp;          /* NULL = inherit */
    const char *stdin_data;     /* NULL = /dev/null */
    size_t stdin_len;
    double deadline;            /* absolute (util/wait.h); ODP_FOREVER for none */
    double kill_grace;          /* seconds between SIGTERM and SIGKILL of the group */
    size_t capture_limit;       /* bytes kept per stream; 0 = keep everything */
    /* > 2: the child gets the read end of odp's lifeline pipe as this descriptor. Only odp holds the write
     * end, so the child (or whatever it hands the descriptor to) reads end-of-file when odp's process ends,
     * however it ends, SIGKILL included: the way a daemon odp starts (the twin's QEMU) ends with odp. */
    int lifeline_fd;
    /* Each chunk of output as it arrives (stream 1 = stdout, 2 = stderr). Non-zero stops the run
     * (the group is killed, result.aborted set). */
    int (*on_output)(void *ctx, int stream, const char *data, size_t n);
    void *ctx;
    /* > 0: the arrival times of at most this many stdout chunks are kept (result.out_times): an LLM runner's
     * generated pieces, timed in the read loop itself (docs/llm.md) */
    size_t out_times_max;
} odp_proc_opts;

/* When each chunk of a stream was read: CLOCK_MONOTONIC µs since the spawn, and the stream's bytes up to the
 * chunk's end. Chunks past the bound are counted in cut, not kept. */
typedef struct {
    long long *t_us;
    unsigned long long *ends;
    size_t n, cap, cut;
    unsigned long long bytes; /* of the stream so far */
} odp_chunk_times;

typedef struct {
    int status;            /* exit status when the process exited, else 0 */
    int signal;            /* terminating signal, else 0 */
    int timed_out;         /* the deadline passed and the group was killed */
    int canceled;          /* Ctrl-C: the group was killed */
    int aborted;           /* on_output asked to stop */
    int core_dumped;
    odp_buf out, err;      /* captured output; .dropped counts what capture_limit refused */
    odp_chunk_times out_times; /* with opts.out_times_max */
    double wall_s;         /* spawn to reap */
    struct rusage ru;      /* from wait4: this child only (ru_maxrss in KiB) */
} odp_proc_result;

/* Runs the process to completion. Returns 0 when it ran (whatever its exit: a process exit is data),
 * or a negative odp_code when it could not be started (ENOTFOUND: no such program; EIO otherwise).
 * The caller frees result with odp_proc_result_free. */
int odp_proc_run(const odp_proc_opts *opts, odp_proc_result *result, odp_err *err);

/* The posix_spawn attributes of every child odp starts (odp_proc_run's, the J-Link helpers'): a process group of
 * its own (a timeout or Ctrl-C ends it with everything it started; the terminal's Ctrl-C reaches odp only), no
 * signal blocked, and the signals odp handles or ignores back to their defaults. posix_spawnattr_destroy after. */
void odp_spawnattr_child(posix_spawnattr_t *attr);
void odp_proc_result_free(odp_proc_result *result);

/* odp is a child subreaper (odp_proc_run): a daemon a child leaves behind (the twin's QEMU) becomes odp's
 * child, and a zombie of odp's when it exits, unless odp reaps it. Every child odp starts and waits for itself
 * is tracked from its spawn to its reaping, so that odp_reap_orphans reaps only the others: the exited
 * orphans among /proc/self/task/N/children. It runs at each odp_proc_run, so none stays a zombie for longer
 * than until the next process odp runs. Returns how many it reaped. */
void odp_child_track(pid_t pid);
void odp_child_untrack(pid_t pid);
int odp_reap_orphans(void);

#endif
