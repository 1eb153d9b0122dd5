#include "xmodem.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/wait.h"

#define SOH 0x01
#define STX 0x02
#define EOT 0x04
#define ACK 0x06
#define NAK 0x15
#define CAN 0x18
#define PAD 0x1A
#define CRC_ASK 'C'
/* The standard: a receiver asking with `C` falls back to NAK (checksum) after this many unanswered tries. */
#define CRC_TRIES 3

void odp_xmodem_opts_init(odp_xmodem_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout = 10;
    o->start_timeout = 60;
    o->max_retries = 10;
}

uint16_t odp_crc16_xmodem(const uint8_t *p, size_t n)
{
    uint16_t crc = 0;
    while (n--) {
        crc ^= (uint16_t)(*p++ << 8);
        for (int i = 0; i < 8; i++)
            crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

static uint8_t checksum8(const uint8_t *p, size_t n)
{
    uint8_t s = 0;
    while (n--)
        s = (uint8_t)(s + *p++);
    return s;
}

/* Silence between two bytes of one packet before it counts as lost: short enough that a dropped byte costs
 * little, long enough for a slow UART (1029 bytes at 9600 baud arrive as a stream, never with 1 s gaps). */
static double byte_gap(const odp_xmodem_opts *o) { return fmin(1.0, o->timeout / 2); }

/* Reads one byte before the deadline: the byte (0..255) or a negative odp_code. End of stream is EIO. */
static int get_byte(odp_stream *s, double deadline, odp_err *err)
{
    uint8_t c;
    ssize_t r = odp_stream_read(s, &c, 1, deadline, err);
    if (r < 0)
        return (int)r;
    if (r == 0)
        return odp_fail(err, ODP_EIO, "stream ended");
    return c;
}

/* Reads exactly n bytes, each chunk arriving within `gap` seconds of the previous one. */
static int read_gap(odp_stream *s, uint8_t *buf, size_t n, double gap, odp_err *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = odp_stream_read(s, buf + got, n - got, odp_now() + gap, err);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_EIO, "stream ended inside a packet");
        got += (size_t)r;
    }
    return 0;
}

/* Discards what is already buffered (stale answers, duplicated bytes) without waiting. */
static int drain(odp_stream *s, odp_err *err)
{
    uint8_t junk[256];
    for (int i = 0; i < 64; i++) { /* bounded: a stream that never stops talking is not drained forever */
        ssize_t r = odp_stream_read(s, junk, sizeof junk, 0, err);
        if (r == ODP_ETIMEDOUT)
            return 0;
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_EIO, "stream ended");
    }
    return 0;
}

/* Discards input until the line is quiet (the rest of a broken packet), bounded by `limit` seconds. */
static int purge(odp_stream *s, double quiet, double limit, odp_err *err)
{
    uint8_t junk[256];
    double end = odp_now() + limit;
    for (;;) {
        double d = fmin(odp_now() + quiet, end);
        ssize_t r = odp_stream_read(s, junk, sizeof junk, d, err);
        if (r == ODP_ETIMEDOUT)
            return 0;
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_EIO, "stream ended");
        if (odp_now() >= end)
            return 0;
    }
}

static int put_byte(odp_stream *s, uint8_t c, double timeout, odp_err *err)
{
    ssize_t r = odp_stream_write(s, &c, 1, odp_deadline(timeout), err);
    return r < 0 ? (int)r : 0;
}

/* Best-effort CAN CAN CAN (the abort both sides understand); the original error in err is kept. */
static void send_cancel(odp_stream *s, double timeout)
{
    static const uint8_t cans[] = {CAN, CAN, CAN};
    odp_err ignored;
    odp_stream_write(s, cans, sizeof cans, odp_deadline(fmin(timeout, 1.0)), &ignored);
}

static int report(const odp_xmodem_opts *o, const odp_xmodem_progress *p, odp_stream *s, odp_err *err)
{
    if (o->progress && o->progress(o->ctx, p)) {
        send_cancel(s, o->timeout);
        return odp_fail(err, ODP_ECANCELED, "transfer cancelled by the progress callback");
    }
    return 0;
}

/* Waits for a second CAN right after a first one (a lone CAN is line noise). 1 = cancelled. */
static int second_can(odp_stream *s, odp_err *err)
{
    int c = get_byte(s, odp_now() + 1.0, err);
    if (c == ODP_ECANCELED)
        return c;
    return c == CAN;
}

/* ---- send ---- */

