/* odp-rusage's sampler: see tools/sample.h; the stream it writes is docs/cpu-profile.md, "The sample stream". */
#define _GNU_SOURCE
#include "sample.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../src/sample/stream.h"

#define MAX_CPUS 256
#define MAX_SYSFS 16
#define DEFAULT_RING_PAGES 64      /* 256 KiB per CPU: ~100 ms of 4 kHz samples with 64-deep chains */
#define DRAIN_MS 10                /* the ring is drained at least this often */
#define COUNTERS_MS 50             /* CPU frequency and temperature read this often */
#define MAX_STACK 64               /* call-chain depth kept (the kernel's own default is 127) */
#define LINE_PREFIX 32             /* bytes of each stderr line kept: the ExecuTorch log's timestamp */

struct ring {
    int fd;
    struct perf_event_mmap_page *meta;
    uint8_t *data;
    uint64_t size;
};

struct sampler {
    FILE *out;
    char *path;
    unsigned hz, pages;
    int event; /* ODP_SAMPLE_EVENT_* */
    int user_only, callchain, switches;
    struct ring rings[MAX_CPUS];
    int nrings;
    int err_rd, err_wr, err_out; /* the program's stderr: read end, child's write end, where it goes */
    int stop_rd, stop_wr;
    pthread_t thread;
    int started;
    volatile int stopping;
    int freq_fd[MAX_SYSFS], nfreq, freq_id[MAX_SYSFS];
    int temp_fd[MAX_SYSFS], ntemp, temp_id[MAX_SYSFS];
    uint64_t records, lost_write;
    int write_failed;
    /* the stderr line being collected */
    int at_line_start, collecting;
    uint64_t line_t;
    char line[LINE_PREFIX];
    size_t line_n;
    uint8_t scratch[65536];
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put(struct sampler *s, const void *p, size_t n)
{
    if (s->write_failed)
        return;
    if (fwrite(p, 1, n, s->out) != n)
        s->write_failed = 1;
}

/* an odp record: the perf header shape, then the payload */
static void put_record(struct sampler *s, uint32_t type, const void *payload, size_t n)
{
    struct perf_event_header h = {.type = type, .misc = 0, .size = (uint16_t)(sizeof h + n)};
    put(s, &h, sizeof h);
    put(s, payload, n);
    s->records++;
}

struct sampler *sampler_new(const char *path, unsigned hz, unsigned ring_pages)
{
    if (!hz || hz > 100000 || (ring_pages & (ring_pages - 1))) {
        errno = EINVAL;
        return NULL;
    }
    struct sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->hz = hz;
    s->pages = ring_pages ? ring_pages : DEFAULT_RING_PAGES;
    s->err_rd = s->err_wr = s->err_out = s->stop_rd = s->stop_wr = -1;
    s->at_line_start = 1;
    s->path = strdup(path);
    s->out = fopen(path, "wb");
    if (!s->out || !s->path) {
        int e = errno;
        if (s->out)
            fclose(s->out);
        free(s->path);
        free(s);
        errno = e;
        return NULL;
    }
    setvbuf(s->out, NULL, _IOFBF, 1 << 16);
    return s;
}

struct sampler *sampler_request(const char *spec)
{
    char *end;
    errno = 0;
    unsigned long hz = strtoul(spec, &end, 10);
    if (errno || end == spec || *end != ',' || !end[1] || hz > 100000)
        return NULL;
    return sampler_new(end + 1, (unsigned)hz, 0);
}

int sampler_stderr_pipe(struct sampler *s, int out_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    /* a copy: the caller may close its own once the program is started (the resident helper does) */
    int out = fcntl(out_fd >= 0 ? out_fd : 2, F_DUPFD_CLOEXEC, 3);
    if (out < 0) {
        close(p[0]), close(p[1]);
        return -1;
    }
    s->err_rd = p[0];
    s->err_wr = p[1];
    s->err_out = out;
    return p[1];
}

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -9;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -9;
        fclose(f);
    }
    return v;
}

