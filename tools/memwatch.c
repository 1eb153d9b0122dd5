/* memwatch: a measured program's memory by phase; see memwatch.h and docs/memory.md. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "memwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

#define CHILD_CHECK_EVERY 16 /* samples between looks for the program's children (a small file each) */
#define SAMPLE_DUTY 20 /* a sample that walks page tables comes at most every 20 times its cost (5% of a CPU) */
#define MODEL_CHECK_EVERY 256 /* samples between counts of the model's mapped bytes (all of smaps: ~0.1 ms) */

int memwatch_add_mark(struct memwatch *m, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || (size_t)(eq - spec) >= MEMWATCH_EVENT || !eq[1] || m->nmarks >= MEMWATCH_MARKS)
        return -1;
    for (const char *c = spec; c < eq; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            return -1; /* event names travel in report lines: [a-z0-9_] only */
    struct memwatch_mark *k = &m->marks[m->nmarks++];
    memcpy(k->event, spec, (size_t)(eq - spec));
    k->event[eq - spec] = 0;
    k->glob = eq + 1;
    return 0;
}

static char model_real[PATH_MAX];

/* Whether this kernel counts a process's RSS per thread in batches: before Linux 6.2 (SPLIT_RSS_COUNTING, gone
 * with commit f1a7941243c1 "mm: convert mm's rss stats into percpu_counter") a thread's page faults are added to
 * the process's counters only every 64 faults (TASK_RSS_EVENTS_THRESH), so statm, VmHWM and clear_refs' reset
 * see up to 64 faults less per thread: a small static program reads 4 kB for its first 64 faults. Page-table
 * walks (smaps_rollup) see every page. */
static int rss_counters_batched(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
        return 1; /* unknown: the careful way */
    return major < 6 || (major == 6 && minor < 2);
}

/* One line of the timeline, if it still fits in its bound. */
static void timeline_line(struct memwatch *m, const char *line, int len)
{
    if (!m->timeline || m->timeline_cut || len <= 0)
        return;
    if (m->timeline_bytes + (size_t)len > m->timeline_max) {
        m->timeline_cut = 1;
        return;
    }
    m->timeline_bytes += (size_t)len;
    if (fwrite(line, 1, (size_t)len, m->timeline) != (size_t)len && !m->timeline_errno)
        m->timeline_errno = errno ? errno : EIO;
}

void memwatch_start(struct memwatch *m, pid_t pid, double t0, FILE *timeline, size_t timeline_max,
                    const char *model_path)
{
    m->pid = pid;
    m->t0 = t0;
    m->sample_s = 0.001;
    m->next_sample = t0;
    m->page_kb = sysconf(_SC_PAGESIZE) / 1024;
    m->seg_max_kb = m->max_kb = m->model_max_kb = 0;
    m->model_path = model_path && realpath(model_path, model_real) ? model_real : NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    m->statm_fd = open(path, O_RDONLY | O_CLOEXEC);
    m->batched = rss_counters_batched();
    m->timeline = timeline;
    m->timeline_max = timeline ? timeline_max : 0;
    m->timeline_bytes = 0;
    m->timeline_cut = m->timeline_errno = 0;
    static const char header[] = "t_ms,rss_kb,anon_kb,file_kb\n";
    timeline_line(m, header, (int)sizeof header - 1);
    m->on = 1;
}

/* Reads a small /proc file whole; its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = 0, r;
    while ((size_t)got < n - 1 && ((r = read(fd, buf + got, n - 1 - (size_t)got)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            got += r;
    close(fd);
    buf[got] = 0;
    return got;
}

/* The value of "Key:   123 kB" in text, or -1. */
static long field_kb(const char *text, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, k) == 0 && p[k] == ':')
            return strtol(p + k + 1, NULL, 10);
    return -1;
}

/* The program's resident and file-backed (file + shmem) kB now: statm (the kernel's counters), or where they
 * are batched smaps_rollup (its page tables). 0, or -1 when the program is gone, 1 when it has no memory map. */
static int resident_now(struct memwatch *m, long *rss, long *file)
{
    char buf[4096];
    if (m->batched) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)m->pid);
        if (read_small(path, buf, sizeof buf) <= 0)
            return -1;
        long r = field_kb(buf, "Rss"), anon = field_kb(buf, "Anonymous");
        if (r <= 0 || anon < 0 || anon > r)
            return 1;
        *rss = r, *file = r - anon;
        return 0;
    }
    ssize_t n = m->statm_fd >= 0 ? pread(m->statm_fd, buf, 255, 0) : -1;
    if (n <= 0)
        return -1;
    buf[n] = 0;
    long size, resident, shared;
    if (sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) != 3 || resident == 0)
        return 1;
    *rss = resident * m->page_kb, *file = shared * m->page_kb;
    return 0;
}

