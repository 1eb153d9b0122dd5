#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

/* 1 MiB: a core's own frames are small, but a Lua callback run on the fiber (on_stdout, progress) may nest
 * up to LUAI_MAXCCALLS C levels. Pages are committed only when touched; the lowest is a guard. */
#define STACK_SIZE (1u << 20)
#define GUARD_SIZE 4096u
#define POOL_MAX 32

typedef struct fiber {
    odp_fiber pub;
    ucontext_t ctx, caller;
    char *stack; /* the mapping, guard page included */
    int (*fn)(void *);
    void *arg;
    int done, parked;
    struct fiber *prev, *next; /* every live fiber: light userdata from Lua is checked against them */
} fiber;

static fiber *running;  /* the fiber whose code runs now (NULL: the ordinary stack, or held) */
static fiber *starting; /* handed to entry(): makecontext passes only ints */
static fiber *live;
static long long calls;
static char *pool[POOL_MAX];
static int pool_len;

static int on_stack(const fiber *f, const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)f->stack;
    return a >= lo && a < lo + STACK_SIZE;
}

static void release(fiber *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        live = f->next;
    if (f->next)
        f->next->prev = f->prev;
    if (pool_len < POOL_MAX)
        pool[pool_len++] = f->stack;
    else
        munmap(f->stack, STACK_SIZE);
    free(f);
}

/* A Lua error raised on a fiber longjmps to a setjmp on the ordinary stack, leaving `running` set and the fiber's
 * frames dead: seen here from the ordinary stack, it is freed. */
static void settle(void)
{
    char here;
    if (running && !on_stack(running, &here)) {
        fiber *f = running;
        running = NULL;
        release(f);
    }
}

odp_fiber *odp_fiber_new(void)
{
    settle();
    fiber *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    if (pool_len) {
        f->stack = pool[--pool_len];
    } else {
        f->stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (f->stack == MAP_FAILED) {
            free(f);
            return NULL;
        }
        mprotect(f->stack, GUARD_SIZE, PROT_NONE);
    }
    f->next = live;
    if (live)
        live->prev = f;
    live = f;
    return &f->pub;
}

void odp_fiber_free(odp_fiber *pub)
{
    if (pub)
        release((fiber *)pub);
}

static void entry(void)
{
    fiber *f = starting;
    f->pub.result = f->fn(f->arg);
    f->done = 1;
    running = NULL;
    swapcontext(&f->ctx, &f->caller);
}

static int switch_in(fiber *f)
{
    running = f;
    swapcontext(&f->caller, &f->ctx);
    running = NULL;
    return f->done;
}

int odp_fiber_start(odp_fiber *pub, int (*fn)(void *), void *arg)
{
    fiber *f = (fiber *)pub;
    settle();
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack + GUARD_SIZE;
    f->ctx.uc_stack.ss_size = STACK_SIZE - GUARD_SIZE;
    f->ctx.uc_link = NULL;
    f->fn = fn;
    f->arg = arg;
    f->done = 0;
    f->pub.cancel = 0;
    f->pub.call = ++calls;
    starting = f;
    makecontext(&f->ctx, entry, 0);
    return switch_in(f);
}

int odp_fiber_resume(odp_fiber *pub)
{
    fiber *f = (fiber *)pub;
    settle();
    return switch_in(f);
}

int odp_fiber_parked(const void *p)
{
    for (fiber *f = live; f; f = f->next)
        if (f == p)
            return f->parked;
    return 0;
}

odp_fiber *odp_fiber_current(void)
{
    settle();
    return running ? &running->pub : NULL;
}

int odp_fiber_park(odp_fiber *pub, struct pollfd *fds, nfds_t nfds, double deadline)
{
    fiber *f = (fiber *)pub;
    f->pub.fds = fds;
    f->pub.nfds = nfds;
    f->pub.deadline = deadline;
    f->pub.outcome = 0;
    f->parked = 1;
    running = NULL;
    swapcontext(&f->ctx, &f->caller);
    running = f;
    f->parked = 0;
    f->pub.fds = NULL;
    f->pub.nfds = 0;
    return f->pub.outcome;
}

odp_fiber *odp_fiber_hold(void)
{
    odp_fiber *f = odp_fiber_current();
    running = NULL;
    return f;
}

void odp_fiber_unhold(odp_fiber *f) { running = (fiber *)f; }