/* ODP_RUSAGE_PERF_DENY=1 answers every open as a kernel whose kernel.perf_event_paranoid forbids it (Debian's and
 * Android's 3) answers: EACCES. Only for odp's tests: the kernels they run on let everyone sample their own
 * programs whatever the setting, so the refusal cannot be made real there. */
static long perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
    const char *deny = getenv("ODP_RUSAGE_PERF_DENY");
    if (deny && strcmp(deny, "1") == 0) {
        errno = EACCES;
        return -1;
    }
    return syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void fill_attr(struct perf_event_attr *a, const struct sampler *s)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    if (s->event == ODP_SAMPLE_EVENT_CYCLES) {
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_CPU_CYCLES;
    } else {
        a->type = PERF_TYPE_SOFTWARE;
        a->config = PERF_COUNT_SW_CPU_CLOCK;
    }
    a->freq = 1;
    a->sample_freq = s->hz;
    a->sample_type = ODP_SAMPLE_TYPE;
    a->disabled = 1;
    a->enable_on_exec = 1;
    a->inherit = 1;
    a->exclude_hv = 1;
    a->exclude_kernel = (unsigned)s->user_only;
    a->mmap = 1;
    a->mmap2 = 1;
    a->comm = 1;
    a->comm_exec = 1;
    a->task = 1;
    a->sample_id_all = 1;
    a->context_switch = (unsigned)s->switches;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->sample_max_stack = MAX_STACK;
    a->watermark = 1;
    a->wakeup_watermark = (uint32_t)(s->pages * (uint64_t)getpagesize() / 2);
}

/* Opens the event on CPU 0 trying what this kernel and PMU allow: cycles, else cpu-clock; kernel and user,
 * else user only (perf_event_paranoid 2 refuses kernel samples to unprivileged users); a callchain, else the
 * leaf (a kernel without user stacks for this event). */
static long open_first(struct sampler *s, pid_t pid, int cpu, int *err)
{
    static const int events[] = {ODP_SAMPLE_EVENT_CYCLES, ODP_SAMPLE_EVENT_CPU_CLOCK};
    s->switches = 1;
    for (int e = 0; e < 2; e++) {
        for (int uo = 0; uo < 2; uo++) {
            s->event = events[e];
            s->user_only = uo;
            struct perf_event_attr a;
            fill_attr(&a, s);
            long fd = perf_open(&a, pid, cpu);
            if (fd < 0 && errno == EINVAL && s->switches) {
                s->switches = 0; /* a kernel before 4.3: no switch records; the time a thread waited is not seen */
                fill_attr(&a, s);
                fd = perf_open(&a, pid, cpu);
            }
            if (fd >= 0)
                return fd;
            *err = errno;
            if (errno != EACCES && errno != EPERM)
                break; /* no such event here (ENOENT, EOPNOTSUPP, ENODEV, EINVAL): try the next */
        }
    }
    return -1;
}

static int map_ring(struct sampler *s, long fd)
{
    size_t psz = (size_t)getpagesize(), len = (1 + s->pages) * psz;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    if (m == MAP_FAILED)
        return -1;
    struct ring *r = &s->rings[s->nrings++];
    r->fd = (int)fd;
    r->meta = m;
    r->data = (uint8_t *)m + psz;
    r->size = s->pages * psz;
    return 0;
}

static void open_sysfs(struct sampler *s)
{
    char p[128];
    for (int i = 0; i < 64 && s->nfreq < MAX_SYSFS; i++) {
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpufreq/policy%d/scaling_cur_freq", i);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            s->freq_id[s->nfreq] = i;
            s->freq_fd[s->nfreq++] = fd;
        }
    }
    for (int i = 0; i < 64 && s->ntemp < MAX_SYSFS; i++) {
        snprintf(p, sizeof p, "/sys/class/thermal/thermal_zone%d/temp", i);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            s->temp_id[s->ntemp] = i;
            s->temp_fd[s->ntemp++] = fd;
        }
    }
}

