/* odp.serial: list ports (libserialport) and open one as an odp.Stream (src/serial). */
#include <string.h>

#include "l_streamdeps.h"
#include "l_util.h"
#include "net/rfc2217.h"
#include "serial/serial.h"

static void set_str(lua_State *L, const char *k, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static int push_port(void *ctx, const odp_serial_info *p)
{
    lua_State *L = ctx;
    lua_createtable(L, 0, 10);
    set_str(L, "port", p->name);
    set_str(L, "description", p->description);
    set_str(L, "transport", p->transport);
    if (p->vid >= 0) {
        lua_pushinteger(L, p->vid);
        lua_setfield(L, -2, "vid");
        lua_pushinteger(L, p->pid);
        lua_setfield(L, -2, "pid");
    }
    set_str(L, "manufacturer", p->manufacturer);
    set_str(L, "product", p->product);
    set_str(L, "serial", p->serial);
    lua_pushboolean(L, p->readable && p->writable);
    lua_setfield(L, -2, "access");
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    return 0;
}

/* serial.list() -> {{port=, description=, transport=, vid=, pid=, manufacturer=, product=, serial=, access=}...} */
static int l_list(lua_State *L)
{
    lua_newtable(L);
    odp_err err;
    if (odp_serial_list(push_port, L, &err))
        return odp_pushfail(L, &err);
    return 1;
}

/* serial.open{port=, baud=115200, timeout=} -> odp.Stream, how ("libserialport"|"termios") | nil, err, code */
static int l_open(lua_State *L)
{
    static const char *const allowed[] = {"port", "baud", "timeout", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    odp_checkopts(L, 1, allowed);
    const char *port = odp_optstring(L, 1, "port", NULL);
    luaL_argcheck(L, port != NULL, 1, "option 'port' is required");
    lua_Integer baud = odp_optinteger(L, 1, "baud", 115200);
    luaL_argcheck(L, baud > 0 && baud <= 16000000, 1, "baud out of range");
    /* a local port opens without blocking; an RFC 2217 one connects and negotiates within the timeout */
    double deadline = odp_optdeadline(L, 1, 5);
    const char *how = NULL;
    odp_err err;
    odp_stream *s;
    if (strncmp(port, "rfc2217://", 10) == 0) {
        s = odp_rfc2217_open(port + 10, (unsigned long)baud, deadline, &err);
        how = "rfc2217";
    } else {
        s = odp_serial_open(port, (int)baud, &how, &err);
    }
    if (!s)
        return odp_pushfail(L, &err);
    odp_pushstream(L, s);
    lua_pushstring(L, how);
    return 2;
}

int luaopen_odp_serial(lua_State *L)
{
    static const luaL_Reg fns[] = {{"list", l_list}, {"open", l_open}, {NULL, NULL}};
    luaL_newlib(L, fns);
    odp_require_stream(L);
    return 1;
}
