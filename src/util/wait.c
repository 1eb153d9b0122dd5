#include "wait.h"

#include "fiber.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t cancel_flag;
static volatile sig_atomic_t terminate_sig;
/* Self-pipe: a cancel wakes a poll that is already sleeping. */
static int cancel_pipe[2] = {-1, -1};

double odp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double odp_deadline(double timeout)
{
    if (timeout < 0 || isinf(timeout) || isnan(timeout) || timeout > 1e9)
        return ODP_FOREVER;
    return odp_now() + timeout;
}

int odp_wait_init(void)
{
    if (cancel_pipe[0] >= 0)
        return 0;
    return pipe2(cancel_pipe, O_CLOEXEC | O_NONBLOCK);
}

void odp_interrupt(void)
{
    int saved = errno;
    cancel_flag = 1;
    if (cancel_pipe[1] >= 0) {
        ssize_t r = write(cancel_pipe[1], "x", 1);
        (void)r;
    }
    errno = saved;
}

int odp_interrupted(void) { return cancel_flag != 0; }

void odp_cancel_request(void)
{
    odp_fiber *f = odp_fiber_current();
    if (f)
        f->cancel = 1;
    else
        odp_interrupt();
}

int odp_cancel_requested(void)
{
    odp_fiber *f = odp_fiber_current();
    return f ? f->cancel : cancel_flag != 0;
}

void odp_terminate_request(int sig)
{
    terminate_sig = sig;
    odp_interrupt();
}

int odp_terminate_signal(void) { return terminate_sig; }

void odp_cancel_clear(void)
{
    char buf[64];
    odp_fiber *f = odp_fiber_current();
    if (f) {
        f->cancel = 0;
        return;
    }
    cancel_flag = 0;
    if (cancel_pipe[0] >= 0)
        while (read(cancel_pipe[0], buf, sizeof buf) > 0) {}
}

static int timeout_ms(double deadline)
{
    if (deadline >= ODP_FOREVER)
        return -1;
    double left = deadline - odp_now();
    if (left <= 0)
        return 0;
    double ms = ceil(left * 1000.0);
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* On a fiber the wait is parked and the fiber suspended; the scheduler's one poll (src/l_wait.c) decides how
 * it ends. Its cancel flag is sticky like the process's: a core that goes on waiting after ECANCELED gets it
 * again at once. */
static int wait_on_fiber(odp_fiber *f, struct pollfd *fds, nfds_t nfds, double deadline, odp_err *err)
{
    if (f->cancel)
        return odp_fail(err, ODP_ECANCELED, "interrupted");
    int outcome = odp_fiber_park(f, fds, nfds, deadline);
    if (outcome == ODP_ECANCELED) {
        f->cancel = 1;
        return odp_fail(err, ODP_ECANCELED, "interrupted");
    }
    if (outcome == ODP_ETIMEDOUT)
        return odp_fail(err, ODP_ETIMEDOUT, "timed out");
    return 0;
}

int odp_wait(struct pollfd *fds, nfds_t nfds, double deadline, odp_err *err)
{
    odp_fiber *f = odp_fiber_current();
    if (f)
        return wait_on_fiber(f, fds, nfds, deadline, err);
    struct pollfd local[16];
    struct pollfd *all = nfds + 1 <= 16 ? local : malloc((nfds + 1) * sizeof *all);
    if (!all)
        return odp_fail(err, ODP_EIO, "out of memory waiting on %zu descriptors", (size_t)nfds);
    if (nfds)
        memcpy(all, fds, nfds * sizeof *all);
    all[nfds] = (struct pollfd){.fd = cancel_pipe[0], .events = POLLIN};
    int rc;
    for (;;) {
        if (cancel_flag) {
            rc = odp_fail(err, ODP_ECANCELED, "interrupted");
            break;
        }
        int ms = timeout_ms(deadline);
        int n = poll(all, nfds + 1, ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = odp_fail_errno(err, ODP_EIO, errno, "poll");
            break;
        }
        if (cancel_flag) {
            rc = odp_fail(err, ODP_ECANCELED, "interrupted");
            break;
        }
        if (n > (all[nfds].revents != 0)) {
            for (nfds_t i = 0; i < nfds; i++)
                fds[i].revents = all[i].revents;
            rc = 0;
            break;
        }
        if (ms == 0 || (ms > 0 && odp_now() >= deadline)) {
            rc = odp_fail(err, ODP_ETIMEDOUT, "timed out");
            break;
        }
    }
    if (all != local)
        free(all);
    return rc;
}

int odp_sleep_until(double deadline, odp_err *err)
{
    int rc = odp_wait(NULL, 0, deadline, err);
    return rc == ODP_ETIMEDOUT ? 0 : rc;
}