static void read_counters(struct sampler *s)
{
    for (int k = 0; k < 2; k++) {
        int n = k ? s->ntemp : s->nfreq, *fds = k ? s->temp_fd : s->freq_fd, *ids = k ? s->temp_id : s->freq_id;
        for (int i = 0; i < n; i++) {
            char b[32];
            ssize_t r = pread(fds[i], b, sizeof b - 1, 0);
            if (r <= 0)
                continue;
            b[r] = 0;
            struct odp_sample_counter c = {.time = mono_ns(), .kind = k ? ODP_SAMPLE_COUNTER_TEMP_MC : ODP_SAMPLE_COUNTER_FREQ_KHZ,
                                           .index = (uint32_t)ids[i], .value = strtoll(b, NULL, 10)};
            put_record(s, ODP_SAMPLE_REC_COUNTER, &c, sizeof c);
        }
    }
}

/* n bytes of the ring from offset off (its size is a power of 2), in at most two pieces where it wraps */
static void ring_copy(const struct ring *r, uint64_t off, void *dst, size_t n)
{
    size_t at = (size_t)(off & (r->size - 1)), first = r->size - at < n ? (size_t)(r->size - at) : n;
    memcpy(dst, r->data + at, first);
    memcpy((uint8_t *)dst + first, r->data, n - first);
}

/* Copies every whole record between the ring's tail and head into the stream, then frees that space. A record
 * that does not wrap goes from the ring to the stream's buffer directly; one that wraps, through scratch (a
 * byte-at-a-time copy with a division per byte cost the helper ~7 ns a byte of stream: bench/README.md). */
static void drain(struct sampler *s, struct ring *r)
{
    uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->meta->data_tail;
    while (tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header h;
        ring_copy(r, tail, &h, sizeof h);
        if (h.size < sizeof h || tail + h.size > head)
            break;
        size_t at = (size_t)(tail & (r->size - 1));
        if (at + h.size <= r->size) {
            put(s, r->data + at, h.size);
        } else {
            ring_copy(r, tail, s->scratch, h.size);
            put(s, s->scratch, h.size);
        }
        s->records++;
        tail += h.size;
    }
    __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

static void line_end(struct sampler *s)
{
    if (s->collecting && s->line_n) {
        struct odp_sample_line l;
        memset(&l, 0, sizeof l);
        l.time = s->line_t;
        memcpy(l.text, s->line, s->line_n);
        put_record(s, ODP_SAMPLE_REC_LINE, &l, sizeof l);
    }
    s->collecting = 0;
    s->line_n = 0;
}

/* The program's stderr: forwarded unchanged; each line's first bytes kept with the time they were read. */
static int pass_stderr(struct sampler *s)
{
    char buf[4096];
    ssize_t n = read(s->err_rd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return -1;
    uint64_t t = mono_ns();
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(s->err_out, buf + off, (size_t)(n - off));
        if (w <= 0)
            break; /* nobody reads the program's stderr any more: the profile goes on */
        off += w;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (s->at_line_start) {
            s->at_line_start = 0;
            s->collecting = 1;
            s->line_t = t;
        }
        if (buf[i] == '\n') {
            line_end(s);
            s->at_line_start = 1;
        } else if (s->collecting) {
            s->line[s->line_n++] = buf[i];
            if (s->line_n == LINE_PREFIX)
                line_end(s);
        }
    }
    return 0;
}

/* ODP_RUSAGE_DRAIN_STALL_MS=N stalls the drainer N ms after each wake, as a board too busy to run it would: only
 * for odp's tests, where an idle machine drains a small ring fast enough that no sample is ever lost. */
static long drain_stall_ms(void)
{
    const char *v = getenv("ODP_RUSAGE_DRAIN_STALL_MS");
    long ms = v ? atol(v) : 0;
    return ms > 0 && ms <= 1000 ? ms : 0;
}

static void *drain_thread(void *arg)
{
    struct sampler *s = arg;
    struct pollfd p[MAX_CPUS + 2];
    uint64_t next_counters = 0;
    long stall = drain_stall_ms();
    for (;;) {
        int n = 0;
        for (int i = 0; i < s->nrings; i++)
            p[n++] = (struct pollfd){.fd = s->rings[i].fd, .events = POLLIN};
        int err_at = -1;
        if (s->err_rd >= 0) {
            err_at = n;
            p[n++] = (struct pollfd){.fd = s->err_rd, .events = POLLIN};
        }
        p[n++] = (struct pollfd){.fd = s->stop_rd, .events = POLLIN};
        poll(p, (nfds_t)n, DRAIN_MS);
        if (stall) {
            struct timespec ts = {stall / 1000, (stall % 1000) * 1000000};
            while (nanosleep(&ts, &ts)) {}
        }
        for (int i = 0; i < s->nrings; i++)
            drain(s, &s->rings[i]);
        if (err_at >= 0 && (p[err_at].revents & (POLLIN | POLLHUP | POLLERR)) && pass_stderr(s)) {
            /* the program's stderr is closed (by it and its children): so is ours, for whoever reads it (the
             * resident helper waits for that end) */
            line_end(s);
            close(s->err_rd);
            close(s->err_out);
            s->err_rd = s->err_out = -1;
        }
        uint64_t now = mono_ns();
        if (now >= next_counters) {
            read_counters(s);
            next_counters = now + COUNTERS_MS * 1000000ull;
        }
        if (__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE))
            break;
    }
    return NULL;
}