static void sample(struct memwatch *m, double t)
{
    long rss, file;
    int got = resident_now(m, &rss, &file);
    if (got < 0) {
        m->ended = 1; /* a zombie's statm reads zeros or fails: nothing more to see */
        return;
    }
    if (got > 0)
        return;
    if (rss > m->seg_max_kb)
        m->seg_max_kb = rss;
    if (rss > m->max_kb)
        m->max_kb = rss;
    m->samples++;
    char line[96]; /* a time and three longs: 85 bytes at most */
    int len = snprintf(line, sizeof line, "%.3f,%ld,%ld,%ld\n", (t - m->t0) * 1000, rss, rss - file, file);
    if (len < (int)sizeof line)
        timeline_line(m, line, len);
}

/* The program's children now (/proc/PID/task/PID/children): counted once each. */
static void look_for_children(struct memwatch *m)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)m->pid, (int)m->pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return;
    for (char *p = buf, *end; *p; p = end) {
        long c = strtol(p, &end, 10);
        if (end == p)
            break;
        int known = 0, keep = (int)(sizeof m->child_seen / sizeof m->child_seen[0]);
        for (int k = 0; k < m->children && k < keep; k++)
            known |= m->child_seen[k] == (pid_t)c;
        if (!known) {
            if (m->children < keep)
                m->child_seen[m->children] = (pid_t)c;
            m->children++;
        }
    }
}

/* Resident kB of the model file's mappings (/proc/PID/smaps), or -1 when it cannot be read. */
static long model_resident_kb(struct memwatch *m)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)m->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[PATH_MAX + 128];
    long kb = 0;
    int in = 0;
    size_t plen = strlen(m->model_path);
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\n");
        line[len] = 0;
        if (strncmp(line, "Rss:", 4) == 0) {
            if (in)
                kb += strtol(line + 4, NULL, 10);
        } else if (((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')) &&
                   strchr(line, '-') && strchr(line, ' ')) {
            /* a mapping's header: "start-end perms offset dev inode   path" (the keys are capitalised) */
            in = len >= plen && strcmp(line + len - plen, m->model_path) == 0;
        }
    }
    fclose(f);
    return kb;
}

/* ODP_RUSAGE_RESET_STALL=EVENT:MS holds the helper MS ms between EVENT's VmHWM read and its reset, as a board too
 * busy to run it would: only for odp's tests, where the program's exit cannot otherwise be made to fall between
 * the two. */
static void reset_stall(const char *event)
{
    const char *v = getenv("ODP_RUSAGE_RESET_STALL");
    const char *colon = v ? strchr(v, ':') : NULL;
    if (!colon || (size_t)(colon - v) != strlen(event) || strncmp(v, event, (size_t)(colon - v)))
        return;
    long ms = atol(colon + 1);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    if (ms > 0 && ms <= 10000)
        while (nanosleep(&ts, &ts)) {}
}

/* A boundary: read (and reset) now, or, with read 0, only noted (its line came with a later boundary's in the
 * same read: the program had passed both before the helper saw either, so one reading covers both). */
