/* adb host side over any transport; see conn.h. Protocol facts: docs/sources.md §3. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "../util/wait.h"

#define HOST_BANNER "host::features=shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir"

struct adb_conn {
    struct adb_transport t;
    uint32_t version, maxdata;
    int checksum;
    int broken;
    struct adb_banner banner;
    uint8_t *buf;   /* payload of the last message received (ADB_MAXDATA bytes) */
    uint8_t *wbuf;  /* outgoing stream bytes gathered into one WRTE */
    size_t wlen;
    uint32_t next_id;
};

struct stream {
    uint32_t local, remote;
    int closed;
};

/* ---------- messages ---------- */

static int send_msg(struct adb_conn *c, uint32_t cmd, uint32_t a0, uint32_t a1, const void *data, size_t len,
                    double deadline, odp_err *e)
{
    if (c->broken) {
        odp_fail(e, ODP_EIO, "the adb connection was lost: connect again");
        return -1;
    }
    uint8_t h[ADB_HDR_SIZE];
    adb_hdr_pack(h, cmd, a0, a1, data, (uint32_t)len, c->checksum || cmd == ADB_CNXN || cmd == ADB_AUTH);
    if (c->t.send(c->t.ctx, h, data, len, deadline, e) != 0) {
        c->broken = 1;
        return -1;
    }
    return 0;
}

static int recv_msg(struct adb_conn *c, struct adb_hdr *h, double deadline, odp_err *e)
{
    if (c->broken) {
        odp_fail(e, ODP_EIO, "the adb connection was lost: connect again");
        return -1;
    }
    uint8_t raw[ADB_HDR_SIZE];
    if (c->t.recv(c->t.ctx, raw, sizeof raw, deadline, e) != 0) {
        /* a timeout before the first byte leaves the framing intact */
        if (e->code != ODP_ETIMEDOUT)
            c->broken = 1;
        return -1;
    }
    /* before CNXN nothing may exceed the CNXN/AUTH limit; after, the negotiated maxdata */
    enum adb_hdr_status st = adb_hdr_parse(raw, h, c->maxdata ? c->maxdata : ADB_CNXN_MAX);
    if (st != ADB_HDR_OK) {
        c->broken = 1;
        odp_fail(e, ODP_EPROTO, "%s (command 0x%08x, length %u)", adb_hdr_status_text(st), h->cmd, h->len);
        return -1;
    }
    /* the payload follows the header at once: never give up between the two */
    if (h->len && c->t.recv(c->t.ctx, c->buf, h->len, deadline + 10.0, e) != 0) {
        c->broken = 1;
        return -1;
    }
    if (h->len) {
        /* old (0x01000000) peers checksum every payload; before CNXN only a non-zero check counts */
        uint32_t sum = adb_checksum(c->buf, h->len);
        if ((c->checksum && sum != h->check) || (c->version == 0 && h->check && sum != h->check)) {
            c->broken = 1;
            odp_fail(e, ODP_ECRC, "%s payload checksum mismatch", adb_cmd_name(h->cmd));
            return -1;
        }
    }
    return 0;
}

/* ---------- connect ---------- */

