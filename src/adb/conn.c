/* adb host side over any transport; see conn.h. Protocol facts: docs/sources.md §3. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "auth.h"
#include "../util/fiber.h"
#include "../util/wait.h"

#define HOST_BANNER "host::features=shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir"

struct adb_conn {
    struct adb_transport t;
    uint32_t version, maxdata;
    int checksum;
    int broken;
    struct adb_banner banner;
    uint8_t *buf;   /* payload of the last message received (ADB_MAXDATA bytes) */
    uint32_t next_id;
    struct adb_traffic traffic;
    int sent_since_rx; /* messages went out since one last came in: the next one in ends a round trip */
    /* One connection, several calls (see "Many calls on one connection" below) */
    int receiving, sending; /* a call is reading a message / writing one */
    int waiters;            /* calls waiting on the bell */
    int bell;               /* eventfd rung when the receiver or the sender is done */
    struct stream *streams; /* the open streams: where received messages are kept */
};

struct stream {
    uint32_t local, remote;
    int closed;          /* CLSE received, or sent */
    int okays;           /* OKAYs received and not yet taken: the OPEN's, then one for each WRTE of odp's */
    uint32_t okay_from;  /* the device's id for the stream, from an OKAY */
    int wrtes;           /* the device's WRTEs kept, each owed an OKAY (adb's flow control: one at a time) */
    odp_buf data;        /* their payloads, in order */
    struct stream *next;
};

static int bell_wait(struct adb_conn *c, double deadline, odp_err *e);
static void ring(struct adb_conn *c);

/* ---------- messages ---------- */

static int send_msg(struct adb_conn *c, uint32_t cmd, uint32_t a0, uint32_t a1, const void *data, size_t len,
                    double deadline, odp_err *e)
{
    /* a message leaves whole: a call whose send parks mid-message keeps the others off the transport */
    while (c->sending && !c->broken)
        if (bell_wait(c, deadline, e) != 0)
            return -1;
    if (c->broken) {
        odp_fail(e, ODP_EIO, "the adb connection was lost: connect again");
        return -1;
    }
    uint8_t h[ADB_HDR_SIZE];
    adb_hdr_pack(h, cmd, a0, a1, data, (uint32_t)len, c->checksum || cmd == ADB_CNXN || cmd == ADB_AUTH);
    c->sending = 1;
    int rc = c->t.send(c->t.ctx, h, data, len, deadline, e);
    c->sending = 0;
    if (rc != 0)
        c->broken = 1;
    ring(c);
    if (rc != 0)
        return -1;
    c->traffic.bytes_up += ADB_HDR_SIZE + len;
    c->sent_since_rx = 1;
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
        /* a timeout or a Ctrl-C leaves the framing intact (the transport keeps a message's bytes that had
         * arrived): the stop that follows a Ctrl-C (the helper's kill request) goes over this connection */
        if (e->code != ODP_ETIMEDOUT && e->code != ODP_ECANCELED)
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
    c->traffic.bytes_down += ADB_HDR_SIZE + (unsigned long long)h->len;
    c->traffic.round_trips += (unsigned long long)c->sent_since_rx;
    c->sent_since_rx = 0;
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
    int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!c || !buf || bell < 0) {
        free(c);
        free(buf);
        if (bell >= 0)
            close(bell);
        t->close(t->ctx);
        odp_fail(e, ODP_EIO, "out of memory");
        return NULL;
    }
    c->t = *t;
    c->buf = buf;
    c->bell = bell;
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
            if (!nb) {
                odp_fail(e, ODP_EIO, "out of memory");
                goto fail;
            }
            c->buf = nb;
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
    close(c->bell);
    free(c->buf);
    free(c);
}

const struct adb_banner *adb_conn_banner(const struct adb_conn *c) { return &c->banner; }
uint32_t adb_conn_maxdata(const struct adb_conn *c) { return c->maxdata; }
uint32_t adb_conn_version(const struct adb_conn *c) { return c->version; }
int adb_conn_broken(const struct adb_conn *c) { return c->broken; }