static void boundary(struct memwatch *m, const char *event, double t, int read, long after)
{
    char path[64], buf[4096];
    struct memwatch_boundary tmp, *b = m->nb < MEMWATCH_REPORTED ? &m->b[m->nb] : &tmp;
    memset(b, 0, sizeof *b);
    snprintf(b->event, sizeof b->event, "%s", event);
    b->t_ms = (t - m->t0) * 1000;
    b->after = after;
    snprintf(path, sizeof path, "/proc/%d/status", (int)m->pid);
    b->hwm_kb = read && !m->ended && read_small(path, buf, sizeof buf) > 0 ? field_kb(buf, "VmHWM") : -1;
    b->rss_kb = b->anon_kb = b->file_kb = b->shmem_kb = b->pte_kb = b->sampled_max_kb = -1;
    b->late = !read ? "together" : "ended";
    if (b->hwm_kb < 0) {
        /* not read, or the line came after the program had ended (a zombie has no VmHWM): it ran faster than
         * its lines were read. Reported without a reading; the phase goes on to the next one. */
        if (read)
            m->ended = 1;
        b->read_us = (now() - t) * 1e6;
        goto done;
    }
    /* opened for each write: a program that made itself undumpable (or a setuid one) is refused here, as the
     * kernel decides for this user now, not when the program was still the helper's fork */
    reset_stall(event);
    snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)m->pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    b->reset = fd >= 0 && write(fd, "5", 1) == 1;
    int reset_errno = errno ? errno : EIO;
    if (fd >= 0)
        close(fd);
    if (!b->reset) {
        /* a program that began to exit since its VmHWM was read has no memory map any more, and the kernel gives
         * the /proc files of such a task to root (fs/proc/base.c, task_dump_owner): the write is refused though
         * nothing forbids it. That is the program's end, not a refusal (its reading above stands). */
        snprintf(path, sizeof path, "/proc/%d/status", (int)m->pid);
        if (read_small(path, buf, sizeof buf) > 0 && field_kb(buf, "VmHWM") >= 0)
            m->reset_errno = reset_errno;
        else
            m->ended = 1;
    }
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)m->pid);
    if (read_small(path, buf, sizeof buf) > 0) {
        b->rss_kb = field_kb(buf, "Rss");
        b->anon_kb = field_kb(buf, "Anonymous");
        b->shmem_kb = field_kb(buf, "Pss_Shmem");
        if (b->rss_kb >= 0 && b->anon_kb >= 0)
            b->file_kb = b->rss_kb - b->anon_kb - (b->shmem_kb > 0 ? b->shmem_kb : 0);
    }
    b->pte_kb = m->model_path ? model_resident_kb(m) : -1;
    if (b->pte_kb > m->model_max_kb)
        m->model_max_kb = b->pte_kb;
    b->sampled_max_kb = m->seg_max_kb;
    b->read_us = (now() - t) * 1e6;
    m->seg_max_kb = 0;
    look_for_children(m);
done:
    if (m->nb < MEMWATCH_REPORTED)
        m->nb++;
    else
        m->dropped++;
}

/* The mark a finished line matches, or -1. */
static int line_mark(struct memwatch *m, int s)
{
    char *l = m->line[s];
    l[m->len[s]] = 0;
    m->len[s] = 0;
    for (int k = 0; k < m->nmarks; k++)
        if (fnmatch(m->marks[k].glob, l, 0) == 0)
            return k;
    return -1;
}

void memwatch_output(struct memwatch *m, int stream, const char *p, size_t n)
{
    if (!m->on || stream < 0 || stream > 1)
        return; /* lines still count once the program has ended: they say which boundaries it passed */
    double t = now();
    int pending = -1; /* the last boundary of this read: the one read; those before it in the read are noted */
    size_t after = 0;  /* the bytes after its line in this read */
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            int k = line_mark(m, stream);
            if (k >= 0 && pending >= 0)
                boundary(m, m->marks[pending].event, t, 0, 0);
            if (k >= 0)
                pending = k, after = n - i - 1;
        } else if (m->len[stream] < MEMWATCH_LINE - 1) {
            m->line[stream][m->len[stream]++] = p[i];
        }
    }
    if (pending >= 0)
        boundary(m, m->marks[pending].event, t, 1, (long)after);
}

void memwatch_gone(struct memwatch *m) { m->ended = 1; }