struct adb_conn *adb_conn_open(struct adb_transport *t, const struct adb_conn_opts *o, double deadline,
                               odp_err *e)
{
    struct adb_conn *c = calloc(1, sizeof *c);
    uint8_t *buf = malloc(ADB_CNXN_MAX); /* grown to maxdata once it is negotiated */
    if (!c || !buf) {
        free(c);
        free(buf);
        t->close(t->ctx);
        odp_fail(e, ODP_EIO, "out of memory");
        return NULL;
    }
    c->t = *t;
    c->buf = buf;
    if (send_msg(c, ADB_CNXN, ADB_VERSION, ADB_MAXDATA, HOST_BANNER, sizeof HOST_BANNER, deadline, e) != 0)
        goto fail;
    int key = 0, pub_sent = 0;
    for (;;) {
        struct adb_hdr h;
        if (recv_msg(c, &h, pub_sent ? o->auth_deadline : deadline, e) != 0) {
            if (pub_sent && e->code == ODP_ETIMEDOUT)
                odp_fail(e, ODP_EAUTH,
                            "the device did not authorize this computer: unlock the phone, accept the "
                            "USB debugging prompt (Allow), and connect again");
            goto fail;
        }
        if (h.cmd == ADB_CNXN) {
            if (adb_banner_parse(c->buf, h.len, &c->banner) != 0) {
                odp_fail(e, ODP_EPROTO, "the device's CNXN banner does not parse");
                goto fail;
            }
            c->version = h.arg0 < ADB_VERSION ? h.arg0 : ADB_VERSION;
            c->maxdata = h.arg1 < ADB_MAXDATA ? h.arg1 : ADB_MAXDATA;
            c->checksum = c->version < ADB_VERSION;
            if (c->maxdata < 256) {
                odp_fail(e, ODP_EPROTO, "the device's maxdata %u is too small", h.arg1);
                goto fail;
            }
            uint8_t *nb = realloc(c->buf, c->maxdata > ADB_CNXN_MAX ? c->maxdata : ADB_CNXN_MAX);
            if (nb)
                c->buf = nb;
            c->wbuf = malloc(c->maxdata);
            if (!nb || !c->wbuf) {
                odp_fail(e, ODP_EIO, "out of memory");
                goto fail;
            }
            if (strcmp(c->banner.state, "device") != 0) {
                odp_fail(e, ODP_ENODEV, "the device is in %s mode, not Android", c->banner.state);
                goto fail;
            }
            return c;
        }
        if (h.cmd == ADB_AUTH && h.arg0 == ADB_AUTH_TOKEN) {
            if (pub_sent) {
                odp_fail(e, ODP_EAUTH, "the device refused this computer's key");
                goto fail;
            }
            if (key < o->nkeys) {
                uint8_t sig[512];
                int n = adb_sign_token(o->keys[key++], c->buf, h.len, sig, sizeof sig);
                if (n < 0) {
                    odp_fail(e, ODP_EPROTO, "cannot sign the device's %u-byte AUTH token", h.len);
                    goto fail;
                }
                if (send_msg(c, ADB_AUTH, ADB_AUTH_SIGNATURE, 0, sig, (size_t)n, deadline, e) != 0)
                    goto fail;
                continue;
            }
            if (o->nkeys == 0) {
                odp_fail(e, ODP_EAUTH, "the device wants a key and odp has none");
                goto fail;
            }
            char pub[1200];
            int n = adb_pubkey_encode(o->keys[0], o->key_comment ? o->key_comment : "odp", pub, sizeof pub);
            if (n < 0) {
                odp_fail(e, ODP_EAUTH, "cannot encode the public key");
                goto fail;
            }
            if (send_msg(c, ADB_AUTH, ADB_AUTH_RSAPUBLICKEY, 0, pub, (size_t)n + 1, deadline, e) != 0)
                goto fail;
            pub_sent = 1;
            if (o->on_event)
                o->on_event(o->ud, ADB_EV_AUTH_PROMPT, 0, 0);
            continue;
        }
        if (h.cmd == ADB_STLS) {
            odp_fail(e, ODP_EPROTO, "the device wants TLS (wireless debugging pairing): use `adb tcpip` mode");
            goto fail;
        }
        /* anything else before CNXN is noise from an earlier session: ignore it */
    }
fail:
    adb_conn_close(c);
    return NULL;
}

void adb_conn_close(struct adb_conn *c)
{
    if (!c)
        return;
    c->t.close(c->t.ctx);
    free(c->buf);
    free(c->wbuf);
    free(c);
}

const struct adb_banner *adb_conn_banner(const struct adb_conn *c) { return &c->banner; }
uint32_t adb_conn_maxdata(const struct adb_conn *c) { return c->maxdata; }
uint32_t adb_conn_version(const struct adb_conn *c) { return c->version; }
int adb_conn_broken(const struct adb_conn *c) { return c->broken; }

/* ---------- streams ---------- */

