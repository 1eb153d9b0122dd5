/* The adb TCP transport (src/adb/tcp.c) against a real socket on loopback, the device side written here byte by
 * byte: a timeout or a Ctrl-C partway through a message (a header split across TCP segments, as a slow link or a
 * busy device sends it) must leave the framing intact, so that the next read gets the same message whole and the
 * connection can still carry the stop that follows a Ctrl-C. Prints TAP lines. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "adb/tcp.h"
#include "util/wait.h"

static int n, failed;
static void check(int ok, const char *what, const odp_err *e)
{
    n++;
    if (!ok)
        failed++;
    printf("%sok %d - %s\n", ok ? "" : "not ", n, what);
    if (!ok && e)
        printf("#   %d: %s\n", e->code, e->msg);
}

static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    *port = ntohs(sa.sin_port);
    return fd;
}

int main(void)
{
    odp_wait_init();
    int port = 0, lfd = listener(&port);
    odp_err e = {0};
    struct adb_transport t;
    if (lfd < 0 || adb_tcp_open("127.0.0.1", port, odp_deadline(5), &t, &e) != 0) {
        printf("not ok 1 - connect on loopback\n#   %s\n1..1\n", e.msg);
        return 1;
    }
    int dev = accept(lfd, NULL, NULL);
    uint8_t msg[ADB_HDR_SIZE + 4], got[ADB_HDR_SIZE + 4];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(0xa0 + i);

    /* a timeout with 10 of the header's 24 bytes in */
    if (write(dev, msg, 10) != 10)
        return 1;
    int rc = t.recv(t.ctx, got, ADB_HDR_SIZE, odp_deadline(0.2), &e);
    check(rc == ODP_ETIMEDOUT, "a header cut short: ETIMEDOUT at the deadline", &e);
    if (write(dev, msg + 10, sizeof msg - 10) != (ssize_t)(sizeof msg - 10))
        return 1;
    memset(got, 0, sizeof got);
    rc = t.recv(t.ctx, got, ADB_HDR_SIZE, odp_deadline(5), &e);
    check(rc == 0 && memcmp(got, msg, ADB_HDR_SIZE) == 0, "the next read gets the header whole: the 10 bytes kept",
          &e);
    rc = t.recv(t.ctx, got + ADB_HDR_SIZE, 4, odp_deadline(5), &e);
    check(rc == 0 && memcmp(got + ADB_HDR_SIZE, msg + ADB_HDR_SIZE, 4) == 0, "and its payload after it", &e);

    /* a Ctrl-C with 5 bytes in: the same, and the read after the cancel is cleared gets them */
    if (write(dev, msg, 5) != 5)
        return 1;
    odp_cancel_request();
    rc = t.recv(t.ctx, got, ADB_HDR_SIZE, odp_deadline(5), &e);
    check(rc == ODP_ECANCELED, "a Ctrl-C partway through a header: ECANCELED", &e);
    odp_cancel_clear();
    if (write(dev, msg + 5, ADB_HDR_SIZE - 5) != ADB_HDR_SIZE - 5)
        return 1;
    memset(got, 0, sizeof got);
    rc = t.recv(t.ctx, got, ADB_HDR_SIZE, odp_deadline(5), &e);
    check(rc == 0 && memcmp(got, msg, ADB_HDR_SIZE) == 0, "then the header whole: the framing holds", &e);

    /* the device gone partway: EIO, never a short message */
    if (write(dev, msg, 7) != 7)
        return 1;
    close(dev);
    rc = t.recv(t.ctx, got, ADB_HDR_SIZE, odp_deadline(5), &e);
    check(rc == ODP_EIO, "the device closing partway: EIO", &e);

    t.close(t.ctx);
    close(lfd);
    printf("1..%d\n", n);
    return failed != 0;
}