int memwatch_timeout_ms(const struct memwatch *m)
{
    if (!m->on || m->ended)
        return -1;
    double left = m->next_sample - now();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

void memwatch_tick(struct memwatch *m)
{
    if (!m->on || m->ended)
        return;
    double t = now();
    if (t < m->next_sample)
        return;
    sample(m, t);
    if (m->batched) {
        /* a page-table walk costs with the program's size (~1 ms for 20 MB on an emulated core): the interval
         * grows to keep the walks under 1/SAMPLE_DUTY of a CPU, and the report gives the longest one used */
        double cost = now() - t;
        if (cost * SAMPLE_DUTY > m->sample_s)
            m->sample_s = cost * SAMPLE_DUTY;
    }
    if (m->samples % CHILD_CHECK_EVERY == 0)
        look_for_children(m);
    if (m->model_path && m->samples % MODEL_CHECK_EVERY == 1) {
        /* also between boundaries: a quick program may be gone before its lines are read */
        long kb = model_resident_kb(m);
        if (kb > m->model_max_kb)
            m->model_max_kb = kb;
    }
    /* a late wake-up takes one sample, not a burst of them */
    m->next_sample += m->sample_s;
    if (m->next_sample < t)
        m->next_sample = t + m->sample_s;
}

void memwatch_report(struct memwatch *m, FILE *f)
{
    if (!m->on)
        return;
    for (int k = 0; k < m->nb; k++) {
        struct memwatch_boundary *b = &m->b[k];
        fprintf(f,
                "ODP-MEMORY-MARK event=%s t_ms=%.3f hwm_kb=%ld reset=%d sampled_max_kb=%ld rss_kb=%ld anon_kb=%ld "
                "file_kb=%ld shmem_kb=%ld model_kb=%ld read_us=%.1f after=%ld%s%s\n",
                b->event, b->t_ms, b->hwm_kb, b->reset, b->sampled_max_kb, b->rss_kb, b->anon_kb, b->file_kb,
                b->shmem_kb, b->pte_kb, b->read_us, b->after, b->hwm_kb < 0 ? " late=" : "", b->hwm_kb < 0 ? b->late : "");
    }
    if (m->timeline) {
        if (fclose(m->timeline) && !m->timeline_errno)
            m->timeline_errno = errno ? errno : EIO;
        m->timeline = NULL;
    }
    const char *timeline = m->timeline_errno ? "failed" : m->timeline_cut ? "cut" : m->timeline_max ? "ok" : "none";
    /* the last segment (after the last boundary, to the exit): what the samples saw; its exact peak is the
     * program's ru_maxrss, which counts from the last reset */
    fprintf(f,
            "ODP-MEMORY samples=%ld sample_ms=%.3f sampled_max_kb=%ld tail_sampled_max_kb=%ld dropped_marks=%d "
            "clear_refs=%s children=%d timeline=%s model_kb=%ld rss_counters=%s\n",
            m->samples, m->sample_s * 1000, m->max_kb, m->seg_max_kb, m->dropped,
            m->reset_errno == 0 ? "ok" : m->reset_errno == EACCES || m->reset_errno == EPERM ? "denied" : "failed",
            m->children, timeline, m->model_path ? m->model_max_kb : -1L, m->batched ? "batched" : "exact");
    if (m->statm_fd >= 0)
        close(m->statm_fd);
    m->statm_fd = -1;
    m->on = 0;
}

/* Exec mode's loop: the program's stdout and stderr (pipes out_fd, err_fd) passed on to ours as they come, the
 * watch fed and ticked, until the program is reaped and its pipes are quiet (what it left running may hold
 * them: not waited for). */
void memwatch_relay(struct memwatch *m, pid_t pid, int out_fd, int err_fd, int *st, struct rusage *ru)
{
    int fds[2] = {out_fd, err_fd}, open_[2] = {1, 1}, reaped = 0;
    fcntl(out_fd, F_SETFL, O_NONBLOCK);
    fcntl(err_fd, F_SETFL, O_NONBLOCK);
    while (!reaped || open_[0] || open_[1]) {
        struct pollfd p[2] = {{out_fd, open_[0] ? POLLIN : 0, 0}, {err_fd, open_[1] ? POLLIN : 0, 0}};
        int timeout = memwatch_timeout_ms(m);
        if (reaped)
            timeout = 50;
        else if (timeout < 0 || timeout > 50)
            timeout = 50; /* wait4 is polled: the program's end is seen within 50 ms at most */
        int pr = poll(p, 2, timeout);
        if (pr < 0 && errno != EINTR)
            break;
        for (int s = 0; s < 2; s++) {
            if (!open_[s] || !(p[s].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t n = read(fds[s], buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                open_[s] = 0;
                continue;
            }
            memwatch_output(m, s, buf, (size_t)n);
            for (ssize_t done = 0, w; done < n; done += w > 0 ? w : 0) {
                w = write(s + 1, buf + done, (size_t)(n - done));
                if (w < 0 && errno != EINTR)
                    break; /* our reader is gone: the program's output goes nowhere, as it would */
            }
        }
        if (!reaped)
            memwatch_tick(m);
        if (!reaped && wait4(pid, st, WNOHANG, ru) == pid) {
            reaped = 1;
            memwatch_gone(m);
        }
        else if (reaped && pr == 0)
            break;
    }
    if (!reaped)
        while (wait4(pid, st, 0, ru) < 0 && errno == EINTR) {}
}
