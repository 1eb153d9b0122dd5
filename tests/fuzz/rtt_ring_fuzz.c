/* libFuzzer target: the RTT reader over target memory that is entirely fuzzed.
 * The input is the target's RAM at 0x20000000 (up to 8 KiB): scan, list channels, read every up channel,
 * write to every down channel. Checks: no crash, no out-of-bounds access, bounded time (deadlines are now).
 * sources: src/rtt/rtt.c src/probe/probe.c src/stream/stream.c src/util/err.c src/util/wait.c src/util/fiber.c src/util/buf.c
 * seeds: tests/fuzz/corpus/rtt
 * max_len: 8192 */
#include <stdint.h>
#include <string.h>

#include "probe/probe.h"
#include "rtt/rtt.h"
#include "util/wait.h"

#define BASE 0x20000000u
static uint8_t mem[8192];
static size_t mem_len;

static int f_read(odp_probe *p, uint32_t a, void *b, size_t n, double d, odp_err *e)
{
    (void)p, (void)d;
    if (a < BASE || a - BASE > mem_len || n > mem_len - (a - BASE))
        return odp_fail(e, ODP_EIO, "unmapped");
    memcpy(b, mem + (a - BASE), n);
    return 0;
}
static int f_write(odp_probe *p, uint32_t a, const void *b, size_t n, double d, odp_err *e)
{
    (void)p, (void)d;
    if (a < BASE || a - BASE > mem_len || n > mem_len - (a - BASE))
        return odp_fail(e, ODP_EIO, "unmapped");
    memcpy(mem + (a - BASE), b, n);
    return 0;
}
static int f_ctl(odp_probe *p, double d, odp_err *e) { (void)p, (void)d, (void)e; return 0; }
static void f_close(odp_probe *p) { (void)p; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const odp_probe_ops ops = {"fuzz", f_read, f_write, f_ctl, f_ctl, f_ctl, f_close};
    odp_probe p = {.ops = &ops, .refs = 1000};
    mem_len = size < sizeof mem ? size : sizeof mem;
    memcpy(mem, data, mem_len);
    if (mem_len < 16)
        return 0;
    odp_rtt_where w = {.nranges = 1, .ranges = {{BASE, (uint32_t)mem_len}}};
    odp_rtt *r;
    odp_err err;
    if (odp_rtt_attach(&p, &w, odp_now(), &r, &err))
        return 0;
    odp_rtt_channel up[ODP_RTT_MAX_BUFFERS], down[ODP_RTT_MAX_BUFFERS];
    int nup = 0, ndown = 0;
    if (odp_rtt_channels(r, &nup, up, &ndown, down, odp_now(), &err) == 0) {
        uint8_t buf[512];
        for (int i = 0; i < nup; i++)
            odp_rtt_read(r, i, buf, sizeof buf, odp_now(), &err);
        for (int i = 0; i < ndown; i++)
            odp_rtt_write(r, i, "0123456789", 10, odp_now(), &err);
    }
    odp_rtt_close(r);
    return 0;
}
