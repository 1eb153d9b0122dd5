/* odp_tcp_connect against real sockets on loopback, and name resolution against a DNS server that never
 * answers: this process moves into its own mount namespace and binds a resolv.conf naming a silent UDP
 * socket of its own over /etc/resolv.conf, so getaddrinfo would block for its 30 s timeout; odp must give
 * up at the deadline, and on a cancel (Ctrl-C), instead. Needs root (unshare), as the other suites. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tcp.h"
#include "util/wait.h"

static int nfail, ntest;

#define CHECK(name, cond)                                                                                     \
    do {                                                                                                      \
        ntest++;                                                                                              \
        if (cond)                                                                                             \
            printf("ok %d - %s\n", ntest, name);                                                              \
        else {                                                                                                \
            printf("not ok %d - %s\n#   at line %d: %s\n", ntest, name, __LINE__, err.msg);                    \
            nfail++;                                                                                          \
        }                                                                                                     \
    } while (0)

static int listener(const char *addr, int type, int port, int *bound_port)
{
    int fd = socket(AF_INET, type, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || (type == SOCK_STREAM && listen(fd, 4))) {
        close(fd);
        return -1;
    }
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    if (bound_port)
        *bound_port = ntohs(sa.sin_port);
    return fd;
}

static void *cancel_later(void *arg)
{
    (void)arg;
    usleep(300 * 1000);
    odp_cancel_request();
    return NULL;
}

/* A resolver that never answers and an empty /etc/hosts, for this process only. 0 when set up. */
static int silent_dns(void)
{
    char conf[] = "/tmp/odp-net-test-resolv.XXXXXX";
    int fd = mkstemp(conf);
    if (fd < 0)
        return -1;
    const char text[] = "nameserver 127.0.0.77\noptions timeout:30 attempts:1\n";
    int ok = write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1);
    close(fd);
    int rc = -1;
    if (ok && unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
        mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) == 0 &&
        mount("/dev/null", "/etc/hosts", NULL, MS_BIND, NULL) == 0) /* nothing answers locally either */
        rc = listener("127.0.0.77", SOCK_DGRAM, 53, NULL) >= 0 ? 0 : -1; /* kept open, never read */
    unlink(conf);
    return rc;
}

int main(void)
{
    odp_wait_init();
    odp_err err = {0};
    char addr[64];

    int port = 0, l = listener("127.0.0.1", SOCK_STREAM, 0, &port);
    int fd = odp_tcp_connect_to("127.0.0.1", port, odp_deadline(5), &err);
    int nodelay = 0;
    socklen_t sl = sizeof nodelay;
    if (fd >= 0)
        getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &sl);
    CHECK("an address connects: non-blocking, close-on-exec, TCP_NODELAY",
          fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) && (fcntl(fd, F_GETFD) & FD_CLOEXEC) && nodelay);
    int a = accept(l, NULL, NULL);
    CHECK("the listener gets the connection", a >= 0 && write(fd, "x", 1) == 1);
    close(a);
    close(fd);

    fd = odp_tcp_connect_to("localhost", port, odp_deadline(5), &err);
    CHECK("localhost connects (the loopback address)", fd >= 0);
    close(fd);
    snprintf(addr, sizeof addr, "localhost:%d", port);
    fd = odp_tcp_connect(addr, odp_deadline(5), &err);
    CHECK("host:port form", fd >= 0);
    close(fd);
    snprintf(addr, sizeof addr, "[127.0.0.1]:%d", port);
    fd = odp_tcp_connect(addr, odp_deadline(5), &err);
    CHECK("[host]:port form", fd >= 0);
    close(fd);
    close(l);

    fd = odp_tcp_connect_to("127.0.0.1", port, odp_deadline(5), &err);
    CHECK("nothing listening: ENODEV (connection refused)", fd < 0 && err.code == ODP_ENODEV &&
          strstr(err.msg, "127.0.0.1 port") && strstr(err.msg, "refused"));
    fd = odp_tcp_connect_to("nosuch.invalid", port, odp_deadline(5), &err);
    CHECK("no such host: ENOTFOUND naming it", fd < 0 && err.code == ODP_ENOTFOUND &&
          strstr(err.msg, "cannot resolve nosuch.invalid"));
    fd = odp_tcp_connect("no-port-here", odp_deadline(5), &err);
    CHECK("an address without a port is refused", fd < 0 && strstr(err.msg, "is not host:port"));
    fd = odp_tcp_connect("host:99999", odp_deadline(5), &err);
    CHECK("a port out of range is refused", fd < 0 && strstr(err.msg, "is not host:port"));

    int dns = silent_dns();
    CHECK("a silent DNS server for this process (mount namespace)", dns == 0);
    if (dns == 0) {
        double t0 = odp_now();
        fd = odp_tcp_connect_to("board.example", 22, odp_deadline(0.5), &err);
        double took = odp_now() - t0;
        CHECK("resolving against a silent DNS server ends at the deadline: ETIMEDOUT",
              fd < 0 && err.code == ODP_ETIMEDOUT && strstr(err.msg, "resolving board.example timed out") &&
                  took >= 0.45 && took < 5);
        pthread_t t;
        pthread_create(&t, NULL, cancel_later, NULL);
        t0 = odp_now();
        fd = odp_tcp_connect_to("board.example", 22, odp_deadline(60), &err);
        took = odp_now() - t0;
        pthread_join(t, NULL);
        CHECK("a cancel (Ctrl-C) ends the lookup: ECANCELED", fd < 0 && err.code == ODP_ECANCELED && took < 5);
        odp_cancel_clear();
        fd = odp_tcp_connect_to("127.0.0.1", 1, odp_deadline(5), &err);
        CHECK("addresses never wait for the resolver", fd < 0 && err.code == ODP_ENODEV);
        int lport = 0, ll = listener("127.0.0.1", SOCK_STREAM, 0, &lport);
        t0 = odp_now();
        fd = odp_tcp_connect_to("localhost", lport, odp_deadline(5), &err);
        took = odp_now() - t0;
        CHECK("localhost never waits for the resolver either (RFC 6761: the loopback address)", fd >= 0 && took < 1);
        close(fd);
        fd = odp_tcp_connect_to("adb.LOCALHOST", lport, odp_deadline(5), &err);
        CHECK("nor a name under .localhost", fd >= 0);
        close(fd);
        close(ll);
    }
    printf("1..%d\n# %d failed\n", ntest, nfail);
    return nfail != 0;
}
