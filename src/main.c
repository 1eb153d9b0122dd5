/* odp: the Lua host. Creates the state, registers the C modules, finds the Lua library and hands the
 * command line to odp.cli.main (Lua), which owns the CLI. Ctrl-C: the first asks every wait to stop
 * (children are killed, partial results kept); the second interrupts Lua code; the third exits. SIGHUP (a
 * closed terminal) and SIGTERM do the same and also ask odp to end: the REPL leaves, boards are closed and
 * odp exits 128+signal (docs/signals.md). */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/probe.h"
#include "util/wait.h"

#ifndef ODP_VERSION
#define ODP_VERSION "0.0.0-dev"
#endif
#ifndef ODP_DATADIR
#define ODP_DATADIR "/usr/local/share/odp"
#endif
#ifndef ODP_LIBDIR
#define ODP_LIBDIR "/usr/local/lib"
#endif

#define ODP_MODULE(name) int luaopen_odp_##name(lua_State *L);
#include "modules.h"
#undef ODP_MODULE
int luaopen_lpeg(lua_State *L);

static lua_State *main_L;
static volatile sig_atomic_t hooked;

/* The second Ctrl-C: the Lua code is interrupted where it is, with the same structured failure (ECANCELED) as
 * every wait gives, so the run's record is kept and odp says one line (odp.core.errors; no traceback). */
static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    hooked = 0;
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "odp.core.errors") == LUA_TTABLE && lua_getfield(L, -1, "fail") == LUA_TFUNCTION) {
        lua_pushliteral(L, "ECANCELED");
        lua_pushliteral(L, "interrupted again while odp was still stopping: the Lua code was cut where it was");
        lua_call(L, 2, 0); /* raises */
    }
    luaL_error(L, "interrupted");
}

/* A repeat of the signal within this many seconds is the same request: `timeout -s INT` signals odp and then
 * its whole process group, so odp gets the signal twice at once; a person's second Ctrl-C comes later. */
#define SAME_SIGNAL_S 0.5

/* Ctrl-C: the first asks every wait to stop (ECANCELED: children killed, transfers aborted); a second one
 * while that is pending interrupts the Lua code; a third kills odp. odp.sys.cancel_clear() (the REPL, after
 * each statement) starts the count again. */
static void on_interrupt(int sig)
{
    static double last;
    double now = odp_now(); /* clock_gettime: async-signal-safe */
    int repeat = last > 0 && now - last < SAME_SIGNAL_S && odp_interrupted();
    last = now;
    if (repeat)
        return;
    if (sig != SIGINT && !odp_terminate_signal()) {
        odp_terminate_request(sig);
    } else if (!odp_interrupted()) {
        odp_interrupt();
    } else if (!hooked && main_L) {
        hooked = 1;
        lua_sethook(main_L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
    } else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static int file_exists(const char *p) { return access(p, F_OK) == 0; }

/* The directory odp's executable is in ("" when /proc/self/exe cannot be read). */
static void find_exe_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    dir[len > 0 ? len : 0] = 0;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        dir[0] = 0;
}

/* The directory holding lua/, scripts/, devices/: the source tree when run from it (build/odp), else
 * <prefix>/share/odp beside <prefix>/bin/odp (so an installed tree can be moved), else the configured
 * install data dir. */
static void find_root(const char *exe_dir, char *root, size_t n)
{
    static const char *const candidates[] = {"..", "../share/odp"};
    for (size_t i = 0; *exe_dir && i < sizeof candidates / sizeof candidates[0]; i++) {
        char probe[PATH_MAX + 64];
        snprintf(probe, sizeof probe, "%s/%s/lua/odp/cli/main.lua", exe_dir, candidates[i]);
        if (!file_exists(probe))
            continue;
        snprintf(probe, sizeof probe, "%s/%s", exe_dir, candidates[i]);
        if (realpath(probe, root))
            return;
    }
    snprintf(root, n, "%s", ODP_DATADIR);
}

#ifdef LUA_LDIR2
#define SYSTEM_LUA_DIR LUA_LDIR2 /* Debian's luaconf.h: /usr/share/lua/5.4/ */
#else
#define SYSTEM_LUA_DIR "/usr/share/lua/" LUA_VERSION_MAJOR "." LUA_VERSION_MINOR "/"
#endif

/* Each directory of ODP_PATH (':'-separated) as package.path or package.cpath entries: "dir/?.lua;..." */
static void add_odp_path(lua_State *L, luaL_Buffer *b, const char *templ)
{
    const char *user = getenv("ODP_PATH");
    if (!user || !*user)
        return;
    char *copy = strdup(user), *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        lua_pushfstring(L, templ, d, d);
        luaL_addvalue(b);
    }
    free(copy);
}