static int stream_open(struct adb_conn *c, struct stream *s, const char *svc, double deadline, odp_err *e)
{
    memset(s, 0, sizeof *s);
    s->local = ++c->next_id;
    if (send_msg(c, ADB_OPEN, s->local, 0, svc, strlen(svc) + 1, deadline, e) != 0)
        return -1;
    for (;;) {
        struct adb_hdr h;
        if (recv_msg(c, &h, deadline, e) != 0)
            return -1;
        if (h.arg1 != s->local)
            continue; /* late messages of closed streams */
        if (h.cmd == ADB_OKAY) {
            s->remote = h.arg0;
            return 0;
        }
        if (h.cmd == ADB_CLSE) {
            odp_fail(e, ODP_ENOTFOUND, "the device refused the service '%.*s'", 64, svc);
            s->closed = 1;
            return -1;
        }
        odp_fail(e, ODP_EPROTO, "%s before OKAY of OPEN", adb_cmd_name(h.cmd));
        c->broken = 1;
        return -1;
    }
}

static void stream_close(struct adb_conn *c, struct stream *s, double deadline)
{
    odp_err e;
    if (!s->closed && !c->broken)
        send_msg(c, ADB_CLSE, s->local, s->remote, NULL, 0, deadline, &e);
    s->closed = 1;
}

/* Next message for stream s (WRTE with payload in c->buf, OKAY or CLSE). A WRTE is
 * acknowledged by the caller with stream_ack once consumed. */
static int stream_next(struct adb_conn *c, struct stream *s, struct adb_hdr *h, double deadline,
                       odp_err *e)
{
    for (;;) {
        if (recv_msg(c, h, deadline, e) != 0)
            return -1;
        if (h->arg1 != s->local)
            continue;
        if (h->cmd == ADB_WRTE || h->cmd == ADB_OKAY)
            return 0;
        if (h->cmd == ADB_CLSE) {
            s->closed = 1;
            return 0;
        }
        odp_fail(e, ODP_EPROTO, "unexpected %s on a stream", adb_cmd_name(h->cmd));
        c->broken = 1;
        return -1;
    }
}

static int stream_ack(struct adb_conn *c, struct stream *s, double deadline, odp_err *e)
{
    return send_msg(c, ADB_OKAY, s->local, s->remote, NULL, 0, deadline, e);
}

/* Incoming WRTEs while we wait for our OKAY are handed to this. */
typedef int (*wrte_fn)(void *ud, const uint8_t *p, size_t n, odp_err *e);

/* Send c->wbuf as one WRTE and wait for its OKAY (one WRTE in flight per stream). */
static int stream_flush(struct adb_conn *c, struct stream *s, wrte_fn on_wrte, void *ud, double deadline,
                        odp_err *e)
{
    if (!c->wlen)
        return 0;
    if (s->closed) {
        odp_fail(e, ODP_EIO, "the device closed the stream");
        return -1;
    }
    if (send_msg(c, ADB_WRTE, s->local, s->remote, c->wbuf, c->wlen, deadline, e) != 0)
        return -1;
    c->wlen = 0;
    for (;;) {
        struct adb_hdr h;
        if (stream_next(c, s, &h, deadline, e) != 0)
            return -1;
        if (h.cmd == ADB_OKAY)
            return 0;
        if (s->closed) {
            odp_fail(e, ODP_EIO, "the device closed the stream");
            return -1;
        }
        if (on_wrte && on_wrte(ud, c->buf, h.len, e) != 0)
            return -1;
        if (stream_ack(c, s, deadline, e) != 0)
            return -1;
    }
}

static int stream_put(struct adb_conn *c, struct stream *s, const void *data, size_t n, wrte_fn on_wrte,
                      void *ud, double deadline, odp_err *e)
{
    const uint8_t *p = data;
    while (n) {
        size_t take = c->maxdata - c->wlen < n ? c->maxdata - c->wlen : n;
        memcpy(c->wbuf + c->wlen, p, take);
        c->wlen += take;
        p += take;
        n -= take;
        if (c->wlen == c->maxdata && stream_flush(c, s, on_wrte, ud, deadline, e) != 0)
            return -1;
    }
    return 0;
}

/* ---------- shell ---------- */

struct shell_ctx {
    struct adb_shell_result *r;
    struct adb_shell_demux *dm;
    adb_output_fn on_output;
    void *ctx;
};

static void shell_sink(void *ud, int id, const uint8_t *p, size_t n)
{
    struct shell_ctx *sc = ud;
    odp_buf *b = id == ADB_SHELL_STDERR ? &sc->r->err : &sc->r->out;
    odp_buf_append(b, p, n);
    if (sc->on_output && !sc->r->aborted && sc->on_output(sc->ctx, id == ADB_SHELL_STDERR ? 2 : 1, (const char *)p, n))
        sc->r->aborted = 1;
}

