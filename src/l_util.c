#include "l_util.h"

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
    if (lua_pcall(cb->L, nargs, 0, 0) != LUA_OK) {
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
