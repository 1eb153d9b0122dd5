#include "l_util.h"

#include "util/fiber.h"
#include "util/wait.h"

#include <math.h>
#include <string.h>

int odp_pushfail(lua_State *L, const odp_err *err)
{
    const char *name = odp_code_name(err->code);
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", name, err->msg);
    lua_pushstring(L, name);
    return 3;
}

void odp_checkopts(lua_State *L, int idx, const char *const allowed[])
{
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            if (lua_type(L, -1) == LUA_TNUMBER) /* array part: positional values, checked by the caller */
                continue;
            luaL_error(L, "option keys must be strings");
        }
        const char *key = lua_tostring(L, -1);
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0) {
                ok = 1;
                break;
            }
        if (!ok) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (const char *const *a = allowed; *a; a++) {
                luaL_addstring(&b, a == allowed ? "" : ", ");
                luaL_addstring(&b, *a);
            }
            luaL_pushresult(&b);
            luaL_error(L, "unknown option '%s' (known: %s)", key, lua_tostring(L, -1));
        }
    }
}

int odp_optfield(lua_State *L, int idx, const char *key)
{
    if (lua_isnoneornil(L, idx)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, idx, key);
}

lua_Number odp_optnumber(lua_State *L, int idx, const char *key, lua_Number def)
{
    int t = odp_optfield(L, idx, key);
    lua_Number v = def;
    if (t != LUA_TNIL) {
        int isnum;
        v = lua_tonumberx(L, -1, &isnum);
        if (!isnum)
            luaL_error(L, "option '%s' must be a number (got %s)", key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

lua_Integer odp_optinteger(lua_State *L, int idx, const char *key, lua_Integer def)
{
    int t = odp_optfield(L, idx, key);
    lua_Integer v = def;
    if (t != LUA_TNIL) {
        int isnum;
        v = lua_tointegerx(L, -1, &isnum);
        if (!isnum)
            luaL_error(L, "option '%s' must be an integer (got %s)", key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

const char *odp_optstring(lua_State *L, int idx, const char *key, const char *def)
{
    int t = odp_optfield(L, idx, key);
    const char *v = def;
    if (t != LUA_TNIL) {
        if (t != LUA_TSTRING)
            luaL_error(L, "option '%s' must be a string (got %s)", key, luaL_typename(L, -1));
        v = lua_tostring(L, -1); /* stays valid: the options table still refers to it */
    }
    lua_pop(L, 1);
    return v;
}

int odp_optboolean(lua_State *L, int idx, const char *key, int def)
{
    int t = odp_optfield(L, idx, key);
    int v = def;
    if (t != LUA_TNIL) {
        if (t != LUA_TBOOLEAN)
            luaL_error(L, "option '%s' must be a boolean (got %s)", key, luaL_typename(L, -1));
        v = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

double odp_optdeadline(lua_State *L, int idx, double def)
{
    double t = odp_optnumber(L, idx, "timeout", def);
    if (isnan(t))
        luaL_error(L, "option 'timeout' must not be NaN");
    return odp_deadline(t);
}

void odp_newclass(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta)
{
    luaL_newmetatable(L, name);
    if (meta)
        luaL_setfuncs(L, meta, 0);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "locked");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}

void odp_luacb_init(odp_luacb *cb, lua_State *L, int fn_idx)
{
    cb->L = L;
    cb->err_ref = LUA_NOREF;
    cb->fn_ref = LUA_NOREF;
    if (!lua_isnoneornil(L, fn_idx)) {
        luaL_checktype(L, fn_idx, LUA_TFUNCTION);
        lua_pushvalue(L, fn_idx);
        cb->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
}

int odp_luacb_present(const odp_luacb *cb) { return cb->fn_ref != LUA_NOREF; }

void odp_luacb_push(odp_luacb *cb) { lua_rawgeti(cb->L, LUA_REGISTRYINDEX, cb->fn_ref); }

int odp_luacb_call(odp_luacb *cb, int nargs)
{
    /* On a fiber the callback cannot yield (it is below a C frame): waits inside it block. */
    odp_fiber *held = odp_fiber_hold();
    int rc = lua_pcall(cb->L, nargs, 0, 0);
    odp_fiber_unhold(held);
    if (rc != LUA_OK) {
        if (cb->err_ref == LUA_NOREF)
            cb->err_ref = luaL_ref(cb->L, LUA_REGISTRYINDEX);
        else
            lua_pop(cb->L, 1);
        return -1;
    }
    return 0;
}

void odp_luacb_release(odp_luacb *cb)
{
    lua_State *L = cb->L;
    luaL_unref(L, LUA_REGISTRYINDEX, cb->fn_ref);
    cb->fn_ref = LUA_NOREF;
    if (cb->err_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, cb->err_ref);
        luaL_unref(L, LUA_REGISTRYINDEX, cb->err_ref);
        cb->err_ref = LUA_NOREF;
        lua_error(L);
    }
}

void odp_exec_opts(lua_State *L, int idx, odp_exec_io *io)
{
    io->stdin_data = NULL;
    io->stdin_len = 0;
    if (odp_optfield(L, idx, "stdin") != LUA_TNIL) {
        if (!lua_isstring(L, -1))
            luaL_error(L, "option 'stdin' must be a string");
        io->stdin_data = lua_tolstring(L, -1, &io->stdin_len);
    }
    lua_pop(L, 1);
    lua_Integer cap = odp_optinteger(L, idx, "capture_limit", 0);
    if (cap < 0)
        luaL_error(L, "option 'capture_limit' must be >= 0");
    io->capture_limit = (size_t)cap;
    odp_optfield(L, idx, "on_stdout");
    odp_luacb_init(&io->on_stdout, L, -1);
    lua_pop(L, 1);
    odp_optfield(L, idx, "on_stderr");
    odp_luacb_init(&io->on_stderr, L, -1);
    lua_pop(L, 1);
}

int odp_exec_on_output(void *ctx, int stream, const char *data, size_t n)
{
    odp_exec_io *io = ctx;
    odp_luacb *cb = stream == 1 ? &io->on_stdout : &io->on_stderr;
    if (!odp_luacb_present(cb))
        return 0;
    odp_luacb_push(cb);
    lua_pushlstring(cb->L, data, n);
    return odp_luacb_call(cb, 1);
}

void odp_exec_io_release(odp_exec_io *io)
{
    /* The first callback error stops the run, so at most one is pending: release the other one first. */
    odp_luacb *failed = io->on_stdout.err_ref != LUA_NOREF ? &io->on_stdout : &io->on_stderr;
    odp_luacb_release(failed == &io->on_stdout ? &io->on_stderr : &io->on_stdout);
    odp_luacb_release(failed);
}

static void set_bool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

void odp_push_exec(lua_State *L, const odp_exec_view *v)
{
    lua_createtable(L, 0, 14);
    set_bool(L, "ok", v->status == 0 && !v->signal_name && !v->timed_out && !v->canceled && !v->aborted);
    lua_pushinteger(L, v->status);
    lua_setfield(L, -2, "status");
    if (v->signal_name) {
        if (v->signal) {
            lua_pushinteger(L, v->signal);
            lua_setfield(L, -2, "signal");
        }
        lua_pushstring(L, v->signal_name);
        lua_setfield(L, -2, "signal_name");
    }
    set_bool(L, "timed_out", v->timed_out);
    set_bool(L, "canceled", v->canceled);
    if (v->aborted)
        set_bool(L, "aborted", 1);
    lua_pushlstring(L, v->out->data ? v->out->data : "", v->out->len);
    lua_setfield(L, -2, "stdout");
    lua_pushlstring(L, v->err->data ? v->err->data : "", v->err->len);
    lua_setfield(L, -2, "stderr");
    if (v->out->dropped || v->err->dropped) {
        lua_pushinteger(L, (lua_Integer)v->out->dropped);
        lua_setfield(L, -2, "stdout_dropped");
        lua_pushinteger(L, (lua_Integer)v->err->dropped);
        lua_setfield(L, -2, "stderr_dropped");
    }
    lua_pushnumber(L, v->wall_s);
    lua_setfield(L, -2, "wall_s");
}

static char yield_sentinel;
static int scheduling;

void *odp_yield_sentinel(void) { return &yield_sentinel; }

int odp_scheduling(int delta) { return scheduling += delta; }

/* The registered function (upvalue 1) on the fiber, with the stack its caller gave it. */
static int call_on_fiber(void *arg)
{
    lua_State *L = arg;
    return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

static int waiting_continue(lua_State *L, int status, lua_KContext ctx);

/* After the fiber ran: its results are on the stack, or it parked a wait and the coroutine yields. */
static int waiting_step(lua_State *L, odp_fiber *f, int done)
{
    if (done) {
        int n = f->result;
        odp_fiber_free(f);
        return n;
    }
    f->user = lua_gettop(L);
    luaL_checkstack(L, 3, "yielding a wait");
    lua_pushlightuserdata(L, &yield_sentinel);
    lua_pushlightuserdata(L, f);
    lua_pushinteger(L, f->call);
    return lua_yieldk(L, 3, (lua_KContext)f, waiting_continue);
}

/* Resumed by the scheduler (f->outcome set): the stack is put back as the function left it (what resume passed
 * is dropped) and the fiber goes on from its wait. */
static int waiting_continue(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    odp_fiber *f = (odp_fiber *)ctx;
    lua_settop(L, (int)f->user);
    return waiting_step(L, f, odp_fiber_resume(f));
}

static int waiting_trampoline(lua_State *L)
{
    odp_fiber *f = NULL;
    if (scheduling <= 0 || !lua_isyieldable(L) || odp_fiber_current() || !(f = odp_fiber_new()))
        return lua_tocfunction(L, lua_upvalueindex(1))(L);
    return waiting_step(L, f, odp_fiber_start(f, call_on_fiber, L));
}

void odp_waiting(lua_State *L, int idx, const char *const names[])
{
    idx = lua_absindex(L, idx);
    for (int i = 0; names[i]; i++) {
        lua_getfield(L, idx, names[i]);
        if (!lua_tocfunction(L, -1))
            luaL_error(L, "odp_waiting: '%s' is not a C function", names[i]);
        lua_pushcclosure(L, waiting_trampoline, 1);
        lua_setfield(L, idx, names[i]);
    }
}

void odp_waiting_methods(lua_State *L, const char *class_name, const char *const names[])
{
    luaL_getmetatable(L, class_name);
    lua_getfield(L, -1, "__index");
    odp_waiting(L, -1, names);
    lua_pop(L, 2);
}

void odp_pushtraffic(lua_State *L, unsigned long long round_trips, unsigned long long bytes_up,
                     unsigned long long bytes_down)
{
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)round_trips);
    lua_setfield(L, -2, "round_trips");
    lua_pushinteger(L, (lua_Integer)bytes_up);
    lua_setfield(L, -2, "bytes_up");
    lua_pushinteger(L, (lua_Integer)bytes_down);
    lua_setfield(L, -2, "bytes_down");
}
