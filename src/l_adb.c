/* odp.adb: Android devices over adb, through Google's adb server when one runs, else directly (USB, TCP).
 *   adb.devices() -> {{serial=, transport="usb", state=, model=, ...}, ...}      (direct USB)
 *   adb.server{server=, timeout=} -> {address=, version=, devices={{serial=, state=, model=, ...}}} | nil, err, code
 *   adb.server_address{server=} -> "tcp:HOST:PORT" (the server connect and server would use; no I/O) | nil, err, code
 *   adb.connect{serial=, transport="auto"|"server"|"usb"|"tcp:HOST:PORT", server=, timeout=, auth_timeout=,
 *               on_auth_prompt=} -> odp.adb.Device | nil, err, code
 *   dev:shell(argv_or_string, {timeout=, stdin=, capture_limit=, on_stdout=, on_stderr=}) -> the exec result
 *   dev:push(local, remote, {mode=, on_progress=, timeout=}) -> true
 *   dev:pull(remote, local, {on_progress=, timeout=}) -> true
 *   dev:stat(path, {timeout=}) -> {type=, mode=, size=, mtime=}
 *   dev:broken() -> true once the transport dropped (connect again)
 *   dev:info() -> {serial=, transport=, model=, product=, device=, features={...}, version=, maxdata=}
 *   dev:close() */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adb/auth.h"
#include "adb/conn.h"
#include "adb/server.h"
#include "adb/services.h"
#include "adb/tcp.h"
#include "adb/usb.h"
#include "l_streamdeps.h"
#include "l_util.h"
#include "util/wait.h"

#define DEVICE_MT "odp.adb.Device"
#define DEFAULT_TIMEOUT_S 10.0
#define DEFAULT_AUTH_TIMEOUT_S 120.0
#define SERVER_PROBE_S 3.0

typedef struct {
    struct adb_link link; /* link.close is NULL once closed */
    struct adb_conn *c;   /* the direct connection (NULL through the adb server) */
    int server_version;   /* through the adb server: its host protocol version */
    char serial[160];
    char transport[160];
    char server[300];     /* "tcp:HOST:PORT" through the adb server */
} ldev;

static ldev *check_dev(lua_State *L)
{
    ldev *d = luaL_checkudata(L, 1, DEVICE_MT);
    if (!d->link.close)
        luaL_error(L, "attempt to use a closed adb device");
    return d;
}

static int dev_close(lua_State *L)
{
    ldev *d = luaL_checkudata(L, 1, DEVICE_MT);
    adb_link_close(&d->link);
    d->c = NULL;
    return 0;
}

/* opts.server, else ADB_SERVER_SOCKET, else ANDROID_ADB_SERVER_ADDRESS:ANDROID_ADB_SERVER_PORT (Google's adb's
 * variables, so odp finds the server the user's adb uses). */
static int server_addr(lua_State *L, int opts, struct adb_server_addr *a, odp_err *e)
{
    const char *spec = odp_optstring(L, opts, "server", NULL);
    const char *host = getenv("ANDROID_ADB_SERVER_ADDRESS");
    host = host && *host ? host : "localhost";
    char built[300];
    if (!spec)
        spec = getenv("ADB_SERVER_SOCKET");
    if (!spec || !*spec) {
        const char *port = getenv("ANDROID_ADB_SERVER_PORT");
        snprintf(built, sizeof built, "tcp:%s:%s", host, port && *port ? port : "5037");
        spec = built;
    }
    return adb_server_addr_parse(spec, host, a, e);
}

typedef struct {
    odp_luacb cb;
    lua_State *L;
} event_ctx;

static void on_event(void *ud, enum adb_event ev, uint64_t done, uint64_t total)
{
    event_ctx *x = ud;
    if (!odp_luacb_present(&x->cb) || x->cb.err_ref != LUA_NOREF)
        return;
    odp_luacb_push(&x->cb);
    if (ev == ADB_EV_PROGRESS) {
        lua_pushinteger(x->L, (lua_Integer)done);
        lua_pushinteger(x->L, (lua_Integer)total);
        odp_luacb_call(&x->cb, 2);
    } else {
        odp_luacb_call(&x->cb, 0);
    }
}

