/* libFuzzer target: the XMODEM receiver fed arbitrary bytes from the "sender".
 * A fake stream hands out the input in chunks whose sizes come from the input itself and times out at once
 * when it is used up; received data goes to a capped memory sink. Checks: no crash, no overrun, bounded work.
 * sources: src/xmodem/xmodem.c src/stream/stream.c src/util/err.c src/util/wait.c src/util/fiber.c src/util/buf.c
 * seeds: tests/fuzz/corpus/xmodem
 * max_len: 4096 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/stream.h"
#include "xmodem/xmodem.h"

typedef struct {
    odp_stream base;
    const uint8_t *p;
    size_t n, pos;
} fake_stream;

static ssize_t fake_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    (void)deadline;
    fake_stream *f = (fake_stream *)s;
    if (f->pos >= f->n)
        return odp_fail(err, ODP_ETIMEDOUT, "no more input");
    size_t k = f->n - f->pos;
    size_t chunk = 1 + f->p[f->pos] % 97; /* uneven chunks, like a pty */
    if (k > chunk)
        k = chunk;
    if (k > n)
        k = n;
    memcpy(buf, f->p + f->pos, k);
    f->pos += k;
    return (ssize_t)k;
}

static ssize_t fake_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err)
{
    (void)s, (void)buf, (void)deadline, (void)err;
    return (ssize_t)n;
}

static void fake_close(odp_stream *s) { (void)s; }

typedef struct {
    size_t len;
    uint8_t data[64 * 1024];
} sink;

static int to_memory(void *ctx, const void *buf, size_t n, odp_err *err)
{
    sink *k = ctx;
    if (n > sizeof k->data - k->len)
        return odp_fail(err, ODP_EIO, "sink full");
    memcpy(k->data + k->len, buf, n);
    k->len += n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const odp_stream_ops ops = {"fake", fake_read, fake_write, fake_close, NULL};
    static sink k;
    fake_stream f = {.base = {.ops = &ops}, .p = data, .n = size};
    odp_xmodem_opts o;
    odp_xmodem_opts_init(&o);
    o.timeout = 0.0005;
    o.start_timeout = 0.0005;
    o.max_retries = 3;
    o.max_bytes = sizeof k.data;
    o.checksum = size > 0 && (data[0] & 1);
    k.len = 0;
    odp_xmodem_progress p;
    odp_err err;
    odp_xmodem_receive(&f.base, to_memory, &k, &o, &p, &err);
    odp_buf_free(&f.base.pending);
    return 0;
}
