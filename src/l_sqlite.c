/* odp.sqlite: the history's embedded store (lua/odp/results/history.lua), Debian's libsqlite3.
 * A lazy module: odp links no SQLite unless a history is written or read.
 *   local db = assert(sqlite.open("history.db", {timeout = 30}))
 *   db:exec("CREATE TABLE ...; CREATE INDEX ...")
 *   local r = db:query("SELECT id, v FROM t WHERE k = $1", {"x"})   -- r.n rows, r.id[i], r.v[i]
 * Results are columns (one Lua array per column, r.columns their names in order): a history scan reads a
 * million values without making a million row tables. A lock held by another writer is waited out through
 * the one waiting point (a busy handler sleeping in odp_sleep_until, so Ctrl-C ends the wait), up to the
 * timeout; then EBUSY. */
#include "l_util.h"
#include "util/wait.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define DB_TYPE "odp.sqlite.Db"
#define STMT_CACHE 24

typedef struct {
    sqlite3 *db;
    double timeout;   /* seconds a lock is waited for */
    double busy_since; /* odp_now() when the current wait began; < 0 none */
    struct {
        char *sql;
        sqlite3_stmt *stmt;
    } cache[STMT_CACHE];
    int next_slot;
} Db;


/* The result's own fields: a column may not take these names. */
static int reserved(const char *name)
{
    return strcmp(name, "n") == 0 || strcmp(name, "columns") == 0 || strcmp(name, "changes") == 0;
}
static int fail(lua_State *L, odp_code code, const char *what, const char *msg)
{
    odp_err err;
    odp_fail(&err, code, "sqlite: %s%s%s", what, *what ? ": " : "", msg);
    return odp_pushfail(L, &err);
}

static odp_code code_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return ODP_EBUSY;
    case SQLITE_INTERRUPT:
        return ODP_ECANCELED;
    case SQLITE_CANTOPEN:
        return ODP_ENOTFOUND;
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_READONLY:
        return ODP_EAUTH;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return ODP_EPROTO;
    default:
        return ODP_EIO;
    }
}

static int db_fail(lua_State *L, Db *d, int rc)
{
    return fail(L, code_of(rc), "", d->db ? sqlite3_errmsg(d->db) : sqlite3_errstr(rc));
}

/* SQLite calls this while another connection holds the lock: sleep a little through the waiting point and
 * try again, until the timeout. Returning 0 makes the statement fail with SQLITE_BUSY. */
static int on_busy(void *ctx, int attempt)
{
    Db *d = ctx;
    double now = odp_now();
    if (attempt == 0 || d->busy_since < 0)
        d->busy_since = now;
    if (now - d->busy_since >= d->timeout)
        return 0;
    double step = attempt < 10 ? 0.001 * (attempt + 1) : 0.02;
    odp_err err;
    return odp_sleep_until(now + step, &err) == 0;
}

/* Frames a commit may leave in the WAL before its connection checkpoints them into the database and
 * truncates the WAL: ~20 host runs' rows (a run's row and its points write ~6 pages). */
#define WAL_TRUNCATE_FRAMES 128

/* After each commit in WAL mode (it replaces SQLite's own autocheckpoint). Every process that opens the
 * history first reads the whole WAL to rebuild its index (the last connection closed without a checkpoint),
 * and that rebuilt index counts no frame as checkpointed, so SQLite's own PASSIVE autocheckpoint copied the
 * WAL again and again and never restarted it: a run's history row cost 17 ms against 3.5 after 360 runs,
 * with a 13 MB WAL (bench/README.md). A TRUNCATE checkpoint empties it; one that other readers hold up is
 * not waited for (a run must not stall on `odp history`), and the next commit tries again. */
static int on_wal_commit(void *ctx, sqlite3 *db, const char *name, int frames)
{
    Db *d = ctx;
    if (frames < WAL_TRUNCATE_FRAMES)
        return SQLITE_OK;
    double timeout = d->timeout;
    d->timeout = 0; /* on_busy gives up at once */
    d->busy_since = -1;
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    d->timeout = timeout;
    d->busy_since = -1;
    return SQLITE_OK;
}

static Db *check_db(lua_State *L)
{
    Db *d = luaL_checkudata(L, 1, DB_TYPE);
    if (!d->db)
        luaL_error(L, "attempt to use a closed database");
    return d;
}

static void close_db(Db *d)
{
    for (int i = 0; i < STMT_CACHE; i++) {
        if (d->cache[i].stmt)
            sqlite3_finalize(d->cache[i].stmt);
        free(d->cache[i].sql);
        d->cache[i].stmt = NULL;
        d->cache[i].sql = NULL;
    }
    if (d->db)
        sqlite3_close_v2(d->db);
    d->db = NULL;
}

