/* The sample stream of odp-rusage --sample (layout: stream.h, docs/cpu-profile.md, "The sample stream"): read, then joined with
 * ETDump's op intervals and folded into call stacks per op. The stream comes from a board: untrusted. Every
 * record's size is checked against the buffer and its own fields, every count is capped, and a stream cut
 * short (no trailer, a record cut in two) reads as far as it is whole and says it is not complete. */
#ifndef ODP_SAMPLE_H
#define ODP_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "stream.h"

#define ODP_SAMPLE_MAX_BYTES ((size_t)1 << 31)
#define ODP_SAMPLE_MAX_SAMPLES 50000000u
#define ODP_SAMPLE_MAX_SIDE 1000000u /* mmaps, comms, tasks, lines, counters: each */
#define ODP_SAMPLE_MAX_DEPTH 127     /* frames kept per sample */
/* A frame that stands for every kernel frame of a sample (they are shown as one "[kernel]"). */
#define ODP_SAMPLE_KERNEL UINT64_MAX
/* The one frame of a sample made for time a thread was runnable but off the CPU (preempted: the switch record
 * says so): the samples of cpu-clock and cycles only come while a thread runs, and ETDump's intervals count the
 * waiting too; one such sample per sampling period of the wait, on the period's grid. */
#define ODP_SAMPLE_PREEMPTED (UINT64_MAX - 1)
#define ODP_SAMPLE_MAX_THREADS 65536u
#define ODP_SAMPLE_MAX_PREEMPTED 4000000u /* samples made for preempted time, at most (17 min at 4 kHz) */
#define ODP_SAMPLE_MAX_HZ 100000u         /* the helper's own bound on the rate */

typedef struct {
    uint64_t time;
    uint32_t pid, tid;
    uint32_t chain; /* first frame in odp_sample_stream.frames (leaf first) */
    uint32_t depth; /* frames: at least 1 (the leaf, the IP) */
} odp_sample;

typedef struct {
    uint64_t time, start, len, pgoff;
    uint32_t pid, prot;
    const char *file; /* into the caller's buffer, not NUL-terminated */
    uint32_t file_len;
    uint8_t build_id[20];
    uint8_t build_id_len; /* 0: the kernel gave device/inode instead */
} odp_sample_mmap;

typedef struct {
    uint64_t time;
    uint32_t pid, tid;
    int exec;
    char name[17];
} odp_sample_comm;

typedef struct {
    uint64_t time;
    uint32_t pid, ppid, tid;
    int exit; /* 0: fork, 1: exit */
} odp_sample_task;

typedef struct {
    uint64_t time;
    char text[33];
} odp_sample_line;

typedef struct {
    uint64_t time;
    uint32_t kind, index;
    int64_t value;
} odp_sample_counter;

typedef struct {
    struct odp_sample_file_header header;
    int complete;          /* the trailer was read and counted every record before it */
    uint64_t lost;         /* samples the kernel dropped (PERF_RECORD_LOST, LOST_SAMPLES) */
    uint64_t lost_records; /* PERF_RECORD_LOST records */
    uint64_t records, unknown_records, kernel_samples;
    uint64_t switches, preempted_samples; /* context switches read; samples made for preempted time */
    uint64_t end_time;
    odp_sample *samples;
    uint32_t nsamples;
    uint64_t *frames;
    size_t nframes;
    odp_sample_mmap *mmaps;
    uint32_t nmmaps;
    odp_sample_comm *comms;
    uint32_t ncomms;
    odp_sample_task *tasks;
    uint32_t ntasks;
    odp_sample_line *lines;
    uint32_t nlines;
    odp_sample_counter *counters;
    uint32_t ncounters;
} odp_sample_stream;

/* Reads a stream (pointers into buf: keep it while the stream is used). EPROTO for what is not a sample
 * stream (bad magic, a header or record that contradicts itself); a stream cut short is read, not complete. */
int odp_sample_read(const uint8_t *buf, size_t n, odp_sample_stream *st, odp_err *err);
void odp_sample_free(odp_sample_stream *st);

/* The executable mapping that held addr in pid at time t (the latest made before t; any pid's when pid has
 * none: a forked child shares its parent's), or -1. */
int32_t odp_sample_mapping(const odp_sample_stream *st, uint32_t pid, uint64_t t, uint64_t addr);

/* An interval on the samples' clock, [start, end), that samples inside are attributed to. */
typedef struct {
    uint64_t start, end;
    int32_t id;
} odp_sample_interval;

/* Intervals that may nest (an op inside a delegate call) -> disjoint ones where the innermost wins, sorted.
 * *out is malloc'd (free it); returns its count, or -1 (ENOMEM). */
long odp_sample_flatten(const odp_sample_interval *in, size_t n, odp_sample_interval **out);

/* Per sample: the id of the flattened op interval holding its time, ODP_SAMPLE_BETWEEN when it is in an execute
 * interval but no op's, ODP_SAMPLE_OUTSIDE otherwise. ops and execs are flattened (sorted, disjoint). */
#define ODP_SAMPLE_BETWEEN (-1)
#define ODP_SAMPLE_OUTSIDE (-2)
void odp_sample_assign(const odp_sample_stream *st, const odp_sample_interval *ops, size_t nops,
                       const odp_sample_interval *execs, size_t nexecs, int32_t *assign);

/* The distinct (owner, call stack) pairs of the samples and how many samples each has: owner is assign[i]
 * (or anything the caller chose). Stacks point into st->frames. */
typedef struct {
    int32_t owner;
    uint32_t count;
    uint32_t chain, depth;
} odp_sample_stack;

/* Returns the number of stacks (*out malloc'd), or -1 (ENOMEM). */
long odp_sample_fold(const odp_sample_stream *st, const int32_t *owner, odp_sample_stack **out);

#endif