/* odp's own adb connection (USB, or TCP when tcp is set): CNXN, AUTH with the user's keys. */
static int connect_direct(ldev *d, int tcp, const char *host, int port, const char *serial, event_ctx *ev,
                          double deadline, double auth_timeout, odp_err *err)
{
    struct adb_transport t;
    int rc;
    if (tcp) {
        rc = adb_tcp_open(host, port, deadline, &t, err);
        snprintf(d->serial, sizeof d->serial, "%s:%d", host, port);
    } else {
        rc = adb_usb_open(serial, deadline, &t, d->serial, sizeof d->serial, err);
    }
    if (rc)
        return rc;
    EVP_PKEY *keys[ADB_KEYS_MAX];
    int nkeys = adb_keys_load(keys, ADB_KEYS_MAX, getenv("HOME"), getenv("ADB_VENDOR_KEYS"), err->msg, sizeof err->msg);
    if (nkeys < 0) {
        t.close(t.ctx);
        return err->code = ODP_EAUTH;
    }
    char comment[300], hostname[200] = "host";
    gethostname(hostname, sizeof hostname - 1);
    const char *user = getenv("USER");
    snprintf(comment, sizeof comment, "%s@%s", user && *user ? user : "odp", hostname);
    struct adb_conn_opts o = {
        .keys = keys,
        .nkeys = nkeys,
        .key_comment = comment,
        .auth_deadline = odp_deadline(auth_timeout),
        .on_event = on_event,
        .ud = ev,
    };
    d->c = adb_conn_open(&t, &o, deadline, err);
    for (int i = 0; i < nkeys; i++)
        EVP_PKEY_free(keys[i]);
    if (!d->c)
        return err->code;
    adb_conn_link(d->c, &d->link);
    return 0;
}

static int l_connect(lua_State *L)
{
    static const char *const allowed[] = {"serial", "transport", "server", "timeout", "auth_timeout",
                                          "on_auth_prompt", NULL};
    static const char *const usage = "transport must be \"auto\", \"server\", \"usb\" or \"tcp:HOST:PORT\"";
    lua_settop(L, 1);
    if (lua_isnoneornil(L, 1)) {
        lua_newtable(L);
        lua_replace(L, 1);
    }
    odp_checkopts(L, 1, allowed);
    const char *serial = odp_optstring(L, 1, "serial", NULL);
    const char *transport = odp_optstring(L, 1, "transport", "auto");
    double deadline = odp_deadline(odp_optnumber(L, 1, "timeout", DEFAULT_TIMEOUT_S));
    double auth_timeout = odp_optnumber(L, 1, "auth_timeout", DEFAULT_AUTH_TIMEOUT_S);
    char host[100];
    int port = 0;
    int tcp = 0;
    if (!strncmp(transport, "tcp:", 4)) {
        const char *hp = transport + 4;
        const char *colon = strrchr(hp, ':');
        if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof host || !(port = atoi(colon + 1)) || port > 65535)
            luaL_argerror(L, 1, usage);
        memcpy(host, hp, (size_t)(colon - hp));
        host[colon - hp] = 0;
        tcp = 1;
    } else if (strcmp(transport, "usb") != 0 && strcmp(transport, "server") != 0 && strcmp(transport, "auto") != 0) {
        luaL_argerror(L, 1, usage);
    }
    event_ctx ev = {.L = L};
    odp_optfield(L, 1, "on_auth_prompt");
    odp_luacb_init(&ev.cb, L, -1);

    ldev *d = lua_newuserdatauv(L, sizeof *d, 0);
    memset(d, 0, sizeof *d);
    luaL_setmetatable(L, DEVICE_MT);
    int ud = lua_gettop(L);

    odp_err err;
    int rc = 0, via_server = 0;
    struct adb_server_addr a;
    if (!strcmp(transport, "server") || !strcmp(transport, "auto")) {
        rc = server_addr(L, 1, &a, &err);
        if (rc == 0) {
            /* a running server answers at once; a silent listener must not cost the whole timeout */
            double probe = odp_now() + SERVER_PROBE_S;
            int version = adb_server_version(&a, probe < deadline ? probe : deadline, &err);
            via_server = version > 0;
            d->server_version = via_server ? version : 0;
            /* auto: no server runs, so nobody holds the phone's USB interface: talk to it directly */
            rc = version > 0 || (version == ODP_ENODEV && !strcmp(transport, "auto")) ? 0 : version;
        }
    }
    if (rc == 0 && via_server) {
        struct adb_server_opts so = {serial, odp_deadline(auth_timeout), on_event, &ev};
        rc = adb_server_link(&a, &so, deadline, &d->link, d->serial, sizeof d->serial, &err);
        snprintf(d->transport, sizeof d->transport, "server");
        snprintf(d->server, sizeof d->server, "tcp:%s:%d", a.host, a.port);
    } else if (rc == 0) {
        rc = connect_direct(d, tcp, host, port, serial, &ev, deadline, auth_timeout, &err);
        snprintf(d->transport, sizeof d->transport, "%s", tcp ? transport : "usb");
    }
    odp_luacb_release(&ev.cb);
    if (rc)
        return odp_pushfail(L, &err);
    lua_pushvalue(L, ud);
    return 1;
}

