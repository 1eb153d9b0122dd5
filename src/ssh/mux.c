/* OpenSSH ControlMaster sessions; see mux.h. The messages are OpenSSH's (mux.c there): each is a uint32 length
 * and that many bytes, integers big-endian uint32, strings a uint32 length and the bytes; the master is a peer
 * odp does not trust to be well-formed, so every length is bounded before it is used. */
#include "mux.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../util/wait.h"

#define MUX_MSG_HELLO 0x00000001u
#define MUX_C_NEW_SESSION 0x10000002u
#define MUX_C_ALIVE_CHECK 0x10000004u
#define MUX_S_OK 0x80000001u
#define MUX_S_PERMISSION_DENIED 0x80000002u
#define MUX_S_FAILURE 0x80000003u
#define MUX_S_ALIVE 0x80000005u
#define MUX_S_SESSION_OPENED 0x80000006u
#define MUX_VERSION 4u
#define MUX_PACKET_MAX (64u * 1024u) /* the master's answers are a few dozen bytes; its hello may carry extensions */
#define MUX_STDERR_MAX 4096

struct odp_ssh_mux {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int refs; /* the owner's, and one per open stream */
    uint32_t next_rid;
    odp_ssh_traffic traffic;
};

typedef struct {
    odp_stream base;
    odp_ssh_mux *m;
    int io, err_fd, ctl; /* the session's stdin+stdout, its stderr, its control connection */
    int sent_since_rx;
    odp_buf err;
} mux_stream;

static void mux_unref(odp_ssh_mux *m)
{
    if (m && --m->refs == 0)
        free(m);
}

const char *odp_ssh_mux_path(const odp_ssh_mux *m) { return m->path; }

/* ---------- packets ---------- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} pkt;

static int put_u32(pkt *b, uint32_t v)
{
    if (b->len + 4 > b->cap)
        return -1;
    b->p[b->len++] = (uint8_t)(v >> 24);
    b->p[b->len++] = (uint8_t)(v >> 16);
    b->p[b->len++] = (uint8_t)(v >> 8);
    b->p[b->len++] = (uint8_t)v;
    return 0;
}

static int put_str(pkt *b, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT32_MAX || put_u32(b, (uint32_t)n) != 0 || b->len + n > b->cap)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static uint32_t get_u32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* Sends body (a packet without its length) on fd. */
static int send_packet(int fd, const pkt *body, double deadline, odp_err *err)
{
    uint8_t len[4] = {(uint8_t)(body->len >> 24), (uint8_t)(body->len >> 16), (uint8_t)(body->len >> 8),
                      (uint8_t)body->len};
    if (odp_fd_write(fd, len, 4, deadline, err) < 0 || odp_fd_write(fd, body->p, body->len, deadline, err) < 0)
        return err->code;
    return 0;
}