/* ---------- Many calls on one connection ----------
 * Two scheduled tasks may use one connection at once (a pipelined sweep: one reads the helper's stream while the
 * next writes its run on it, docs/helper-protocol.md), each call parking in its own waits (util/fiber.h). A
 * message must never be read or written in part by two of them: one call at a time receives (c->receiving) and
 * one sends (c->sending). What the receiver reads for an open stream is kept in that stream (its OKAYs counted,
 * its WRTEs' bytes held, its CLSE noted) for whichever call uses it; the others wait on c->bell, an eventfd rung
 * whenever the receiver or the sender is done, and look again. */

static void ring(struct adb_conn *c)
{
    uint64_t one = 1;
    if (c->waiters && write(c->bell, &one, sizeof one) < 0 && errno != EAGAIN)
        c->broken = 1; /* nothing would wake the waiters: they see the connection lost instead of hanging */
}

/* Waits until the bell rings (every call parked on it then looks again, the first one clears it). */
static int bell_wait(struct adb_conn *c, double deadline, odp_err *e)
{
    /* outside a task nothing can finish the receiver's or the sender's message meanwhile */
    if (!odp_fiber_current())
        return odp_fail(e, ODP_EBUSY, "the adb connection is in use by another task");
    struct pollfd p = {.fd = c->bell, .events = POLLIN};
    c->waiters++;
    int rc = odp_wait(&p, 1, deadline, e);
    c->waiters--;
    uint64_t n;
    if (read(c->bell, &n, sizeof n) < 0 && errno != EAGAIN)
        c->broken = 1;
    return rc;
}

static struct stream *stream_of(struct adb_conn *c, uint32_t local)
{
    for (struct stream *s = c->streams; s; s = s->next)
        if (s->local == local)
            return s;
    return NULL;
}

