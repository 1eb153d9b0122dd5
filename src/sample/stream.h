/* The sample stream odp-rusage --sample writes (tools/sample.c) and odp reads (src/sample/sample.c); the
 * layout is docs/cpu-profile.md, "The sample stream". Shared by both, so it needs nothing but <stdint.h>. Little-endian (every
 * board odp drives: x86_64, aarch64). */
#ifndef ODP_SAMPLE_STREAM_H
#define ODP_SAMPLE_STREAM_H

#include <stdint.h>

#define ODP_SAMPLE_MAGIC "ODPSMPL1"

/* PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN */
#define ODP_SAMPLE_TYPE ((uint64_t)(1u << 0 | 1u << 1 | 1u << 2 | 1u << 5))

enum { ODP_SAMPLE_EVENT_CYCLES = 1, ODP_SAMPLE_EVENT_CPU_CLOCK = 2 };
/* SWITCHES: the kernel wrote a PERF_RECORD_SWITCH at each context switch of the program's threads */
enum { ODP_SAMPLE_FLAG_USER_ONLY = 1, ODP_SAMPLE_FLAG_CALLCHAIN = 2, ODP_SAMPLE_FLAG_SWITCHES = 4 };

struct odp_sample_file_header {
    char magic[8];
    uint32_t header_size; /* sizeof this struct: a later helper may append fields */
    uint32_t event;       /* ODP_SAMPLE_EVENT_* */
    uint32_t freq_hz;     /* the rate asked of the kernel (it adjusts the period to approach it): the requested
                           * one, or kernel.perf_event_max_sample_rate where that is lower */
    uint32_t clockid;     /* 1: CLOCK_MONOTONIC, the samples' and the line records' clock */
    uint64_t sample_type; /* ODP_SAMPLE_TYPE */
    uint32_t ncpus;       /* events opened (one per CPU) */
    uint32_t flags;       /* ODP_SAMPLE_FLAG_* */
    int32_t paranoid;     /* kernel.perf_event_paranoid then (-9: unreadable) */
    uint32_t pid;         /* the program */
    uint32_t ring_bytes;  /* data bytes of each CPU's ring buffer */
    uint32_t reserved;
    uint64_t start_time;  /* CLOCK_MONOTONIC ns when the events were opened */
};

/* Records after the header: the kernel's own (struct perf_event_header, then its payload, as the ring buffer
 * held them: PERF_RECORD_SAMPLE, MMAP2, COMM, FORK, EXIT, LOST, ...) and the helper's, typed from 0x4000. */
enum {
    ODP_SAMPLE_REC_LINE = 0x4001,    /* struct odp_sample_line */
    ODP_SAMPLE_REC_COUNTER = 0x4002, /* struct odp_sample_counter */
    ODP_SAMPLE_REC_END = 0x4003,     /* struct odp_sample_end: the stream is whole */
};

/* A line of the program's stderr: the time its first byte was read, and its first bytes (NUL-padded). */
struct odp_sample_line {
    uint64_t time;
    char text[32];
};

enum { ODP_SAMPLE_COUNTER_FREQ_KHZ = 1, ODP_SAMPLE_COUNTER_TEMP_MC = 2 };

/* A reading of /sys/devices/system/cpu/cpufreq/policy<index>/scaling_cur_freq (kHz) or
 * /sys/class/thermal/thermal_zone<index>/temp (millidegrees Celsius). */
struct odp_sample_counter {
    uint64_t time;
    uint32_t kind;
    uint32_t index;
    int64_t value;
};

struct odp_sample_end {
    uint64_t records;    /* records before this one */
    uint64_t lost_write; /* reserved: records the helper could not write */
    uint64_t end_time;
};

#endif