static void push_features(lua_State *L, const char *features)
{
    lua_newtable(L);
    const char *p = features;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l) {
            lua_pushlstring(L, p, l);
            lua_pushboolean(L, 1);
            lua_rawset(L, -3);
        }
        if (!c)
            break;
        p = c + 1;
    }
}

/* dev:broken() -> true when the transport dropped: connect again. */
static int dev_broken(lua_State *L)
{
    ldev *d = check_dev(L);
    lua_pushboolean(L, d->link.broken(d->link.ctx));
    return 1;
}

/* dev:traffic() -> {round_trips=, bytes_up=, bytes_down=} of a direct connection (struct adb_traffic); nil
 * through the adb server. */
static int dev_traffic(lua_State *L)
{
    ldev *d = check_dev(L);
    if (!d->link.traffic)
        return lua_pushnil(L), 1;
    struct adb_traffic t;
    d->link.traffic(d->link.ctx, &t);
    odp_pushtraffic(L, t.round_trips, t.bytes_up, t.bytes_down);
    return 1;
}

static int dev_info(lua_State *L)
{
    ldev *d = check_dev(L);
    const struct adb_banner *b = &d->link.banner;
    lua_createtable(L, 0, 10);
    lua_pushstring(L, d->serial);
    lua_setfield(L, -2, "serial");
    lua_pushstring(L, d->transport);
    lua_setfield(L, -2, "transport");
    lua_pushstring(L, b->state);
    lua_setfield(L, -2, "state");
    lua_pushstring(L, b->model);
    lua_setfield(L, -2, "model");
    lua_pushstring(L, b->product);
    lua_setfield(L, -2, "product");
    lua_pushstring(L, b->device);
    lua_setfield(L, -2, "device");
    push_features(L, b->features);
    lua_setfield(L, -2, "features");
    if (d->c) {
        lua_pushinteger(L, adb_conn_version(d->c));
        lua_setfield(L, -2, "version");
        lua_pushinteger(L, adb_conn_maxdata(d->c));
        lua_setfield(L, -2, "maxdata");
    } else {
        lua_pushstring(L, d->server);
        lua_setfield(L, -2, "server");
        lua_pushinteger(L, d->server_version);
        lua_setfield(L, -2, "server_version");
    }
    return 1;
}

/* argv -> one command line for the device's /bin/sh, each word single-quoted. */
static const char *shell_command(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TSTRING)
        return lua_tostring(L, idx);
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    luaL_argcheck(L, n >= 1, idx, "argv must hold at least one string");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, idx, i) != LUA_TSTRING && !lua_isnumber(L, -1))
            luaL_error(L, "argv[%d] must be a string", (int)i);
        const char *w = lua_tostring(L, -1);
        lua_pop(L, 1);
        if (i > 1)
            luaL_addchar(&b, ' ');
        luaL_addchar(&b, '\'');
        for (; *w; w++) {
            if (*w == '\'')
                luaL_addstring(&b, "'\\''");
            else
                luaL_addchar(&b, *w);
        }
        luaL_addchar(&b, '\'');
    }
    luaL_pushresult(&b);
    lua_replace(L, idx);
    return lua_tostring(L, idx);
}

static int dev_shell(lua_State *L)
{
    static const char *const allowed[] = {"timeout", "stdin", "capture_limit", "on_stdout", "on_stderr", NULL};
    ldev *d = check_dev(L);
    lua_settop(L, 3);
    const char *cmd = shell_command(L, 2);
    odp_checkopts(L, 3, allowed);
    double deadline = odp_optdeadline(L, 3, -1);
    odp_exec_io io;
    odp_exec_opts(L, 3, &io);
    struct adb_shell_result r;
    memset(&r, 0, sizeof r);
    r.out.limit = r.err.limit = io.capture_limit;
    odp_err err;
    double t0 = odp_now();
    int rc = adb_shell(&d->link, cmd, (const uint8_t *)io.stdin_data, io.stdin_len, odp_exec_on_output, &io, &r,
                            deadline, &err);
    double wall = odp_now() - t0;
    int timed_out = rc && err.code == ODP_ETIMEDOUT;
    int canceled = rc && err.code == ODP_ECANCELED;
    if (rc && !timed_out && !canceled) {
        odp_buf_free(&r.out);
        odp_buf_free(&r.err);
        odp_exec_io_release(&io);
        return odp_pushfail(L, &err);
    }
    odp_exec_view v = {
        .status = rc || r.status < 0 ? 0 : r.status,
        .timed_out = timed_out,
        .canceled = canceled,
        .aborted = r.aborted,
        .out = &r.out,
        .err = &r.err,
        .wall_s = wall,
    };
    odp_push_exec(L, &v);
    lua_pushboolean(L, r.v2);
    lua_setfield(L, -2, "separate_stderr");
    odp_buf_free(&r.out);
    odp_buf_free(&r.err);
    odp_exec_io_release(&io); /* re-raises an error from on_stdout/on_stderr */
    return 1;
}

