/* memwatch: a measured program's memory by phase (docs/memory.md), for both modes of odp-rusage (exec mode:
 * tools/odp-rusage.c; the resident helper: tools/serve.c). The helper sees the program's output as it arrives;
 * a line matching a mark (EVENT=GLOB, fnmatch(3) globs the caller gives: odp's Lua knows the runner's lines,
 * this file does not) is a phase boundary: the program's VmHWM is read from /proc/PID/status, then "5" is
 * written to /proc/PID/clear_refs so the next read is the next phase's peak alone. Between boundaries
 * /proc/PID/statm is sampled every sample_ms into a CSV timeline (t_ms, rss, anon, file+shmem) written to a
 * stream the caller gives (exec mode: a file; the resident helper: its 'T' frames), whole lines, bounded. Its
 * report is ODP-MEMORY-MARK lines (one per boundary) and one ODP-MEMORY line, written with the ODP-RUSAGE report. */
#ifndef ODP_TOOLS_MEMWATCH_H
#define ODP_TOOLS_MEMWATCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <sys/types.h>

#define MEMWATCH_MARKS 16      /* marks a caller may give */
#define MEMWATCH_REPORTED 64   /* boundaries reported; more are still read and reset, and counted */
#define MEMWATCH_LINE 512      /* a line is matched on its first 511 bytes (ExecuTorch cuts its own at 255) */
#define MEMWATCH_EVENT 32      /* an event name's bytes */
#define MEMWATCH_TIMELINE_MAX ((size_t)64 << 20) /* timeline bytes at most (~30 min at 1 kHz); the rest is cut */

struct memwatch_mark {
    char event[MEMWATCH_EVENT];
    const char *glob;
};

struct memwatch_boundary {
    char event[MEMWATCH_EVENT];
    double t_ms;                 /* when its line arrived, from the program's start */
    double read_us;              /* what reading status (and smaps_rollup) and resetting cost */
    long hwm_kb;                 /* VmHWM: the peak since the last reset (or since the start) */
    long rss_kb, anon_kb, file_kb, shmem_kb; /* smaps_rollup at the boundary (-1: unreadable) */
    long sampled_max_kb;         /* the largest sample since the previous boundary */
    long pte_kb;                 /* resident bytes of mappings of the model file (-1: not asked) */
    int reset;                   /* 1: clear_refs written after the read; 0: it could not be (reset_errno) */
    long after;                  /* bytes of the program's output that came after its line in the same read: the
                                  * program had gone on past the boundary before the helper read it, so the
                                  * reading holds some of the next phase */
    const char *late;            /* no reading (hwm_kb -1): "ended" (the program was gone), "together" (its
                                  * line came in one read with a later boundary's) */
};

struct memwatch {
    int on;
    pid_t pid;
    double t0;                   /* the program's start, CLOCK_MONOTONIC seconds */
    double sample_s, next_sample;
    struct memwatch_mark marks[MEMWATCH_MARKS];
    int nmarks;
    const char *model_path;      /* NULL: no mapping count */
    FILE *timeline;              /* NULL: none (timeline=none) */
    int timeline_errno;          /* the timeline could not be written: why (timeline=failed) */
    size_t timeline_bytes, timeline_max;
    int timeline_cut;            /* a line would have passed timeline_max: it and the rest are left out */
    int statm_fd;
    int batched;                 /* the kernel counts RSS per thread in batches (before Linux 6.2): statm and
                                  * VmHWM lag, so samples walk the page tables (smaps_rollup) instead, at
                                  * an interval that only grows (sample_s: the longest so far) */
    long page_kb;
    char line[2][MEMWATCH_LINE]; /* the line being assembled per stream (0 stdout, 1 stderr) */
    size_t len[2];
    struct memwatch_boundary b[MEMWATCH_REPORTED];
    int nb, dropped;             /* reported boundaries; boundaries beyond MEMWATCH_REPORTED */
    long seg_max_kb, max_kb;     /* sampled max since the last boundary; over the whole run */
    long samples;
    long model_max_kb;           /* the most of the model file's mappings seen resident */
    int reset_errno;             /* the last clear_refs failure (0: every write worked) */
    int children;                /* child processes of the program seen (their memory is not its own) */
    pid_t child_seen[16];
    int ended;                   /* the program is gone: /proc no longer answers */
};

/* Parses "EVENT=GLOB" into m's marks (the string must outlive m). 0, or -1 for a malformed or one too many. */
int memwatch_add_mark(struct memwatch *m, const char *spec);
/* Starts watching pid (its start at t0) with m's marks. timeline (NULL: none) gets the CSV timeline, header
 * first, whole lines up to timeline_max bytes in all (a line that would pass it and every later one are left
 * out: timeline=cut); memwatch_report closes it. model_path: the model file whose mapped bytes are counted. */
void memwatch_start(struct memwatch *m, pid_t pid, double t0, FILE *timeline, size_t timeline_max,
                    const char *model_path);
/* Output of the program on stream 0 (stdout) or 1 (stderr), as it arrived: boundaries are read at once. */
void memwatch_output(struct memwatch *m, int stream, const char *p, size_t n);
/* The program was reaped: its PID may be another's from now on, so /proc/PID is not read again. */
void memwatch_gone(struct memwatch *m);
/* Milliseconds until the next sample is due (for poll), or -1 when nothing is watched. */
int memwatch_timeout_ms(const struct memwatch *m);
/* Takes the samples that are due. */
void memwatch_tick(struct memwatch *m);
/* The program was reaped: the report lines (nothing when not watching); closes the timeline (flushed first,
 * so what it holds is written before the report). */
void memwatch_report(struct memwatch *m, FILE *f);

/* Exec mode: relays the program's stdout (out_fd) and stderr (err_fd) to ours while watching, until it is
 * reaped (st, ru from wait4) and its pipes are quiet. */
struct rusage;
void memwatch_relay(struct memwatch *m, pid_t pid, int out_fd, int err_fd, int *st, struct rusage *ru);

#endif
