/* The sample stream reader and the join (sample.h). */
#include "sample.h"

#include <stdlib.h>
#include <string.h>

/* the kernel's record types and call-chain markers (linux/perf_event.h), spelt here so that odp builds
 * without kernel headers of any particular age */
enum {
    REC_MMAP = 1, REC_LOST = 2, REC_COMM = 3, REC_EXIT = 4, REC_FORK = 7, REC_SAMPLE = 9, REC_MMAP2 = 10,
    REC_LOST_SAMPLES = 13, REC_SWITCH = 14,
};
#define MISC_SWITCH_OUT (1u << 13)
#define MISC_SWITCH_OUT_PREEMPT (1u << 14)
#define MISC_CPUMODE_MASK 7u
#define MISC_KERNEL 1u
#define MISC_COMM_EXEC (1u << 13)
#define MISC_MMAP_BUILD_ID (1u << 14)
#define CONTEXT_MAX ((uint64_t)-4095) /* PERF_CONTEXT_*: -32 (hv), -128 (kernel), -512 (user), guest ones */
#define CONTEXT_USER ((uint64_t)-512)
#define CONTEXT_GUEST_USER ((uint64_t)-2560)
#define SAMPLE_ID_BYTES 16 /* sample_id_all with TID | TIME: pid, tid, time */

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Grows *arr (elem bytes each) to hold n + 1, within cap. 0, or -1 (full or out of memory). */
static int grow(void **arr, uint32_t *cap, uint32_t n, size_t elem, uint32_t limit)
{
    if (n < *cap)
        return 0;
    if (n >= limit)
        return -1;
    uint32_t c = *cap ? *cap * 2 : 64;
    if (c > limit)
        c = limit;
    void *p = realloc(*arr, (size_t)c * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

void odp_sample_free(odp_sample_stream *st)
{
    free(st->samples);
    free(st->frames);
    free(st->mmaps);
    free(st->comms);
    free(st->tasks);
    free(st->lines);
    free(st->counters);
    memset(st, 0, sizeof *st);
}

/* a thread's last switch out, while it waits to be switched in */
typedef struct {
    uint32_t tid; /* 0: free slot */
    uint32_t pid;
    uint64_t out;
    int preempted;
} thread_state;

typedef struct {
    odp_sample_stream *st;
    uint32_t cap_samples, cap_mmaps, cap_comms, cap_tasks, cap_lines, cap_counters;
    size_t cap_frames;
    thread_state *threads; /* open addressing, ODP_SAMPLE_MAX_THREADS slots */
    uint32_t nthreads;
    struct switch_rec *switches;
    uint32_t nswitches, cap_switches;
} reader;

static int push_frame(reader *r, uint64_t f)
{
    odp_sample_stream *st = r->st;
    if (st->nframes == r->cap_frames) {
        size_t c = r->cap_frames ? r->cap_frames * 2 : 1024;
        uint64_t *p = realloc(st->frames, c * sizeof *p);
        if (!p)
            return -1;
        st->frames = p;
        r->cap_frames = c;
    }
    st->frames[st->nframes++] = f;
    return 0;
}

static int read_sample(reader *r, const uint8_t *p, size_t size, unsigned misc, odp_err *err)
{
    odp_sample_stream *st = r->st;
    if (size < 8 + 8 + 8 + 8)
        return odp_fail(err, ODP_EPROTO, "sample stream: a sample record of %zu bytes", size + 8);
    uint64_t ip = rd64(p), nr = rd64(p + 24);
    if (nr > (size - 32) / 8)
        return odp_fail(err, ODP_EPROTO, "sample stream: a call chain of %llu frames in a %zu-byte record",
                        (unsigned long long)nr, size + 8);
    if (grow((void **)&st->samples, &r->cap_samples, st->nsamples, sizeof *st->samples, ODP_SAMPLE_MAX_SAMPLES))
        return odp_fail(err, ODP_EPROTO, "sample stream: more than %u samples", ODP_SAMPLE_MAX_SAMPLES);
    odp_sample *s = &st->samples[st->nsamples];
    s->pid = rd32(p + 8);
    s->tid = rd32(p + 12);
    s->time = rd64(p + 16);
    s->chain = (uint32_t)st->nframes;
    if (st->nframes > UINT32_MAX - ODP_SAMPLE_MAX_DEPTH)
        return odp_fail(err, ODP_EPROTO, "sample stream: too many frames");
    int kernel_leaf = (misc & MISC_CPUMODE_MASK) == MISC_KERNEL;
    uint32_t depth = 0;
    uint64_t ctx = CONTEXT_USER;
    int last_kernel = 0;
    for (uint64_t i = 0; i < nr && depth < ODP_SAMPLE_MAX_DEPTH; i++) {
        uint64_t f = rd64(p + 32 + 8 * i);
        if (f >= CONTEXT_MAX) {
            ctx = f;
            continue;
        }
        int user = ctx == CONTEXT_USER || ctx == CONTEXT_GUEST_USER;
        if (!user) {
            if (last_kernel)
                continue; /* every kernel frame in a row is one [kernel] */
            f = ODP_SAMPLE_KERNEL;
        }
        last_kernel = !user;
        if (push_frame(r, f))
            return odp_fail(err, ODP_EIO, "sample stream: out of memory");
        depth++;
    }
    if (depth == 0) { /* no call chain: the leaf */
        if (push_frame(r, kernel_leaf ? ODP_SAMPLE_KERNEL : ip))
            return odp_fail(err, ODP_EIO, "sample stream: out of memory");
        depth = 1;
    }
    if (kernel_leaf)
        st->kernel_samples++;
    s->depth = depth;
    st->nsamples++;
    return 0;
}

/* the sample_id_all trailer's time, when the record has room for it */
static uint64_t trailer_time(const uint8_t *p, size_t size, size_t fixed)
{
    return size >= fixed + SAMPLE_ID_BYTES ? rd64(p + size - 8) : 0;
}

static int read_mmap(reader *r, const uint8_t *p, size_t size, unsigned type, unsigned misc, odp_err *err)
{
    odp_sample_stream *st = r->st;
    size_t fixed = type == REC_MMAP2 ? 64 : 32;
    if (size < fixed + 1)
        return odp_fail(err, ODP_EPROTO, "sample stream: an mmap record of %zu bytes", size + 8);
    if (grow((void **)&st->mmaps, &r->cap_mmaps, st->nmmaps, sizeof *st->mmaps, ODP_SAMPLE_MAX_SIDE))
        return 0; /* a program with a million mappings: the later ones are not needed to place the samples */
    odp_sample_mmap *m = &st->mmaps[st->nmmaps];
    memset(m, 0, sizeof *m);
    m->pid = rd32(p);
    m->start = rd64(p + 8);
    m->len = rd64(p + 16);
    m->pgoff = rd64(p + 24);
    m->prot = 4; /* PROT_EXEC: a plain MMAP record is an executable mapping (mmap_data is never asked for) */
    if (type == REC_MMAP2) {
        if (misc & MISC_MMAP_BUILD_ID) {
            uint8_t n = p[32];
            m->build_id_len = n > 20 ? 20 : n;
            memcpy(m->build_id, p + 36, m->build_id_len);
        }
        m->prot = rd32(p + 56);
    }
    const uint8_t *name = p + fixed;
    size_t room = size - fixed;
    const uint8_t *nul = memchr(name, 0, room);
    if (!nul)
        return odp_fail(err, ODP_EPROTO, "sample stream: an mmap record's file name has no end");
    m->file = (const char *)name;
    m->file_len = (uint32_t)(nul - name);
    /* the name is padded to 8 bytes; the sample_id trailer follows it */
    size_t used = fixed + (((size_t)(nul - name) + 1 + 7) & ~(size_t)7);
    m->time = size >= used + SAMPLE_ID_BYTES ? rd64(p + size - 8) : 0;
    st->nmmaps++;
    return 0;
}

static thread_state *thread_slot(reader *r, uint32_t tid)
{
    if (!r->threads && !(r->threads = calloc(ODP_SAMPLE_MAX_THREADS, sizeof *r->threads)))
        return NULL;
    uint32_t h = (tid * 2654435761u) & (ODP_SAMPLE_MAX_THREADS - 1);
    for (uint32_t k = 0; k < ODP_SAMPLE_MAX_THREADS; k++) {
        thread_state *t = &r->threads[(h + k) & (ODP_SAMPLE_MAX_THREADS - 1)];
        if (t->tid == tid)
            return t;
        if (t->tid == 0) {
            if (r->nthreads >= ODP_SAMPLE_MAX_THREADS / 2)
                return NULL; /* a stream that claims more threads than any program has: the rest go unseen */
            r->nthreads++;
            t->tid = tid;
            return t;
        }
    }
    return NULL;
}

/* Switch records are kept as read, then ordered by time (each CPU's ring is drained in turn, so the stream is in
 * time order per CPU only) and paired per thread: the switch in that ends a preemption adds a sample at every
 * multiple of the sampling period inside it. */
typedef struct switch_rec {
    uint64_t time;
    uint32_t pid, tid;
    uint8_t out, preempted;
} switch_rec;

static int read_switch(reader *r, const uint8_t *p, size_t size, unsigned misc)
{
    if (size < SAMPLE_ID_BYTES)
        return 0;
    if (grow((void **)&r->switches, &r->cap_switches, r->nswitches, sizeof *r->switches, ODP_SAMPLE_MAX_SIDE * 4))
        return 0; /* past the bound: later waits are not made into samples */
    r->switches[r->nswitches++] = (switch_rec){rd64(p + size - 8), rd32(p + size - 16), rd32(p + size - 12),
                                               (misc & MISC_SWITCH_OUT) != 0, (misc & MISC_SWITCH_OUT_PREEMPT) != 0};
    r->st->switches++;
    return 0;
}

static int cmp_switch(const void *a, const void *b)
{
    const switch_rec *x = a, *y = b;
    return (x->time > y->time) - (x->time < y->time);
}

static int preempted_samples(reader *r, odp_err *err)
{
    odp_sample_stream *st = r->st;
    if (!r->nswitches || st->header.freq_hz == 0)
        return 0;
    qsort(r->switches, r->nswitches, sizeof *r->switches, cmp_switch);
    uint64_t period = 1000000000u / st->header.freq_hz;
    for (uint32_t i = 0; i < r->nswitches; i++) {
        const switch_rec *w = &r->switches[i];
        thread_state *ts = w->tid ? thread_slot(r, w->tid) : NULL;
        if (!ts)
            continue;
        if (w->out) {
            ts->out = w->time;
            ts->pid = w->pid;
            ts->preempted = w->preempted;
            continue;
        }
        uint64_t out = ts->out;
        ts->out = 0;
        if (!ts->preempted || out == 0 || w->time <= out)
            continue;
        /* a wait longer than a minute is no preemption a profile could use: a stream that says so is bent */
        uint64_t end = w->time - out > 60000000000ull ? out + 60000000000ull : w->time;
        for (uint64_t at = (out / period + 1) * period; at < end && st->preempted_samples < ODP_SAMPLE_MAX_PREEMPTED;
             at += period) {
            if (grow((void **)&st->samples, &r->cap_samples, st->nsamples, sizeof *st->samples, ODP_SAMPLE_MAX_SAMPLES))
                return odp_fail(err, ODP_EPROTO, "sample stream: more than %u samples", ODP_SAMPLE_MAX_SAMPLES);
            if (push_frame(r, ODP_SAMPLE_PREEMPTED))
                return odp_fail(err, ODP_EIO, "sample stream: out of memory");
            st->samples[st->nsamples++] = (odp_sample){at, ts->pid, w->tid, (uint32_t)(st->nframes - 1), 1};
            st->preempted_samples++;
        }
    }
    return 0;
}

int odp_sample_read(const uint8_t *buf, size_t n, odp_sample_stream *st, odp_err *err)
{
    memset(st, 0, sizeof *st);
    if (n > ODP_SAMPLE_MAX_BYTES)
        return odp_fail(err, ODP_EPROTO, "sample stream: %zu bytes, more than %zu", n, ODP_SAMPLE_MAX_BYTES);
    if (n < 12 || memcmp(buf, ODP_SAMPLE_MAGIC, 8) != 0)
        return odp_fail(err, ODP_EPROTO, "not an odp sample stream (no %s at its start)", ODP_SAMPLE_MAGIC);
    uint32_t hsize = rd32(buf + 8);
    if (hsize < sizeof st->header || hsize > n || hsize > 4096)
        return odp_fail(err, ODP_EPROTO, "sample stream: a header of %u bytes", hsize);
    memcpy(&st->header, buf, sizeof st->header);
    if (st->header.freq_hz == 0 || st->header.freq_hz > ODP_SAMPLE_MAX_HZ)
        return odp_fail(err, ODP_EPROTO, "sample stream: a rate of %u Hz (1 to %u)", st->header.freq_hz,
                        ODP_SAMPLE_MAX_HZ);
    if (st->header.sample_type != ODP_SAMPLE_TYPE)
        return odp_fail(err, ODP_EPROTO, "sample stream: sample_type %#llx, not odp's %#llx",
                        (unsigned long long)st->header.sample_type, (unsigned long long)ODP_SAMPLE_TYPE);
    reader r = {.st = st};
    size_t pos = hsize;
    int rc = 0;
    while (pos + 8 <= n) {
        uint32_t type = rd32(buf + pos);
        unsigned misc = (unsigned)buf[pos + 4] | (unsigned)buf[pos + 5] << 8;
        size_t size = (size_t)buf[pos + 6] | (size_t)buf[pos + 7] << 8;
        if (size < 8) {
            rc = odp_fail(err, ODP_EPROTO, "sample stream: a record of %zu bytes at byte %zu", size, pos);
            break;
        }
        if (pos + size > n)
            break; /* cut short: what came before stands, and the stream is not complete */
        const uint8_t *p = buf + pos + 8;
        size_t plen = size - 8;
        if (type == ODP_SAMPLE_REC_END) {
            if (plen >= sizeof(struct odp_sample_end)) {
                st->end_time = rd64(p + 16);
                st->complete = rd64(p) == st->records && pos + size == n;
            }
            pos += size;
            break;
        }
        st->records++;
        switch (type) {
        case REC_SAMPLE:
            rc = read_sample(&r, p, plen, misc, err);
            break;
        case REC_MMAP:
        case REC_MMAP2:
            rc = read_mmap(&r, p, plen, type, misc, err);
            break;
        case REC_LOST:
            if (plen >= 16) {
                st->lost += rd64(p + 8);
                st->lost_records++;
            }
            break;
        case REC_SWITCH:
            rc = read_switch(&r, p, plen, misc);
            break;
        case REC_LOST_SAMPLES:
            if (plen >= 8)
                st->lost += rd64(p);
            break;
        case REC_COMM:
            if (plen > 8 && !grow((void **)&st->comms, &r.cap_comms, st->ncomms, sizeof *st->comms, ODP_SAMPLE_MAX_SIDE)) {
                odp_sample_comm *c = &st->comms[st->ncomms++];
                memset(c, 0, sizeof *c);
                c->pid = rd32(p);
                c->tid = rd32(p + 4);
                size_t k = 0;
                while (k < 16 && 8 + k < plen && p[8 + k])
                    c->name[k] = (char)p[8 + k], k++;
                c->exec = (misc & MISC_COMM_EXEC) != 0;
                c->time = trailer_time(p, plen, 16);
            }
            break;
        case REC_FORK:
        case REC_EXIT:
            if (plen >= 24 && !grow((void **)&st->tasks, &r.cap_tasks, st->ntasks, sizeof *st->tasks, ODP_SAMPLE_MAX_SIDE)) {
                odp_sample_task *t = &st->tasks[st->ntasks++];
                t->pid = rd32(p);
                t->ppid = rd32(p + 4);
                t->tid = rd32(p + 8);
                t->time = rd64(p + 16);
                t->exit = type == REC_EXIT;
            }
            break;
        case ODP_SAMPLE_REC_LINE:
            if (plen >= sizeof(struct odp_sample_line) &&
                !grow((void **)&st->lines, &r.cap_lines, st->nlines, sizeof *st->lines, ODP_SAMPLE_MAX_SIDE)) {
                odp_sample_line *l = &st->lines[st->nlines++];
                l->time = rd64(p);
                memcpy(l->text, p + 8, 32);
                l->text[32] = 0;
            }
            break;
        case ODP_SAMPLE_REC_COUNTER:
            if (plen >= sizeof(struct odp_sample_counter) &&
                !grow((void **)&st->counters, &r.cap_counters, st->ncounters, sizeof *st->counters, ODP_SAMPLE_MAX_SIDE)) {
                odp_sample_counter *c = &st->counters[st->ncounters++];
                c->time = rd64(p);
                c->kind = rd32(p + 8);
                c->index = rd32(p + 12);
                c->value = (int64_t)rd64(p + 16);
            }
            break;
        default:
            st->unknown_records++; /* throttling and the like: nothing odp places */
        }
        if (rc)
            break;
        pos += size;
    }
    if (!rc)
        rc = preempted_samples(&r, err);
    free(r.threads);
    free(r.switches);
    if (rc) {
        odp_sample_free(st);
        return rc;
    }
    return 0;
}

int32_t odp_sample_mapping(const odp_sample_stream *st, uint32_t pid, uint64_t t, uint64_t addr)
{
    int32_t best = -1, any = -1;
    for (uint32_t i = 0; i < st->nmmaps; i++) {
        const odp_sample_mmap *m = &st->mmaps[i];
        if (!(m->prot & 4) || addr < m->start || addr - m->start >= m->len)
            continue;
        if (m->pid == pid && m->time <= t)
            best = (int32_t)i; /* records come in time order: the last one wins */
        any = (int32_t)i;
    }
    return best >= 0 ? best : any;
}

static int cmp_interval(const void *a, const void *b)
{
    const odp_sample_interval *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1; /* the outer first */
    return (x->id > y->id) - (x->id < y->id);
}

long odp_sample_flatten(const odp_sample_interval *in, size_t n, odp_sample_interval **out)
{
    *out = NULL;
    odp_sample_interval *s = malloc((n ? n : 1) * sizeof *s);
    /* each interval opens at most one piece and its end resumes at most one enclosing piece */
    odp_sample_interval *o = malloc((2 * n + 1) * sizeof *o);
    odp_sample_interval *stack = malloc((n ? n : 1) * sizeof *stack);
    if (!s || !o || !stack) {
        free(s), free(o), free(stack);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i].end > in[i].start)
            s[m++] = in[i];
    qsort(s, m, sizeof *s, cmp_interval);
    size_t no = 0, depth = 0;
    uint64_t at = 0; /* where the piece being built starts */
#define EMIT(a, b, idv)                                                                                           \
    do {                                                                                                          \
        if ((b) > (a)) {                                                                                          \
            if (no && o[no - 1].end == (a) && o[no - 1].id == (idv))                                              \
                o[no - 1].end = (b);                                                                              \
            else                                                                                                  \
                o[no++] = (odp_sample_interval){(a), (b), (idv)};                                                 \
        }                                                                                                         \
    } while (0)
    for (size_t i = 0; i <= m; i++) {
        uint64_t next = i < m ? s[i].start : UINT64_MAX;
        /* close what ends before the next interval starts, innermost first */
        while (depth && stack[depth - 1].end <= next) {
            EMIT(at, stack[depth - 1].end, stack[depth - 1].id);
            at = stack[depth - 1].end;
            depth--;
        }
        if (i == m)
            break;
        if (depth) {
            EMIT(at, next, stack[depth - 1].id);
        }
        at = next;
        odp_sample_interval iv = s[i];
        if (depth && iv.end > stack[depth - 1].end)
            iv.end = stack[depth - 1].end; /* overlapping without nesting: the inner one ends with its parent */
        stack[depth++] = iv;
    }
#undef EMIT
    free(s);
    free(stack);
    *out = o;
    return (long)no;
}

/* the index of the interval holding t in sorted disjoint ivs, or -1 */
static long find(const odp_sample_interval *ivs, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ivs[mid].start <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || t >= ivs[lo - 1].end)
        return -1;
    return (long)lo - 1;
}