int odp_xmodem_send(odp_stream *s, uint64_t n, odp_xmodem_source_fn source, void *src_ctx,
                    const odp_xmodem_opts *o, odp_xmodem_progress *res, odp_err *err)
{
    odp_xmodem_progress p = {.total = n};
    uint8_t pkt[3 + 1024 + 2];
    int rc;

    /* The receiver starts: `C` asks for CRC-16, NAK for the checksum. Other bytes (a banner) are ignored. */
    double start_end = odp_deadline(o->start_timeout);
    for (;;) {
        int c = get_byte(s, start_end, err);
        if (c == ODP_ETIMEDOUT)
            return odp_fail(err, ODP_ETIMEDOUT, "the receiver did not start (no `C` or NAK within %.3g s)",
                            o->start_timeout);
        if (c < 0)
            return c;
        if (c == CRC_ASK || c == NAK) {
            p.crc = c == CRC_ASK;
            break;
        }
        if (c == CAN && (rc = second_can(s, err)) != 0)
            return rc < 0 ? rc : odp_fail(err, ODP_ECANCELED, "the receiver cancelled (CAN CAN) before the first block");
    }

    uint64_t off = 0;
    unsigned blk = 1;
    int done_data = n == 0;
    for (;;) {
        size_t len = 0, plen;
        if (!done_data) {
            uint64_t left = n - off;
            size_t bs = o->block_1k && left > 896 ? 1024 : 128;
            len = left < bs ? (size_t)left : bs;
            pkt[0] = bs == 1024 ? STX : SOH;
            pkt[1] = (uint8_t)blk;
            pkt[2] = (uint8_t)~blk;
            if ((rc = source(src_ctx, off, pkt + 3, len, err)) != 0)
                return rc;
            memset(pkt + 3 + len, PAD, bs - len);
            if (p.crc) {
                uint16_t crc = odp_crc16_xmodem(pkt + 3, bs);
                pkt[3 + bs] = (uint8_t)(crc >> 8);
                pkt[4 + bs] = (uint8_t)crc;
                plen = 5 + bs;
            } else {
                pkt[3 + bs] = checksum8(pkt + 3, bs);
                plen = 4 + bs;
            }
        } else {
            pkt[0] = EOT;
            plen = 1;
        }
        unsigned tries = 0;
        for (;;) {
            if (tries > o->max_retries) {
                send_cancel(s, o->timeout);
                return odp_fail(err, ODP_EIO, "%s not acknowledged after %u tries; sent CAN CAN",
                                done_data ? "EOT" : "block", tries);
            }
            if ((rc = drain(s, err)) != 0)
                return rc;
            ssize_t w = odp_stream_write(s, pkt, plen, odp_deadline(o->timeout), err);
            if (w < 0)
                return (int)w;
            if (tries++)
                p.retries++;
            double end = odp_deadline(o->timeout);
            int answer = -1;
            while (answer < 0) {
                int c = get_byte(s, end, err);
                if (c == ODP_ETIMEDOUT)
                    break;
                if (c < 0)
                    return c;
                if (c == ACK || c == NAK)
                    answer = c;
                else if (c == CAN && (rc = second_can(s, err)) != 0)
                    return rc < 0 ? rc : odp_fail(err, ODP_ECANCELED, "the receiver cancelled (CAN CAN) at block %u", blk);
                /* anything else (`C` repeated by a receiver that had not seen block 1 yet, noise): keep waiting */
            }
            if (answer == ACK)
                break;
        }
        if (done_data)
            break;
        off += len;
        p.bytes = off;
        p.blocks++;
        blk++;
        if ((rc = report(o, &p, s, err)) != 0)
            return rc;
        done_data = off >= n;
    }
    if (res)
        *res = p;
    return 0;
}

static int file_source(void *ctx, uint64_t off, void *buf, size_t n, odp_err *err)
{
    int fd = *(int *)ctx;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return odp_fail_errno(err, ODP_EIO, errno, "reading the file to send");
        if (r == 0)
            return odp_fail(err, ODP_EIO, "the file to send shrank while sending");
        got += (size_t)r;
    }
    return 0;
}

int odp_xmodem_send_file(odp_stream *s, const char *path, const odp_xmodem_opts *o, odp_xmodem_progress *res,
                         odp_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return odp_fail(err, ODP_EIO, "%s: not a regular file", path);
    }
    int rc = odp_xmodem_send(s, (uint64_t)st.st_size, file_source, &fd, o, res, err);
    close(fd);
    return rc;
}

/* ---- receive ---- */

