/* odp.pg: a team's history in PostgreSQL (lua/odp/results/history.lua), Debian's libpq, waiting through
 * src/pg (the one waiting point). A lazy module, like odp.sqlite, with the same shape of results:
 *   local c = assert(pg.connect("postgresql:///odp?host=/run/postgresql", {timeout = 10}))
 *   local r = c:query("SELECT id, v FROM t WHERE k = $1", {"x"}, {timeout = 30})  -- r.n, r.id[i], r.v[i]
 * Integer and float columns come back as numbers, booleans as booleans, everything else as text. */
#include "l_util.h"
#include "pg/pg.h"
#include "util/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONN_TYPE "odp.pg.Conn"
#define MAX_PARAMS 64

typedef struct {
    PGconn *conn;
} Conn;


/* The result's own fields: a column may not take these names. */
static int reserved(const char *name)
{
    return strcmp(name, "n") == 0 || strcmp(name, "columns") == 0 || strcmp(name, "changes") == 0;
}
static int l_close(lua_State *L)
{
    Conn *c = luaL_checkudata(L, 1, CONN_TYPE);
    if (c->conn)
        PQfinish(c->conn);
    c->conn = NULL;
    return 0;
}

static Conn *check_conn(lua_State *L)
{
    Conn *c = luaL_checkudata(L, 1, CONN_TYPE);
    if (!c->conn)
        luaL_error(L, "attempt to use a closed connection");
    return c;
}

/* pg.connect(conninfo, {timeout = 10}) -> Conn | nil, err, code */
static int l_connect(lua_State *L)
{
    static const char *const allowed[] = {"timeout", NULL};
    const char *info = luaL_checkstring(L, 1);
    odp_checkopts(L, 2, allowed);
    double deadline = odp_optdeadline(L, 2, 10);
    Conn *c = lua_newuserdatauv(L, sizeof *c, 0);
    c->conn = NULL;
    luaL_setmetatable(L, CONN_TYPE);
    odp_err err;
    if (odp_pg_connect(info, deadline, &c->conn, &err))
        return odp_pushfail(L, &err);
    return 1;
}

static void push_value(lua_State *L, const PGresult *r, int row, int col)
{
    const char *v = PQgetvalue(r, row, col);
    switch (PQftype(r, col)) {
    case 20: /* int8 */
    case 21: /* int2 */
    case 23: /* int4 */
        lua_pushinteger(L, (lua_Integer)strtoll(v, NULL, 10));
        break;
    case 700:  /* float4 */
    case 701:  /* float8 */
    case 1700: /* numeric */
        lua_pushnumber(L, strtod(v, NULL));
        break;
    case 16: /* bool */
        lua_pushboolean(L, v[0] == 't');
        break;
    default:
        lua_pushlstring(L, v, (size_t)PQgetlength(r, row, col));
    }
}

/* conn:query(sql, params?, {timeout = 30}) -> {n, columns, <name> = {values}, changes} | nil, err, code
 * Without params the text may hold several statements (the last one's rows are returned). */
static int l_query(lua_State *L)
{
    static const char *const allowed[] = {"timeout", NULL};
    Conn *c = check_conn(L);
    const char *sql = luaL_checkstring(L, 2);
    odp_checkopts(L, 4, allowed);
    double deadline = odp_optdeadline(L, 4, 30);
    const char *values[MAX_PARAMS];
    int n = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        n = lua_getfield(L, 3, "n") == LUA_TNUMBER ? (int)lua_tointeger(L, -1) : (int)lua_rawlen(L, 3);
        lua_pop(L, 1);
        luaL_argcheck(L, n >= 0 && n <= MAX_PARAMS, 3, "too many parameters");
        luaL_checkstack(L, n + 4, "parameters");
        for (int i = 1; i <= n; i++) {
            switch (lua_rawgeti(L, 3, i)) { /* each text stays on the stack while the query runs */
            case LUA_TNIL:
                values[i - 1] = NULL;
                break;
            case LUA_TBOOLEAN:
                values[i - 1] = lua_toboolean(L, -1) ? "t" : "f";
                break;
            case LUA_TNUMBER:
                if (lua_isinteger(L, -1))
                    lua_pushfstring(L, "%I", lua_tointeger(L, -1));
                else {
                    char buf[40];
                    double x = lua_tonumber(L, -1);
                    snprintf(buf, sizeof buf, "%.17g", x);
                    lua_pushstring(L, x != x ? "NaN" : x > 1e308 ? "Infinity" : x < -1e308 ? "-Infinity" : buf);
                }
                values[i - 1] = lua_tostring(L, -1);
                break;
            case LUA_TSTRING:
                values[i - 1] = lua_tostring(L, -1);
                break;
            default:
                return luaL_error(L, "parameter %d: cannot send a %s", i, luaL_typename(L, -1));
            }
        }
    }
    odp_err err;
    PGresult *r = odp_pg_query(c->conn, sql, n, values, deadline, &err);
    if (!r)
        return odp_pushfail(L, &err);
    int rows = PQntuples(r), ncol = PQnfields(r);
    for (int col = 0; col < ncol; col++)
        if (reserved(PQfname(r, col))) {
            lua_pushfstring(L, "column '%s' has a reserved name (n, columns, changes): alias it", PQfname(r, col));
            PQclear(r);
            return lua_error(L);
        }
    lua_createtable(L, 0, ncol + 3);
    int res = lua_gettop(L);
    lua_createtable(L, ncol, 0);
    for (int col = 0; col < ncol; col++) {
        lua_pushstring(L, PQfname(r, col));
        lua_rawseti(L, -2, col + 1);
        lua_createtable(L, rows, 0);
        for (int row = 0; row < rows; row++) {
            if (PQgetisnull(r, row, col))
                continue;
            push_value(L, r, row, col);
            lua_rawseti(L, -2, row + 1);
        }
        lua_setfield(L, res, PQfname(r, col));
    }
    lua_setfield(L, res, "columns");
    lua_pushinteger(L, rows);
    lua_setfield(L, res, "n");
    const char *changed = PQcmdTuples(r);
    lua_pushinteger(L, ncol == 0 && changed && *changed ? strtoll(changed, NULL, 10) : 0);
    lua_setfield(L, res, "changes");
    PQclear(r);
    return 1;
}

/* conn:exec(sql): statements without parameters -> true | nil, err, code */
static int l_exec(lua_State *L)
{
    lua_settop(L, 2);
    lua_pushnil(L);
    lua_replace(L, 3);
    int n = l_query(L);
    if (n == 1) {
        lua_pushboolean(L, 1);
        return 1;
    }
    return n;
}

int luaopen_odp_pg(lua_State *L)
{
    static const luaL_Reg methods[] = {{"exec", l_exec}, {"query", l_query}, {"close", l_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_close}, {"__close", l_close}, {NULL, NULL}};
    odp_newclass(L, CONN_TYPE, methods, meta);
    static const luaL_Reg fns[] = {{"connect", l_connect}, {NULL, NULL}};
    luaL_newlib(L, fns);
    lua_pushinteger(L, PQlibVersion());
    lua_setfield(L, -2, "version");
    return 1;
}
