#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        if ((rc = p->scrub_fn(p, p->scrub, p->nscrub, deadline, err)) != 0)
            return rc;
    }
    if ((rc = p->ops->reset(p, deadline, err)) != 0)
        return rc;
    p->resets++;
    return odp_probe_go(p, deadline, err);
}

void odp_probe_add_scrub(odp_probe *p, uint32_t addr,
                         int (*fn)(odp_probe *p, const uint32_t *addrs, int n, double deadline, odp_err *err))
{
    p->scrub_fn = fn;
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