int odp_xmodem_receive(odp_stream *s, odp_xmodem_sink_fn sink, void *sink_ctx, const odp_xmodem_opts *o,
                       odp_xmodem_progress *res, odp_err *err)
{
    odp_xmodem_progress p = {.crc = !o->checksum};
    uint64_t max = o->max_bytes ? o->max_bytes : (uint64_t)4 << 30;
    uint8_t pkt[2 + 1024 + 2];
    unsigned expected = 1, errors = 0, asks = 0;
    int started = 0, eot_once = 0, rc;
    double gap = byte_gap(o);
    double start_end = odp_deadline(o->start_timeout);
    /* Ask every few seconds until the sender starts (lrzsz sx, a board's sender, a user starting a tool). */
    double ask_every = fmin(o->timeout, 3.0);
    uint8_t answer = p.crc ? CRC_ASK : NAK;

    for (;;) {
        if (!started) {
            if (odp_now() >= start_end) {
                send_cancel(s, o->timeout);
                return odp_fail(err, ODP_ETIMEDOUT, "the sender did not start within %.3g s", o->start_timeout);
            }
            if (p.crc && !o->checksum && asks >= CRC_TRIES) {
                p.crc = 0; /* the sender ignores `C`: fall back to the checksum, as the standard says */
                answer = NAK;
            }
            asks++;
        } else if (errors > o->max_retries) {
            send_cancel(s, o->timeout);
            return odp_fail(err, ODP_EIO, "block %u failed %u times in a row; sent CAN CAN", expected, errors);
        }
        if ((rc = drain(s, err)) != 0 || (rc = put_byte(s, answer, o->timeout, err)) != 0)
            return rc;
        /* the next packet header */
        for (;;) {
            double end = started ? odp_deadline(o->timeout) : fmin(odp_now() + ask_every, start_end);
            int c = get_byte(s, end, err);
            if (c == ODP_ETIMEDOUT) {
                if (started) {
                    errors++;
                    p.retries++;
                }
                answer = started ? NAK : answer;
                break;
            }
            if (c < 0)
                return c;
            if (c == SOH || c == STX) {
                size_t bs = c == STX ? 1024 : 128;
                size_t tail = p.crc ? 2 : 1;
                rc = read_gap(s, pkt, 2 + bs + tail, gap, err);
                if (rc == ODP_ETIMEDOUT)
                    goto bad_packet;
                if (rc)
                    return rc;
                uint8_t *data = pkt + 2;
                int good = (pkt[0] ^ pkt[1]) == 0xff;
                if (good && p.crc)
                    good = odp_crc16_xmodem(data, bs) == (uint16_t)(data[bs] << 8 | data[bs + 1]);
                else if (good)
                    good = checksum8(data, bs) == data[bs];
                if (!good)
                    goto bad_packet;
                started = 1;
                eot_once = 0;
                errors = 0;
                if (pkt[0] == (uint8_t)expected) {
                    if (p.bytes + bs > max) {
                        send_cancel(s, o->timeout);
                        return odp_fail(err, ODP_EIO, "transfer exceeds the limit of %llu bytes; sent CAN CAN",
                                        (unsigned long long)max);
                    }
                    if ((rc = sink(sink_ctx, data, bs, err)) != 0) {
                        send_cancel(s, o->timeout);
                        return rc;
                    }
                    p.bytes += bs;
                    p.blocks++;
                    expected++;
                    if ((rc = report(o, &p, s, err)) != 0)
                        return rc;
                } else if (pkt[0] != (uint8_t)(expected - 1)) {
                    send_cancel(s, o->timeout);
                    return odp_fail(err, ODP_EPROTO, "lost sync: got block %u, expected %u; sent CAN CAN",
                                    pkt[0], expected & 0xff);
                } /* else: a repeat of the previous block (our ACK was lost): acknowledge it again */
                answer = ACK;
                break;
            }
            if (c == EOT) {
                /* NAK the first EOT: a corrupted header byte that reads as EOT must not end the transfer. */
                if (!eot_once) {
                    eot_once = 1;
                    answer = NAK;
                    break;
                }
                if ((rc = drain(s, err)) != 0 || (rc = put_byte(s, ACK, o->timeout, err)) != 0)
                    return rc;
                if (res)
                    *res = p;
                return 0;
            }
            if (c == CAN) {
                if ((rc = second_can(s, err)) < 0)
                    return rc;
                if (rc)
                    return odp_fail(err, ODP_ECANCELED, "the sender cancelled (CAN CAN) at block %u", expected);
            }
            if (!started)
                continue; /* a banner or line noise before the first block */
        bad_packet:
            errors++;
            p.retries++;
            if ((rc = purge(s, fmin(0.1, gap), o->timeout, err)) != 0)
                return rc;
            answer = NAK;
            break;
        }
    }
}

typedef struct {
    int fd;
} file_sink;

static int write_sink(void *ctx, const void *buf, size_t n, odp_err *err)
{
    file_sink *f = ctx;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(f->fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return odp_fail_errno(err, ODP_EIO, errno, "writing the received file");
        done += (size_t)w;
    }
    return 0;
}

int odp_xmodem_receive_file(odp_stream *s, const char *path, const odp_xmodem_opts *o, odp_xmodem_progress *res,
                            odp_err *err)
{
    char dir[4096], base[4096], tmp[8300];
    if (strlen(path) >= sizeof dir)
        return odp_fail(err, ODP_EIO, "path too long");
    strcpy(dir, path);
    strcpy(base, path);
    snprintf(tmp, sizeof tmp, "%s/.%s.part-XXXXXX", dirname(dir), basename(base));
    file_sink f = {mkostemp(tmp, O_CLOEXEC)};
    if (f.fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "creating a temporary file next to %s", path);
    mode_t mask = umask(0);
    umask(mask);
    fchmod(f.fd, 0666 & ~mask); /* like a file the user created, not mkostemp's 0600 */
    int rc = odp_xmodem_receive(s, write_sink, &f, o, res, err);
    if (rc == 0 && fsync(f.fd) < 0)
        rc = odp_fail_errno(err, ODP_EIO, errno, "fsync %s", tmp);
    if (close(f.fd) < 0 && rc == 0)
        rc = odp_fail_errno(err, ODP_EIO, errno, "close %s", tmp);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = odp_fail_errno(err, ODP_EIO, errno, "rename to %s", path);
    if (rc)
        unlink(tmp);
    return rc;
}
