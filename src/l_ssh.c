/* odp.ssh: SSH sessions (exec, SFTP put/get) over libssh2, and sessions through a running OpenSSH ControlMaster;
 * the C cores are src/ssh/ssh.h and src/ssh/mux.h. */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "l_streamdeps.h"
#include "l_util.h"
#include "ssh/mux.h"
#include "ssh/ssh.h"
#include "util/wait.h"

#define SESSION "odp.ssh.Session"
#define MUX "odp.ssh.Mux"
#define DEFAULT_CONNECT_TIMEOUT_S 30.0

typedef struct {
    odp_ssh *s;
} session_ud;

static session_ud *check_session(lua_State *L)
{
    session_ud *u = luaL_checkudata(L, 1, SESSION);
    if (!u->s)
        luaL_error(L, "attempt to use a closed odp.ssh.Session");
    return u;
}

static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && *h)
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw ? pw->pw_dir : "/";
}

#define MAX_PATHS 32
/* The list of paths opts[key] into out (NULL-terminated; at most MAX_PATHS), the strings kept referenced on the
 * stack. Returns how many, or -1 when the option is absent. */
static int opt_paths(lua_State *L, int idx, const char *key, const char *out[MAX_PATHS + 1])
{
    int t = odp_optfield(L, idx, key);
    out[0] = NULL;
    if (t == LUA_TNIL)
        return -1;
    if (t != LUA_TTABLE)
        luaL_error(L, "option '%s' must be a list of paths", key);
    lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
    if (len > MAX_PATHS)
        luaL_error(L, "option '%s': more than %d paths", key, MAX_PATHS);
    luaL_checkstack(L, (int)len + 2, key);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, -1 - (int)(i - 1), i);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "option '%s' must be a list of paths", key);
        out[i - 1] = lua_tostring(L, -1);
    }
    out[len] = NULL;
    return (int)len;
}

/* opts.keys, else ~/.ssh/id_ed25519, ~/.ssh/id_ecdsa, and ~/.ssh/id_rsa where the linked libssh2 signs RSA with
 * SHA-2. */
static void opt_keys(lua_State *L, int idx, const char *home, const char *keys[MAX_PATHS + 1])
{
    if (opt_paths(L, idx, "keys", keys) >= 0)
        return;
    int n = 0;
    keys[n++] = lua_pushfstring(L, "%s/.ssh/id_ed25519", home);
    keys[n++] = lua_pushfstring(L, "%s/.ssh/id_ecdsa", home);
    if (odp_ssh_rsa_sha2())
        keys[n++] = lua_pushfstring(L, "%s/.ssh/id_rsa", home);
    keys[n] = NULL;
}

/* ssh.connect{host=, port=22, user=$USER, identity=, keys={...}, known_hosts=~/.ssh/known_hosts, known_hosts_also={},
 *             host_key_alias=, accept_new=false, agent=true|false|SOCKET, timeout=30, proxy_command=,
 *             via=Session, alive_interval=0, alive_count_max=3}
 *             passphrase=$ODP_SSH_PASSPHRASE}
 *   -> Session | nil, err, code. A passphrase never comes from odp's argv, where `ps` would show it: from the
 * environment, or from a terminal prompt (lua/odp/target/ssh.lua) passed here in memory. */