int sampler_attach(struct sampler *s, pid_t pid, char *why, size_t whylen)
{
    if (s->err_wr >= 0) {
        close(s->err_wr); /* the child has its copy: EOF comes when the program (and its children) are done */
        s->err_wr = -1;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu < 1)
        ncpu = 1;
    if (ncpu > MAX_CPUS)
        ncpu = MAX_CPUS;
    /* every ring is locked memory: an unprivileged user has kernel.perf_event_mlock_kb (516 KiB by default) for
     * all of them, each its data pages plus one */
    long mlock_kb = read_long("/proc/sys/kernel/perf_event_mlock_kb");
    long psz = getpagesize();
    while (mlock_kb > 0 && s->pages > 1 && (s->pages + 1) * psz * ncpu > mlock_kb * 1024)
        s->pages /= 2;
    /* a rate above kernel.perf_event_max_sample_rate is refused (EINVAL), and the kernel lowers that limit
     * itself when its sampling interrupts take too long (under emulation: to ~2 kHz after a run at 4 kHz):
     * sample at the limit then, as perf record does; the header carries the rate used, odp says so */
    long max_rate = read_long("/proc/sys/kernel/perf_event_max_sample_rate");
    if (max_rate > 0 && s->hz > (unsigned long)max_rate)
        s->hz = (unsigned)max_rate;
    int err = 0, first = 1, map_err = 0;
    for (int cpu = 0; cpu < ncpu; cpu++) {
        long fd;
        if (first) {
            fd = open_first(s, pid, cpu, &err);
        } else {
            struct perf_event_attr a;
            fill_attr(&a, s);
            fd = perf_open(&a, pid, cpu);
            err = errno;
        }
        if (fd < 0) {
            if (err == ENODEV || err == EINVAL || err == ENOENT)
                continue; /* an offline CPU (or one this event has no PMU on) */
            break;
        }
        first = 0;
        err = 0;
        if (map_ring(s, fd)) {
            err = errno;
            map_err = 1;
            close((int)fd);
            break;
        }
    }
    if (s->nrings == 0 || (err && err != ENODEV && err != EINVAL && err != ENOENT)) {
        long paranoid = read_long("/proc/sys/kernel/perf_event_paranoid");
        if (map_err)
            snprintf(why, whylen,
                     "sampling: cannot map %u KiB of ring buffer per CPU: %s (kernel.perf_event_mlock_kb is %ld)",
                     (unsigned)(s->pages * (unsigned long)psz / 1024), strerror(err), mlock_kb);
        else if (err == EACCES || err == EPERM)
            snprintf(why, whylen,
                     "sampling refused by the kernel: kernel.perf_event_paranoid is %ld "
                     "(/proc/sys/kernel/perf_event_paranoid; 2 or lower allows user-space sampling of one's own "
                     "programs; on Android `setprop security.perf_harden 0`)",
                     paranoid);
        else
            snprintf(why, whylen, "sampling: perf_event_open: %s", strerror(err));
        return -1;
    }
    int sp[2];
    if (pipe2(sp, O_CLOEXEC)) {
        snprintf(why, whylen, "sampling: pipe: %s", strerror(errno));
        return -1;
    }
    s->stop_rd = sp[0];
    s->stop_wr = sp[1];
    open_sysfs(s);
    struct odp_sample_file_header fh;
    memset(&fh, 0, sizeof fh);
    memcpy(fh.magic, ODP_SAMPLE_MAGIC, sizeof fh.magic);
    fh.header_size = sizeof fh;
    fh.event = (uint32_t)s->event;
    fh.freq_hz = s->hz;
    fh.clockid = CLOCK_MONOTONIC;
    fh.sample_type = ODP_SAMPLE_TYPE;
    fh.ncpus = (uint32_t)s->nrings;
    fh.flags = (s->user_only ? ODP_SAMPLE_FLAG_USER_ONLY : 0) | ODP_SAMPLE_FLAG_CALLCHAIN |
               (s->switches ? ODP_SAMPLE_FLAG_SWITCHES : 0);
    fh.paranoid = (int32_t)read_long("/proc/sys/kernel/perf_event_paranoid");
    fh.pid = (uint32_t)pid;
    fh.ring_bytes = (uint32_t)(s->pages * (uint64_t)getpagesize());
    fh.start_time = mono_ns();
    put(s, &fh, sizeof fh);
    /* the drain thread takes no signal: the helper's handlers run on its main thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, drain_thread, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        snprintf(why, whylen, "sampling: thread: %s", strerror(rc));
        return -1;
    }
    s->started = 1;
    return 0;
}

int sampler_finish(struct sampler *s)
{
    int rc = 0;
    if (s->started) {
        __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
        char b = 1;
        if (write(s->stop_wr, &b, 1) < 0) {} /* the poll wakes; its timeout would too */
        pthread_join(s->thread, NULL);
        for (int i = 0; i < s->nrings; i++)
            drain(s, &s->rings[i]);
        /* what the program wrote last, as long as a child that kept its stderr does not hold it open */
        if (s->err_rd >= 0) {
            fcntl(s->err_rd, F_SETFL, O_NONBLOCK);
            while (pass_stderr(s) == 0) {
                struct pollfd p = {.fd = s->err_rd, .events = POLLIN};
                if (poll(&p, 1, 0) <= 0)
                    break;
            }
            line_end(s);
        }
        struct odp_sample_end e = {.records = s->records, .lost_write = s->lost_write, .end_time = mono_ns()};
        put_record(s, ODP_SAMPLE_REC_END, &e, sizeof e);
    }
    for (int i = 0; i < s->nrings; i++) {
        munmap(s->rings[i].meta, (size_t)getpagesize() + s->rings[i].size);
        close(s->rings[i].fd);
    }
    for (int i = 0; i < s->nfreq; i++)
        close(s->freq_fd[i]);
    for (int i = 0; i < s->ntemp; i++)
        close(s->temp_fd[i]);
    int fds[] = {s->err_rd, s->err_wr, s->err_out, s->stop_rd, s->stop_wr};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (fclose(s->out) || s->write_failed || !s->started)
        rc = -1;
    free(s->path);
    free(s);
    return rc;
}
