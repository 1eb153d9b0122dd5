/* odp.rtt: attach to a SEGGER RTT block through an odp.probe.Probe; channels as odp.Stream. */
#include <string.h>

#include "l_probe.h"
#include "l_streamdeps.h"
#include "l_util.h"
#include "rtt/rtt.h"
#include "util/wait.h"

#define RTT_MT "odp.rtt.Rtt"

typedef struct {
    odp_rtt *r;
} lrtt;

static odp_rtt *check_rtt(lua_State *L, int idx)
{
    lrtt *u = luaL_checkudata(L, idx, RTT_MT);
    if (!u->r)
        luaL_error(L, "attempt to use a closed RTT");
    return u->r;
}

static uint32_t field_u32(lua_State *L, int t, lua_Integer i, const char *what)
{
    lua_rawgeti(L, t, i);
    if (!lua_isinteger(L, -1))
        luaL_error(L, "%s must be an integer", what);
    lua_Integer v = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (v < 0 || v > 0xffffffff)
        luaL_error(L, "%s out of the 32-bit range", what);
    return (uint32_t)v;
}

/* Reads `where` at idx ({ranges={{start, size}, ...}} | {address=} | {elf=}) into w; misuse raises. */
static int check_where(lua_State *L, int idx, odp_rtt_where *w, odp_err *err)
{
    static const char *const where_keys[] = {"ranges", "address", "elf", NULL};
    luaL_checktype(L, idx, LUA_TTABLE);
    odp_checkopts(L, idx, where_keys);
    memset(w, 0, sizeof *w);
    int kinds = 0, rc = 0;
    if (lua_getfield(L, idx, "ranges") != LUA_TNIL) {
        luaL_argcheck(L, lua_istable(L, -1), idx, "ranges must be a list of {start, size}");
        int t = lua_absindex(L, -1);
        lua_Integer n = (lua_Integer)lua_rawlen(L, t);
        luaL_argcheck(L, n >= 1 && n <= ODP_RTT_MAX_RANGES, idx, "ranges must hold 1..16 {start, size} pairs");
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, t, i);
            luaL_argcheck(L, lua_istable(L, -1), idx, "each range is {start, size}");
            int rt = lua_absindex(L, -1);
            w->ranges[i - 1].start = field_u32(L, rt, 1, "range start");
            w->ranges[i - 1].size = field_u32(L, rt, 2, "range size");
            luaL_argcheck(L, (uint64_t)w->ranges[i - 1].start + w->ranges[i - 1].size <= 0x100000000ULL, idx,
                          "range passes the end of the 32-bit address space");
            lua_pop(L, 1);
        }
        w->nranges = (int)n;
        kinds++;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "address") != LUA_TNIL) {
        lua_Integer a = luaL_checkinteger(L, -1);
        luaL_argcheck(L, a >= 0 && a <= 0xffffffff, idx, "address must be 32-bit");
        w->has_address = 1;
        w->address = (uint32_t)a;
        kinds++;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "elf") != LUA_TNIL) {
        const char *elf = luaL_checkstring(L, -1);
        rc = odp_elf32_symbol(elf, "_SEGGER_RTT", &w->address, err);
        w->has_address = 1;
        kinds++;
    }
    lua_pop(L, 1);
    luaL_argcheck(L, kinds == 1, idx, "give exactly one of ranges=, address=, elf=");
    return rc;
}

/* rtt.attach(probe, where, {timeout=}) -> Rtt | nil, err, code */
static int l_attach(lua_State *L)
{
    static const char *const opt_keys[] = {"timeout", NULL};
    odp_probe *p = odp_checkprobe(L, 1);
    odp_checkopts(L, 3, opt_keys);
    double deadline = odp_optdeadline(L, 3, 5);
    odp_rtt_where w;
    odp_err err;
    if (check_where(L, 2, &w, &err))
        return odp_pushfail(L, &err);
    lrtt *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->r = NULL;
    luaL_setmetatable(L, RTT_MT);
    lua_newtable(L); /* channel streams, by index */
    lua_setiuservalue(L, -2, 1);
    odp_rtt *r;
    if (odp_rtt_attach(p, &w, deadline, &r, &err))
        return odp_pushfail(L, &err);
    u->r = r;
    return 1;
}

/* rtt.clear_ids(probe, where, {timeout=}) -> number of IDs zeroed | nil, err, code (halt the core first) */
static int l_clear_ids(lua_State *L)
{
    static const char *const opt_keys[] = {"timeout", NULL};
    odp_probe *p = odp_checkprobe(L, 1);
    odp_checkopts(L, 3, opt_keys);
    double deadline = odp_optdeadline(L, 3, 10);
    odp_rtt_where w;
    odp_err err;
    int cleared;
    if (check_where(L, 2, &w, &err) || odp_rtt_clear_ids(p, &w, deadline, &cleared, &err))
        return odp_pushfail(L, &err);
    lua_pushinteger(L, cleared);
    return 1;
}

static void push_channel(lua_State *L, const odp_rtt_channel *c, int index, const char *dir)
{
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, index);
    lua_setfield(L, -2, "index");
    lua_pushstring(L, dir);
    lua_setfield(L, -2, "direction");
    if (c->name_readable) {
        lua_pushstring(L, c->name);
        lua_setfield(L, -2, "name");
    }
    lua_pushinteger(L, c->size);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, c->flags);
    lua_setfield(L, -2, "flags");
    lua_pushinteger(L, c->buffer);
    lua_setfield(L, -2, "buffer");
    lua_pushinteger(L, c->wr);
    lua_setfield(L, -2, "wr");
    lua_pushinteger(L, c->rd);
    lua_setfield(L, -2, "rd");
}