/* Output that arrives while stdin is still being sent. */
static int shell_wrte(void *ud, const uint8_t *p, size_t n, odp_err *e)
{
    struct shell_ctx *sc = ud;
    if (adb_shell_demux_feed(sc->dm, p, n, shell_sink, sc) != 0)
        return odp_fail(e, ODP_EPROTO, "malformed shell protocol v2 packet from the device");
    return 0;
}

static int shell_collect(struct adb_conn *c, struct stream *s, struct adb_shell_demux *dm,
                         adb_output_fn on_output, void *ctx, struct adb_shell_result *r, double deadline, odp_err *e)
{
    struct shell_ctx sc = {r, dm, on_output, ctx};
    while (!s->closed && !r->aborted) {
        struct adb_hdr h;
        if (stream_next(c, s, &h, deadline, e) != 0) {
            if (e->code == ODP_ETIMEDOUT)
                stream_close(c, s, odp_now() + 2.0); /* adbd kills the command */
            return -1;
        }
        if (h.cmd != ADB_WRTE)
            continue;
        if (dm) {
            if (adb_shell_demux_feed(dm, c->buf, h.len, shell_sink, &sc) != 0) {
                odp_fail(e, ODP_EPROTO, "malformed shell protocol v2 packet from the device");
                stream_close(c, s, deadline);
                return -1;
            }
        } else {
            odp_buf_append(&r->out, c->buf, h.len);
        }
        if (stream_ack(c, s, deadline, e) != 0)
            return -1;
    }
    if (r->aborted)
        stream_close(c, s, deadline); /* adbd kills the command */
    return 0;
}

static int shell_v2(struct adb_conn *c, const char *cmd, const uint8_t *in, size_t in_len, adb_output_fn on_output,
                    void *ctx, struct adb_shell_result *r, double deadline, odp_err *e)
{
    size_t svl = strlen(cmd) + 32;
    char *svc = malloc(svl);
    snprintf(svc, svl, "shell,v2,raw:%s", cmd);
    struct stream s;
    int rc = stream_open(c, &s, svc, deadline, e);
    free(svc);
    if (rc != 0)
        return -1;
    uint8_t ph[5];
    struct adb_shell_demux dm;
    adb_shell_demux_init(&dm);
    struct shell_ctx sc = {r, &dm, on_output, ctx};
    /* stdin in packets that fit one WRTE each, then close-stdin */
    size_t room = c->maxdata - 5;
    while (in_len) {
        size_t n = in_len < room ? in_len : room;
        adb_shell_pack_hdr(ph, ADB_SHELL_STDIN, (uint32_t)n);
        if (stream_put(c, &s, ph, 5, shell_wrte, &sc, deadline, e) ||
            stream_put(c, &s, in, n, shell_wrte, &sc, deadline, e))
            goto out_err;
        in += n;
        in_len -= n;
    }
    adb_shell_pack_hdr(ph, ADB_SHELL_CLOSE_STDIN, 0);
    if (stream_put(c, &s, ph, 5, shell_wrte, &sc, deadline, e) != 0)
        goto out_err;
    /* output may arrive before the OKAY for our stdin: collect it meanwhile */
    if (c->wlen) {
        if (send_msg(c, ADB_WRTE, s.local, s.remote, c->wbuf, c->wlen, deadline, e) != 0)
            goto out_err;
        c->wlen = 0;
    }
    if (shell_collect(c, &s, &dm, on_output, ctx, r, deadline, e) != 0)
        return -1;
    r->v2 = 1;
    r->status = dm.exit_status;
    return 0;
out_err:
    c->wlen = 0;
    stream_close(c, &s, deadline);
    return -1;
}

