/* RTT ring logic on plain byte arrays: a fake in-memory probe (the target's RAM is an array) so wrap, full,
 * empty, corrupt offsets, absurd sizes, two IDs, a stale ID and a block changing under the reader are
 * checked exactly. The real backends are tested against the twin (tests/probe). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe.h"
#include "rtt/rtt.h"
#include "util/wait.h"

#define BASE 0x20000000u
#define MEM 0x20000 /* two scan chunks: an ID can straddle their edge */
static uint8_t mem[MEM];
static int nfail, ntest;

typedef struct {
    odp_probe base;
    int reads;
} fake_probe;

static int f_read(odp_probe *p, uint32_t a, void *b, size_t n, double d, odp_err *e)
{
    (void)d;
    ((fake_probe *)p)->reads++;
    if (a < BASE || a - BASE + n > MEM)
        return odp_fail(e, ODP_EIO, "fake: 0x%08x+%zu unmapped", a, n);
    memcpy(b, mem + (a - BASE), n);
    return 0;
}
static int f_write(odp_probe *p, uint32_t a, const void *b, size_t n, double d, odp_err *e)
{
    (void)p, (void)d;
    if (a < BASE || a - BASE + n > MEM)
        return odp_fail(e, ODP_EIO, "fake: 0x%08x+%zu unmapped", a, n);
    memcpy(mem + (a - BASE), b, n);
    return 0;
}
static int f_ctl(odp_probe *p, double d, odp_err *e) { (void)p, (void)d, (void)e; return 0; }
static void f_close(odp_probe *p) { (void)p; }
static const odp_probe_ops fops = {"fake", f_read, f_write, f_ctl, f_ctl, f_ctl, f_close};
static fake_probe fp = {.base = {.ops = &fops, .refs = 1000}};

static void put32(uint32_t a, uint32_t v) { memcpy(mem + (a - BASE), &v, 4); }
static uint32_t get32(uint32_t a) { uint32_t v; memcpy(&v, mem + (a - BASE), 4); return v; }

/* block at `at`: 1 up (buffer at upbuf, size), 1 down (downbuf, dsize) */
#define CB (BASE + 0x100)
#define UPD (CB + 24)
#define DND (CB + 48)
#define UPBUF (BASE + 0x1000)
#define DNBUF (BASE + 0x2000)
static void make_block(uint32_t at, uint32_t size, uint32_t dsize)
{
    memset(mem + (at - BASE), 0, 72);
    memcpy(mem + (at - BASE), "SEGGER RTT", 10);
    put32(at + 16, 1);
    put32(at + 20, 1);
    put32(at + 24 + 4, UPBUF), put32(at + 24 + 8, size);
    put32(at + 48 + 4, DNBUF), put32(at + 48 + 8, dsize);
}

/* target side: append to the up ring */
static void target_put(const char *s, size_t n, uint32_t size)
{
    uint32_t wr = get32(UPD + 12);
    for (size_t i = 0; i < n; i++) {
        mem[UPBUF - BASE + wr] = (uint8_t)s[i];
        wr = (wr + 1) % size;
    }
    put32(UPD + 12, wr);
}

#define CHECK(name, cond)                                                                                     \
    do {                                                                                                      \
        ntest++;                                                                                              \
        if (cond)                                                                                             \
            printf("ok %d - %s\n", ntest, name);                                                              \
        else {                                                                                                \
            printf("not ok %d - %s\n#   at line %d\n", ntest, name, __LINE__);                                 \
            nfail++;                                                                                          \
        }                                                                                                     \
    } while (0)

static odp_rtt *attach_ranges(odp_err *err, int *rc)
{
    odp_rtt_where w = {.nranges = 1, .ranges = {{BASE, MEM}}};
    odp_rtt *r = NULL;
    *rc = odp_rtt_attach(&fp.base, &w, odp_deadline(0.05), &r, err);
    return r;
}

