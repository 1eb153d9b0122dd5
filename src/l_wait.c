/* odp.wait: what the scheduler (lua/odp/core/sched.lua) needs from the one waiting point. Waiting functions
 * called from its coroutines yield (odp_yield_sentinel(), fiber) instead of blocking (l_util.c); poll waits for
 * all their parked waits at once, in odp_wait, so Ctrl-C and deadlines keep working. */
#include <stdlib.h>
#include <string.h>

#include <poll.h>

#include "l_util.h"
#include "util/fiber.h"
#include "util/wait.h"

static odp_fiber *check_fiber(lua_State *L, int idx)
{
    void *p = lua_touserdata(L, idx);
    if (!lua_islightuserdata(L, idx) || !odp_fiber_parked(p))
        luaL_argerror(L, idx, "not a parked wait");
    return p;
}

/* poll(waits, deadline) -> ready | nil, "ECANCELED: interrupted", "ECANCELED"
 * waits: a list of parked waits (the second value of a sentinel yield); deadline: an absolute odp.sys.now() time,
 * nil = none beyond the waits' own deadlines. ready: the indices of the waits that are over (their outcome set:
 * ready or timed out), in order; empty when the deadline came first. */
static int l_poll(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    double until = luaL_optnumber(L, 2, ODP_FOREVER);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    odp_fiber **fs = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *fs, 0);
    size_t nfds = 0;
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        fs[i] = check_fiber(L, -1);
        lua_pop(L, 1);
        nfds += fs[i]->nfds;
        if (fs[i]->deadline < until)
            until = fs[i]->deadline;
    }
    struct pollfd *all = lua_newuserdatauv(L, (nfds ? nfds : 1) * sizeof *all, 0);
    size_t k = 0;
    for (lua_Integer i = 0; i < n; i++) {
        if (fs[i]->nfds)
            memcpy(all + k, fs[i]->fds, fs[i]->nfds * sizeof *all);
        k += fs[i]->nfds;
    }
    odp_err err;
    int rc = odp_wait(all, (nfds_t)nfds, until, &err);
    if (rc && rc != ODP_ETIMEDOUT)
        return odp_pushfail(L, &err);
    double now = odp_now();
    lua_createtable(L, 4, 0);
    int ready = 0;
    k = 0;
    for (lua_Integer i = 0; i < n; i++) {
        int any = 0;
        for (nfds_t j = 0; j < fs[i]->nfds; j++) {
            fs[i]->fds[j].revents = rc ? 0 : all[k + j].revents;
            any |= fs[i]->fds[j].revents != 0;
        }
        k += fs[i]->nfds;
        if (any || now >= fs[i]->deadline) {
            fs[i]->outcome = any ? 0 : ODP_ETIMEDOUT;
            lua_pushinteger(L, i + 1);
            lua_rawseti(L, -2, ++ready);
        }
    }
    return 1;
}

/* wake(wait, "ECANCELED" | "ETIMEDOUT" | "ready"): the parked wait ends that way when its coroutine is resumed.
 * "ready" says every descriptor it waits on is ready, so the core looks again: another task used the same
 * connection meanwhile (a write on the same SSH session may have taken in what this wait was waiting for),
 * and its nonblocking calls find out what is really there. */
static int l_wake(lua_State *L)
{
    odp_fiber *f = check_fiber(L, 1);
    static const char *const names[] = {"ECANCELED", "ETIMEDOUT", "ready", NULL};
    static const int outcomes[] = {ODP_ECANCELED, ODP_ETIMEDOUT, 0};
    f->outcome = outcomes[luaL_checkoption(L, 2, NULL, names)];
    for (nfds_t j = 0; f->outcome == 0 && j < f->nfds; j++)
        f->fds[j].revents = f->fds[j].events ? f->fds[j].events : POLLIN;
    return 0;
}

/* scheduling(true|false): a scheduler starts or stops running coroutines (nested ones count).
 * scheduling() -> whether one runs. */
static int l_scheduling(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_pushboolean(L, odp_scheduling(0) > 0);
        return 1;
    }
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    odp_scheduling(lua_toboolean(L, 1) ? 1 : -1);
    return 0;
}

/* interrupted() -> whether Ctrl-C asked the process to stop; interrupt() asks it (the scheduler lifts a Ctrl-C
 * while its tasks stop, then raises it again for the code around it). */
static int l_interrupted(lua_State *L)
{
    lua_pushboolean(L, odp_interrupted());
    return 1;
}

static int l_interrupt(lua_State *L)
{
    (void)L;
    odp_interrupt();
    return 0;
}

int luaopen_odp_wait(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"poll", l_poll}, {"wake", l_wake}, {"scheduling", l_scheduling},
                                     {"interrupted", l_interrupted}, {"interrupt", l_interrupt}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    lua_pushlightuserdata(L, odp_yield_sentinel());
    lua_setfield(L, -2, "SENTINEL");
    return 1;
}
