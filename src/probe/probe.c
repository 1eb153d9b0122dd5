#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/wait.h"

int odp_probe_read(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    if (n && (uint64_t)addr + n > 0x100000000ULL)
        return odp_fail(err, ODP_EIO, "read 0x%08x+%zu wraps past the 32-bit address space", addr, n);
    return n ? p->ops->read(p, addr, buf, n, deadline, err) : 0;
}

int odp_probe_write(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err)
{
    if (n && (uint64_t)addr + n > 0x100000000ULL)
        return odp_fail(err, ODP_EIO, "write 0x%08x+%zu wraps past the 32-bit address space", addr, n);
    return n ? p->ops->write(p, addr, buf, n, deadline, err) : 0;
}

int odp_probe_halt(odp_probe *p, double deadline, odp_err *err) { return p->ops->halt(p, deadline, err); }
int odp_probe_go(odp_probe *p, double deadline, odp_err *err) { return p->ops->go(p, deadline, err); }

int odp_probe_reset(odp_probe *p, double deadline, odp_err *err)
{
    int rc;
    if (p->nscrub) {
        if ((rc = odp_probe_halt(p, deadline, err)) != 0)
            return rc;
        static const uint8_t zero[4];
        for (int i = 0; i < p->nscrub; i++)
            if ((rc = odp_probe_write(p, p->scrub[i], zero, 4, deadline, err)) != 0)
                return rc;
    }
    if ((rc = p->ops->reset(p, deadline, err)) != 0)
        return rc;
    p->resets++;
    return odp_probe_go(p, deadline, err);
}

void odp_probe_add_scrub(odp_probe *p, uint32_t addr)
{
    for (int i = 0; i < p->nscrub; i++)
        if (p->scrub[i] == addr)
            return;
    if (p->nscrub < ODP_PROBE_MAX_SCRUB)
        p->scrub[p->nscrub++] = addr;
}

void odp_probe_retain(odp_probe *p) { p->refs++; }

void odp_probe_release(odp_probe *p)
{
    if (p && --p->refs <= 0)
        p->ops->close(p);
}

int odp_tcp_connect(const char *address, double deadline, odp_err *err)
{
    char host[256];
    const char *colon = strrchr(address, ':');
    if (!colon || colon == address || (size_t)(colon - address) >= sizeof host || !colon[1]) {
        odp_fail(err, ODP_EIO, "address '%s' is not host:port", address);
        return -1;
    }
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = 0;
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g) {
        odp_fail(err, ODP_ENOTFOUND, "%s: %s", address, gai_strerror(g));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int rc = odp_wait(&pf, 1, deadline, err);
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                break;
            if (rc == 0)
                odp_fail_errno(err, soerr == ECONNREFUSED ? ODP_ENODEV : ODP_EIO, soerr, "connect %s", address);
        } else {
            odp_fail_errno(err, errno == ECONNREFUSED ? ODP_ENODEV : ODP_EIO, errno, "connect %s", address);
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}
