#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/wait.h"

ssize_t odp_stream_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    if (s->pending.len) {
        size_t k = n < s->pending.len ? n : s->pending.len;
        memcpy(buf, s->pending.data, k);
        memmove(s->pending.data, s->pending.data + k, s->pending.len - k);
        s->pending.len -= k;
        return (ssize_t)k;
    }
    return s->ops->read(s, buf, n, deadline, err);
}

ssize_t odp_stream_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err)
{
    return s->ops->write(s, buf, n, deadline, err);
}

int odp_stream_read_full(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = odp_stream_read(s, (char *)buf + got, n - got, deadline, err);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_EIO, "stream ended after %zu of %zu bytes", got, n);
        got += (size_t)r;
    }
    return 0;
}

int odp_stream_unread(odp_stream *s, const void *buf, size_t n)
{
    size_t old = s->pending.len;
    if (odp_buf_append(&s->pending, buf, n) < 0)
        return -1;
    memmove(s->pending.data + n, s->pending.data, old);
    memcpy(s->pending.data, buf, n);
    return 0;
}

const odp_buf *odp_stream_diag(odp_stream *s) { return s->ops->diag ? s->ops->diag(s) : NULL; }

void odp_stream_close(odp_stream *s)
{
    odp_buf_free(&s->pending);
    s->ops->close(s);
}

ssize_t odp_fd_read(int fd, void *buf, size_t n, double deadline, odp_err *err)
{
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r >= 0)
            return r;
        if (errno == EIO) /* a pty whose other side closed */
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return odp_fail_errno(err, ODP_EIO, errno, "read");
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = odp_wait(&p, 1, deadline, err);
        if (rc)
            return rc;
    }
}

ssize_t odp_fd_write(int fd, const void *buf, size_t n, double deadline, odp_err *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return odp_fail_errno(err, ODP_EIO, errno, "write");
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int rc = odp_wait(&p, 1, deadline, err);
        if (rc)
            return rc;
    }
    return (ssize_t)n;
}

typedef struct {
    odp_stream base;
    int fd, own_fd;
} fd_stream;

static ssize_t fd_stream_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    return odp_fd_read(((fd_stream *)s)->fd, buf, n, deadline, err);
}

static ssize_t fd_stream_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err)
{
    return odp_fd_write(((fd_stream *)s)->fd, buf, n, deadline, err);
}

static void fd_stream_close(odp_stream *s)
{
    fd_stream *f = (fd_stream *)s;
    if (f->own_fd)
        close(f->fd);
    free(f);
}

odp_stream *odp_fd_stream_new(int fd, int own_fd)
{
    static const odp_stream_ops ops[1] = {{"fd", fd_stream_read, fd_stream_write, fd_stream_close, NULL}};
    fd_stream *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    f->base.ops = ops;
    f->fd = fd;
    f->own_fd = own_fd;
    return &f->base;
}
