/* odp.xmodem: XMODEM send/receive over any odp.Stream (src/xmodem). */
#include <string.h>

#include "l_streamdeps.h"
#include "l_util.h"
#include "xmodem/xmodem.h"

typedef struct {
    lua_State *L;
    odp_luacb cb;
} progress_ctx;

/* on_progress{bytes=, total=, blocks=, retries=, check=}; an error in it cancels the transfer and is re-raised. */
/* {bytes, blocks, retries, check}: what a progress event and the final result both carry. */
static void push_counts(lua_State *L, const odp_xmodem_progress *p)
{
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)p->bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, p->blocks);
    lua_setfield(L, -2, "blocks");
    lua_pushinteger(L, p->retries);
    lua_setfield(L, -2, "retries");
    lua_pushstring(L, p->crc ? "crc" : "checksum");
    lua_setfield(L, -2, "check");
}

static int on_progress(void *ctx, const odp_xmodem_progress *p)
{
    progress_ctx *c = ctx;
    lua_State *L = c->L;
    odp_luacb_push(&c->cb);
    push_counts(L, p);
    lua_pushinteger(L, (lua_Integer)p->total);
    lua_setfield(L, -2, "total");
    return odp_luacb_call(&c->cb, 1);
}

static void check_common(lua_State *L, int idx, odp_xmodem_opts *o, progress_ctx *pc)
{
    odp_xmodem_opts_init(o);
    o->timeout = odp_optnumber(L, idx, "timeout", o->timeout);
    luaL_argcheck(L, o->timeout > 0 && o->timeout <= 3600, idx, "timeout must be in (0, 3600] seconds");
    o->start_timeout = odp_optnumber(L, idx, "start_timeout", o->start_timeout);
    luaL_argcheck(L, o->start_timeout > 0, idx, "start_timeout must be > 0");
    lua_Integer r = odp_optinteger(L, idx, "retries", o->max_retries);
    luaL_argcheck(L, r >= 0 && r <= 1000, idx, "retries must be 0..1000");
    o->max_retries = (unsigned)r;
    pc->L = L;
    odp_optfield(L, idx, "on_progress");
    odp_luacb_init(&pc->cb, L, -1);
    lua_pop(L, 1);
    if (odp_luacb_present(&pc->cb)) {
        o->progress = on_progress;
        o->ctx = pc;
    }
}

static int push_result(lua_State *L, int rc, const odp_xmodem_progress *p, odp_err *err, progress_ctx *pc)
{
    odp_luacb_release(&pc->cb); /* re-raises an error from on_progress */
    if (rc)
        return odp_pushfail(L, err);
    push_counts(L, p);
    return 1;
}

/* xmodem.send(stream, path, {mode="1k"|"128", timeout=, start_timeout=, retries=, on_progress=}) */
static int l_send(lua_State *L)
{
    static const char *const allowed[] = {"mode", "timeout", "start_timeout", "retries", "on_progress", NULL};
    static const char *const modes[] = {"1k", "128", NULL};
    odp_stream *s = odp_checkstream(L, 1);
    const char *path = luaL_checkstring(L, 2);
    odp_checkopts(L, 3, allowed);
    odp_xmodem_opts o;
    progress_ctx pc;
    const char *mode = odp_optstring(L, 3, "mode", "1k");
    int m = 0;
    while (modes[m] && strcmp(modes[m], mode))
        m++;
    if (!modes[m])
        return luaL_argerror(L, 3, lua_pushfstring(L, "mode must be \"1k\" or \"128\" (got \"%s\")", mode));
    check_common(L, 3, &o, &pc);
    o.block_1k = m == 0;
    odp_xmodem_progress p;
    odp_err err;
    int rc = odp_xmodem_send_file(s, path, &o, &p, &err);
    return push_result(L, rc, &p, &err, &pc);
}

/* xmodem.receive(stream, path, {check="crc"|"checksum", timeout=, start_timeout=, retries=, max_bytes=,
 * on_progress=}) */
static int l_receive(lua_State *L)
{
    static const char *const allowed[] = {"check", "timeout", "start_timeout", "retries", "max_bytes",
                                          "on_progress", NULL};
    odp_stream *s = odp_checkstream(L, 1);
    const char *path = luaL_checkstring(L, 2);
    odp_checkopts(L, 3, allowed);
    odp_xmodem_opts o;
    progress_ctx pc;
    const char *check = odp_optstring(L, 3, "check", "crc");
    if (strcmp(check, "crc") && strcmp(check, "checksum"))
        return luaL_argerror(L, 3, lua_pushfstring(L, "check must be \"crc\" or \"checksum\" (got \"%s\")", check));
    lua_Integer max = odp_optinteger(L, 3, "max_bytes", 0);
    luaL_argcheck(L, max >= 0, 3, "max_bytes must be >= 0");
    check_common(L, 3, &o, &pc);
    o.checksum = strcmp(check, "checksum") == 0;
    o.max_bytes = (uint64_t)max;
    odp_xmodem_progress p;
    odp_err err;
    int rc = odp_xmodem_receive_file(s, path, &o, &p, &err);
    return push_result(L, rc, &p, &err, &pc);
}

int luaopen_odp_xmodem(lua_State *L)
{
    static const luaL_Reg fns[] = {{"send", l_send}, {"receive", l_receive}, {NULL, NULL}};
    odp_require_stream(L);
    static const char *const waiting[] = {"send", "receive", NULL};
    luaL_newlib(L, fns);
    odp_waiting(L, -1, waiting);
    return 1;
}
