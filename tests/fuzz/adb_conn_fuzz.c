/* libFuzzer target for src/adb/conn.c: the host side of a connection whose device sends the input bytes
 * (CNXN, AUTH, OKAY/WRTE/CLSE, shell v2 and sync payloads). Whatever arrives, odp must fail cleanly:
 * no crash, no overread, no hang (the transport ends the input with an error).
 * sources: src/adb/proto.c src/adb/conn.c src/adb/services.c src/adb/auth.c src/util/err.c src/util/wait.c src/util/fiber.c src/util/fs.c src/util/buf.c
 * seeds: tests/fuzz/corpus/adb/conn_session
 * max_len: 16384 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "adb/conn.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} feed;

static int f_send(void *ctx, const uint8_t hdr[ADB_HDR_SIZE], const uint8_t *payload, size_t len, double deadline,
                  odp_err *e)
{
    (void)ctx, (void)hdr, (void)payload, (void)deadline, (void)e;
    if (len > ADB_MAXDATA)
        __builtin_trap(); /* odp never sends above the negotiated maximum */
    return 0;
}

static int f_recv(void *ctx, uint8_t *buf, size_t n, double deadline, odp_err *e)
{
    (void)deadline;
    feed *f = ctx;
    if (n > f->n)
        return odp_fail(e, ODP_EIO, "end of input");
    memcpy(buf, f->p, n);
    f->p += n;
    f->n -= n;
    return 0;
}

static void f_close(void *ctx) { (void)ctx; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    feed f = {data, size};
    struct adb_transport t = {&f, f_send, f_recv, f_close};
    struct adb_conn_opts o = {0};
    o.auth_deadline = 1e300;
    odp_err e;
    struct adb_conn *c = adb_conn_open(&t, &o, 1e300, &e);
    if (!c)
        return 0;
    struct adb_link l;
    adb_conn_link(c, &l);
    struct adb_shell_result r;
    memset(&r, 0, sizeof r);
    r.out.limit = r.err.limit = 1 << 20;
    adb_shell(&l, "true", (const uint8_t *)"in", 2, NULL, NULL, &r, 1e300, &e);
    if (r.out.len > size || r.err.len > size)
        __builtin_trap();
    odp_buf_free(&r.out);
    odp_buf_free(&r.err);
    struct adb_sync_stat st;
    adb_stat(&l, "/data/local/tmp/x", &st, 1e300, &e);
    adb_link_close(&l);
    return 0;
}
