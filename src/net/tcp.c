/* One TCP connect with a deadline; see tcp.h. */
#include "tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/wait.h"

/* A name lookup shared by the waiting caller and the helper thread; the last of the two to let go frees it. */
typedef struct {
    char host[256];
    char service[16];
    struct addrinfo *res;
    int rc, sys_errno;
    atomic_int done;
    atomic_int refs;
    int wfd;
} lookup;

static void lookup_unref(lookup *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1) {
        if (l->res)
            freeaddrinfo(l->res);
        free(l);
    }
}

static void *lookup_run(void *arg)
{
    lookup *l = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    l->rc = getaddrinfo(l->host, l->service, &hints, &l->res);
    l->sys_errno = errno;
    atomic_store_explicit(&l->done, 1, memory_order_release);
    ssize_t w = write(l->wfd, "x", 1);
    (void)w; /* the reader gives up at its deadline either way */
    close(l->wfd);
    lookup_unref(l);
    return NULL;
}

/* getaddrinfo for host:port within the deadline; *res is the caller's to freeaddrinfo. */
static int resolve(const char *host, int port, double deadline, struct addrinfo **res, odp_err *err)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    if (getaddrinfo(host, service, &hints, res) == 0)
        return 0; /* an address: nothing to look up */
    /* localhost is the loopback address (RFC 6761 6.3), looked up nowhere: getaddrinfo without a name gives
     * ::1 and 127.0.0.1. An adb server is reached as localhost several times per run, each lookup a thread
     * and ~3 ms. */
    size_t hl = strlen(host);
    if (!strcasecmp(host, "localhost") || (hl > 10 && !strcasecmp(host + hl - 10, ".localhost"))) {
        hints.ai_flags = AI_NUMERICSERV;
        if (getaddrinfo(NULL, service, &hints, res) == 0)
            return 0;
    }
    if (strlen(host) >= sizeof ((lookup *)0)->host)
        return odp_fail(err, ODP_ENOTFOUND, "cannot resolve %.64s...: name too long", host);
    lookup *l = calloc(1, sizeof *l);
    int p[2];
    if (!l || pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
        free(l);
        return odp_fail_errno(err, ODP_EIO, errno, "cannot resolve %s", host);
    }
    strcpy(l->host, host);
    memcpy(l->service, service, sizeof service);
    l->wfd = p[1];
    atomic_init(&l->refs, 2);
    atomic_init(&l->done, 0);
    /* The helper takes no signals: they stay with the threads that handle them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int tr = pthread_create(&t, &attr, lookup_run, l);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (tr) {
        close(p[0]);
        close(p[1]);
        free(l);
        return odp_fail_errno(err, ODP_EIO, tr, "cannot resolve %s", host);
    }
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int rc = 0;
    while (!atomic_load_explicit(&l->done, memory_order_acquire)) {
        if ((rc = odp_wait(&pf, 1, deadline, err)))
            break;
        char c;
        if (read(p[0], &c, 1) == 0 && !atomic_load_explicit(&l->done, memory_order_acquire))
            break; /* writer gone without an answer: cannot happen, but never spin */
    }
    close(p[0]);
    if (rc == ODP_ETIMEDOUT)
        rc = odp_fail(err, ODP_ETIMEDOUT, "resolving %s timed out", host);
    else if (!rc && l->rc)
        rc = odp_fail(err, ODP_ENOTFOUND, "cannot resolve %s: %s", host,
                      l->rc == EAI_SYSTEM ? strerror(l->sys_errno) : gai_strerror(l->rc));
    else if (!rc) {
        *res = l->res;
        l->res = NULL;
    }
    lookup_unref(l);
    return rc;
}

int odp_tcp_connect_to(const char *host, int port, double deadline, odp_err *err)
{
    struct addrinfo *res = NULL;
    if (resolve(host, port, deadline, &res, err))
        return -1;
    int fd = -1;
    odp_fail(err, ODP_EIO, "no address for %s", host);
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            odp_fail_errno(err, ODP_EIO, errno, "cannot connect to %s port %d", host, port);
            continue;
        }
        int soerr = 0, w = 0;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            w = odp_wait(&p, 1, deadline, err);
            socklen_t sl = sizeof soerr;
            if (w == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                break;
        } else {
            soerr = errno;
        }
        close(fd);
        fd = -1;
        if (w == ODP_ETIMEDOUT) {
            odp_fail(err, ODP_ETIMEDOUT, "connecting to %s port %d timed out", host, port);
            break;
        }
        if (w) /* canceled: err says so */
            break;
        odp_fail_errno(err, soerr == ECONNREFUSED ? ODP_ENODEV : ODP_EIO, soerr, "cannot connect to %s port %d",
                       host, port);
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* request/response protocols: ~2x SFTP get */
    }
    return fd;
}

int odp_tcp_connect(const char *address, double deadline, odp_err *err)
{
    char host[256];
    const char *colon = strrchr(address, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == address || (size_t)(colon - address) >= sizeof host || !colon[1] || *end || port < 1 ||
        port > 65535) {
        odp_fail(err, ODP_EIO, "address '%s' is not host:port", address);
        return -1;
    }
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = 0;
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    return odp_tcp_connect_to(host, (int)port, deadline, err);
}