static int read_exact(int fd, uint8_t *p, size_t n, double deadline, odp_err *err)
{
    while (n) {
        ssize_t r = odp_fd_read(fd, p, n, deadline, err);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_ENODEV, "the ControlMaster closed its control connection");
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Reads one packet into *out (malloc'd, its length in *len, at least 4: its type first). */
static int read_packet(int fd, uint8_t **out, size_t *len, double deadline, odp_err *err)
{
    uint8_t l[4];
    int rc = read_exact(fd, l, 4, deadline, err);
    if (rc)
        return rc;
    uint32_t n = get_u32(l);
    if (n < 4 || n > MUX_PACKET_MAX)
        return odp_fail(err, ODP_EPROTO, "the ControlMaster sent a packet of %u bytes", n);
    uint8_t *p = malloc(n);
    if (!p)
        return odp_fail(err, ODP_EIO, "out of memory");
    if ((rc = read_exact(fd, p, n, deadline, err)) != 0) {
        free(p);
        return rc;
    }
    *out = p;
    *len = n;
    return 0;
}

/* The reason string of a MUX_S_FAILURE / PERMISSION_DENIED (type, rid, reason), printable and bounded. */
static void failure_reason(const uint8_t *p, size_t len, char *out, size_t cap)
{
    snprintf(out, cap, "no reason given");
    if (len < 12)
        return;
    uint32_t n = get_u32(p + 8);
    if (n > len - 12)
        n = (uint32_t)(len - 12);
    if (n > cap - 1)
        n = (uint32_t)(cap - 1);
    for (uint32_t i = 0; i < n; i++)
        out[i] = p[12 + i] >= 0x20 && p[12 + i] < 0x7f ? (char)p[12 + i] : '?';
    out[n] = 0;
}

/* ---------- the control connection ---------- */

/* Connects to the master at path and exchanges hellos. -> the control fd, or a negative code. */
static int ctl_connect(const char *path, double deadline, odp_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return odp_fail_errno(err, ODP_ENODEV, errno, "ControlPath %s", path);
    if (!S_ISSOCK(st.st_mode))
        return odp_fail(err, ODP_ENODEV, "ControlPath %s is not a socket", path);
    if (st.st_uid != geteuid())
        return odp_fail(err, ODP_ENODEV, "ControlPath %s is another user's socket (uid %u): not used", path,
                        (unsigned)st.st_uid);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return odp_fail(err, ODP_ENODEV, "ControlPath %s is longer than a socket's path can be", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return odp_fail_errno(err, ODP_EIO, errno, "socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        return odp_fail_errno(err, ODP_ENODEV, e, "no ControlMaster at %s", path);
    }
    uint8_t b[8];
    pkt hello = {b, 0, sizeof b};
    put_u32(&hello, MUX_MSG_HELLO);
    put_u32(&hello, MUX_VERSION);
    uint8_t *p = NULL;
    size_t len = 0;
    int rc = send_packet(fd, &hello, deadline, err);
    if (!rc)
        rc = read_packet(fd, &p, &len, deadline, err);
    if (!rc && (len < 8 || get_u32(p) != MUX_MSG_HELLO || get_u32(p + 4) != MUX_VERSION))
        rc = odp_fail(err, ODP_ENODEV, "%s is no OpenSSH ControlMaster of mux protocol %u", path, MUX_VERSION);
    free(p);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

/* Reads packets on fd until the answer to request rid: want (its packet in *out), or the master's refusal. */
static int await_answer(odp_ssh_mux *m, int fd, uint32_t rid, uint32_t want, uint8_t **out, size_t *len,
                        double deadline, odp_err *err)
{
    for (;;) {
        int rc = read_packet(fd, out, len, deadline, err);
        if (rc)
            return rc;
        uint32_t type = get_u32(*out);
        uint32_t r = *len >= 8 ? get_u32(*out + 4) : ~rid;
        if (r == rid && type == want && *len >= 12)
            return 0;
        if (r == rid && (type == MUX_S_FAILURE || type == MUX_S_PERMISSION_DENIED)) {
            char why[256];
            failure_reason(*out, *len, why, sizeof why);
            free(*out);
            return odp_fail(err, ODP_ENODEV, "the ControlMaster at %s refused: %s", m->path, why);
        }
        free(*out); /* MUX_S_OK and anything else that is no answer to this request */
        if (type != MUX_S_OK && r == rid)
            return odp_fail(err, ODP_EPROTO, "the ControlMaster answered 0x%08x", type);
    }
}

int odp_ssh_mux_alive(odp_ssh_mux *m, double deadline, long *pid, odp_err *err)
{
    int fd = ctl_connect(m->path, deadline, err);
    if (fd < 0)
        return fd;
    uint8_t b[8], *p = NULL;
    size_t len = 0;
    pkt q = {b, 0, sizeof b};
    uint32_t rid = m->next_rid++;
    put_u32(&q, MUX_C_ALIVE_CHECK);
    put_u32(&q, rid);
    int rc = send_packet(fd, &q, deadline, err);
    if (!rc)
        rc = await_answer(m, fd, rid, MUX_S_ALIVE, &p, &len, deadline, err);
    close(fd);
    if (rc)
        return rc;
    if (pid)
        *pid = (long)get_u32(p + 8);
    free(p);
    return 0;
}

int odp_ssh_mux_clear_stale(const char *path)
{
    struct stat st;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid() || strlen(path) >= sizeof sa.sun_path)
        return 0;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int refused = connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno == ECONNREFUSED;
    close(fd);
    return refused && unlink(path) == 0;
}

int odp_ssh_mux_open(const char *path, double deadline, odp_ssh_mux **out, long *pid, odp_err *err)
{
    double t0 = odp_now();
    odp_ssh_mux *m = calloc(1, sizeof *m);
    if (!m)
        return odp_fail(err, ODP_EIO, "out of memory");
    if (strlen(path) >= sizeof m->path) {
        free(m);
        return odp_fail(err, ODP_ENODEV, "ControlPath %s is longer than a socket's path can be", path);
    }
    strcpy(m->path, path);
    m->refs = 1;
    m->next_rid = 1;
    int rc = odp_ssh_mux_alive(m, deadline, pid, err);
    if (rc) {
        free(m);
        return rc;
    }
    m->traffic.connect_ms = (odp_now() - t0) * 1000.0;
    *out = m;
    return 0;
}

void odp_ssh_mux_traffic_get(const odp_ssh_mux *m, odp_ssh_traffic *out) { *out = m->traffic; }

void odp_ssh_mux_close(odp_ssh_mux *m) { mux_unref(m); }

/* ---------- a session's stream ---------- */

/* Reads what the session's stderr has now (never waits): the first MUX_STDERR_MAX bytes kept, the rest read and
 * dropped, so that stderr never stalls the channel (its window is stdout's too). */
static void drain_stderr(mux_stream *s)
{
    char b[4096];
    while (s->err_fd >= 0) {
        ssize_t r = read(s->err_fd, b, sizeof b);
        if (r > 0) {
            odp_buf_append(&s->err, b, (size_t)r);
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
            close(s->err_fd);
            s->err_fd = -1;
        }
        if (r < 0 && errno == EINTR)
            continue;
        return;
    }
}

/* Waits until io is ready for events (or stderr has bytes, which are read), or the deadline. */
static int stream_wait(mux_stream *s, short events, double deadline, odp_err *err)
{
    struct pollfd p[2] = {{.fd = s->io, .events = events}, {.fd = s->err_fd, .events = POLLIN}};
    int rc = odp_wait(p, s->err_fd >= 0 ? 2 : 1, deadline, err);
    drain_stderr(s);
    return rc;
}

static ssize_t mux_read(odp_stream *base, void *buf, size_t n, double deadline, odp_err *err)
{
    mux_stream *s = (mux_stream *)base;
    for (;;) {
        drain_stderr(s);
        ssize_t r = read(s->io, buf, n);
        if (r > 0) {
            s->m->traffic.bytes_down += (unsigned long long)r;
            if (s->sent_since_rx)
                s->m->traffic.round_trips++;
            s->sent_since_rx = 0;
            return r;
        }
        if (r == 0)
            return 0;
        if (errno == ECONNRESET)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return odp_fail_errno(err, ODP_EIO, errno, "reading the ControlMaster's session");
        int rc = stream_wait(s, POLLIN, deadline, err);
        if (rc)
            return rc;
    }
}

static ssize_t mux_write(odp_stream *base, const void *buf, size_t n, double deadline, odp_err *err)
{
    mux_stream *s = (mux_stream *)base;
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(s->io, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EPIPE)
            return odp_fail(err, ODP_EIO, "the session through the ControlMaster at %s ended", s->m->path);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return odp_fail_errno(err, ODP_EIO, errno, "writing to the ControlMaster's session");
        int rc = stream_wait(s, POLLOUT, deadline, err);
        if (rc)
            return rc;
    }
    s->m->traffic.bytes_up += n;
    s->sent_since_rx = 1;
    return (ssize_t)n;
}

static void mux_stream_close(odp_stream *base)
{
    mux_stream *s = (mux_stream *)base;
    /* the master reads what was written up to this EOF and passes it on before the channel's EOF */
    shutdown(s->io, SHUT_WR);
    close(s->io);
    if (s->err_fd >= 0)
        close(s->err_fd);
    close(s->ctl);
    odp_buf_free(&s->err);
    mux_unref(s->m);
    free(s);
}

static const odp_buf *mux_diag(odp_stream *base) { return &((mux_stream *)base)->err; }

/* Passes fd to the master (OpenSSH's mm_send_fd: one byte with SCM_RIGHTS). */
static int send_fd(int sock, int fd, double deadline, odp_err *err)
{
    char byte = 0;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec v = {&byte, 1};
    struct msghdr msg = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_len = CMSG_LEN(sizeof(int));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    for (;;) {
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (n == 1)
            return 0;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return odp_fail_errno(err, ODP_EIO, errno, "passing a descriptor to the ControlMaster");
        struct pollfd p = {.fd = sock, .events = POLLOUT};
        int rc = odp_wait(&p, 1, deadline, err);
        if (rc)
            return rc;
    }
}

int odp_ssh_mux_channel_open(odp_ssh_mux *m, const char *command, double deadline, odp_stream **out, odp_err *err)
{
    size_t cap = 64 + strlen(command);
    uint8_t *b = malloc(cap), *ans = NULL;
    size_t len = 0;
    int io[2] = {-1, -1}, er[2] = {-1, -1};
    int ctl = ctl_connect(m->path, deadline, err);
    if (ctl < 0) {
        free(b);
        return ctl;
    }
    int rc = 0;
    if (!b || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, io) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, er) != 0) {
        rc = odp_fail_errno(err, ODP_EIO, errno, "socketpair");
        goto fail;
    }
    uint32_t rid = m->next_rid++;
    pkt q = {b, 0, cap};
    /* no tty, X11 or agent forwarding, not a subsystem, no escape character, no terminal type */
    put_u32(&q, MUX_C_NEW_SESSION);
    put_u32(&q, rid);
    put_str(&q, "");
    for (int i = 0; i < 4; i++)
        put_u32(&q, 0);
    put_u32(&q, 0xffffffffu);
    put_str(&q, "");
    put_str(&q, command);
    /* its stdin and stdout one socket, its stderr another */
    if ((rc = send_packet(ctl, &q, deadline, err)) != 0 || (rc = send_fd(ctl, io[1], deadline, err)) != 0 ||
        (rc = send_fd(ctl, io[1], deadline, err)) != 0 || (rc = send_fd(ctl, er[1], deadline, err)) != 0)
        goto fail;
    close(io[1]);
    close(er[1]);
    io[1] = er[1] = -1;
    if ((rc = await_answer(m, ctl, rid, MUX_S_SESSION_OPENED, &ans, &len, deadline, err)) != 0)
        goto fail;
    free(ans);
    mux_stream *s = calloc(1, sizeof *s);
    if (!s) {
        rc = odp_fail(err, ODP_EIO, "out of memory");
        goto fail;
    }
    static const odp_stream_ops ops[1] = {{"ssh-mux", mux_read, mux_write, mux_stream_close, mux_diag}};
    s->base.ops = ops;
    s->m = m;
    m->refs++;
    s->io = io[0];
    s->err_fd = er[0];
    s->ctl = ctl;
    s->err.limit = MUX_STDERR_MAX;
    fcntl(s->io, F_SETFL, fcntl(s->io, F_GETFL) | O_NONBLOCK);
    fcntl(s->err_fd, F_SETFL, fcntl(s->err_fd, F_GETFL) | O_NONBLOCK);
    /* the channel's open was one round trip; the master sent the exec behind it, whose answer ends the next */
    m->traffic.round_trips++;
    s->sent_since_rx = 1;
    free(b);
    *out = &s->base;
    return 0;
fail:
    free(b);
    for (int i = 0; i < 2; i++) {
        if (io[i] >= 0)
            close(io[i]);
        if (er[i] >= 0)
            close(er[i]);
    }
    close(ctl);
    return rc;
}