static void stream_forget(struct adb_conn *c, struct stream *s)
{
    for (struct stream **pp = &c->streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    odp_buf_free(&s->data);
}

/* Keeps a received message (payload in c->buf) in its stream; late messages of closed streams are dropped. */
static int keep(struct adb_conn *c, const struct adb_hdr *h, odp_err *e)
{
    struct stream *s = stream_of(c, h->arg1);
    if (!s)
        return 0;
    if (h->cmd == ADB_OKAY) {
        s->okays++;
        s->okay_from = h->arg0;
    } else if (h->cmd == ADB_WRTE) {
        if (odp_buf_append(&s->data, c->buf, h->len) != 0) {
            c->broken = 1;
            return odp_fail(e, ODP_EIO, "out of memory");
        }
        s->wrtes++;
    } else if (h->cmd == ADB_CLSE) {
        s->closed = 1;
    } else {
        c->broken = 1;
        return odp_fail(e, ODP_EPROTO, "unexpected %s on a stream", adb_cmd_name(h->cmd));
    }
    return 0;
}

/* Waits for the next message on the connection (received here when no other call receives, else waited for on
 * the bell): 0 when the caller should look at its stream again, -1 with e set. */
static int stream_wait(struct adb_conn *c, double deadline, odp_err *e)
{
    if (c->broken)
        return odp_fail(e, ODP_EIO, "the adb connection was lost: connect again");
    if (c->receiving)
        return bell_wait(c, deadline, e) ? -1 : 0;
    struct adb_hdr h;
    c->receiving = 1;
    int rc = recv_msg(c, &h, deadline, e);
    c->receiving = 0;
    if (rc == 0)
        rc = keep(c, &h, e);
    ring(c);
    return rc;
}

/* Hands the WRTEs kept for s to on_data (NULL: dropped), then acknowledges each: the device sends its next one
 * only then. */
static int stream_take(struct adb_conn *c, struct stream *s, adb_data_fn on_data, void *ud, double deadline,
                       odp_err *e)
{
    int n = s->wrtes, rc = 0;
    s->wrtes = 0;
    if (on_data && s->data.len)
        rc = on_data(ud, (const uint8_t *)s->data.data, s->data.len, e);
    s->data.len = 0;
    for (int i = 0; i < n; i++) {
        odp_err ae;
        if (send_msg(c, ADB_OKAY, s->local, s->remote, NULL, 0, deadline, rc ? &ae : e) != 0)
            return -1;
    }
    return rc ? -1 : 0;
}

static int stream_open(struct adb_conn *c, struct stream *s, const char *svc, double deadline, odp_err *e)
{
    memset(s, 0, sizeof *s);
    s->local = ++c->next_id;
    s->next = c->streams;
    c->streams = s;
    if (send_msg(c, ADB_OPEN, s->local, 0, svc, strlen(svc) + 1, deadline, e) != 0)
        goto fail;
    for (;;) {
        if (s->okays) {
            s->okays--;
            s->remote = s->okay_from;
            return 0;
        }
        if (s->wrtes) {
            odp_fail(e, ODP_EPROTO, "WRTE before OKAY of OPEN");
            c->broken = 1;
            ring(c);
            goto fail;
        }
        if (s->closed) {
            odp_fail(e, ODP_ENOTFOUND, "the device refused the service '%.*s'", 64, svc);
            goto fail;
        }
        if (stream_wait(c, deadline, e) != 0)
            goto fail;
    }
fail:
    stream_forget(c, s);
    s->closed = 1;
    return -1;
}

static void stream_close(struct adb_conn *c, struct stream *s, double deadline)
{
    odp_err e;
    if (!s->closed && !c->broken)
        send_msg(c, ADB_CLSE, s->local, s->remote, NULL, 0, deadline, &e);
    s->closed = 1;
    stream_forget(c, s);
}

/* ---------- a stream as a service's byte stream (services.h) ---------- */

struct conn_svc {
    struct adb_conn *c;
    struct stream s;
};

/* One WRTE, then its OKAY (one WRTE in flight per stream); WRTEs meanwhile go to on_data. */
static int svc_write(void *ctx, const uint8_t *p, size_t n, adb_data_fn on_data, void *ud, double deadline,
                     odp_err *e)
{
    struct conn_svc *x = ctx;
    struct adb_conn *c = x->c;
    struct stream *s = &x->s;
    if (s->closed)
        return odp_fail(e, ODP_EIO, "the device closed the stream");
    if (send_msg(c, ADB_WRTE, s->local, s->remote, p, n, deadline, e) != 0)
        return -1;
    for (;;) {
        if (s->okays) {
            s->okays--;
            return 0;
        }
        if (s->wrtes) {
            if (stream_take(c, s, on_data, ud, deadline, e) != 0)
                return -1;
            continue;
        }
        if (s->closed)
            return odp_fail(e, ODP_EIO, "the device closed the stream");
        if (stream_wait(c, deadline, e) != 0)
            return -1;
    }
}

/* What the device sent on the stream to on_data: 0 (also when nothing came for it: another call on the stream,
 * its writer, may have taken it, so the caller looks again), 1 when the device ended the stream. */
static int svc_read(void *ctx, adb_data_fn on_data, void *ud, double deadline, odp_err *e)
{
    struct conn_svc *x = ctx;
    if (x->s.wrtes)
        return stream_take(x->c, &x->s, on_data, ud, deadline, e);
    if (x->s.closed)
        return 1;
    return stream_wait(x->c, deadline, e);
}

static void svc_close(void *ctx)
{
    struct conn_svc *x = ctx;
    stream_close(x->c, &x->s, odp_now() + 2.0);
    free(x);
}

static int link_open(void *ctx, const char *service, struct adb_svc *s, double deadline, odp_err *e)
{
    struct adb_conn *c = ctx;
    struct conn_svc *x = calloc(1, sizeof *x);
    if (!x)
        return odp_fail(e, ODP_EIO, "out of memory");
    x->c = c;
    if (stream_open(c, &x->s, service, deadline, e) != 0) {
        free(x);
        return -1;
    }
    s->ctx = x;
    s->chunk = c->maxdata;
    s->write = svc_write;
    s->read = svc_read;
    s->close = svc_close;
    return 0;
}

static int link_broken(void *ctx) { return adb_conn_broken(ctx); }
static void link_close(void *ctx) { adb_conn_close(ctx); }
static void link_traffic(void *ctx, struct adb_traffic *out) { *out = ((struct adb_conn *)ctx)->traffic; }

void adb_conn_link(struct adb_conn *c, struct adb_link *l)
{
    memset(l, 0, sizeof *l);
    l->ctx = c;
    l->open = link_open;
    l->broken = link_broken;
    l->close = link_close;
    l->traffic = link_traffic;
    l->banner = c->banner;
}