static int shell_plain(struct adb_conn *c, const char *cmd, const uint8_t *in, size_t in_len, adb_output_fn on_output,
                       void *ctx, struct adb_shell_result *r, double deadline, odp_err *e)
{
    (void)in;
    if (in_len)
        return odp_fail(e, ODP_EPROTO, "this device has no shell_v2: stdin for a command is not supported");
    /* the status travels as the last line: "<sentinel><status>" */
    uint8_t rnd[8];
    char sentinel[40];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd)
        memset(rnd, 0x5a, sizeof rnd);
    if (fd >= 0)
        close(fd);
    snprintf(sentinel, sizeof sentinel, "ODPRC%02x%02x%02x%02x%02x%02x%02x%02x=", rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    size_t svl = strlen(cmd) + 128;
    char *svc = malloc(svl);
    /* no shell_v2, no way to close stdin: the command reads /dev/null */
    snprintf(svc, svl, "shell:(%s\n) </dev/null; printf '\\n%s%%d\\n' $?", cmd, sentinel);
    struct stream s;
    int rc = stream_open(c, &s, svc, deadline, e);
    free(svc);
    if (rc != 0)
        return -1;
    /* the sentinel must not leak: collect everything, strip it, then report */
    size_t limit = r->out.limit;
    r->out.limit = 0;
    rc = shell_collect(c, &s, NULL, NULL, NULL, r, deadline, e);
    r->out.limit = limit;
    if (rc != 0)
        return -1;
    r->status = -1;
    /* find "\n<sentinel>N" at the end; the echo before it added the "\n" */
    size_t sl = strlen(sentinel);
    for (size_t i = r->out.len; i-- > 0;) {
        if (r->out.data[i] == '\n' && r->out.len - i - 1 >= sl && !memcmp(r->out.data + i + 1, sentinel, sl)) {
            r->status = atoi(r->out.data + i + 1 + sl);
            r->out.len = i;
            break;
        }
    }
    if (r->status < 0) {
        odp_fail(e, ODP_EPROTO, "the shell exit status was lost (no sentinel in the output)");
        return -1;
    }
    if (limit && r->out.len > limit) {
        r->out.dropped += r->out.len - limit;
        r->out.len = limit;
    }
    if (on_output && r->out.len && on_output(ctx, 1, r->out.data, r->out.len))
        r->aborted = 1;
    return 0;
}

int adb_conn_shell(struct adb_conn *c, const char *cmd, const uint8_t *in, size_t in_len, adb_output_fn on_output,
                   void *ctx, struct adb_shell_result *r, double deadline, odp_err *e)
{
    r->status = -1;
    r->v2 = 0;
    r->aborted = 0;
    if (!r->out.limit)
        r->out.limit = ADB_OUTPUT_LIMIT;
    if (!r->err.limit)
        r->err.limit = ADB_OUTPUT_LIMIT;
    if (adb_banner_has(&c->banner, "shell_v2"))
        return shell_v2(c, cmd, in, in_len, on_output, ctx, r, deadline, e);
    return shell_plain(c, cmd, in, in_len, on_output, ctx, r, deadline, e);
}

/* ---------- sync ---------- */

struct sync_ctx {
    struct adb_conn *c;
    struct adb_sync_dec dec;
    int fail;   /* the device sent FAIL */
    int okay;   /* the device sent OKAY */
    char msg[ADB_SYNC_FAIL_MAX + 1];
    int fd;     /* pull: the local file */
    uint64_t done, total;
    int done_seen;
    int have_stat;
    struct adb_sync_stat st;
    adb_event_fn progress;
    void *ud;
};

static int sync_wrte(void *ud, const uint8_t *p, size_t n, odp_err *e)
{
    struct sync_ctx *sx = ud;
    while (n) {
        size_t used = 0;
        struct adb_sync_ev ev;
        int r = adb_sync_dec_feed(&sx->dec, p, n, &used, &ev);
        if (r < 0) {
            odp_fail(e, ODP_EPROTO, "%s", ev.msg);
            return -1;
        }
        p += used;
        n -= used;
        if (r == 0)
            break;
        switch (ev.type) {
        case ADB_SYNC_EV_DATA:
            if (sx->fd < 0) {
                odp_fail(e, ODP_EPROTO, "sync DATA where none was asked for");
                return -1;
            }
            for (size_t off = 0; off < ev.len;) {
                ssize_t w = write(sx->fd, ev.data + off, ev.len - off);
                if (w < 0) {
                    odp_fail(e, ODP_EIO, "writing the pulled file: %s", strerror(errno));
                    return -1;
                }
                off += (size_t)w;
            }
            sx->done += ev.len;
            if (sx->progress)
                sx->progress(sx->ud, ADB_EV_PROGRESS, sx->done, sx->total);
            break;
        case ADB_SYNC_EV_DONE:
            sx->done_seen = 1;
            break;
        case ADB_SYNC_EV_OKAY:
            sx->okay = 1;
            break;
        case ADB_SYNC_EV_FAIL:
            sx->fail = 1;
            snprintf(sx->msg, sizeof sx->msg, "%s", ev.msg);
            break;
        case ADB_SYNC_EV_STAT:
            sx->have_stat = 1;
            sx->st = ev.st;
            break;
        }
    }
    return 0;
}