/* rtt:channels() -> {up={{index, name, size, flags, buffer, wr, rd}...}, down={...}} | nil, err, code */
static int l_channels(lua_State *L)
{
    odp_rtt *r = check_rtt(L, 1);
    odp_rtt_channel up[ODP_RTT_MAX_BUFFERS], down[ODP_RTT_MAX_BUFFERS];
    int nup, ndown;
    odp_err err;
    if (odp_rtt_channels(r, &nup, up, &ndown, down, odp_deadline(5), &err))
        return odp_pushfail(L, &err);
    lua_createtable(L, 0, 3);
    lua_createtable(L, nup, 0);
    for (int i = 0; i < nup; i++) {
        push_channel(L, &up[i], i, "up");
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "up");
    lua_createtable(L, ndown, 0);
    for (int i = 0; i < ndown; i++) {
        push_channel(L, &down[i], i, "down");
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "down");
    lua_pushinteger(L, odp_rtt_address(r));
    lua_setfield(L, -2, "address");
    return 1;
}

/* rtt:channel(i) -> odp.Stream (up i / down i); the same stream for the same i while it is open */
static int l_channel(lua_State *L)
{
    odp_rtt *r = check_rtt(L, 1);
    lua_Integer ch = luaL_checkinteger(L, 2);
    luaL_argcheck(L, ch >= 0 && ch < ODP_RTT_MAX_BUFFERS, 2, "channel must be 0..15");
    lua_getiuservalue(L, 1, 1);
    if (lua_rawgeti(L, -1, ch) != LUA_TNIL) {
        /* still open? (stream:kind() raises on a closed stream) */
        lua_getfield(L, -1, "kind");
        lua_pushvalue(L, -2);
        if (lua_pcall(L, 1, 0, 0) == LUA_OK)
            return 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    odp_err err;
    odp_stream *s = odp_rtt_stream(r, (int)ch, &err);
    if (!s)
        return odp_pushfail(L, &err);
    odp_pushstream(L, s);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, ch);
    return 1;
}

/* rtt:lines(i, {timeout=, count=}) -> iterator over lines of up channel i */
static int l_lines(lua_State *L)
{
    check_rtt(L, 1);
    lua_settop(L, 3);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "odp.core.stream");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "lines");
    lua_pushcfunction(L, l_channel);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_call(L, 2, 3);
    if (lua_isnil(L, -3))
        return 3; /* nil, err, code */
    lua_pop(L, 2);
    lua_pushvalue(L, 3);
    lua_call(L, 2, 1);
    return 1;
}

/* rtt:stats() -> {bytes_up, bytes_down, full_seen, lost_on_reset, refinds, address} */
static int l_stats(lua_State *L)
{
    odp_rtt *r = check_rtt(L, 1);
    odp_rtt_stats s;
    odp_rtt_get_stats(r, &s);
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)s.bytes_up);
    lua_setfield(L, -2, "bytes_up");
    lua_pushinteger(L, (lua_Integer)s.bytes_down);
    lua_setfield(L, -2, "bytes_down");
    lua_pushinteger(L, (lua_Integer)s.full_seen);
    lua_setfield(L, -2, "full_seen");
    lua_pushinteger(L, (lua_Integer)s.lost_on_reset);
    lua_setfield(L, -2, "lost_on_reset");
    lua_pushinteger(L, s.refinds);
    lua_setfield(L, -2, "refinds");
    lua_pushinteger(L, odp_rtt_address(r));
    lua_setfield(L, -2, "address");
    return 1;
}

static int l_close(lua_State *L)
{
    lrtt *u = luaL_checkudata(L, 1, RTT_MT);
    if (u->r) {
        /* close the channel streams handed out: they belong to this RTT (and keep the probe open) */
        if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) {
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_getfield(L, -1, "close");
                lua_insert(L, -2);
                lua_call(L, 1, 0);
            }
        }
        lua_pop(L, 1);
        odp_rtt_close(u->r);
        u->r = NULL;
    }
    return 0;
}

/* rtt.telnet{address="127.0.0.1:19021", channel=0, timeout=} -> odp.Stream | nil, err, code */
static int l_telnet(lua_State *L)
{
    static const char *const allowed[] = {"address", "channel", "timeout", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    odp_checkopts(L, 1, allowed);
    const char *address = odp_optstring(L, 1, "address", "127.0.0.1:19021");
    lua_Integer ch = odp_optinteger(L, 1, "channel", -1);
    luaL_argcheck(L, ch >= -1 && ch < 16, 1, "channel must be 0..15");
    double deadline = odp_optdeadline(L, 1, 5);
    odp_err err;
    odp_stream *s = odp_rtt_telnet_open(address, (int)ch, deadline, &err);
    if (!s)
        return odp_pushfail(L, &err);
    odp_pushstream(L, s);
    return 1;
}

int luaopen_odp_rtt(lua_State *L)
{
    static const luaL_Reg methods[] = {{"channels", l_channels}, {"channel", l_channel}, {"lines", l_lines},
                                       {"stats", l_stats}, {"close", l_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_close}, {"__close", l_close}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"attach", l_attach}, {"clear_ids", l_clear_ids}, {"telnet", l_telnet}, {NULL, NULL}};
    odp_require_stream(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "odp.probe");
    lua_call(L, 1, 0);
    static const char *const waiting[] = {"attach", "clear_ids", "telnet", NULL};
    odp_newclass(L, RTT_MT, methods, meta);
    luaL_newlib(L, fns);
    odp_waiting(L, -1, waiting);
    return 1;
}
