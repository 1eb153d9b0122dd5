#include "rtt.h"

#include <stdlib.h>
#include <string.h>

#include "../util/wait.h"

#define ID_LEN 16
static const char rtt_id[ID_LEN] = "SEGGER RTT";
#define HDR 24  /* id[16] + MaxNumUpBuffers + MaxNumDownBuffers */
#define DESC 24 /* sName, pBuffer, SizeOfBuffer, WrOff, RdOff, Flags */
#define POLL_MIN 0.0001
#define POLL_MAX 0.005
#define SCAN_CHUNK 65536

struct odp_rtt {
    odp_probe *p;
    int refs, closed;
    odp_rtt_where where;
    uint32_t addr;
    int nup, ndown;
    unsigned epoch; /* p->resets when the block was found */
    int valid;
    odp_rtt_stats stats;
};

static uint32_t le32(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static void put32(uint8_t *b, uint32_t v) { b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8), b[2] = (uint8_t)(v >> 16), b[3] = (uint8_t)(v >> 24); }

/* "SEGGER RTT" and its terminating NUL; the remaining ID bytes are not compared (J-Link does the same). */
#define ID_MATCH 11
static int id_ok(const uint8_t *b) { return memcmp(b, rtt_id, ID_MATCH) == 0; }

int odp_rtt_scan_image(const uint8_t *mem, size_t n, size_t *off)
{
    int found = 0;
    for (size_t i = 0; i + ID_LEN <= n; i++) {
        const uint8_t *q = memchr(mem + i, 'S', n - ID_LEN + 1 - i);
        if (!q)
            break;
        i = (size_t)(q - mem);
        if (id_ok(q)) {
            if (!found)
                *off = i;
            found++;
        }
    }
    return found;
}

static int in_ranges(const odp_rtt *r, uint32_t addr, uint32_t n)
{
    if (!r->where.nranges)
        return (uint64_t)addr + n <= 0x100000000ULL;
    for (int i = 0; i < r->where.nranges; i++) {
        const odp_rtt_range *g = &r->where.ranges[i];
        if (addr >= g->start && (uint64_t)addr + n <= (uint64_t)g->start + g->size)
            return 1;
    }
    return 0;
}

/* Calls fn for every ID in the ranges, in address order. IDs straddling a chunk edge are found by
 * overlapping chunks by ID_LEN-1 bytes; an ID is reported from the chunk it starts in, so once. */
static int each_id(odp_probe *p, const odp_rtt_where *w, double deadline,
                   int (*fn)(void *arg, uint32_t addr, double deadline, odp_err *err), void *arg, odp_err *err)
{
    uint8_t *buf = malloc(SCAN_CHUNK + ID_LEN);
    if (!buf)
        return odp_fail(err, ODP_EIO, "out of memory");
    int rc = 0;
    uint64_t scanned = 0;
    for (int i = 0; i < w->nranges && !rc; i++) {
        const odp_rtt_range *g = &w->ranges[i];
        for (uint64_t off = 0; off < g->size && !rc; off += SCAN_CHUNK) {
            uint64_t k = g->size - off < SCAN_CHUNK + ID_LEN - 1 ? g->size - off : SCAN_CHUNK + ID_LEN - 1;
            if (k < ID_LEN)
                break;
            if ((scanned += k) > ODP_RTT_MAX_SCAN) {
                rc = odp_fail(err, ODP_EIO, "RTT search ranges exceed %u MiB", ODP_RTT_MAX_SCAN >> 20);
                break;
            }
            rc = odp_probe_read(p, (uint32_t)(g->start + off), buf, (size_t)k, deadline, err);
            size_t pos = 0, at_off;
            while (!rc && pos + ID_LEN <= k) {
                if (!odp_rtt_scan_image(buf + pos, (size_t)k - pos, &at_off))
                    break;
                rc = fn(arg, (uint32_t)(g->start + off + pos + at_off), deadline, err);
                pos += at_off + 1;
            }
        }
    }
    free(buf);
    return rc;
}