static int l_close(lua_State *L)
{
    close_db(luaL_checkudata(L, 1, DB_TYPE));
    return 0;
}

/* sqlite.open(path, {timeout = 30, readonly = false}) -> Db | nil, err, code */
static int l_open(lua_State *L)
{
    static const char *const allowed[] = {"timeout", "readonly", NULL};
    const char *path = luaL_checkstring(L, 1);
    odp_checkopts(L, 2, allowed);
    double timeout = odp_optnumber(L, 2, "timeout", 30);
    luaL_argcheck(L, timeout >= 0, 2, "timeout must be >= 0");
    int readonly = odp_optboolean(L, 2, "readonly", 0);
    Db *d = lua_newuserdatauv(L, sizeof *d, 0);
    memset(d, 0, sizeof *d);
    d->busy_since = -1;
    d->timeout = timeout;
    luaL_setmetatable(L, DB_TYPE);
    int flags = readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &d->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", d->db ? sqlite3_errmsg(d->db) : sqlite3_errstr(rc));
        close_db(d);
        return fail(L, code_of(rc), path, msg);
    }
    sqlite3_extended_result_codes(d->db, 1);
    sqlite3_busy_handler(d->db, on_busy, d);
    /* A process's last connection neither checkpoints nor deletes the WAL when it closes: one run's history
     * write then costs no fsync of its own (WAL with synchronous=NORMAL; the record file is the durable copy,
     * `odp history import` its way back). The WAL is bounded by truncating it instead (on_wal_commit). */
    sqlite3_db_config(d->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    sqlite3_wal_hook(d->db, on_wal_commit, d);
    return 1;
}

