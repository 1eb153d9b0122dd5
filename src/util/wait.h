/* The one waiting point. Every blocking C call in odp waits here, with an absolute deadline, so that
 * timeouts and Ctrl-C work everywhere. On a fiber (util/fiber.h: a C call of a scheduled Lua coroutine) the wait
 * is parked instead, and the scheduler polls every parked wait at once (src/l_wait.c). Nothing else in odp may
 * sleep or poll. */
#ifndef ODP_WAIT_H
#define ODP_WAIT_H

#include <poll.h>

#include "err.h"

#define ODP_FOREVER 1e300

/* Monotonic clock, seconds. */
double odp_now(void);
/* Absolute deadline for a relative timeout in seconds; timeout < 0 means forever. */
double odp_deadline(double timeout);

/* Waits until one of fds is ready (revents filled), the deadline passes (ODP_ETIMEDOUT) or a cancel
 * is requested (ODP_ECANCELED). Returns 0 when something is ready. nfds may be 0: a cancellable sleep. */
int odp_wait(struct pollfd *fds, nfds_t nfds, double deadline, odp_err *err);

/* Sleeps until the deadline; returns 0, or ODP_ECANCELED. */
int odp_sleep_until(double deadline, odp_err *err);

/* Cancellation. odp_interrupt (Ctrl-C; async-signal-safe) asks the whole process to stop; odp_interrupted says
 * whether it did. odp_cancel_request/requested/clear act on the current call: on a fiber (a call of a scheduled
 * task, util/fiber.h) that call's own flag, else the process's. */
int odp_wait_init(void);
void odp_interrupt(void);
int odp_interrupted(void);
void odp_cancel_request(void);
int odp_cancel_requested(void);
void odp_cancel_clear(void);

/* Termination (SIGHUP, SIGTERM): odp is to end, not only the current wait. odp_terminate_request cancels
 * like Ctrl-C and remembers the signal, which odp_cancel_clear does not forget, so that cleanup (closing
 * boards, killing remote groups) can still wait while everything above it knows to stop. Async-signal-safe. */
void odp_terminate_request(int sig);
/* The signal that asked odp to end, or 0. */
int odp_terminate_signal(void);

#endif