typedef struct {
    int found;
    uint32_t first, second;
} scan_result;

static int note_id(void *arg, uint32_t addr, double deadline, odp_err *err)
{
    (void)deadline, (void)err;
    scan_result *s = arg;
    if (s->found == 0)
        s->first = addr;
    else if (s->found == 1)
        s->second = addr;
    s->found++;
    return 0;
}

/* Scans the ranges: 1 ID -> *at; 0 -> ENOTFOUND; 2+ -> EPROTO. */
static int scan(odp_rtt *r, uint32_t *at, double deadline, odp_err *err)
{
    scan_result s = {0};
    int rc = each_id(r->p, &r->where, deadline, note_id, &s, err);
    if (rc)
        return rc;
    if (s.found > 1)
        return odp_fail(err, ODP_EPROTO, "two RTT control blocks (IDs at 0x%08x and 0x%08x): a stale copy? "
                        "narrow the ranges or give the address", s.first, s.second);
    if (!s.found)
        return odp_fail(err, ODP_ENOTFOUND, "no RTT control block in the search ranges");
    *at = s.first;
    return 0;
}

typedef struct {
    odp_probe *p;
    int cleared;
} clear_state;

static int wipe_id(void *arg, uint32_t addr, double deadline, odp_err *err)
{
    static const uint8_t zero[ID_LEN];
    clear_state *c = arg;
    int rc = odp_probe_write(c->p, addr, zero, ID_LEN, deadline, err);
    if (rc == 0)
        c->cleared++;
    return rc;
}

/* The ID at addr, if it is one. */
static int wipe_if_id(clear_state *c, uint32_t addr, double deadline, odp_err *err)
{
    uint8_t id[ID_LEN];
    int rc = odp_probe_read(c->p, addr, id, ID_LEN, deadline, err);
    return rc ? rc : id_ok(id) ? wipe_id(c, addr, deadline, err) : 0;
}

int odp_rtt_clear_ids(odp_probe *p, const odp_rtt_where *w, double deadline, int *cleared, odp_err *err)
{
    clear_state c = {p, 0};
    int rc = w->has_address ? wipe_if_id(&c, w->address, deadline, err) : each_id(p, w, deadline, wipe_id, &c, err);
    *cleared = c.cleared;
    return rc;
}