/* The whole of an open file in a malloc'd buffer (NULL when it cannot be read), in one read where it can:
 * odp reads every module's source and chunk at start, and stdio's 4 KB reads were ~150 read calls of a host
 * run. A read that brings the size fstat gave is the end (no second read to see it): a syscall costs ~1 us
 * on the VMs odp is measured on, and a host run reads ~100 files. */
static char *read_fd(int fd, size_t *len)
{
    struct stat st;
    size_t n = 0, size = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : 0;
    size_t cap = size ? size + 1 : 16384;
    char *data = malloc(cap);
    if (!data)
        return NULL;
    while (!size || n < size) {
        if (n == cap) {
            char *more = realloc(data, cap *= 2);
            if (!more)
                goto fail;
            data = more;
        }
        ssize_t got = read(fd, data + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            goto fail;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    *len = n;
    return data;
fail:
    free(data);
    return NULL;
}

static char *read_whole(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *data = read_fd(fd, len);
    close(fd);
    return data;
}

/* package.searchpath(name, package.path) that keeps the file it found open: the first of package.path's
 * templates whose file opens for reading (as searchpath's own test, fopen "r"). Pushes that path and returns
 * the descriptor, or pushes nothing and returns -1: a module's source is opened once, not probed and opened
 * again. */
static int open_on_path(lua_State *L, const char *name)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    const char *path = lua_tostring(L, -1);
    const char *file_name = luaL_gsub(L, name, ".", LUA_DIRSEP);
    for (const char *t = path; t;) {
        const char *end = strchr(t, *LUA_PATH_SEP);
        size_t n = end ? (size_t)(end - t) : strlen(t);
        if (n > 0) {
            lua_pushlstring(L, t, n);
            const char *candidate = luaL_gsub(L, lua_tostring(L, -1), LUA_PATH_MARK, file_name);
            int fd = open(candidate, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                lua_replace(L, -5); /* the path in package's place; template, name and package.path popped */
                lua_pop(L, 3);
                return fd;
            }
            lua_pop(L, 2);
        }
        t = end ? end + 1 : NULL;
    }
    lua_pop(L, 3);
    return -1;
}

/* The precompiled chunk's key (tools/luac.lua computes the same): FNV-1a's 64-bit step over the source taken
 * 8 bytes at a time in native order (the chunks are built where they run), then its last bytes one by one;
 * a word at a time costs a fifth of byte-wise FNV over the ~250 KB a host run loads. */
static unsigned long long source_hash(const char *p, size_t n)
{
    unsigned long long h = 14695981039346656037ULL, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ULL;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

/* A package.searchers entry placed before Lua's own: the module's source is found on package.path as
 * usual (so ODP_PATH overrides win); when a precompiled chunk of that very file exists (make writes
 * build/luac/<path under lua/>c with tools/luac.lua, make install <prefix>/lib/odp/luac/, and luac/system/
 * for the Debian Lua libraries odp uses) and its header names the same path, size and hash of the source's bytes (and the hash of the chunk's own
 * bytes matches), the chunk is loaded
 * instead of parsing the source. Any mismatch (an edited source, another file, a chunk of another Lua)
 * returns nothing and Lua's searcher parses the source: a stale chunk is never loaded. Parsing odp's Lua
 * was most of a host run's own instructions (bench/README.md, "Precompiled Lua"). */
static int search_bytecode(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    const char *cache = lua_tostring(L, lua_upvalueindex(1));
    int fd = open_on_path(L, name);
    if (fd < 0)
        return 0;
    const char *src = lua_tostring(L, -1);
    const char *under = NULL, *area = NULL;
    for (int i = 2; i <= 3 && !under; i++) {
        size_t n;
        const char *prefix = lua_tolstring(L, lua_upvalueindex(i), &n);
        if (strncmp(src, prefix, n) == 0) {
            under = src + n;
            area = i == 2 ? "" : "system/";
        }
    }
    size_t src_len, chunk_len;
    char *chunk = NULL, *source = NULL;
    if (under && strlen(under) >= 5 && strcmp(under + strlen(under) - 4, ".lua") == 0)
        chunk = read_whole(lua_pushfstring(L, "%s/%s%sc", cache, area, under), &chunk_len);
    if (chunk)
        source = read_fd(fd, &src_len);
    close(fd);
    if (!chunk)
        return 0;
    int found = 0;
    if (source) {
        /* header: "odp-bytecode 1 PATH SIZE SOURCE-HASH CHUNK-HASH\n"; the chunk's own hash keeps a damaged
         * file from reaching Lua's undump, which trusts its input */
        const char *key = lua_pushfstring(L, "odp-bytecode 1 %s %I %s ", src, (lua_Integer)src_len,
                                          lua_pushfstring(L, "%I", (lua_Integer)source_hash(source, src_len)));
        size_t key_len = strlen(key);
        const char *eol = chunk_len > key_len ? memchr(chunk + key_len, '\n', chunk_len - key_len) : NULL;
        if (eol && memcmp(chunk, key, key_len) == 0) {
            const char *body = eol + 1;
            size_t body_len = chunk_len - (size_t)(body - chunk);
            const char *want = lua_pushfstring(L, "%I", (lua_Integer)source_hash(body, body_len));
            found = (size_t)(eol - chunk) - key_len == strlen(want) &&
                    memcmp(chunk + key_len, want, strlen(want)) == 0 &&
                    luaL_loadbufferx(L, body, body_len, src, "b") == LUA_OK;
        }
    }
    free(source);
    free(chunk);
    if (!found)
        return 0;
    lua_pushstring(L, src);
    return 2;
}

/* Puts search_bytecode second in package.searchers (after package.preload's, before the source's). */
static void add_bytecode_searcher(lua_State *L, const char *exe_dir, const char *root)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    /* build/luac/ beside build/odp in the source tree, else <prefix>/lib/odp/luac/ (make install) */
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/luac", exe_dir);
    if (!file_exists(dir))
        snprintf(dir, sizeof dir, "%s/../lib/odp/luac", exe_dir);
    lua_pushstring(L, dir);
    lua_pushfstring(L, "%s/lua/", root);
    lua_pushliteral(L, SYSTEM_LUA_DIR);
    lua_pushcclosure(L, search_bytecode, 3);
    for (lua_Integer i = (lua_Integer)luaL_len(L, -2); i >= 2; i--) {
        lua_rawgeti(L, -2, i);
        lua_rawseti(L, -3, i + 1);
    }
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}

/* package.cpath: the lazy C modules (odp/<m>.so) beside the binary in the build tree (build/lib), in the
 * install tree (<prefix>/lib beside <prefix>/bin) or the configured one, after ODP_PATH's directories; last,
 * Debian's directory of Lua 5.4 C modules (LUA_CDIR2 of its luaconf.h). */
static void set_cpath(lua_State *L, const char *exe_dir)
{
    lua_getglobal(L, "package");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    add_odp_path(L, &b, "%s/?.so;");
    if (*exe_dir) {
        lua_pushfstring(L, "%s/lib/?.so;%s/../lib/?.so;", exe_dir, exe_dir);
        luaL_addvalue(&b);
    }
    luaL_addstring(&b, ODP_LIBDIR "/?.so");
#ifdef LUA_CDIR2
    /* then the C modules Debian packages for Lua 5.4 (lua-yaml: the labgrid provider's YAML parser) */
    luaL_addstring(&b, ";" LUA_CDIR2 "?.so");
#endif
    luaL_pushresult(&b);
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
}

static void set_paths(lua_State *L, const char *root)
{
    lua_getglobal(L, "package");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    /* ODP_PATH: directories, each searched like lua/ (dir/?.lua, dir/?/init.lua). */
    add_odp_path(L, &b, "%s/?.lua;%s/?/init.lua;");
    lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua", root, root);
    luaL_addvalue(&b);
    /* then the pure-Lua libraries Debian packages for Lua 5.4 (lua-dkjson: odp.core.json's codec); never the
     * current directory */
    luaL_addstring(&b, ";" SYSTEM_LUA_DIR "?.lua;" SYSTEM_LUA_DIR "?/init.lua");
    luaL_pushresult(&b);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
}

static void preload(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
#define ODP_MODULE(name)                         \
    lua_pushcfunction(L, luaopen_odp_##name);    \
    lua_setfield(L, -2, "odp." #name);
#include "modules.h"
#undef ODP_MODULE
    lua_pushcfunction(L, luaopen_lpeg);
    lua_setfield(L, -2, "lpeg");
    lua_pop(L, 1);
}

/* package.loaded["odp.host"]: facts about this binary for the Lua side. */
static void push_host_info(lua_State *L, const char *root, int argc, char **argv, double started)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_createtable(L, 0, 9);
    /* odp.sys.now() at main()'s start: where a run's own cost begins (odp.core.timings) */
    lua_pushnumber(L, started);
    lua_setfield(L, -2, "started");
    lua_pushstring(L, ODP_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, root);
    lua_setfield(L, -2, "root");
    lua_pushstring(L, LUA_RELEASE);
    lua_setfield(L, -2, "lua_release");
    lua_pushstring(L, __DATE__ " " __TIME__);
    lua_setfield(L, -2, "built");
#ifdef __VERSION__
    lua_pushstring(L, "cc " __VERSION__);
    lua_setfield(L, -2, "compiler");
#endif
    lua_createtable(L, argc, 0);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    lua_setfield(L, -2, "argv");
    lua_setfield(L, -2, "odp.host");
    lua_pop(L, 1);
}

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define ODP_SANITIZED 1
#else
#define ODP_SANITIZED 0
#endif

#if !ODP_SANITIZED
/* Lua's allocator once the process is about to end: allocates as before (finalizers may), frees nothing. */
static void *alloc_at_exit(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    (void)osize;
    return nsize == 0 ? NULL : realloc(ptr, nsize);
}
#endif

static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL && !lua_isnoneornil(L, 1) && !luaL_callmeta(L, 1, "__tostring")) {
        /* a structured error (odp.fail): hand it back untouched for odp.cli.main to present */
        return 1;
    }
    if (msg == NULL)
        msg = lua_tostring(L, -1);
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int main(int argc, char **argv)
{
    double started = odp_now();
    signal(SIGPIPE, SIG_IGN);
    /* a J-Link's helper process (src/probe/jlink.c): odp re-executed to own one DLL; no Lua */
    if (argc > 1 && strcmp(argv[1], "--jlink-helper") == 0)
        return odp_jlink_helper_main(argc, argv);
    if (odp_wait_init()) {
        perror("odp: pipe");
        return 3;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "odp: out of memory\n");
        return 3;
    }
    main_L = L;
    luaL_openlibs(L);
    char exe_dir[PATH_MAX], root[PATH_MAX];
    find_exe_dir(exe_dir, sizeof exe_dir);
    find_root(exe_dir, root, sizeof root);
    set_paths(L, root);
    set_cpath(L, exe_dir);
    preload(L);
    if (*exe_dir)
        add_bytecode_searcher(L, exe_dir, root);
    push_host_info(L, root, argc, argv, started);

    int code = 2;
    lua_pushcfunction(L, traceback);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "odp.cli.main");
    if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
        fprintf(stderr, "odp: cannot load the Lua library from %s/lua (set ODP_PATH?)\n%s\n", root,
                lua_tostring(L, -1));
        lua_close(L);
        return 2;
    }
    lua_getfield(L, -1, "main");
    lua_createtable(L, argc, 0);
    for (int i = 1; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
        /* odp.cli.main catches everything it can present; what reaches here is a bug in odp itself */
        fprintf(stderr, "odp: internal error: %s\n", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
        code = 2;
    } else {
        code = (int)luaL_optinteger(L, -1, 0);
    }
    /* The process ends here: lua_close still runs every pending finalizer (files flushed, connections and
     * helpers closed), but the memory it would then free object by object (~3 M instructions, a tenth of a
     * host run) goes back to the kernel with the process. Not under AddressSanitizer (make asan): the blocks
     * lua_close unlinks without freeing would be reported as leaks, and real ones would hide among them. */
#if !ODP_SANITIZED
    lua_setallocf(L, alloc_at_exit, NULL);
#endif
    lua_close(L);
    return code;
}
