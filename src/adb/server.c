/* adb server host protocol client; see server.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "server.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../net/tcp.h"
#include "../stream/stream.h"
#include "../util/wait.h"

#define SOCK_CHUNK (256u * 1024u)
#define MAX_DEVICES 64
#define AUTH_POLL_S 0.25

int adb_server_addr_parse(const char *spec, const char *default_host, struct adb_server_addr *a, odp_err *e)
{
    memset(a, 0, sizeof *a);
    const char *p = strncmp(spec, "tcp:", 4) == 0 ? spec + 4 : NULL;
    const char *colon = p ? strrchr(p, ':') : NULL;
    const char *port = colon ? colon + 1 : p;
    char *end = NULL;
    long v = port && *port ? strtol(port, &end, 10) : 0;
    if (!p || !end || *end || v < 1 || v > 65535 || (colon && (colon == p || (size_t)(colon - p) >= sizeof a->host)))
        return odp_fail(e, ODP_EPROTO, "adb server address '%.100s': odp understands tcp:PORT and tcp:HOST:PORT",
                        spec);
    if (colon) {
        memcpy(a->host, p, (size_t)(colon - p));
        a->host[colon - p] = 0;
    } else {
        snprintf(a->host, sizeof a->host, "%s", default_host);
    }
    a->port = (int)v;
    return 0;
}

/* ---------- requests ---------- */

static int read_exact(int fd, const struct adb_server_addr *a, uint8_t *buf, size_t n, double deadline, odp_err *e)
{
    while (n) {
        ssize_t r = odp_fd_read(fd, buf, n, deadline, e);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(e, ODP_EIO, "the adb server at %s:%d closed the connection", a->host, a->port);
        buf += r;
        n -= (size_t)r;
    }
    return 0;
}

/* "%04x" + text into out (cap >= 0x10000 + 1 holds any), NUL-terminated; returns its length. */
static int read_string(int fd, const struct adb_server_addr *a, char *out, size_t cap, double deadline, odp_err *e)
{
    uint8_t hex[4];
    if (read_exact(fd, a, hex, 4, deadline, e) != 0)
        return -1;
    int n = adb_hex4(hex);
    if (n < 0)
        return odp_fail(e, ODP_EPROTO, "the adb server at %s:%d sent a bad length '%.4s'", a->host, a->port,
                        (const char *)hex);
    if ((size_t)n >= cap)
        return odp_fail(e, ODP_EPROTO, "the adb server at %s:%d sent %d bytes where odp expects at most %zu",
                        a->host, a->port, n, cap - 1);
    if (read_exact(fd, a, (uint8_t *)out, (size_t)n, deadline, e) != 0)
        return -1;
    out[n] = 0;
    return n;
}

/* What a FAIL message means for the user. */
static odp_code fail_code(const char *msg)
{
    if (strstr(msg, "unauthorized") || strstr(msg, "no permissions"))
        return ODP_EAUTH;
    if (strstr(msg, "not found") || strstr(msg, "offline") || strstr(msg, "no devices"))
        return ODP_ENODEV;
    return ODP_EIO;
}

/* Sends one request and reads OKAY, or FAIL and its message. */
static int request(int fd, const struct adb_server_addr *a, const char *text, double deadline, odp_err *e)
{
    size_t n = strlen(text);
    if (n > 0xffff)
        return odp_fail(e, ODP_EIO, "adb server request of %zu bytes (the protocol allows 65535)", n);
    char *msg = malloc(n + 5);
    if (!msg)
        return odp_fail(e, ODP_EIO, "out of memory");
    snprintf(msg, n + 5, "%04zx", n);
    memcpy(msg + 4, text, n);
    ssize_t w = odp_fd_write(fd, msg, n + 4, deadline, e);
    free(msg);
    if (w < 0)
        return (int)w;
    uint8_t st[4];
    int rc = read_exact(fd, a, st, 4, deadline, e);
    if (rc == ODP_ETIMEDOUT)
        return odp_fail(e, ODP_EPROTO, "%s:%d accepted the connection but gave no adb server reply in time: is "
                                       "something other than an adb server listening there?", a->host, a->port);
    if (rc == ODP_EIO && strstr(e->msg, "closed the connection"))
        return odp_fail(e, ODP_EPROTO, "%s:%d closed the connection without an adb server reply: is something other "
                                       "than an adb server listening there?", a->host, a->port);
    if (rc != 0)
        return rc; /* Ctrl-C, a reset connection */
    if (!memcmp(st, "OKAY", 4))
        return 0;
    if (!memcmp(st, "FAIL", 4)) {
        char why[0x10001];
        if (read_string(fd, a, why, sizeof why, deadline, e) < 0)
            return -1;
        return odp_fail(e, fail_code(why), "the adb server: %.300s", why);
    }
    char shown[5];
    for (int i = 0; i < 4; i++)
        shown[i] = isprint(st[i]) ? (char)st[i] : '?';
    shown[4] = 0;
    return odp_fail(e, ODP_EPROTO, "%s:%d is not an adb server (it answered '%s' where OKAY or FAIL belongs)",
                    a->host, a->port, shown);
}

