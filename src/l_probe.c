/* odp.probe: open a debug probe (jlink | gdb | qemu) as odp.probe.Probe with read/write/halt/go/reset/close. */
#include <string.h>

#include "l_probe.h"
#include "l_util.h"

#define PROBE_MT "odp.probe.Probe"
#define READ_MAX (64u << 20)

typedef struct {
    odp_probe *p;
} lprobe;

odp_probe *odp_checkprobe(lua_State *L, int idx)
{
    lprobe *u = luaL_checkudata(L, idx, PROBE_MT);
    if (!u->p)
        luaL_error(L, "attempt to use a closed probe");
    return u->p;
}

static const char *const io_opts[] = {"timeout", NULL};

static uint32_t check_addr(lua_State *L, int idx)
{
    lua_Integer a = luaL_checkinteger(L, idx);
    luaL_argcheck(L, a >= 0 && a <= 0xffffffff, idx, "address must be 0..0xffffffff");
    return (uint32_t)a;
}

/* p:read(addr, n, {timeout=}) -> bytes | nil, err, code */
static int l_read(lua_State *L)
{
    odp_probe *p = odp_checkprobe(L, 1);
    uint32_t addr = check_addr(L, 2);
    lua_Integer n = luaL_checkinteger(L, 3);
    luaL_argcheck(L, n >= 0 && n <= READ_MAX, 3, "size must be 0..64 MiB");
    odp_checkopts(L, 4, io_opts);
    double deadline = odp_optdeadline(L, 4, 10);
    luaL_Buffer b;
    char *buf = luaL_buffinitsize(L, &b, (size_t)n);
    odp_err err;
    if (odp_probe_read(p, addr, buf, (size_t)n, deadline, &err))
        return odp_pushfail(L, &err);
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

/* p:write(addr, bytes, {timeout=}) -> true | nil, err, code */
static int l_write(lua_State *L)
{
    odp_probe *p = odp_checkprobe(L, 1);
    uint32_t addr = check_addr(L, 2);
    size_t n;
    const char *data = luaL_checklstring(L, 3, &n);
    odp_checkopts(L, 4, io_opts);
    double deadline = odp_optdeadline(L, 4, 10);
    odp_err err;
    if (odp_probe_write(p, addr, data, n, deadline, &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int control(lua_State *L, int (*fn)(odp_probe *, double, odp_err *))
{
    odp_probe *p = odp_checkprobe(L, 1);
    odp_checkopts(L, 2, io_opts);
    double deadline = odp_optdeadline(L, 2, 10);
    odp_err err;
    if (fn(p, deadline, &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_halt(lua_State *L) { return control(L, odp_probe_halt); }
static int l_go(lua_State *L) { return control(L, odp_probe_go); }
static int l_reset(lua_State *L) { return control(L, odp_probe_reset); }

static int l_kind(lua_State *L)
{
    lua_pushstring(L, odp_checkprobe(L, 1)->ops->kind);
    return 1;
}

static int l_close(lua_State *L)
{
    lprobe *u = luaL_checkudata(L, 1, PROBE_MT);
    if (u->p) {
        odp_probe_release(u->p);
        u->p = NULL;
    }
    return 0;
}

static int l_tostring(lua_State *L)
{
    lprobe *u = luaL_checkudata(L, 1, PROBE_MT);
    if (u->p)
        lua_pushfstring(L, PROBE_MT " (%s, %p)", u->p->ops->kind, (void *)u);
    else
        lua_pushliteral(L, PROBE_MT " (closed)");
    return 1;
}

#define ENV_MAX 16

/* jlink's env={NAME = VALUE}: extra environment for its helper process only (each J-Link has its own process,
 * so each can have its own: the test DLL finds its twin in ODP_TWIN_STATE). Fills env with "NAME=VALUE"
 * strings kept on the Lua stack until the caller resets it, NULL-ended. */
static void jlink_env(lua_State *L, const char **env)
{
    int n = 0;
    if (lua_getfield(L, 1, "env") != LUA_TNIL) {
        luaL_argcheck(L, lua_istable(L, -1), 1, "env must be a table {NAME = VALUE}");
        int t = lua_absindex(L, -1);
        lua_pushnil(L);
        while (lua_next(L, t)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
            luaL_argcheck(L, k && *k && !strchr(k, '=') && lua_type(L, -1) == LUA_TSTRING, 1,
                          "env: NAME = VALUE strings (a NAME without '=')");
            luaL_argcheck(L, n < ENV_MAX, 1, "env: at most 16 variables");
            env[n++] = lua_pushfstring(L, "%s=%s", k, lua_tostring(L, -1));
            lua_insert(L, -3); /* below the key and value: lua_next goes on */
            lua_pop(L, 1);
        }
    }
    env[n] = NULL;
}

/* probe.open{backend="jlink"|"gdb"|"qemu", ...backend options, timeout=} -> Probe | nil, err, code */
static int l_open(lua_State *L)
{
    static const char *const allowed[] = {"backend", "device", "speed_khz", "serial", "ip", "lib", "env", "address",
                                          "shm", "base", "qmp", "timeout", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    odp_checkopts(L, 1, allowed);
    const char *backend = odp_optstring(L, 1, "backend", NULL);
    luaL_argcheck(L, backend != NULL, 1, "option 'backend' is required (\"jlink\", \"gdb\" or \"qemu\")");
    double deadline = odp_optdeadline(L, 1, 10);
    lprobe *u = lua_newuserdatauv(L, sizeof *u, 0); /* created closed, filled once the probe is open */
    u->p = NULL;
    luaL_setmetatable(L, PROBE_MT);
    odp_err err;
    odp_probe *p = NULL;
    if (!strcmp(backend, "qemu")) {
        const char *shm = odp_optstring(L, 1, "shm", NULL);
        luaL_argcheck(L, shm != NULL, 1, "backend qemu needs shm= (QEMU's memory-backend-file path)");
        lua_Integer base = odp_optinteger(L, 1, "base", 0x60000000);
        luaL_argcheck(L, base >= 0 && base <= 0xffffffff, 1, "base must be a 32-bit address");
        p = odp_probe_qemu_open(shm, (uint32_t)base, odp_optstring(L, 1, "qmp", NULL), deadline, &err);
    } else if (!strcmp(backend, "gdb")) {
        const char *address = odp_optstring(L, 1, "address", NULL);
        luaL_argcheck(L, address != NULL, 1, "backend gdb needs address=\"host:port\"");
        p = odp_probe_gdb_open(address, deadline, &err);
    } else if (!strcmp(backend, "jlink")) {
        lua_Integer khz = odp_optinteger(L, 1, "speed_khz", 4000);
        luaL_argcheck(L, khz > 0 && khz <= 100000, 1, "speed_khz must be 1..100000");
        luaL_argcheck(L, !odp_optstring(L, 1, "serial", NULL) || !odp_optstring(L, 1, "ip", NULL), 1,
                      "give serial (USB) or ip (J-Link Remote Server), not both");
        const char *env[ENV_MAX + 1];
        int top = lua_gettop(L); /* the userdata */
        jlink_env(L, env);
        p = odp_probe_jlink_open_env(odp_optstring(L, 1, "lib", NULL), odp_optstring(L, 1, "device", NULL), (int)khz,
                                     odp_optstring(L, 1, "serial", NULL), odp_optstring(L, 1, "ip", NULL),
                                     env[0] ? env : NULL, deadline, &err);
        lua_settop(L, top);
    } else {
        return luaL_argerror(L, 1, lua_pushfstring(L, "unknown backend '%s' (jlink, gdb, qemu)", backend));
    }
    if (!p)
        return odp_pushfail(L, &err);
    u->p = p;
    return 1;
}

/* probe.jlink_lib([lib]) -> path | nil, err, code: the DLL the jlink backend would load */
static int l_jlink_lib(lua_State *L)
{
    char path[4096];
    odp_err err;
    if (odp_jlink_find_lib(luaL_optstring(L, 1, NULL), path, sizeof path, &err))
        return odp_pushfail(L, &err);
    lua_pushstring(L, path);
    return 1;
}

/* probe.usb_list([vid]): odp.usb.list, kept here for the probe's callers. libusb lives in the odp.usb module,
 * loaded on first use, so a run that never lists USB devices never loads it. */
static int l_usb_list(lua_State *L)
{
    lua_settop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "odp.usb");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "list");
    lua_pushvalue(L, 1);
    lua_call(L, 1, LUA_MULTRET);
    return lua_gettop(L) - 2;
}

int luaopen_odp_probe(lua_State *L)
{
    static const luaL_Reg methods[] = {{"read", l_read}, {"write", l_write}, {"halt", l_halt}, {"go", l_go},
                                       {"reset", l_reset}, {"kind", l_kind}, {"close", l_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_close}, {"__close", l_close}, {"__tostring", l_tostring}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"open", l_open}, {"jlink_lib", l_jlink_lib},
                                   {"usb_list", l_usb_list}, {NULL, NULL}};
    static const char *const waiting_methods[] = {"read", "write", "halt", "go", "reset", NULL};
    static const char *const waiting[] = {"open", NULL};
    odp_newclass(L, PROBE_MT, methods, meta);
    odp_waiting_methods(L, PROBE_MT, waiting_methods);
    luaL_newlib(L, fns);
    odp_waiting(L, -1, waiting);
    return 1;
}
