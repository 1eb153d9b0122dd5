/* adb TCP transport; see tcp.h. */
#include "tcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../net/tcp.h"
#include "../stream/stream.h"
#include "../util/wait.h"

#define RBUF_SIZE (256u * 1024u)

typedef struct {
    int fd;
    uint8_t *rbuf; /* bytes read ahead: one read() serves many small messages */
    size_t roff, rlen;
    uint8_t *sbuf; /* header + payload, so a message leaves in one write() */
} tcp_ctx;

static int tcp_send(void *ctx, const uint8_t hdr[ADB_HDR_SIZE], const uint8_t *payload, size_t len,
                    double deadline, odp_err *e)
{
    tcp_ctx *t = ctx;
    if (len > ADB_MAXDATA)
        return odp_fail(e, ODP_EPROTO, "adb payload of %zu bytes", len);
    memcpy(t->sbuf, hdr, ADB_HDR_SIZE);
    if (len)
        memcpy(t->sbuf + ADB_HDR_SIZE, payload, len);
    ssize_t w = odp_fd_write(t->fd, t->sbuf, ADB_HDR_SIZE + len, deadline, e);
    return w < 0 ? (int)w : 0;
}

static int tcp_recv(void *ctx, uint8_t *buf, size_t n, double deadline, odp_err *e)
{
    tcp_ctx *t = ctx;
    uint8_t *start = buf;
    while (n) {
        if (t->rlen) {
            size_t take = t->rlen < n ? t->rlen : n;
            memcpy(buf, t->rbuf + t->roff, take);
            t->roff += take;
            t->rlen -= take;
            buf += take;
            n -= take;
            continue;
        }
        /* large payloads go straight to the caller's buffer */
        uint8_t *dst = n >= RBUF_SIZE ? buf : t->rbuf;
        ssize_t r = odp_fd_read(t->fd, dst, n >= RBUF_SIZE ? n : RBUF_SIZE, deadline, e);
        if (r < 0) {
            /* a timeout or Ctrl-C partway through (a header split across TCP segments): what this call took
             * goes back to the read-ahead buffer, empty whenever a read waits, so the next call reads the
             * message whole and the framing holds */
            size_t got = (size_t)(buf - start);
            if (got && (e->code == ODP_ETIMEDOUT || e->code == ODP_ECANCELED)) {
                if (got > RBUF_SIZE)
                    return odp_fail(e, ODP_EIO, "stopped %zu bytes into a %zu-byte adb read: the framing is lost",
                                    got, got + n);
                memmove(t->rbuf, start, got);
                t->roff = 0;
                t->rlen = got;
            }
            return (int)r;
        }
        if (r == 0)
            return odp_fail(e, ODP_EIO, "the device closed the adb connection");
        if (dst == buf) {
            buf += r;
            n -= (size_t)r;
        } else {
            t->roff = 0;
            t->rlen = (size_t)r;
        }
    }
    return 0;
}

static void tcp_close(void *ctx)
{
    tcp_ctx *t = ctx;
    if (t->fd >= 0)
        close(t->fd);
    free(t->rbuf);
    free(t->sbuf);
    free(t);
}

int adb_tcp_open(const char *host, int port, double deadline, struct adb_transport *out, odp_err *e)
{
    int fd = odp_tcp_connect_to(host, port, deadline, e);
    if (fd < 0)
        return e->code;
    tcp_ctx *t = calloc(1, sizeof *t);
    if (t) {
        t->rbuf = malloc(RBUF_SIZE);
        t->sbuf = malloc(ADB_HDR_SIZE + ADB_MAXDATA);
    }
    if (!t || !t->rbuf || !t->sbuf) {
        close(fd);
        if (t) {
            free(t->rbuf);
            free(t);
        }
        return odp_fail(e, ODP_EIO, "out of memory");
    }
    t->fd = fd;
    out->ctx = t;
    out->send = tcp_send;
    out->recv = tcp_recv;
    out->close = tcp_close;
    return 0;
}
