/* odp.proc: run a program (no shell) and get its exit, output and rusage as data. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "l_util.h"
#include "proc/proc.h"
#include "util/wait.h"

#define MAX_ARGS 4096
#define DEFAULT_KILL_GRACE_S 2.0

/* argv from opts.argv or the options table's array part; strings kept alive by that table. */
static const char **check_argv(lua_State *L, int opts)
{
    int t = lua_getfield(L, opts, "argv");
    int src = t == LUA_TNIL ? opts : lua_absindex(L, -1);
    if (t != LUA_TNIL && t != LUA_TTABLE)
        luaL_error(L, "option 'argv' must be a table of strings");
    lua_Integer n = (lua_Integer)lua_rawlen(L, src);
    if (n < 1 || n > MAX_ARGS)
        luaL_error(L, "argv must hold 1..%d strings (got %d)", MAX_ARGS, (int)n);
    const char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, src, i) != LUA_TSTRING && !lua_isnumber(L, -1))
            luaL_error(L, "argv[%d] must be a string (got %s)", (int)i, luaL_typename(L, -1));
        argv[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    argv[n] = NULL;
    return argv; /* the userdata and (if any) opts.argv stay on the stack until the call returns */
}

/* env: {NAME=value | false} applied over the current environment (false removes NAME). */
static char **build_env(lua_State *L, int opts)
{
    extern char **environ;
    if (lua_getfield(L, opts, "env") == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    luaL_argcheck(L, lua_istable(L, -1), 1, "option 'env' must be a table");
    int env = lua_absindex(L, -1);
    lua_newtable(L); /* name -> "NAME=value", keeps the strings alive */
    int merged = lua_absindex(L, -1);
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        lua_pushlstring(L, *e, (size_t)(eq - *e));
        lua_pushstring(L, *e);
        lua_rawset(L, merged);
    }
    lua_pushnil(L);
    while (lua_next(L, env)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "env keys must be strings");
        const char *k = lua_tostring(L, -2);
        if (!*k || strchr(k, '='))
            luaL_error(L, "invalid environment variable name '%s'", k);
        lua_pushvalue(L, -2);
        if (lua_toboolean(L, -2) == 0 && lua_isboolean(L, -2))
            lua_pushnil(L);
        else if (lua_type(L, -2) == LUA_TSTRING || lua_type(L, -2) == LUA_TNUMBER)
            lua_pushfstring(L, "%s=%s", k, lua_tostring(L, -2));
        else
            luaL_error(L, "env value for '%s' must be a string or false", k);
        lua_rawset(L, merged);
        lua_pop(L, 1);
    }
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, merged)) {
        n++;
        lua_pop(L, 1);
    }
    char **envp = lua_newuserdatauv(L, sizeof(char *) * (n + 1), 1);
    lua_pushvalue(L, merged);
    lua_setiuservalue(L, -2, 1);
    size_t i = 0;
    lua_pushnil(L);
    while (lua_next(L, merged)) {
        envp[i++] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    envp[i] = NULL;
    return envp;
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6; }

/* {t_us = {...}, ends = {...}, cut = N}: when each stdout chunk arrived (odp_chunk_times) */
static void push_chunk_times(lua_State *L, const odp_chunk_times *c)
{
    lua_createtable(L, 0, 3);
    lua_createtable(L, (int)c->n, 0);
    for (size_t i = 0; i < c->n; i++) {
        lua_pushinteger(L, c->t_us[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "t_us");
    lua_createtable(L, (int)c->n, 0);
    for (size_t i = 0; i < c->n; i++) {
        lua_pushinteger(L, (lua_Integer)c->ends[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "ends");
    lua_pushinteger(L, (lua_Integer)c->cut);
    lua_setfield(L, -2, "cut");
}

static void push_result(lua_State *L, const odp_proc_result *r, int times)
{
    odp_exec_view v = {r->status, r->signal, NULL, r->timed_out, r->canceled, r->aborted, &r->out, &r->err,
                       r->wall_s};
    if (r->signal)
        v.signal_name = sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?";
    odp_push_exec(L, &v);
    lua_createtable(L, 0, 7);
    lua_pushnumber(L, tv_s(r->ru.ru_utime));
    lua_setfield(L, -2, "utime_s");
    lua_pushnumber(L, tv_s(r->ru.ru_stime));
    lua_setfield(L, -2, "stime_s");
    lua_pushinteger(L, r->ru.ru_maxrss);
    lua_setfield(L, -2, "maxrss_kb");
    lua_pushinteger(L, r->ru.ru_minflt);
    lua_setfield(L, -2, "minflt");
    lua_pushinteger(L, r->ru.ru_majflt);
    lua_setfield(L, -2, "majflt");
    lua_pushinteger(L, r->ru.ru_nvcsw);
    lua_setfield(L, -2, "nvcsw");
    lua_pushinteger(L, r->ru.ru_nivcsw);
    lua_setfield(L, -2, "nivcsw");
    lua_setfield(L, -2, "rusage");
    if (times) {
        push_chunk_times(L, &r->out_times);
        lua_setfield(L, -2, "stdout_times");
    }
}

/* proc.run{argv=... | "prog", "arg", ...; cwd=, env=, stdin=, timeout=, kill_grace=, capture_limit=,
 *          on_stdout=, on_stderr=, lifeline=FD, stdout_times=N} -> result | nil, err, code
 * stdout_times=N: result.stdout_times holds when each of the first N stdout chunks was read */
static int l_run(lua_State *L)
{
    static const char *const allowed[] = {"argv", "cwd", "env", "stdin", "timeout", "kill_grace",
                                          "capture_limit", "on_stdout", "on_stderr", "lifeline", "stdout_times", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    odp_checkopts(L, 1, allowed);
    odp_proc_opts o = {0};
    o.argv = check_argv(L, 1);
    o.envp = build_env(L, 1);
    o.cwd = odp_optstring(L, 1, "cwd", NULL);
    o.deadline = odp_optdeadline(L, 1, -1);
    o.kill_grace = odp_optnumber(L, 1, "kill_grace", DEFAULT_KILL_GRACE_S);
    lua_Integer lifeline = odp_optinteger(L, 1, "lifeline", 0);
    luaL_argcheck(L, lifeline == 0 || (lifeline > 2 && lifeline < 64), 1, "option 'lifeline' must be a descriptor from 3 to 63");
    o.lifeline_fd = (int)lifeline;
    lua_Integer times = odp_optinteger(L, 1, "stdout_times", 0);
    luaL_argcheck(L, times >= 0 && times <= (1 << 20), 1, "option 'stdout_times' must be from 0 to 1048576 chunks");
    o.out_times_max = (size_t)times;
    odp_exec_io io;
    odp_exec_opts(L, 1, &io);
    o.stdin_data = io.stdin_data;
    o.stdin_len = io.stdin_len;
    o.capture_limit = io.capture_limit;
    o.on_output = odp_exec_on_output;
    o.ctx = &io;

    odp_proc_result r;
    odp_err err;
    int rc = odp_proc_run(&o, &r, &err);
    if (rc)
        odp_pushfail(L, &err);
    else {
        push_result(L, &r, times > 0);
        odp_proc_result_free(&r);
    }
    /* Re-raises an error from a callback, now that nothing is left to clean up. */
    odp_exec_io_release(&io);
    return rc ? 3 : 1;
}

int luaopen_odp_proc(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"run", l_run}, {NULL, NULL}};
    static const char *const waiting[] = {"run", NULL};
    luaL_newlib(L, funcs);
    odp_waiting(L, -1, waiting);
    return 1;
}
