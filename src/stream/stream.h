/* One byte-stream interface for serial ports, RTT channels, TCP sockets, ptys and pipes, so that XMODEM,
 * line readers and expect are written once. Every call takes an absolute deadline (util/wait.h). */
#ifndef ODP_STREAM_H
#define ODP_STREAM_H

#include <stddef.h>
#include <sys/types.h>

#include "../util/buf.h"
#include "../util/err.h"

typedef struct odp_stream odp_stream;

typedef struct {
    const char *kind; /* "fd", "serial", "rtt", "tcp", ... */
    /* Reads 1..n bytes, waiting until at least one is there or the deadline passes.
     * Returns the count, 0 at end of stream, or a negative odp_code. */
    ssize_t (*read)(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err);
    /* Writes all n bytes before the deadline; returns n or a negative odp_code. */
    ssize_t (*write)(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err);
    /* Releases the resource and frees the stream. */
    void (*close)(odp_stream *s);
    /* What the other end said on the side (a command's stderr, for an error message), or NULL: optional. */
    const odp_buf *(*diag)(odp_stream *s);
} odp_stream_ops;

/* Implementations embed this as their first member. */
struct odp_stream {
    const odp_stream_ops *ops;
    odp_buf pending; /* bytes handed back with odp_stream_unread, read before the source */
};

ssize_t odp_stream_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err);
ssize_t odp_stream_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err);
/* Reads exactly n bytes (or fails: a short stream is ODP_EIO). */
int odp_stream_read_full(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err);
/* Puts bytes back in front of the stream (line readers and expect read ahead). Returns -1 if out of memory. */
int odp_stream_unread(odp_stream *s, const void *buf, size_t n);
/* The stream's side channel (ops->diag), NULL when it has none. */
const odp_buf *odp_stream_diag(odp_stream *s);
/* Releases and frees s; s must not be used afterwards. */
void odp_stream_close(odp_stream *s);

/* A stream over a file descriptor (pipe, pty, socket, tty). The fd is made non-blocking.
 * own_fd: close it with the stream. Returns NULL when out of memory. */
odp_stream *odp_fd_stream_new(int fd, int own_fd);
/* Reads and writes on a non-blocking fd through odp_wait: shared by fd-backed streams. */
ssize_t odp_fd_read(int fd, void *buf, size_t n, double deadline, odp_err *err);
ssize_t odp_fd_write(int fd, const void *buf, size_t n, double deadline, odp_err *err);

#endif