/* dev:open_channel(command, {timeout=}) -> an odp.Stream of a shell,v2 command's stdout/stdin (its stderr:
 * stream:stderr()) | nil, err, code (EPROTO without shell_v2). The stream keeps its device alive. */
static int dev_open_channel(lua_State *L)
{
    static const char *const allowed[] = {"timeout", NULL};
    ldev *d = check_dev(L);
    const char *cmd = luaL_checkstring(L, 2);
    odp_checkopts(L, 3, allowed);
    double deadline = odp_optdeadline(L, 3, DEFAULT_TIMEOUT_S);
    odp_require_stream(L);
    odp_stream *st;
    odp_err err;
    if (adb_shell_stream_open(&d->link, cmd, deadline, &st, &err))
        return odp_pushfail(L, &err);
    odp_pushstream_owned(L, st, 1);
    return 1;
}

static int dev_push(lua_State *L)
{
    static const char *const allowed[] = {"mode", "on_progress", "timeout", NULL};
    ldev *d = check_dev(L);
    const char *local = luaL_checkstring(L, 2);
    const char *remote = luaL_checkstring(L, 3);
    lua_settop(L, 4);
    odp_checkopts(L, 4, allowed);
    lua_Integer mode = odp_optinteger(L, 4, "mode", 0);
    luaL_argcheck(L, mode >= 0 && mode <= 07777, 4, "mode must be 0..07777");
    double deadline = odp_optdeadline(L, 4, -1);
    event_ctx ev = {.L = L};
    odp_optfield(L, 4, "on_progress");
    odp_luacb_init(&ev.cb, L, -1);
    odp_err err;
    int rc = adb_push(&d->link, local, remote, mode ? (uint32_t)mode | 0100000 : 0, deadline, on_event, &ev, &err);
    odp_luacb_release(&ev.cb);
    if (rc)
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int dev_pull(lua_State *L)
{
    static const char *const allowed[] = {"on_progress", "timeout", NULL};
    ldev *d = check_dev(L);
    const char *remote = luaL_checkstring(L, 2);
    const char *local = luaL_checkstring(L, 3);
    lua_settop(L, 4);
    odp_checkopts(L, 4, allowed);
    double deadline = odp_optdeadline(L, 4, -1);
    event_ctx ev = {.L = L};
    odp_optfield(L, 4, "on_progress");
    odp_luacb_init(&ev.cb, L, -1);
    odp_err err;
    int rc = adb_pull(&d->link, remote, local, deadline, on_event, &ev, &err);
    odp_luacb_release(&ev.cb);
    if (rc)
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int dev_stat(lua_State *L)
{
    static const char *const allowed[] = {"timeout", NULL};
    ldev *d = check_dev(L);
    const char *path = luaL_checkstring(L, 2);
    lua_settop(L, 3);
    odp_checkopts(L, 3, allowed);
    double deadline = odp_optdeadline(L, 3, DEFAULT_TIMEOUT_S);
    struct adb_sync_stat st;
    odp_err err;
    if (adb_stat(&d->link, path, &st, deadline, &err))
        return odp_pushfail(L, &err);
    if (st.error) {
        odp_fail_errno(&err, odp_code_from_errno((int)st.error), (int)st.error, "%s on the device", path);
        return odp_pushfail(L, &err);
    }
    lua_createtable(L, 0, 5);
    const char *type = S_ISREG(st.mode) ? "file" : S_ISDIR(st.mode) ? "directory" : S_ISLNK(st.mode) ? "link" : "other";
    lua_pushstring(L, type);
    lua_setfield(L, -2, "type");
    lua_pushinteger(L, st.mode & 07777);
    lua_setfield(L, -2, "mode");
    lua_pushinteger(L, (lua_Integer)st.size);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, st.mtime);
    lua_setfield(L, -2, "mtime");
    return 1;
}

static int l_devices(lua_State *L)
{
    struct adb_usb_info list[32];
    odp_err err;
    int n = adb_usb_list(list, 32, &err);
    if (n < 0)
        return odp_pushfail(L, &err);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 6);
        lua_pushstring(L, list[i].serial);
        lua_setfield(L, -2, "serial");
        lua_pushliteral(L, "usb");
        lua_setfield(L, -2, "transport");
        lua_pushstring(L, list[i].state);
        lua_setfield(L, -2, "state");
        lua_pushstring(L, list[i].product);
        lua_setfield(L, -2, "model");
        lua_pushfstring(L, "%d-%d", list[i].bus, list[i].address);
        lua_setfield(L, -2, "usb_path");
        if (list[i].hint[0]) {
            lua_pushstring(L, list[i].hint);
            lua_setfield(L, -2, "hint");
        }
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* adb.server{server=, timeout=} -> {address=, version=, devices={...}} | nil, err, code (ENODEV: none runs) */
static int l_server(lua_State *L)
{
    static const char *const allowed[] = {"server", "timeout", NULL};
    lua_settop(L, 1);
    if (lua_isnoneornil(L, 1)) {
        lua_newtable(L);
        lua_replace(L, 1);
    }
    odp_checkopts(L, 1, allowed);
    double deadline = odp_deadline(odp_optnumber(L, 1, "timeout", SERVER_PROBE_S));
    struct adb_server_addr a;
    odp_err err;
    if (server_addr(L, 1, &a, &err) != 0)
        return odp_pushfail(L, &err);
    int version = adb_server_version(&a, deadline, &err);
    if (version < 0)
        return odp_pushfail(L, &err);
    struct adb_host_device *list = malloc(64 * sizeof *list);
    if (!list)
        return luaL_error(L, "out of memory");
    int n = adb_server_devices(&a, list, 64, deadline, &err);
    if (n < 0) {
        free(list);
        return odp_pushfail(L, &err);
    }
    lua_createtable(L, 0, 3);
    lua_pushfstring(L, "tcp:%s:%d", a.host, a.port);
    lua_setfield(L, -2, "address");
    lua_pushinteger(L, version);
    lua_setfield(L, -2, "version");
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const struct adb_host_device *d = &list[i];
        lua_createtable(L, 0, 7);
        const char *const fields[][2] = {{"serial", d->serial}, {"state", d->state},   {"model", d->model},
                                         {"product", d->product}, {"device", d->device}, {"usb", d->usb}};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            if (!fields[f][1][0])
                continue;
            lua_pushstring(L, fields[f][1]);
            lua_setfield(L, -2, fields[f][0]);
        }
        if (d->transport_id >= 0) {
            lua_pushinteger(L, d->transport_id);
            lua_setfield(L, -2, "transport_id");
        }
        lua_rawseti(L, -2, i + 1);
    }
    free(list);
    lua_setfield(L, -2, "devices");
    return 1;
}

