#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

/* 1 MiB: a core's own frames are small, but a Lua callback run on the fiber (on_stdout, progress) may nest
 * up to LUAI_MAXCCALLS C levels. Pages are committed only when touched; the lowest is a guard. */
/* AddressSanitizer follows stack switches only when told (its fake stacks, the shadow of each stack). */
#if defined(__SANITIZE_ADDRESS__)
#define ODP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ODP_ASAN 1
#endif
#endif
#ifdef ODP_ASAN
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SWITCH_START(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define SWITCH_FINISH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
/* A Lua error raised on a fiber longjmps to the ordinary stack over frames whose redzones AddressSanitizer still
 * holds poisoned (it saw no return from them): their shadow is cleared before switching, so the frames that run
 * there after such a jump are not reported. Only these frames' redzones go unchecked, and only under ASan. */
__attribute__((noinline)) static void unpoison_caller_frames(void)
{
    static char *top, *bottom;
    if (!top) {
        pthread_attr_t a;
        void *addr;
        size_t size;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            if (pthread_attr_getstack(&a, &addr, &size) == 0)
                top = (char *)addr + size, bottom = addr;
            pthread_attr_destroy(&a);
        }
    }
    /* from a little below this frame (the switching frames below it, inlined or not, are cleared too) */
    char *here = __builtin_frame_address(0), *from = here - 64 * 1024; /* no address-taken local to re-poison */
    if (top && here < top && from > bottom)
        __asan_unpoison_memory_region(from, (size_t)(top - from));
}
#else
static void unpoison_caller_frames(void) {}
#define SWITCH_START(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define SWITCH_FINISH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#endif

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
    const void *caller_bottom; /* the starter's stack, for AddressSanitizer's switch notes */
    size_t caller_size;
    void *fake_stack;
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
    SWITCH_FINISH(NULL, &f->caller_bottom, &f->caller_size);
    f->pub.result = f->fn(f->arg);
    f->done = 1;
    running = NULL;
    SWITCH_START(NULL, f->caller_bottom, f->caller_size); /* NULL: this stack's frames end here */
    swapcontext(&f->ctx, &f->caller);
}

static int switch_in(fiber *f)
{
    void *fake = NULL;
    running = f;
    SWITCH_START(&fake, f->stack + GUARD_SIZE, STACK_SIZE - GUARD_SIZE);
    unpoison_caller_frames();
    swapcontext(&f->caller, &f->ctx);
    SWITCH_FINISH(fake, NULL, NULL);
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
    SWITCH_START(&f->fake_stack, f->caller_bottom, f->caller_size);
    swapcontext(&f->ctx, &f->caller);
    SWITCH_FINISH(f->fake_stack, &f->caller_bottom, &f->caller_size);
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