static int sync_request(struct adb_conn *c, struct stream *s, struct sync_ctx *sx, uint32_t id, const char *path,
                        double deadline, odp_err *e)
{
    size_t n = strlen(path);
    if (n > ADB_SYNC_PATH_MAX) {
        odp_fail(e, ODP_EIO, "device path longer than %u bytes", ADB_SYNC_PATH_MAX);
        return -1;
    }
    uint8_t h[8];
    adb_sync_pack(h, id, (uint32_t)n);
    if (stream_put(c, s, h, 8, sync_wrte, sx, deadline, e) != 0 ||
        stream_put(c, s, path, n, sync_wrte, sx, deadline, e) != 0)
        return -1;
    return 0;
}

/* Wait for sync replies until `cond` holds or the device fails. */
static int sync_wait(struct adb_conn *c, struct stream *s, struct sync_ctx *sx, int *cond, double deadline,
                     odp_err *e)
{
    while (!*cond && !sx->fail) {
        struct adb_hdr h;
        if (stream_next(c, s, &h, deadline, e) != 0)
            return -1;
        if (s->closed) {
            odp_fail(e, ODP_EIO, "the device closed the sync stream");
            return -1;
        }
        if (h.cmd != ADB_WRTE)
            continue;
        /* acknowledge first: the device reads its next chunk while this one goes to disk
         * (c->buf is not reused before sync_wrte returns) */
        if (stream_ack(c, s, deadline, e) != 0 || sync_wrte(sx, c->buf, h.len, e) != 0)
            return -1;
    }
    return 0;
}

static int sync_open(struct adb_conn *c, struct stream *s, struct sync_ctx *sx, double deadline, odp_err *e)
{
    memset(sx, 0, sizeof *sx);
    sx->c = c;
    sx->fd = -1;
    c->wlen = 0;
    return stream_open(c, s, "sync:", deadline, e);
}

static void sync_end(struct adb_conn *c, struct stream *s, double deadline)
{
    odp_err e;
    if (!s->closed && !c->broken) {
        uint8_t q[8];
        adb_sync_pack(q, ADB_SYNC_QUIT, 0);
        c->wlen = 0;
        if (stream_put(c, s, q, 8, NULL, NULL, deadline, &e) == 0)
            stream_flush(c, s, NULL, NULL, deadline, &e);
    }
    c->wlen = 0;
    stream_close(c, s, deadline);
}

int adb_conn_stat(struct adb_conn *c, const char *remote, struct adb_sync_stat *st, double deadline,
                  odp_err *e)
{
    struct stream s;
    struct sync_ctx sx;
    if (sync_open(c, &s, &sx, deadline, e) != 0)
        return -1;
    uint32_t id = adb_banner_has(&c->banner, "stat_v2") ? ADB_SYNC_STA2 : ADB_SYNC_STAT;
    adb_sync_dec_init(&sx.dec, id);
    int rc = -1;
    if (sync_request(c, &s, &sx, id, remote, deadline, e) == 0 && stream_flush(c, &s, sync_wrte, &sx, deadline, e) == 0 &&
        sync_wait(c, &s, &sx, &sx.have_stat, deadline, e) == 0) {
        if (sx.fail)
            odp_fail(e, ODP_EIO, "stat %s: %s", remote, sx.msg);
        else {
            *st = sx.st;
            rc = 0;
        }
    }
    sync_end(c, &s, deadline);
    return rc;
}