/* The probe's reset hook: the IDs of the blocks attached through it, cleared while the core is halted. */
static int clear_attached(odp_probe *p, const uint32_t *addrs, int n, double deadline, odp_err *err)
{
    clear_state c = {p, 0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = wipe_if_id(&c, addrs[i], deadline, err);
    return rc;
}

/* Reads and checks the header at r->addr; sets nup/ndown. */
static int read_header(odp_rtt *r, double deadline, odp_err *err)
{
    uint8_t h[HDR];
    int rc = odp_probe_read(r->p, r->addr, h, HDR, deadline, err);
    if (rc)
        return rc;
    if (!id_ok(h))
        return odp_fail(err, ODP_ENOTFOUND, "no RTT ID at 0x%08x", r->addr);
    int32_t up = (int32_t)le32(h + 16), down = (int32_t)le32(h + 20);
    if (up < 0 || up > ODP_RTT_MAX_BUFFERS || down < 0 || down > ODP_RTT_MAX_BUFFERS)
        return odp_fail(err, ODP_EPROTO, "RTT block at 0x%08x: absurd buffer counts (%d up, %d down)", r->addr, up,
                        down);
    if (!in_ranges(r, r->addr, HDR + DESC * (uint32_t)(up + down)))
        return odp_fail(err, ODP_EPROTO, "RTT block at 0x%08x extends outside the given ranges", r->addr);
    r->nup = up;
    r->ndown = down;
    return 0;
}

/* Finds the block (again), waiting for the firmware until the deadline. */
static int find(odp_rtt *r, double deadline, odp_err *err)
{
    double backoff = 0.001;
    r->valid = 0;
    for (;;) {
        unsigned epoch = r->p->resets;
        int rc;
        if (r->where.has_address) {
            r->addr = r->where.address;
            rc = 0;
        } else {
            rc = scan(r, &r->addr, deadline, err);
        }
        if (rc == 0)
            rc = read_header(r, deadline, err);
        if (rc == 0) {
            r->valid = 1;
            r->epoch = epoch;
            odp_probe_add_scrub(r->p, r->addr, clear_attached);
            return 0;
        }
        if (rc != ODP_ENOTFOUND)
            return rc; /* two IDs, a corrupt block, a probe error: report, do not spin */
        if (odp_now() + backoff > deadline)
            return odp_fail(err, ODP_ETIMEDOUT, "%s (waited for the firmware to write it)", err->msg);
        if ((rc = odp_sleep_until(odp_now() + backoff, err)) != 0)
            return rc;
        backoff = backoff * 2 > 0.05 ? 0.05 : backoff * 2;
    }
}

int odp_rtt_attach(odp_probe *p, const odp_rtt_where *w, double deadline, odp_rtt **out, odp_err *err)
{
    if (!w->has_address && w->nranges <= 0)
        return odp_fail(err, ODP_EIO, "RTT: give an address, an ELF or search ranges");
    odp_rtt *r = calloc(1, sizeof *r);
    if (!r)
        return odp_fail(err, ODP_EIO, "out of memory");
    r->p = p;
    r->refs = 1;
    r->where = *w;
    odp_probe_retain(p);
    int rc = find(r, deadline, err);
    if (rc) {
        odp_probe_release(p);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

uint32_t odp_rtt_address(const odp_rtt *r) { return r->addr; }

static void retain(odp_rtt *r) { r->refs++; }
static void release(odp_rtt *r)
{
    if (--r->refs <= 0) {
        odp_probe_release(r->p);
        free(r);
    }
}

void odp_rtt_close(odp_rtt *r)
{
    r->closed = 1;
    release(r);
}

void odp_rtt_get_stats(const odp_rtt *r, odp_rtt_stats *s) { *s = r->stats; }

static void parse_desc(const uint8_t *d, odp_rtt_channel *c)
{
    memset(c, 0, sizeof *c);
    c->buffer = le32(d + 4);
    c->size = le32(d + 8);
    c->wr = le32(d + 12);
    c->rd = le32(d + 16);
    c->flags = le32(d + 20);
}

static int check_desc(const odp_rtt *r, const odp_rtt_channel *c, const char *dir, int ch, odp_err *err)
{
    if (c->size < 2 || c->size > ODP_RTT_MAX_RING)
        return odp_fail(err, ODP_EPROTO, "RTT %s channel %d: absurd size %u", dir, ch, c->size);
    if (c->wr >= c->size || c->rd >= c->size)
        return odp_fail(err, ODP_EPROTO, "RTT %s channel %d: offsets (wr %u, rd %u) outside its size %u", dir, ch,
                        c->wr, c->rd, c->size);
    if (!in_ranges(r, c->buffer, c->size))
        return odp_fail(err, ODP_EPROTO, "RTT %s channel %d: buffer 0x%08x+%u outside the allowed ranges", dir, ch,
                        c->buffer, c->size);
    return 0;
}

/* Reads the whole block (ID + descriptors) in one access; re-finds it after a reset or when the ID is gone.
 * Returns the raw block in blk (HDR + DESC*(nup+ndown) bytes). */
static int snapshot(odp_rtt *r, uint8_t *blk, double deadline, odp_err *err)
{
    if (r->closed)
        return odp_fail(err, ODP_EIO, "RTT closed");
    for (int attempt = 0; attempt < 3; attempt++) {
        int rc;
        if (!r->valid || r->epoch != r->p->resets) {
            if ((rc = find(r, deadline, err)) != 0)
                return rc;
            r->stats.refinds++;
        }
        size_t len = HDR + DESC * (size_t)(r->nup + r->ndown);
        if ((rc = odp_probe_read(r->p, r->addr, blk, len, deadline, err)) != 0)
            return rc;
        if (id_ok(blk) && (int32_t)le32(blk + 16) == r->nup && (int32_t)le32(blk + 20) == r->ndown)
            return 0;
        r->valid = 0; /* the ID went away (reset, new firmware) or the layout changed: find it again */
    }
    return odp_fail(err, ODP_EPROTO, "RTT block at 0x%08x keeps changing", r->addr);
}

int odp_rtt_channels(odp_rtt *r, int *nup, odp_rtt_channel *up, int *ndown, odp_rtt_channel *down, double deadline,
                     odp_err *err)
{
    uint8_t blk[HDR + DESC * 2 * ODP_RTT_MAX_BUFFERS];
    int rc = snapshot(r, blk, deadline, err);
    if (rc)
        return rc;
    *nup = r->nup;
    *ndown = r->ndown;
    for (int i = 0; i < r->nup + r->ndown; i++) {
        odp_rtt_channel *c = i < r->nup ? &up[i] : &down[i - r->nup];
        parse_desc(blk + HDR + DESC * i, c);
        uint32_t name = le32(blk + HDR + DESC * i);
        char tmp[sizeof c->name];
        /* names often live in flash/ITCM that a memory window cannot see: unreadable is not an error */
        if (name && odp_probe_read(r->p, name, tmp, sizeof tmp, deadline, &(odp_err){0}) == 0) {
            tmp[sizeof tmp - 1] = 0;
            size_t k = 0;
            while (tmp[k] && tmp[k] >= 0x20 && tmp[k] < 0x7f)
                k++;
            tmp[k] = 0;
            memcpy(c->name, tmp, k + 1);
            c->name_readable = 1;
        }
    }
    return 0;
}

static int poll_wait(double *backoff, double deadline, odp_err *err)
{
    double now = odp_now();
    if (now >= deadline)
        return odp_fail(err, ODP_ETIMEDOUT, "RTT: no data before the deadline");
    double until = now + *backoff < deadline ? now + *backoff : deadline;
    *backoff = *backoff * 2 > POLL_MAX ? POLL_MAX : *backoff * 2;
    return odp_sleep_until(until, err);
}

ssize_t odp_rtt_read(odp_rtt *r, int ch, void *buf, size_t n, double deadline, odp_err *err)
{
    uint8_t blk[HDR + DESC * 2 * ODP_RTT_MAX_BUFFERS], id[ID_LEN];
    double backoff = POLL_MIN;
    for (;;) {
        int rc = snapshot(r, blk, deadline, err);
        if (rc)
            return rc;
        if (ch < 0 || ch >= r->nup)
            return odp_fail(err, ODP_ENOTFOUND, "RTT has no up channel %d (it has %d)", ch, r->nup);
        odp_rtt_channel c;
        parse_desc(blk + HDR + DESC * ch, &c);
        if ((rc = check_desc(r, &c, "up", ch, err)) != 0)
            return rc;
        uint32_t avail = c.wr >= c.rd ? c.wr - c.rd : c.size - c.rd + c.wr;
        if (avail == 0) {
            if ((rc = poll_wait(&backoff, deadline, err)) != 0)
                return rc;
            continue;
        }
        if (avail == c.size - 1)
            r->stats.full_seen++;
        size_t want = avail < n ? avail : n;
        size_t first = c.size - c.rd < want ? c.size - c.rd : want;
        if ((rc = odp_probe_read(r->p, c.buffer + c.rd, buf, first, deadline, err)) != 0)
            return rc;
        if (want > first && (rc = odp_probe_read(r->p, c.buffer, (uint8_t *)buf + first, want - first, deadline, err)))
            return rc;
        /* the data is only ours if the block is still the same one (no reset in between) */
        if ((rc = odp_probe_read(r->p, r->addr, id, ID_LEN, deadline, err)) != 0)
            return rc;
        if (!id_ok(id) || r->epoch != r->p->resets) {
            r->valid = 0;
            r->stats.lost_on_reset += want;
            continue;
        }
        uint8_t rd[4];
        put32(rd, (uint32_t)((c.rd + want) % c.size));
        if ((rc = odp_probe_write(r->p, r->addr + HDR + DESC * (uint32_t)ch + 16, rd, 4, deadline, err)) != 0)
            return rc;
        r->stats.bytes_up += want;
        return (ssize_t)want;
    }
}

ssize_t odp_rtt_write(odp_rtt *r, int ch, const void *buf, size_t n, double deadline, odp_err *err)
{
    uint8_t blk[HDR + DESC * 2 * ODP_RTT_MAX_BUFFERS];
    const uint8_t *in = buf;
    size_t done = 0;
    double backoff = POLL_MIN;
    while (done < n) {
        int rc = snapshot(r, blk, deadline, err);
        if (rc)
            return rc;
        if (ch < 0 || ch >= r->ndown)
            return odp_fail(err, ODP_ENOTFOUND, "RTT has no down channel %d (it has %d)", ch, r->ndown);
        odp_rtt_channel c;
        parse_desc(blk + HDR + DESC * (r->nup + ch), &c);
        if ((rc = check_desc(r, &c, "down", ch, err)) != 0)
            return rc;
        uint32_t room = c.rd > c.wr ? c.rd - c.wr - 1 : c.size - c.wr + c.rd - 1;
        if (room == 0) {
            if ((rc = poll_wait(&backoff, deadline, err)) != 0)
                return rc == ODP_ETIMEDOUT ? odp_fail(err, ODP_ETIMEDOUT,
                                                      "RTT down channel %d full: %zu of %zu bytes written", ch, done, n)
                                           : rc;
            continue;
        }
        backoff = POLL_MIN;
        size_t k = n - done < room ? n - done : room;
        size_t first = c.size - c.wr < k ? c.size - c.wr : k;
        if ((rc = odp_probe_write(r->p, c.buffer + c.wr, in + done, first, deadline, err)) != 0)
            return rc;
        if (k > first && (rc = odp_probe_write(r->p, c.buffer, in + done + first, k - first, deadline, err)) != 0)
            return rc;
        uint8_t wr[4];
        put32(wr, (uint32_t)((c.wr + k) % c.size)); /* data first, offset last */
        if ((rc = odp_probe_write(r->p, r->addr + HDR + DESC * (uint32_t)(r->nup + ch) + 12, wr, 4, deadline, err)))
            return rc;
        done += k;
        r->stats.bytes_down += k;
    }
    return (ssize_t)n;
}

typedef struct {
    odp_stream base;
    odp_rtt *r;
    int ch;
} rtt_stream;

static ssize_t rs_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    rtt_stream *q = (rtt_stream *)s;
    return odp_rtt_read(q->r, q->ch, buf, n, deadline, err);
}

static ssize_t rs_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err)
{
    rtt_stream *q = (rtt_stream *)s;
    return odp_rtt_write(q->r, q->ch, buf, n, deadline, err);
}

static void rs_close(odp_stream *s)
{
    rtt_stream *q = (rtt_stream *)s;
    release(q->r);
    free(q);
}

odp_stream *odp_rtt_stream(odp_rtt *r, int ch, odp_err *err)
{
    static const odp_stream_ops ops = {"rtt", rs_read, rs_write, rs_close, NULL};
    if (ch < 0 || ch >= ODP_RTT_MAX_BUFFERS || (ch >= r->nup && ch >= r->ndown)) {
        odp_fail(err, ODP_ENOTFOUND, "RTT has no channel %d (%d up, %d down)", ch, r->nup, r->ndown);
        return NULL;
    }
    rtt_stream *q = calloc(1, sizeof *q);
    if (!q) {
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    q->base.ops = &ops;
    q->r = r;
    q->ch = ch;
    retain(r);
    return &q->base;
}
