/* libFuzzer target: odp's OpenSSH ControlMaster client (src/ssh/mux.c) against a master whose answers are the
 * input: a thread listens on a unix socket of this process's, and each connection odp makes (the hello and alive
 * check of odp_ssh_mux_open, then a session's) gets its part of the input, the first byte saying where the first
 * part ends; the master side then reads whatever odp sends (closing the descriptors passed to it) until odp closes.
 * Checks: no crash, overread or hang; a session opened is a stream that ends; every size the master names is
 * bounded before use.
 * sources: src/ssh/mux.c src/stream/stream.c src/util/err.c src/util/wait.c src/util/fiber.c src/util/buf.c
 * seeds: tests/fuzz/corpus/ssh_mux
 * max_len: 2048 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ssh/mux.h"
#include "util/wait.h"

static char path[108];
static int listener = -1, done_pipe[2] = {-1, -1}; /* the client writes a byte to done_pipe when it is through */

static void remove_socket(void) { unlink(path); }

typedef struct {
    const uint8_t *part[2];
    size_t len[2];
} answers;

/* Reads what odp sends until it closes (or goes quiet), closing any descriptor it passes. */
static void drain(int fd)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            return;
        char b[4096];
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(3 * sizeof(int))];
        } ctl;
        struct iovec v = {b, sizeof b};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(fd, &m, 0);
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n > 0 && c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                for (int i = 0; i < k; i++) {
                    int got;
                    memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
                    close(got);
                }
            }
        }
        if (n <= 0)
            return;
    }
}

static void *master(void *arg)
{
    answers *a = arg;
    for (int i = 0; i < 2; i++) {
        struct pollfd p[2] = {{.fd = listener, .events = POLLIN}, {.fd = done_pipe[0], .events = POLLIN}};
        if (poll(p, 2, 5000) <= 0 || !(p[0].revents & POLLIN))
            return NULL; /* the client is through without this connection */
        int fd = accept(listener, NULL, NULL);
        if (fd < 0)
            return NULL;
        if (a->len[i])
            (void)!write(fd, a->part[i], a->len[i]);
        shutdown(fd, SHUT_WR);
        drain(fd);
        close(fd);
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (listener < 0) {
        signal(SIGPIPE, SIG_IGN);
        odp_wait_init();
        snprintf(path, sizeof path, "/tmp/odp-mux-fuzz-%d.sock", (int)getpid());
        unlink(path);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, path);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (pipe(done_pipe) != 0 || listener < 0 || bind(listener, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listener, 4) != 0)
            abort();
        atexit(remove_socket);
    }
    if (size < 1)
        return 0;
    size_t cut = 1 + (size_t)data[0] * 4;
    if (cut > size)
        cut = size;
    answers a = {{data + 1, data + cut}, {cut - 1, size - cut}};
    pthread_t t;
    if (pthread_create(&t, NULL, master, &a) != 0)
        abort();
    odp_err e;
    odp_ssh_mux *m = NULL;
    long pid = 0;
    if (odp_ssh_mux_open(path, odp_deadline(2), &m, &pid, &e) == 0) {
        odp_stream *s = NULL;
        if (odp_ssh_mux_channel_open(m, "true", odp_deadline(2), &s, &e) == 0) {
            char b[256];
            while (odp_stream_read(s, b, sizeof b, odp_deadline(2), &e) > 0) {
            }
            const odp_buf *d = odp_stream_diag(s);
            if (d && d->len > 4096)
                abort(); /* stderr is kept to its first 4 KiB */
            odp_stream_close(s);
        }
        odp_ssh_mux_close(m);
    }
    (void)!write(done_pipe[1], "", 1);
    pthread_join(t, NULL);
    char b;
    (void)!read(done_pipe[0], &b, 1);
    return 0;
}