/* adb.server_address{server=} -> "tcp:HOST:PORT" | nil, err, code: which server adb.connect would talk to (for the
 * lock on that server's connections, odp.target.adb), read from opts and the environment like connect does. */
static int l_server_address(lua_State *L)
{
    static const char *const allowed[] = {"server", NULL};
    lua_settop(L, 1);
    if (lua_isnoneornil(L, 1)) {
        lua_newtable(L);
        lua_replace(L, 1);
    }
    odp_checkopts(L, 1, allowed);
    struct adb_server_addr a;
    odp_err err;
    if (server_addr(L, 1, &a, &err) != 0)
        return odp_pushfail(L, &err);
    lua_pushfstring(L, "tcp:%s:%d", a.host, a.port);
    return 1;
}

int luaopen_odp_adb(lua_State *L)
{
    static const luaL_Reg methods[] = {{"shell", dev_shell}, {"push", dev_push}, {"pull", dev_pull},
                                       {"stat", dev_stat},   {"info", dev_info}, {"broken", dev_broken}, {"traffic", dev_traffic},
                                       {"close", dev_close}, {"open_channel", dev_open_channel},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", dev_close}, {"__close", dev_close}, {NULL, NULL}};
    odp_newclass(L, DEVICE_MT, methods, meta);
    static const luaL_Reg funcs[] = {{"devices", l_devices}, {"server", l_server}, {"connect", l_connect},
                                     {"server_address", l_server_address}, {NULL, NULL}};
    static const char *const waiting_methods[] = {"shell", "push", "pull", "stat", "info", "open_channel", NULL};
    static const char *const waiting[] = {"devices", "server", "connect", NULL};
    odp_waiting_methods(L, DEVICE_MT, waiting_methods);
    luaL_newlib(L, funcs);
    odp_waiting(L, -1, waiting);
    return 1;
}
