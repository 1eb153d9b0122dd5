/* odp.scan: the iteration-line scanner of src/parse/scan.h for lua/odp/parse/executorch.lua. */
#include "l_util.h"
#include "parse/scan.h"

/* A 1-based position at arg idx that starts a line of s, or #s + 1 (its end): the 0-based offset. */
static size_t check_linestart(lua_State *L, int idx, const char *s, size_t n)
{
    lua_Integer init = luaL_checkinteger(L, idx);
    luaL_argcheck(L, init >= 1 && (lua_Unsigned)init <= (lua_Unsigned)n + 1, idx, "position out of range");
    size_t pos = (size_t)init - 1;
    luaL_argcheck(L, pos == 0 || pos == n || s[pos - 1] == '\n', idx, "not the start of a line");
    return pos;
}

/* iterations(text, init, dest [, max]) -> next, count, bare, total
 * Consumes the run of `Iteration i of N: f ms` lines starting at init (at most max of them), appending each
 * time (a float) to the list dest. next: the position after them; bare: how many had no log prefix; total:
 * N of the last one (nil when count is 0). */
static int l_iterations(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    size_t pos = check_linestart(L, 2, s, n);
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer max = luaL_optinteger(L, 4, LUA_MAXINTEGER);
    luaL_argcheck(L, max >= 0, 4, "must be >= 0");
    lua_Integer len = (lua_Integer)lua_rawlen(L, 3), count = 0, bare = 0;
    odp_scan_iter it;
    while (count < max && odp_scan_iter_line(s, n, pos, &it)) {
        lua_pushnumber(L, it.ms);
        lua_rawseti(L, 3, ++len);
        count++;
        bare += it.body == pos;
        pos = it.next;
    }
    lua_pushinteger(L, (lua_Integer)pos + 1);
    lua_pushinteger(L, count);
    lua_pushinteger(L, bare);
    if (count == 0)
        lua_pushnil(L);
    else if (it.total_is_int)
        lua_pushinteger(L, it.total);
    else
        lua_pushnumber(L, it.total_f);
    return 4;
}

/* find_iteration(text, init) -> position of the first iteration line starting at or after init (a line
 * start), or #text + 1. */
static int l_find_iteration(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    size_t pos = check_linestart(L, 2, s, n);
    lua_pushinteger(L, (lua_Integer)odp_scan_find_iter(s, n, pos) + 1);
    return 1;
}

/* iteration_list(text...) -> an empty table whose array part already has room for every iteration line the
 * texts (strings or nil) can hold: appending a million times to a growing table costs more than scanning. */
static int l_iteration_list(lua_State *L)
{
    size_t total = 0;
    for (int i = 1; i <= lua_gettop(L); i++) {
        if (lua_isnil(L, i))
            continue;
        size_t n;
        const char *s = luaL_checklstring(L, i, &n);
        total += odp_scan_count_heads(s, n);
    }
    lua_createtable(L, total > ((size_t)1 << 26) ? 1 << 26 : (int)total, 0);
    return 1;
}

int luaopen_odp_scan(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "iterations", l_iterations },
        { "find_iteration", l_find_iteration },
        { "iteration_list", l_iteration_list },
        { NULL, NULL },
    };
    luaL_newlib(L, fns);
    return 1;
}