/* db:exec(sql): one or more statements without parameters -> true | nil, err, code */
static int l_exec(lua_State *L)
{
    Db *d = check_db(L);
    const char *sql = luaL_checkstring(L, 2);
    d->busy_since = -1;
    int rc = sqlite3_exec(d->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return db_fail(L, d, rc);
    lua_pushboolean(L, 1);
    return 1;
}

static sqlite3_stmt *prepare(Db *d, const char *sql, size_t len, int *rc)
{
    for (int i = 0; i < STMT_CACHE; i++)
        if (d->cache[i].sql && strcmp(d->cache[i].sql, sql) == 0) {
            *rc = SQLITE_OK;
            return d->cache[i].stmt;
        }
    sqlite3_stmt *st = NULL;
    *rc = sqlite3_prepare_v3(d->db, sql, (int)len + 1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (*rc != SQLITE_OK)
        return NULL;
    if (!st) { /* only a comment or whitespace */
        *rc = SQLITE_MISUSE;
        return NULL;
    }
    char *copy = strdup(sql);
    if (!copy)
        return st; /* not cached: the caller finalizes statements it does not find in the cache */
    int slot = d->next_slot;
    d->next_slot = (d->next_slot + 1) % STMT_CACHE;
    if (d->cache[slot].stmt)
        sqlite3_finalize(d->cache[slot].stmt);
    free(d->cache[slot].sql);
    d->cache[slot].sql = copy;
    d->cache[slot].stmt = st;
    return st;
}

static int cached(Db *d, sqlite3_stmt *st)
{
    for (int i = 0; i < STMT_CACHE; i++)
        if (d->cache[i].stmt == st)
            return 1;
    return 0;
}

static int bind_params(lua_State *L, Db *d, sqlite3_stmt *st, int idx)
{
    int want = sqlite3_bind_parameter_count(st);
    if (lua_isnoneornil(L, idx)) {
        if (want > 0)
            luaL_error(L, "the statement has %d parameter(s) and none were given", want);
        return SQLITE_OK;
    }
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer n = lua_getfield(L, idx, "n") == LUA_TNUMBER ? lua_tointeger(L, -1) : (lua_Integer)lua_rawlen(L, idx);
    lua_pop(L, 1);
    /* $N is the N-th value, wherever it stands and however often (as in PostgreSQL): SQLite numbers
     * parameters in order of first appearance, so each is looked up by its name */
    int most = 0;
    for (int i = 1; i <= want; i++) {
        const char *name = sqlite3_bind_parameter_name(st, i);
        int v = name && name[0] == '$' ? atoi(name + 1) : i;
        if (v > most)
            most = v;
    }
    if (n != most)
        luaL_error(L, "the statement has %d parameter(s), %d given", most, (int)n);
    for (int i = 1; i <= want; i++) {
        int rc;
        const char *name = sqlite3_bind_parameter_name(st, i);
        int v = name && name[0] == '$' ? atoi(name + 1) : i;
        if (v < 1)
            luaL_error(L, "parameter '%s': give $1, $2, ... or ?", name);
        switch (lua_rawgeti(L, idx, v)) {
        case LUA_TNIL:
            rc = sqlite3_bind_null(st, i);
            break;
        case LUA_TBOOLEAN:
            rc = sqlite3_bind_int(st, i, lua_toboolean(L, -1));
            break;
        case LUA_TNUMBER:
            rc = lua_isinteger(L, -1) ? sqlite3_bind_int64(st, i, lua_tointeger(L, -1))
                                      : sqlite3_bind_double(st, i, lua_tonumber(L, -1));
            break;
        case LUA_TSTRING: {
            size_t len;
            const char *s = lua_tolstring(L, -1, &len);
            rc = sqlite3_bind_text64(st, i, s, len, SQLITE_TRANSIENT, SQLITE_UTF8);
            break;
        }
        default:
            return luaL_error(L, "parameter %d: cannot bind a %s", i, luaL_typename(L, -1));
        }
        lua_pop(L, 1);
        if (rc != SQLITE_OK)
            return rc;
    }
    (void)d;
    return SQLITE_OK;
}

/* db:query(sql, params?) -> {n = rows, columns = {names}, <name> = {values}, changes = n} | nil, err, code
 * One statement; params: a list ($1, $2, ... or ?), nil entries bound as NULL (give params.n then). */
static int l_query(lua_State *L)
{
    Db *d = check_db(L);
    size_t len;
    const char *sql = luaL_checklstring(L, 2, &len);
    d->busy_since = -1;
    int rc;
    sqlite3_stmt *st = prepare(d, sql, len, &rc);
    if (!st)
        return db_fail(L, d, rc);
    int own = !cached(d, st);
    rc = bind_params(L, d, st, 3);
    if (rc != SQLITE_OK) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (own)
            sqlite3_finalize(st);
        return db_fail(L, d, rc);
    }
    int ncol = sqlite3_column_count(st);
    lua_createtable(L, 0, ncol + 3);
    int res = lua_gettop(L);
    lua_createtable(L, ncol, 0);
    for (int c = 0; c < ncol; c++) {
        if (reserved(sqlite3_column_name(st, c))) {
            sqlite3_reset(st);
            if (own)
                sqlite3_finalize(st);
            return luaL_error(L, "column '%s' has a reserved name (n, columns, changes): alias it",
                              sqlite3_column_name(st, c));
        }
        lua_pushstring(L, sqlite3_column_name(st, c));
        lua_rawseti(L, -2, c + 1);
        lua_newtable(L);
        lua_setfield(L, res, sqlite3_column_name(st, c));
    }
    lua_setfield(L, res, "columns");
    lua_checkstack(L, ncol + 4);
    for (int c = 0; c < ncol; c++)
        lua_getfield(L, res, sqlite3_column_name(st, c)); /* the column arrays at res+1 .. res+ncol */
    lua_Integer row = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        row++;
        for (int c = 0; c < ncol; c++) {
            switch (sqlite3_column_type(st, c)) {
            case SQLITE_INTEGER:
                lua_pushinteger(L, sqlite3_column_int64(st, c));
                break;
            case SQLITE_FLOAT:
                lua_pushnumber(L, sqlite3_column_double(st, c));
                break;
            case SQLITE_NULL:
                continue;
            default:
                lua_pushlstring(L, (const char *)sqlite3_column_text(st, c), (size_t)sqlite3_column_bytes(st, c));
            }
            lua_rawseti(L, res + 1 + c, row);
        }
    }
    lua_settop(L, res);
    int changes = sqlite3_changes(d->db);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (own)
        sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_fail(L, d, rc);
    lua_pushinteger(L, row);
    lua_setfield(L, res, "n");
    lua_pushinteger(L, ncol ? 0 : changes);
    lua_setfield(L, res, "changes");
    return 1;
}

int luaopen_odp_sqlite(lua_State *L)
{
    static const luaL_Reg methods[] = {{"exec", l_exec}, {"query", l_query}, {"close", l_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_close}, {"__close", l_close}, {NULL, NULL}};
    odp_newclass(L, DB_TYPE, methods, meta);
    static const luaL_Reg fns[] = {{"open", l_open}, {NULL, NULL}};
    luaL_newlib(L, fns);
    lua_pushstring(L, sqlite3_libversion());
    lua_setfield(L, -2, "version");
    return 1;
}