static int server_connect(const struct adb_server_addr *a, double deadline, odp_err *e)
{
    int fd = odp_tcp_connect_to(a->host, a->port, deadline, e);
    if (fd < 0 && e->code == ODP_ENODEV)
        return odp_fail(e, ODP_ENODEV, "no adb server at %s:%d (nothing listens there)", a->host, a->port);
    return fd < 0 ? e->code : fd;
}

/* One query: connect, request, read the reply's text (out: cap bytes). */
static int query(const struct adb_server_addr *a, const char *text, char *out, size_t cap, double deadline,
                 odp_err *e)
{
    int fd = server_connect(a, deadline, e);
    if (fd < 0)
        return fd;
    int rc = request(fd, a, text, deadline, e);
    if (rc == 0)
        rc = read_string(fd, a, out, cap, deadline, e);
    close(fd);
    return rc;
}

int adb_server_version(const struct adb_server_addr *a, double deadline, odp_err *e)
{
    char v[0x10001];
    int n = query(a, "host:version", v, sizeof v, deadline, e);
    if (n < 0)
        return n;
    int version = n == 4 ? adb_hex4((const uint8_t *)v) : -1;
    if (version < 0)
        return odp_fail(e, ODP_EPROTO, "the adb server at %s:%d answered host:version with '%.20s', not a version",
                        a->host, a->port, v);
    if (version < ADB_HOST_MIN_VERSION)
        return odp_fail(e, ODP_EPROTO,
                        "the adb server at %s:%d speaks host protocol version %d; odp needs %d or newer: update "
                        "Android platform-tools (or stop that server and let odp talk to the device directly)",
                        a->host, a->port, version, ADB_HOST_MIN_VERSION);
    return version;
}

int adb_server_devices(const struct adb_server_addr *a, struct adb_host_device *out, int max, double deadline,
                       odp_err *e)
{
    char *text = malloc(0x10001);
    if (!text)
        return odp_fail(e, ODP_EIO, "out of memory");
    int n = query(a, "host:devices-l", text, 0x10001, deadline, e);
    if (n >= 0)
        n = adb_host_devices_parse(text, (size_t)n, out, max);
    free(text);
    return n;
}

/* ---------- a service on its own socket ---------- */

struct sock_svc {
    int fd;
    const struct adb_server_addr *a;
    uint8_t buf[SOCK_CHUNK];
};

/* Google's adb server leaves Nagle on for its clients' sockets (adb_listeners.cpp accepts them without
 * disable_tcp_nagle): after a small write it holds the next small one until odp ACKs, and odp's kernel
 * delays that ACK up to 40 ms when odp has nothing to send. A resident helper's answer (a few small frames
 * in a row on one open stream) waited 40 ms per command so. Quick ACKs let each frame through at once; the
 * kernel clears the mode on its own, so it is set again after every read. */