static int l_connect(lua_State *L)
{
    static const char *const allowed[] = {"host", "port", "user", "identity", "keys", "known_hosts", "known_hosts_also",
                                          "host_key_alias", "accept_new", "agent", "timeout", "proxy_command",
                                          "via", "alive_interval", "alive_count_max", "passphrase", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    odp_checkopts(L, 1, allowed);
    odp_ssh_opts o = {0};
    o.host = odp_optstring(L, 1, "host", NULL);
    luaL_argcheck(L, o.host && *o.host, 1, "option 'host' is required");
    lua_Integer port = odp_optinteger(L, 1, "port", 22);
    luaL_argcheck(L, port > 0 && port < 65536, 1, "port must be 1..65535");
    o.port = (int)port;
    const char *user = getenv("USER");
    if (!user) {
        struct passwd *pw = getpwuid(getuid());
        user = pw ? pw->pw_name : "root";
    }
    o.user = odp_optstring(L, 1, "user", user);
    o.identity = odp_optstring(L, 1, "identity", NULL);
    const char *home = home_dir();
    lua_pushfstring(L, "%s/.ssh/known_hosts", home);
    o.known_hosts = odp_optstring(L, 1, "known_hosts", lua_tostring(L, -1));
    o.host_key_alias = odp_optstring(L, 1, "host_key_alias", NULL);
    o.accept_new = odp_optboolean(L, 1, "accept_new", 0);
    if (odp_optfield(L, 1, "agent") == LUA_TSTRING) {
        o.use_agent = 1;
        o.agent_socket = lua_tostring(L, -1);
    } else {
        lua_pop(L, 1);
        o.use_agent = odp_optboolean(L, 1, "agent", 1);
    }
    o.deadline = odp_optdeadline(L, 1, DEFAULT_CONNECT_TIMEOUT_S);
    o.passphrase = odp_optstring(L, 1, "passphrase", getenv("ODP_SSH_PASSPHRASE"));
    const char *keys[MAX_PATHS + 1], *also[MAX_PATHS + 1];
    opt_keys(L, 1, home, keys);
    o.keys = keys;
    if (opt_paths(L, 1, "known_hosts_also", also) > 0)
        o.known_hosts_also = also;
    o.proxy_command = odp_optstring(L, 1, "proxy_command", NULL);
    session_ud *via = NULL;
    if (odp_optfield(L, 1, "via") != LUA_TNIL) {
        via = luaL_testudata(L, -1, SESSION);
        luaL_argcheck(L, via && via->s, 1, "via must be an open odp.ssh.Session");
        luaL_argcheck(L, !o.proxy_command, 1, "via and proxy_command exclude each other");
        o.via = via->s;
    }
    lua_Integer alive = odp_optinteger(L, 1, "alive_interval", 0), alive_max = odp_optinteger(L, 1,
                                                                                               "alive_count_max", 3);
    luaL_argcheck(L, alive >= 0 && alive <= 86400 && alive_max >= 0 && alive_max <= 1000, 1,
                  "alive_interval 0..86400 s, alive_count_max 0..1000");
    o.alive_interval = (int)alive;
    o.alive_count_max = (int)alive_max;

    session_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->s = NULL; /* created closed: __gc is safe whatever happens next */
    luaL_setmetatable(L, SESSION);
    odp_err err;
    if (odp_ssh_connect(&o, &u->s, &err))
        return odp_pushfail(L, &err);
    if (via)
        via->s = NULL; /* the new session carries it now and closes it with itself */
    return 1;
}

static int session_close(lua_State *L)
{
    session_ud *u = luaL_checkudata(L, 1, SESSION);
    odp_ssh_close(u->s);
    u->s = NULL;
    return 0;
}

/* Shell-quotes argv for the remote login shell: exec 'a' 'b'\''c'. */
static const char *quote_argv(lua_State *L, int t)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    luaL_argcheck(L, n >= 1, 2, "argv must not be empty");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "exec");
    for (lua_Integer i = 1; i <= n; i++) {
        int ty = lua_rawgeti(L, t, i);
        if (ty != LUA_TSTRING && ty != LUA_TNUMBER)
            luaL_error(L, "argv[%d] must be a string (got %s)", (int)i, luaL_typename(L, -1));
        size_t len;
        const char *a = lua_tolstring(L, -1, &len);
        lua_pop(L, 1);
        luaL_addstring(&b, " '");
        for (size_t k = 0; k < len; k++) {
            if (a[k] == 0)
                luaL_error(L, "argv[%d] contains a NUL byte", (int)i);
            if (a[k] == '\'')
                luaL_addstring(&b, "'\\''");
            else
                luaL_addchar(&b, a[k]);
        }
        luaL_addchar(&b, '\'');
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

static void push_exec_result(lua_State *L, const odp_ssh_exec_result *r)
{
    odp_exec_view v = {r->status, r->signal, r->signal_name[0] ? r->signal_name : NULL, r->timed_out,
                       r->canceled, r->aborted, &r->out, &r->err, r->wall_s};
    odp_push_exec(L, &v);
    if (r->pgid > 0) {
        lua_pushinteger(L, r->pgid);
        lua_setfield(L, -2, "remote_pgid");
    }
    if (r->timed_out || r->canceled || r->aborted) {
        lua_pushboolean(L, r->killed_group);
        lua_setfield(L, -2, "remote_killed");
    }
}

/* session:exec(argv_table | "shell command", {timeout=, stdin=, capture_limit=, on_stdout=, on_stderr=})
 *   -> result (the odp.proc.run shape, without rusage) | nil, err, code */
static int l_exec(lua_State *L)
{
    static const char *const allowed[] = {"timeout", "stdin", "capture_limit", "on_stdout", "on_stderr", NULL};
    session_ud *u = check_session(L);
    lua_settop(L, 3);
    odp_checkopts(L, 3, allowed);
    odp_ssh_exec_opts o = {0};
    if (lua_type(L, 2) == LUA_TTABLE)
        o.command = quote_argv(L, 2);
    else
        o.command = luaL_checkstring(L, 2);
    o.deadline = odp_optdeadline(L, 3, -1);
    odp_exec_io io;
    odp_exec_opts(L, 3, &io);
    o.stdin_data = io.stdin_data;
    o.stdin_len = io.stdin_len;
    o.capture_limit = io.capture_limit;
    o.on_output = odp_exec_on_output;
    o.ctx = &io;
    odp_ssh_exec_result r;
    odp_err err;
    int rc = odp_ssh_exec(u->s, &o, &r, &err);
    if (rc)
        odp_pushfail(L, &err);
    else {
        push_exec_result(L, &r);
        odp_ssh_exec_result_free(&r);
    }
    odp_exec_io_release(&io);
    return rc ? 3 : 1;
}

typedef int (*channel_opener)(void *owner, const char *command, double deadline, odp_stream **out, odp_err *err);

/* The open_channel methods' one body: (command, {timeout=}) at 2 and 3 -> an odp.Stream that keeps its owner (at 1)
 * alive | nil, err, code */
static int push_channel(lua_State *L, channel_opener open, void *owner)
{
    static const char *const allowed[] = {"timeout", NULL};
    const char *cmd = luaL_checkstring(L, 2);
    odp_checkopts(L, 3, allowed);
    double deadline = odp_optdeadline(L, 3, 30);
    odp_require_stream(L);
    odp_stream *st;
    odp_err err;
    if (open(owner, cmd, deadline, &st, &err))
        return odp_pushfail(L, &err);
    odp_pushstream_owned(L, st, 1);
    return 1;
}

static int session_channel(void *s, const char *cmd, double deadline, odp_stream **out, odp_err *err)
{
    return odp_ssh_channel_open(s, cmd, deadline, out, err);
}

/* session:open_channel(command, {timeout=}) -> an odp.Stream of the command's stdout/stdin (its stderr:
 * stream:stderr()) | nil, err, code. The stream keeps its session alive. */
static int l_open_channel(lua_State *L) { return push_channel(L, session_channel, check_session(L)->s); }

/* {round_trips=, bytes_up=, bytes_down=, connect_ms=} */
static void push_traffic(lua_State *L, const odp_ssh_traffic *t)
{
    odp_pushtraffic(L, t->round_trips, t->bytes_up, t->bytes_down);
    lua_pushnumber(L, t->connect_ms);
    lua_setfield(L, -2, "connect_ms");
}

typedef struct {
    odp_luacb cb;
} progress_ctx;

static int on_progress(void *ctx, long long done, long long total)
{
    progress_ctx *p = ctx;
    if (!odp_luacb_present(&p->cb))
        return 0;
    odp_luacb_push(&p->cb);
    lua_pushinteger(p->cb.L, done);
    if (total >= 0)
        lua_pushinteger(p->cb.L, total);
    else
        lua_pushnil(p->cb.L);
    return odp_luacb_call(&p->cb, 2);
}

/* session:put(local, remote, {mode=, on_progress=function(done, total), timeout=}) -> bytes | nil, err, code */
static int l_put(lua_State *L)
{
    static const char *const allowed[] = {"mode", "on_progress", "timeout", NULL};
    session_ud *u = check_session(L);
    const char *local = luaL_checkstring(L, 2), *remote = luaL_checkstring(L, 3);
    lua_settop(L, 4);
    odp_checkopts(L, 4, allowed);
    lua_Integer mode = odp_optinteger(L, 4, "mode", -1);
    luaL_argcheck(L, mode >= -1 && mode <= 07777, 4, "mode must be 0..0o7777");
    double deadline = odp_optdeadline(L, 4, -1);
    progress_ctx p;
    odp_optfield(L, 4, "on_progress");
    odp_luacb_init(&p.cb, L, -1);
    long long bytes = 0;
    odp_err err;
    int rc = odp_ssh_put(u->s, local, remote, (int)mode, deadline, on_progress, &p, &bytes, &err);
    if (rc)
        odp_pushfail(L, &err);
    else
        lua_pushinteger(L, bytes);
    odp_luacb_release(&p.cb);
    return rc ? 3 : 1;
}

/* session:get(remote, local, {on_progress=, timeout=}) -> bytes | nil, err, code */
static int l_get(lua_State *L)
{
    static const char *const allowed[] = {"on_progress", "timeout", NULL};
    session_ud *u = check_session(L);
    const char *remote = luaL_checkstring(L, 2), *local = luaL_checkstring(L, 3);
    lua_settop(L, 4);
    odp_checkopts(L, 4, allowed);
    double deadline = odp_optdeadline(L, 4, -1);
    progress_ctx p;
    odp_optfield(L, 4, "on_progress");
    odp_luacb_init(&p.cb, L, -1);
    long long bytes = 0;
    odp_err err;
    int rc = odp_ssh_get(u->s, remote, local, deadline, on_progress, &p, &bytes, &err);
    if (rc)
        odp_pushfail(L, &err);
    else
        lua_pushinteger(L, bytes);
    odp_luacb_release(&p.cb);
    return rc ? 3 : 1;
}

static int l_uri(lua_State *L)
{
    lua_pushstring(L, odp_ssh_uri(check_session(L)->s));
    return 1;
}

/* session:traffic() -> {round_trips=, bytes_up=, bytes_down=, connect_ms=}: what the connection carried so far
 * (odp_ssh_traffic). */
static int l_traffic(lua_State *L)
{
    odp_ssh_traffic t;
    odp_ssh_traffic_get(check_session(L)->s, &t);
    push_traffic(L, &t);
    return 1;
}

/* session:lost() -> nil while the connection is up, else why it is gone ("closed" for a closed session). */
static int l_lost(lua_State *L)
{
    session_ud *u = luaL_checkudata(L, 1, SESSION);
    const char *why = u->s ? odp_ssh_lost(u->s) : "closed";
    if (why)
        lua_pushstring(L, why);
    else
        lua_pushnil(L);
    return 1;
}

static int l_fingerprint(lua_State *L)
{
    lua_pushstring(L, odp_ssh_fingerprint(check_session(L)->s));
    return 1;
}

static int session_tostring(lua_State *L)
{
    session_ud *u = luaL_checkudata(L, 1, SESSION);
    if (u->s)
        lua_pushfstring(L, SESSION " (%s)", odp_ssh_uri(u->s));
    else
        lua_pushliteral(L, SESSION " (closed)");
    return 1;
}

/* ---------- ControlMaster ---------- */

typedef struct {
    odp_ssh_mux *m;
} mux_ud;

static mux_ud *check_mux(lua_State *L)
{
    mux_ud *u = luaL_checkudata(L, 1, MUX);
    if (!u->m)
        luaL_error(L, "attempt to use a closed odp.ssh.Mux");
    return u;
}

/* ssh.mux(control_path, {timeout=}) -> the master there (an odp.ssh.Mux), its pid | nil, err, code (ENODEV: no
 * master there, or a socket that is not this user's) */
static int l_mux(lua_State *L)
{
    static const char *const allowed[] = {"timeout", NULL};
    const char *path = luaL_checkstring(L, 1);
    odp_checkopts(L, 2, allowed);
    double deadline = odp_optdeadline(L, 2, 10);
    mux_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->m = NULL;
    luaL_setmetatable(L, MUX);
    long pid = 0;
    odp_err err;
    if (odp_ssh_mux_open(path, deadline, &u->m, &pid, &err))
        return odp_pushfail(L, &err);
    lua_pushinteger(L, pid);
    return 2;
}

/* ssh.mux_clear_stale(control_path) -> true when a socket of this user's that nobody listens on was removed */
static int l_mux_clear_stale(lua_State *L)
{
    lua_pushboolean(L, odp_ssh_mux_clear_stale(luaL_checkstring(L, 1)));
    return 1;
}

static int mux_channel(void *m, const char *cmd, double deadline, odp_stream **out, odp_err *err)
{
    return odp_ssh_mux_channel_open(m, cmd, deadline, out, err);
}

/* mux:open_channel(command, {timeout=}) -> an odp.Stream of the command's stdout/stdin (its stderr:
 * stream:stderr()) | nil, err, code */
static int l_mux_open_channel(lua_State *L) { return push_channel(L, mux_channel, check_mux(L)->m); }

/* mux:alive({timeout=}) -> the master's pid | nil, err, code */
static int l_mux_alive(lua_State *L)
{
    static const char *const allowed[] = {"timeout", NULL};
    mux_ud *u = check_mux(L);
    odp_checkopts(L, 2, allowed);
    double deadline = odp_optdeadline(L, 2, 10);
    long pid = 0;
    odp_err err;
    if (odp_ssh_mux_alive(u->m, deadline, &pid, &err))
        return odp_pushfail(L, &err);
    lua_pushinteger(L, pid);
    return 1;
}

/* mux:traffic() -> {round_trips=, bytes_up=, bytes_down=, connect_ms=}: see odp_ssh_mux_traffic_get */
static int l_mux_traffic(lua_State *L)
{
    odp_ssh_traffic t;
    odp_ssh_mux_traffic_get(check_mux(L)->m, &t);
    push_traffic(L, &t);
    return 1;
}

static int l_mux_path(lua_State *L)
{
    lua_pushstring(L, odp_ssh_mux_path(check_mux(L)->m));
    return 1;
}

static int mux_close(lua_State *L)
{
    mux_ud *u = luaL_checkudata(L, 1, MUX);
    odp_ssh_mux_close(u->m);
    u->m = NULL;
    return 0;
}

static int l_libssh2_version(lua_State *L)
{
    lua_pushstring(L, odp_ssh_libssh2_version());
    return 1;
}

/* For `odp version -v`. */
static int l_backend_version(lua_State *L)
{
    lua_pushfstring(L, "libssh2 %s, RSA keys %s", odp_ssh_libssh2_version(),
                    odp_ssh_rsa_sha2() ? "signed with rsa-sha2-256/512" : "SHA-1 only: use ed25519 keys");
    return 1;
}

static int l_rsa_sha2(lua_State *L)
{
    lua_pushboolean(L, odp_ssh_rsa_sha2());
    return 1;
}

int luaopen_odp_ssh(lua_State *L)
{
    static const luaL_Reg methods[] = {{"exec", l_exec},   {"put", l_put},
                                       {"get", l_get},     {"uri", l_uri},
                                       {"fingerprint", l_fingerprint}, {"open_channel", l_open_channel},
                                       {"lost", l_lost}, {"traffic", l_traffic}, {"close", session_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", session_close}, {"__close", session_close},
                                    {"__tostring", session_tostring}, {NULL, NULL}};
    odp_newclass(L, SESSION, methods, meta);
    static const luaL_Reg mux_methods[] = {{"open_channel", l_mux_open_channel}, {"alive", l_mux_alive},
                                           {"traffic", l_mux_traffic}, {"path", l_mux_path},
                                           {"close", mux_close}, {NULL, NULL}};
    static const luaL_Reg mux_meta[] = {{"__gc", mux_close}, {"__close", mux_close}, {NULL, NULL}};
    odp_newclass(L, MUX, mux_methods, mux_meta);
    static const char *const mux_waiting[] = {"open_channel", "alive", NULL};
    odp_waiting_methods(L, MUX, mux_waiting);
    static const luaL_Reg funcs[] = {{"connect", l_connect}, {"mux", l_mux}, {"mux_clear_stale", l_mux_clear_stale},
                                     {"libssh2_version", l_libssh2_version},
                                     {"rsa_sha2", l_rsa_sha2}, {"backend_version", l_backend_version},
                                     {NULL, NULL}};
    static const char *const waiting_methods[] = {"exec", "put", "get", "open_channel", "close", NULL};
    static const char *const waiting[] = {"connect", "mux", NULL};
    odp_waiting_methods(L, SESSION, waiting_methods);
    luaL_newlib(L, funcs);
    odp_waiting(L, -1, waiting);
    return 1;
}