void odp_sample_assign(const odp_sample_stream *st, const odp_sample_interval *ops, size_t nops,
                       const odp_sample_interval *execs, size_t nexecs, int32_t *assign)
{
    for (uint32_t i = 0; i < st->nsamples; i++) {
        uint64_t t = st->samples[i].time;
        long k = find(ops, nops, t);
        if (k >= 0)
            assign[i] = ops[k].id;
        else
            assign[i] = find(execs, nexecs, t) >= 0 ? ODP_SAMPLE_BETWEEN : ODP_SAMPLE_OUTSIDE;
    }
}

/* FNV-1a over the owner and the frames */
static uint64_t stack_hash(int32_t owner, const uint64_t *f, uint32_t depth)
{
    uint64_t h = 1469598103934665603ull ^ (uint32_t)owner;
    h *= 1099511628211ull;
    for (uint32_t i = 0; i < depth; i++) {
        h ^= f[i];
        h *= 1099511628211ull;
    }
    return h;
}

long odp_sample_fold(const odp_sample_stream *st, const int32_t *owner, odp_sample_stack **out)
{
    *out = NULL;
    size_t cap = 1024;
    while (cap < (size_t)st->nsamples * 2)
        cap *= 2;
    uint32_t *slot = malloc(cap * sizeof *slot); /* index + 1 into stacks; 0 empty */
    odp_sample_stack *stacks = malloc((st->nsamples ? st->nsamples : 1) * sizeof *stacks);
    if (!slot || !stacks) {
        free(slot), free(stacks);
        return -1;
    }
    memset(slot, 0, cap * sizeof *slot);
    long n = 0;
    for (uint32_t i = 0; i < st->nsamples; i++) {
        const odp_sample *s = &st->samples[i];
        const uint64_t *f = st->frames + s->chain;
        size_t h = (size_t)stack_hash(owner[i], f, s->depth) & (cap - 1);
        for (;;) {
            uint32_t k = slot[h];
            if (!k) {
                stacks[n] = (odp_sample_stack){owner[i], 1, s->chain, s->depth};
                slot[h] = (uint32_t)++n;
                break;
            }
            odp_sample_stack *x = &stacks[k - 1];
            if (x->owner == owner[i] && x->depth == s->depth &&
                memcmp(st->frames + x->chain, f, s->depth * sizeof *f) == 0) {
                x->count++;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
    }
    free(slot);
    *out = stacks;
    return n;
}