static void quick_ack(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

static int sock_gone(struct sock_svc *x, int err, odp_err *e)
{
    return odp_fail_errno(e, ODP_EIO, err, "the adb server at %s:%d dropped the connection", x->a->host,
                          x->a->port);
}

/* Writes all n bytes; reads what arrives meanwhile (so neither side can block the other). */
static int sock_write(void *ctx, const uint8_t *p, size_t n, adb_data_fn on_data, void *ud, double deadline,
                      odp_err *e)
{
    struct sock_svc *x = ctx;
    while (n) {
        struct pollfd pf = {.fd = x->fd, .events = POLLOUT | (on_data ? POLLIN : 0)};
        int rc = odp_wait(&pf, 1, deadline, e);
        if (rc)
            return rc;
        if (on_data && (pf.revents & POLLIN)) {
            ssize_t r = read(x->fd, x->buf, sizeof x->buf);
            if (r == 0)
                return odp_fail(e, ODP_EIO, "the adb server at %s:%d closed the stream", x->a->host, x->a->port);
            if (r < 0 && errno != EAGAIN && errno != EINTR)
                return sock_gone(x, errno, e);
            if (r > 0)
                quick_ack(x->fd);
            if (r > 0 && on_data(ud, x->buf, (size_t)r, e) != 0)
                return -1;
        }
        if (pf.revents & (POLLOUT | POLLERR | POLLHUP)) {
            ssize_t w = send(x->fd, p, n, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                return sock_gone(x, errno, e);
            if (w > 0) {
                p += w;
                n -= (size_t)w;
            }
        }
    }
    return 0;
}

/* What arrived to on_data: 0 (also when nothing did once the socket was waited on: another call on the stream,
 * its writer, may have read it, so the caller looks again), 1 when the server ended the stream. */
static int sock_read(void *ctx, adb_data_fn on_data, void *ud, double deadline, odp_err *e)
{
    struct sock_svc *x = ctx;
    ssize_t r = read(x->fd, x->buf, sizeof x->buf);
    if (r < 0 && errno != EAGAIN && errno != EINTR)
        return sock_gone(x, errno, e);
    if (r < 0) {
        struct pollfd pf = {.fd = x->fd, .events = POLLIN};
        return odp_wait(&pf, 1, deadline, e);
    }
    if (r == 0)
        return 1;
    quick_ack(x->fd);
    return on_data(ud, x->buf, (size_t)r, e) != 0 ? -1 : 0;
}

static void sock_close(void *ctx)
{
    struct sock_svc *x = ctx;
    close(x->fd);
    free(x);
}

/* ---------- the link ---------- */

struct server_link {
    struct adb_server_addr a;
    char serial[128];
};

static int link_open(void *ctx, const char *service, struct adb_svc *s, double deadline, odp_err *e)
{
    struct server_link *sl = ctx;
    int fd = odp_tcp_connect_to(sl->a.host, sl->a.port, deadline, e);
    if (fd < 0 && e->code == ODP_ENODEV)
        return odp_fail(e, ODP_ENODEV, "the adb server at %s:%d is gone (nothing listens there any more)",
                        sl->a.host, sl->a.port);
    if (fd < 0)
        return e->code;
    char transport[160];
    snprintf(transport, sizeof transport, "host:transport:%s", sl->serial);
    struct sock_svc *x = malloc(sizeof *x);
    int rc = x ? 0 : odp_fail(e, ODP_EIO, "out of memory");
    if (rc == 0)
        rc = request(fd, &sl->a, transport, deadline, e);
    if (rc == 0 && (rc = request(fd, &sl->a, service, deadline, e)) != 0 && !strcmp(e->msg, "the adb server: closed"))
        rc = odp_fail(e, ODP_ENOTFOUND, "the device refused the service '%.64s' (the adb server: closed)", service);
    if (rc != 0) {
        free(x);
        close(fd);
        return rc;
    }
    quick_ack(fd);
    x->fd = fd;
    x->a = &sl->a;
    s->ctx = x;
    s->chunk = SOCK_CHUNK;
    s->write = sock_write;
    s->read = sock_read;
    s->close = sock_close;
    return 0;
}

static int link_broken(void *ctx)
{
    (void)ctx;
    return 0; /* each service has its own socket: nothing outlives a failure */
}

static void link_close(void *ctx) { free(ctx); }

/* The device to use: serial, or the only one. Returns its index or a negative code. */
static int choose(const struct adb_server_addr *a, const struct adb_host_device *d, int n, const char *serial,
                  odp_err *e)
{
    char seen[512] = "";
    for (int i = 0; i < n; i++) {
        if (serial && !strcmp(serial, d[i].serial))
            return i;
        size_t l = strlen(seen);
        snprintf(seen + l, sizeof seen - l, "%s%s (%s)", l ? ", " : "", d[i].serial, d[i].state);
    }
    if (serial)
        return odp_fail(e, ODP_ENODEV, "the adb server at %s:%d has no device %s%s%s", a->host, a->port, serial,
                        n ? "; it has " : "", seen);
    if (n == 0)
        return odp_fail(e, ODP_ENODEV,
                        "the adb server at %s:%d lists no devices: plug the phone in with USB debugging on, or "
                        "`adb connect HOST:PORT` (see docs/devices.md, Android)", a->host, a->port);
    if (n > 1)
        return odp_fail(e, ODP_ENODEV, "several devices at the adb server: %s; choose one with --serial", seen);
    return 0;
}

int adb_server_link(const struct adb_server_addr *a, const struct adb_server_opts *o, double deadline,
                    struct adb_link *l, char *serial_out, size_t cap, odp_err *e)
{
    struct adb_host_device *devs = malloc(MAX_DEVICES * sizeof *devs);
    if (!devs)
        return odp_fail(e, ODP_EIO, "out of memory");
    int rc, prompted = 0;
    const struct adb_host_device *d;
    for (;;) {
        int n = adb_server_devices(a, devs, MAX_DEVICES, deadline, e);
        int i = n < 0 ? n : choose(a, devs, n, o->serial, e);
        if (i < 0) {
            rc = i;
            goto out;
        }
        d = &devs[i];
        /* the phone shows "Allow USB debugging?" while the server lists it unauthorized */
        if (strcmp(d->state, "unauthorized") != 0 && strcmp(d->state, "authorizing") != 0)
            break;
        if (odp_now() >= o->auth_deadline) {
            rc = odp_fail(e, ODP_EAUTH, "device %s is unauthorized: unlock the phone, accept the USB debugging "
                                        "prompt (Allow), and run again", d->serial);
            goto out;
        }
        if (!prompted && o->on_event)
            o->on_event(o->ud, ADB_EV_AUTH_PROMPT, 0, 0);
        prompted = 1;
        double until = odp_now() + AUTH_POLL_S;
        if ((rc = odp_sleep_until(until < o->auth_deadline ? until : o->auth_deadline, e)) != 0)
            goto out;
    }
    if (strcmp(d->state, "device") != 0) {
        if (!strncmp(d->state, "no permissions", 14))
            rc = odp_fail(e, ODP_EAUTH, "device %s: %s", d->serial, d->state);
        else if (!strcmp(d->state, "offline"))
            rc = odp_fail(e, ODP_ENODEV, "device %s is offline at the adb server (no answer from its adbd: "
                                         "reconnect the cable, or `adb reconnect`)", d->serial);
        else
            rc = odp_fail(e, ODP_ENODEV, "device %s is in state '%s', not 'device'", d->serial, d->state);
        goto out;
    }
    struct server_link *sl = calloc(1, sizeof *sl);
    if (!sl) {
        rc = odp_fail(e, ODP_EIO, "out of memory");
        goto out;
    }
    sl->a = *a;
    snprintf(sl->serial, sizeof sl->serial, "%s", d->serial);
    memset(l, 0, sizeof *l);
    l->ctx = sl;
    l->open = link_open;
    l->broken = link_broken;
    l->close = link_close;
    snprintf(l->banner.state, sizeof l->banner.state, "device");
    snprintf(l->banner.model, sizeof l->banner.model, "%s", d->model);
    snprintf(l->banner.product, sizeof l->banner.product, "%s", d->product);
    snprintf(l->banner.device, sizeof l->banner.device, "%s", d->device);
    char features[0x10001], req[200];
    snprintf(req, sizeof req, "host-serial:%s:features", d->serial);
    /* a server too old to tell: the plain shell and STAT work everywhere */
    if (query(a, req, features, sizeof features, deadline, e) >= 0)
        snprintf(l->banner.features, sizeof l->banner.features, "%.1023s", features);
    snprintf(serial_out, cap, "%s", d->serial);
    rc = 0;
out:
    free(devs);
    return rc;
}
