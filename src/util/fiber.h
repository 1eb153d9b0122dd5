/* A C call's own stack. A binding called from a scheduled Lua coroutine runs its C core on a fiber; when the
 * core reaches odp_wait, the fiber is suspended with its wait parked here, the binding yields the coroutine
 * (lua_yieldk, src/l_util.c), and the scheduler polls every parked wait at once and resumes the fiber whose
 * wait is over (src/l_wait.c). The cores stay plain blocking C (libssh2 loops, exec state machines): NSE
 * rewrites each of its calls as nsock callbacks, a stack per call keeps them whole.
 * Single-threaded: one fiber runs at a time, and only while the thread that started it is inside
 * odp_fiber_start/odp_fiber_resume. */
#ifndef ODP_FIBER_H
#define ODP_FIBER_H

#include <poll.h>
#include <stddef.h>

typedef struct odp_fiber odp_fiber;

struct odp_fiber {
    /* The parked wait, valid while suspended: fds live on the fiber's stack; revents are filled by whoever
     * polls before resuming. */
    struct pollfd *fds;
    nfds_t nfds;
    double deadline;
    /* Cancellation of this call only (Ctrl-C for a task, its deadline): odp_cancel_* act on it while the
     * fiber runs, so a core that lifts a cancel to clean up (ssh exec killing the remote group) does so for
     * its own call and not for every board. */
    int cancel;
    int outcome;  /* how the parked wait ends, set before odp_fiber_resume: 0 ready (revents filled),
                   * ODP_ETIMEDOUT (its deadline passed), ODP_ECANCELED */
    int result;   /* fn's return value, once it returned */
    long user;    /* the starter's own bookkeeping (a binding keeps its Lua stack height there) */
    long long call; /* which call runs on it: a new number at every odp_fiber_start (stacks are reused) */
};

/* A fiber with its own stack (from a small pool), or NULL when out of memory. */
odp_fiber *odp_fiber_new(void);
/* Returns the stack to the pool. Not while suspended: a suspended call must be resumed to its end. */
void odp_fiber_free(odp_fiber *f);
/* Runs fn(arg) on f's stack until it returns (1, f->result holds its value) or parks a wait (0). */
int odp_fiber_start(odp_fiber *f, int (*fn)(void *), void *arg);
/* Continues a fiber parked in a wait, which returns f->outcome. Returns like odp_fiber_start. */
int odp_fiber_resume(odp_fiber *f);
/* Whether p is a fiber parked in a wait (p comes from Lua, as a light userdata). */
int odp_fiber_parked(const void *p);
/* The fiber this code runs on, or NULL on the ordinary stack. A fiber left by a Lua error (longjmp out of its
 * stack) is found here, freed, and never reported. */
odp_fiber *odp_fiber_current(void);
/* Parks the running fiber in a wait and switches back to its starter; returns the outcome it is resumed with.
 * For odp_wait only. */
int odp_fiber_park(odp_fiber *f, struct pollfd *fds, nfds_t nfds, double deadline);
/* Runs code on the fiber as if on the ordinary stack (a Lua callback: a wait inside it blocks, since the
 * fiber cannot yield from the middle of it). Returns the fiber to give back to odp_fiber_unhold. */
odp_fiber *odp_fiber_hold(void);
void odp_fiber_unhold(odp_fiber *f);

#endif