int adb_conn_push(struct adb_conn *c, const char *local, const char *remote, uint32_t mode, double deadline,
                  adb_event_fn progress, void *ud, odp_err *e)
{
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        odp_fail(e, ODP_ENOTFOUND, "%s: %s", local, strerror(errno));
        return -1;
    }
    struct stat lst;
    fstat(fd, &lst);
    struct stream s;
    struct sync_ctx sx;
    if (sync_open(c, &s, &sx, deadline, e) != 0) {
        close(fd);
        return -1;
    }
    adb_sync_dec_init(&sx.dec, 0);
    sx.total = (uint64_t)lst.st_size;
    int rc = -1;
    size_t pl = strlen(remote) + 16;
    char *spec = malloc(pl);
    snprintf(spec, pl, "%s,%u", remote, (unsigned)(mode ? mode : (lst.st_mode & 0777) | 0100000));
    if (sync_request(c, &s, &sx, ADB_SYNC_SEND, spec, deadline, e) != 0)
        goto out;
    static uint8_t chunk[ADB_SYNC_DATA_MAX];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0) {
            odp_fail(e, ODP_EIO, "reading %s: %s", local, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        uint8_t h[8];
        adb_sync_pack(h, ADB_SYNC_DATA, (uint32_t)n);
        if (stream_put(c, &s, h, 8, sync_wrte, &sx, deadline, e) != 0 ||
            stream_put(c, &s, chunk, (size_t)n, sync_wrte, &sx, deadline, e) != 0)
            goto out;
        if (sx.fail)
            break;
        sx.done += (uint64_t)n;
        if (progress)
            progress(ud, ADB_EV_PROGRESS, sx.done, sx.total);
    }
    if (!sx.fail) {
        uint8_t h[8];
        adb_sync_pack(h, ADB_SYNC_DONE, (uint32_t)lst.st_mtime);
        if (stream_put(c, &s, h, 8, sync_wrte, &sx, deadline, e) != 0 ||
            stream_flush(c, &s, sync_wrte, &sx, deadline, e) != 0 ||
            sync_wait(c, &s, &sx, &sx.okay, deadline, e) != 0)
            goto out;
    }
    if (sx.fail)
        odp_fail(e, ODP_EIO, "the device refused %s: %s", remote, sx.msg);
    else
        rc = 0;
out:
    free(spec);
    close(fd);
    c->wlen = 0;
    if (rc == 0)
        sync_end(c, &s, deadline);
    else
        stream_close(c, &s, deadline); /* adbd ends the sync service after a FAIL */
    return rc;
}

int adb_conn_pull(struct adb_conn *c, const char *remote, const char *local, double deadline,
                  adb_event_fn progress, void *ud, odp_err *e)
{
    struct adb_sync_stat st;
    if (adb_conn_stat(c, remote, &st, deadline, e) != 0)
        return -1;
    if (st.error) {
        odp_fail(e, ODP_ENOTFOUND, "%s: %s on the device", remote, strerror((int)st.error));
        return -1;
    }
    struct stream s;
    struct sync_ctx sx;
    if (sync_open(c, &s, &sx, deadline, e) != 0)
        return -1;
    adb_sync_dec_init(&sx.dec, 0);
    sx.total = st.size;
    sx.progress = progress;
    sx.ud = ud;
    size_t ll = strlen(local) + 16;
    char *tmp = malloc(ll);
    snprintf(tmp, ll, "%s.part", local);
    sx.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = -1;
    if (sx.fd < 0) {
        odp_fail(e, ODP_EIO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (sync_request(c, &s, &sx, ADB_SYNC_RECV, remote, deadline, e) != 0 ||
        stream_flush(c, &s, sync_wrte, &sx, deadline, e) != 0 ||
        sync_wait(c, &s, &sx, &sx.done_seen, deadline, e) != 0)
        goto out;
    if (sx.fail) {
        odp_fail(e, ODP_EIO, "pull %s: %s", remote, sx.msg);
        goto out;
    }
    if (close(sx.fd) != 0 || rename(tmp, local) != 0) {
        sx.fd = -1;
        odp_fail(e, ODP_EIO, "%s: %s", local, strerror(errno));
        goto out;
    }
    sx.fd = -1;
    if (st.mode & 0111)
        chmod(local, st.mode & 0777);
    rc = 0;
out:
    if (sx.fd >= 0)
        close(sx.fd);
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    if (rc == 0 || !sx.fail)
        sync_end(c, &s, deadline);
    else
        stream_close(c, &s, deadline);
    return rc;
}