int main(void)
{
    odp_wait_init();
    odp_err err;
    int rc;
    char buf[256];

    make_block(CB, 16, 8);
    odp_rtt *r = attach_ranges(&err, &rc);
    CHECK("attach by scanning a range", rc == 0 && odp_rtt_address(r) == CB);

    ssize_t n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.02), &err);
    CHECK("empty ring: read times out", n == ODP_ETIMEDOUT);

    target_put("hello", 5, 16);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("data: read returns it and moves RdOff", n == 5 && !memcmp(buf, "hello", 5) && get32(UPD + 16) == 5);

    target_put("0123456789ab", 12, 16); /* wr wraps: 5+12 = 17 -> 1 */
    CHECK("setup: WrOff wrapped", get32(UPD + 12) == 1);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("wrap: both segments in order", n == 12 && !memcmp(buf, "0123456789ab", 12) && get32(UPD + 16) == 1);

    target_put("ABCDEFGHIJKLMNO", 15, 16); /* full: size-1 bytes */
    n = odp_rtt_read(r, 0, buf, 4, odp_deadline(0.1), &err);
    odp_rtt_stats st;
    odp_rtt_get_stats(r, &st);
    CHECK("full ring: partial read of 4, full counted", n == 4 && !memcmp(buf, "ABCD", 4) && st.full_seen == 1);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("full ring: the rest", n == 11 && !memcmp(buf, "EFGHIJKLMNO", 11));

    n = odp_rtt_write(r, 0, "abcdefghij", 10, odp_deadline(0.02), &err);
    CHECK("down ring of 8 holds 7: a 10-byte write times out", n == ODP_ETIMEDOUT && get32(DND + 12) == 7);
    put32(DND + 16, 7); /* target consumed them */
    n = odp_rtt_write(r, 0, "XYZ", 3, odp_deadline(0.1), &err);
    CHECK("down write wraps: data then WrOff", n == 3 && get32(DND + 12) == 2 && mem[DNBUF - BASE + 7] == 'X' &&
                                                   mem[DNBUF - BASE + 0] == 'Y' && mem[DNBUF - BASE + 1] == 'Z');

    put32(UPD + 16, 99); /* RdOff >= size */
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("corrupt RdOff: EPROTO", n == ODP_EPROTO && strstr(err.msg, "offsets"));
    put32(UPD + 16, get32(UPD + 12));
    put32(UPD + 8, 0x7fffffff);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("absurd SizeOfBuffer: EPROTO", n == ODP_EPROTO && strstr(err.msg, "absurd size"));
    put32(UPD + 8, 16);
    put32(UPD + 4, 0x90000000);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("buffer pointer outside the ranges: EPROTO", n == ODP_EPROTO && strstr(err.msg, "outside"));
    put32(UPD + 4, UPBUF);
    n = odp_rtt_read(r, 5, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("channel out of range: ENOTFOUND", n == ODP_ENOTFOUND);

    /* stale ID: the firmware cleared it (reset) and has not written it again -> wait, then time out */
    mem[CB - BASE] = 0;
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.05), &err);
    CHECK("ID gone: no stale read, ETIMEDOUT waiting for the firmware", n == ODP_ETIMEDOUT);
    /* the firmware re-initialises (offsets 0) and writes again */
    make_block(CB, 16, 8);
    target_put("new", 3, 16);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.2), &err);
    odp_rtt_get_stats(r, &st);
    CHECK("block re-found after re-initialisation, fresh data", n == 3 && !memcmp(buf, "new", 3) && st.refinds >= 1);

    /* the layout changes under the reader (MaxNumUpBuffers absurd) */
    put32(CB + 16, 1000);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.1), &err);
    CHECK("absurd buffer count: EPROTO, no endless loop", n == ODP_EPROTO && strstr(err.msg, "absurd buffer counts"));
    put32(CB + 16, 1);

    /* probe reset bumps the epoch: the block is re-found, the scrub list holds its address */
    CHECK("attach registered the ID for scrubbing before resets", fp.base.nscrub == 1 && fp.base.scrub[0] == CB);
    make_block(CB, 16, 8);
    rc = odp_probe_reset(&fp.base, odp_deadline(1), &err);
    CHECK("reset zeroes the ID (fake firmware does not rewrite it)", rc == 0 && mem[CB - BASE] == 0);
    n = odp_rtt_read(r, 0, buf, sizeof buf, odp_deadline(0.05), &err);
    CHECK("after reset: no read from the old block", n == ODP_ETIMEDOUT);
    odp_rtt_close(r);

    /* two IDs */
    make_block(CB, 16, 8);
    make_block(BASE + 0x3000, 16, 8);
    r = attach_ranges(&err, &rc);
    CHECK("two IDs: EPROTO naming both", rc == ODP_EPROTO && strstr(err.msg, "0x20000100") && strstr(err.msg, "0x20003000"));
    memset(mem + 0x3000, 0, 16);

    /* clearing stale IDs before a reset: every ID in the ranges, each chunk read bounded */
    int cleared = -1;
    odp_rtt_where all = {.nranges = 1, .ranges = {{BASE, MEM}}};
    memset(mem, 0, sizeof mem);
    rc = odp_rtt_clear_ids(&fp.base, &all, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids: none in the ranges -> 0", rc == 0 && cleared == 0);
    make_block(CB, 16, 8);
    rc = odp_rtt_clear_ids(&fp.base, &all, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids: one ID zeroed, the rest of the block kept",
          rc == 0 && cleared == 1 && mem[CB - BASE] == 0 && get32(CB + 16) == 1 && get32(UPD + 4) == UPBUF);
    make_block(CB, 16, 8);
    make_block(BASE + 0x3000, 16, 8);
    rc = odp_rtt_clear_ids(&fp.base, &all, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids: two IDs zeroed", rc == 0 && cleared == 2 && mem[CB - BASE] == 0 && mem[0x3000] == 0);
    uint32_t edge = BASE + 0x10000 - 5; /* "SEGGE" before the 64 KiB chunk edge, "R RTT" after it */
    memcpy(mem + (edge - BASE), "SEGGER RTT", 11);
    memcpy(mem + MEM - 16, "SEGGER RTT", 11); /* the last 16 bytes of the range */
    fp.reads = 0;
    rc = odp_rtt_clear_ids(&fp.base, &all, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids: an ID across the chunk edge and one at the range's end", rc == 0 && cleared == 2 &&
          mem[edge - BASE] == 0 && mem[edge - BASE + 6] == 0 && mem[MEM - 16] == 0);
    CHECK("clear_ids: read in bounded chunks", fp.reads == 2);
    CHECK("clear_ids: nothing left for an attach", odp_rtt_scan_image(mem, MEM, &(size_t){0}) == 0);
    make_block(CB, 16, 8);
    odp_rtt_where at = {.has_address = 1, .address = CB + 0x40};
    rc = odp_rtt_clear_ids(&fp.base, &at, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids at an address without an ID: nothing written", rc == 0 && cleared == 0 && mem[CB - BASE] == 'S');
    at.address = CB;
    rc = odp_rtt_clear_ids(&fp.base, &at, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids at the block's address", rc == 0 && cleared == 1 && mem[CB - BASE] == 0);
    odp_rtt_where bad = {.nranges = 1, .ranges = {{BASE + MEM - 0x100, 0x1000}}};
    rc = odp_rtt_clear_ids(&fp.base, &bad, odp_deadline(1), &cleared, &err);
    CHECK("clear_ids over unmapped memory: the probe's error", rc == ODP_EIO && cleared == 0);

    /* scan image helper */
    size_t off = 0;
    uint8_t img[64] = {0};
    memcpy(img + 40, "SEGGER RTT", 11);
    CHECK("scan_image finds one ID", odp_rtt_scan_image(img, sizeof img, &off) == 1 && off == 40);
    memcpy(img + 3, "SEGGER RTT", 11);
    CHECK("scan_image counts two", odp_rtt_scan_image(img, sizeof img, &off) == 2 && off == 3);

    /* no block at all */
    memset(mem, 0, sizeof mem);
    r = attach_ranges(&err, &rc);
    CHECK("no ID: ETIMEDOUT after waiting", rc == ODP_ETIMEDOUT);

    printf("1..%d\n# %d failed\n", ntest, nfail);
    return nfail != 0;
}
