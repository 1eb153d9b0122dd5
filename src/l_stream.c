/* odp.Stream: the Lua face of every odp_stream (serial, RTT channel, TCP, pty, pipe).
 * Line reading and expect are Lua (lua/odp/core/stream.lua), added to the methods table this module returns. */
#include <stdlib.h>

#include "l_util.h"
#include "util/wait.h"

#define STREAM_MT "odp.Stream"
#define READ_MAX (16 * 1024 * 1024)

typedef struct {
    odp_stream *s; /* NULL once closed */
} lstream;

void odp_pushstream(lua_State *L, odp_stream *s)
{
    lstream *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->s = NULL;
    luaL_setmetatable(L, STREAM_MT);
    u->s = s;
}

void odp_pushstream_owned(lua_State *L, odp_stream *s, int owner)
{
    owner = lua_absindex(L, owner);
    odp_pushstream(L, s);
    lua_pushvalue(L, owner);
    lua_setiuservalue(L, -2, 1);
}

odp_stream *odp_checkstream(lua_State *L, int idx)
{
    lstream *u = luaL_checkudata(L, idx, STREAM_MT);
    if (!u->s)
        luaL_error(L, "attempt to use a closed stream");
    return u->s;
}

static const char *const io_opts[] = {"timeout", NULL};

/* s:read(n, {timeout=}) -> 1..n bytes | "" at end of stream | nil, err, code */
static int l_read(lua_State *L)
{
    odp_stream *s = odp_checkstream(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n > 0 && n <= READ_MAX, 2, "size must be 1..16 MiB");
    odp_checkopts(L, 3, io_opts);
    double deadline = odp_optdeadline(L, 3, -1);
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n);
    odp_err err;
    ssize_t r = odp_stream_read(s, p, (size_t)n, deadline, &err);
    if (r < 0)
        return odp_pushfail(L, &err);
    luaL_pushresultsize(&b, (size_t)r);
    return 1;
}

/* s:write(bytes, {timeout=}) -> true | nil, err, code */
static int l_write(lua_State *L)
{
    odp_stream *s = odp_checkstream(L, 1);
    size_t n;
    const char *p = luaL_checklstring(L, 2, &n);
    odp_checkopts(L, 3, io_opts);
    double deadline = odp_optdeadline(L, 3, -1);
    odp_err err;
    if (odp_stream_write(s, p, n, deadline, &err) < 0)
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

/* s:unread(bytes): the next read returns these first. */
static int l_unread(lua_State *L)
{
    odp_stream *s = odp_checkstream(L, 1);
    size_t n;
    const char *p = luaL_checklstring(L, 2, &n);
    if (odp_stream_unread(s, p, n) < 0)
        return luaL_error(L, "out of memory");
    return 0;
}

/* s:stderr() -> what the other end said on the side (a command's stderr, its first KiB), "" when nothing */
static int l_stderr(lua_State *L)
{
    const odp_buf *b = odp_stream_diag(odp_checkstream(L, 1));
    lua_pushlstring(L, b && b->data ? b->data : "", b ? b->len : 0);
    return 1;
}

static int l_kind(lua_State *L)
{
    lua_pushstring(L, odp_checkstream(L, 1)->ops->kind);
    return 1;
}

static int l_close(lua_State *L)
{
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (u->s) {
        odp_stream_close(u->s);
        u->s = NULL;
    }
    return 0;
}

static int l_tostring(lua_State *L)
{
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (u->s)
        lua_pushfstring(L, "odp.Stream (%s, %p)", u->s->ops->kind, (void *)u);
    else
        lua_pushliteral(L, "odp.Stream (closed)");
    return 1;
}

int luaopen_odp_streamcore(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"read", l_read}, {"write", l_write}, {"unread", l_unread}, {"kind", l_kind}, {"stderr", l_stderr},
        {"close", l_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {
        {"__gc", l_close}, {"__close", l_close}, {"__tostring", l_tostring}, {NULL, NULL}};
    static const char *const waiting_methods[] = {"read", "write", "close", NULL};
    odp_newclass(L, STREAM_MT, methods, meta);
    odp_waiting_methods(L, STREAM_MT, waiting_methods);
    lua_newtable(L);
    luaL_getmetatable(L, STREAM_MT);
    lua_getfield(L, -1, "__index");
    lua_setfield(L, -3, "methods");
    lua_pop(L, 1);
    return 1;
}
