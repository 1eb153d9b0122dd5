/* odp.sys: the small system services Lua lacks (hashes, base64, atomic files, clocks, terminals). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>
#include <zlib.h>

#include "l_util.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/tty.h"
#include "util/wait.h"

static int push_errno(lua_State *L, const char *what)
{
    odp_err err;
    odp_fail_errno(&err, odp_code_from_errno(errno), errno, "%s", what);
    return odp_pushfail(L, &err);
}

static int l_sha256(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    char hex[ODP_SHA256_HEX];
    odp_sha256_hex(s, n, hex);
    lua_pushstring(L, hex);
    return 1;
}

static int l_sha256_file(lua_State *L)
{
    char hex[ODP_SHA256_HEX];
    odp_err err;
    if (odp_sha256_file_hex(luaL_checkstring(L, 1), hex, &err))
        return odp_pushfail(L, &err);
    lua_pushstring(L, hex);
    return 1;
}

static int l_base64_encode(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, 4 * ((n + 2) / 3) + 1);
    luaL_pushresultsize(&b, odp_base64_encode(s, n, out));
    return 1;
}

/* crc32(s [, crc]) -> zlib's CRC-32 (the gzip trailer's), continuing from crc. zlib is opened on the first
 * call, not linked (odp links only Lua and libc: startup, see the Makefile's LAZY). */
static int l_crc32(lua_State *L)
{
    static __typeof__(crc32) *zcrc32;
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    uLong crc = (uLong)luaL_optinteger(L, 2, 0);
    if (!zcrc32) {
        void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
        zcrc32 = h ? (__typeof__(crc32) *)dlsym(h, "crc32") : NULL;
        if (!zcrc32)
            return luaL_error(L, "crc32 needs zlib (libz.so.1): %s", h ? "no crc32 in it" : dlerror());
    }
    while (n > 0) { /* zlib's length is a uInt */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = zcrc32(crc, (const Bytef *)s, k);
        s += k;
        n -= k;
    }
    lua_pushinteger(L, (lua_Integer)crc);
    return 1;
}

/* lz4_compress(s) -> an LZ4 block of s (liblz4's LZ4_compress_default, opened on the first call, not linked),
 * or nil when that would not be shorter than s or liblz4 (liblz4.so.1) is missing: the caller then sends s as it
 * is. The helper's upload chunks (docs/helper-protocol.md 'P'); src/helper/lz4.c decodes them on the board. */
static int l_lz4_compress(lua_State *L)
{
    typedef int bound_fn(int);
    typedef int compress_fn(const char *, char *, int, int);
    static bound_fn *bound;
    static compress_fn *compress;
    static int tried;
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    if (!tried) {
        tried = 1;
        void *h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
        bound = h ? (bound_fn *)dlsym(h, "LZ4_compressBound") : NULL;
        compress = h ? (compress_fn *)dlsym(h, "LZ4_compress_default") : NULL;
    }
    if (!bound || !compress || n == 0 || n > (1u << 30)) {
        lua_pushnil(L);
        return 1;
    }
    int cap = bound((int)n);
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, (size_t)cap);
    int got = compress(s, out, (int)n, cap);
    if (got <= 0 || (size_t)got >= n) {
        lua_pushnil(L);
        return 1;
    }
    luaL_pushresultsize(&b, (size_t)got);
    return 1;
}

/* base64_decode(s) -> bytes | nil, "EPROTO: ...", "EPROTO" (malformed input is data from a device). */
static int l_base64_decode(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    luaL_Buffer b;
    unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, 3 * (n / 4) + 3);
    long len = odp_base64_decode(s, n, out);
    if (len < 0) {
        odp_err err;
        odp_fail(&err, ODP_EPROTO, "malformed base64 (%zu characters)", n);
        return odp_pushfail(L, &err);
    }
    luaL_pushresultsize(&b, (size_t)len);
    return 1;
}

static int l_now(lua_State *L)
{
    lua_pushnumber(L, odp_now());
    return 1;
}

static int l_time(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    lua_pushnumber(L, (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
    return 1;
}

/* sleep(seconds) -> true | nil, "ECANCELED: interrupted", "ECANCELED" */
static int l_sleep(lua_State *L)
{
    double s = luaL_checknumber(L, 1);
    odp_err err;
    if (odp_sleep_until(odp_deadline(s < 0 ? 0 : s), &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int check_fd(lua_State *L, int idx)
{
    static const char *const names[] = {"stdin", "stdout", "stderr", NULL};
    if (lua_type(L, idx) == LUA_TNUMBER)
        return (int)luaL_checkinteger(L, idx);
    return luaL_checkoption(L, idx, "stdout", names);
}

static int l_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty(check_fd(L, 1)));
    return 1;
}

/* sys.read_secret() -> the line typed on the terminal with echo off | nil, err, code (ENODEV without one). */
static int l_read_secret(lua_State *L)
{
    char buf[1024];
    odp_err err;
    if (odp_tty_read_secret(buf, sizeof buf, ODP_FOREVER, &err))
        return odp_pushfail(L, &err);
    lua_pushstring(L, buf);
    explicit_bzero(buf, sizeof buf);
    return 1;
}

static int l_term_width(lua_State *L)
{
    struct winsize ws;
    if (ioctl(check_fd(L, 1), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        lua_pushinteger(L, ws.ws_col);
    else
        luaL_pushfail(L);
    return 1;
}

/* read_file(path) -> bytes | nil, "ENOTFOUND: ...", code (io.open's message carries no code to branch on) */
static int l_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    FILE *f = fopen(path, "rb");
    if (!f)
        return push_errno(L, path);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    size_t n;
    do {
        char *p = luaL_prepbuffer(&b);
        n = fread(p, 1, LUAL_BUFFERSIZE, f);
        luaL_addsize(&b, n);
    } while (n == LUAL_BUFFERSIZE);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        errno = EIO;
        return push_errno(L, path);
    }
    luaL_pushresult(&b);
    return 1;
}

/* file_contains(path, bytes) -> boolean | nil, "ENOTFOUND: ...", code: without reading the file into memory */
static int l_file_contains(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *needle = luaL_checklstring(L, 2, &n);
    luaL_argcheck(L, n >= 1 && n <= 4096, 2, "1 to 4096 bytes");
    int found;
    odp_err err;
    if (odp_file_contains(path, needle, n, &found, &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, found);
    return 1;
}

static int l_write_file(lua_State *L)
{
    static const char *const allowed[] = {"mode", "batch", NULL};
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *data = luaL_checklstring(L, 2, &n);
    odp_checkopts(L, 3, allowed);
    mode_t mode = (mode_t)odp_optinteger(L, 3, "mode", 0644);
    int batch = odp_optboolean(L, 3, "batch", 0);
    odp_err err;
    if (odp_write_atomic(path, data, n, mode, batch, &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_append_sync(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *data = luaL_checklstring(L, 2, &n);
    odp_err err;
    if (odp_append_sync(path, data, n, &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_mkdir_p(lua_State *L)
{
    odp_err err;
    if (odp_mkdir_p(luaL_checkstring(L, 1), (mode_t)luaL_optinteger(L, 2, 0755), &err))
        return odp_pushfail(L, &err);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_rename(lua_State *L)
{
    if (rename(luaL_checkstring(L, 1), luaL_checkstring(L, 2)))
        return push_errno(L, lua_tostring(L, 1));
    lua_pushboolean(L, 1);
    return 1;
}

/* stat(path) -> {type="file"|"dir"|"other", size, mode, mtime, ctime, executable, readable, dev, ino} | nil, err, code.
 * dev and ino name the file itself, whatever path reaches it (a symlink, a hard link, a bind mount). */
static int l_stat(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;
    if (stat(path, &st))
        return push_errno(L, path);
    lua_createtable(L, 0, 8);
    lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : "other");
    lua_setfield(L, -2, "type");
    lua_pushinteger(L, st.st_size);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, st.st_mode & 07777);
    lua_setfield(L, -2, "mode");
    lua_pushnumber(L, (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9);
    lua_setfield(L, -2, "mtime");
    /* the inode's last change (content, mode, links, rename): set by the kernel, never by utime(), so a file
     * given another's size and mtime still differs here (odp.results.result.file_info's sha256 cache) */
    lua_pushnumber(L, (double)st.st_ctim.tv_sec + (double)st.st_ctim.tv_nsec * 1e-9);
    lua_setfield(L, -2, "ctime");
    lua_pushboolean(L, access(path, X_OK) == 0);
    lua_setfield(L, -2, "executable");
    lua_pushboolean(L, access(path, R_OK) == 0);
    lua_setfield(L, -2, "readable");
    lua_pushinteger(L, (lua_Integer)st.st_dev);
    lua_setfield(L, -2, "dev");
    lua_pushinteger(L, (lua_Integer)st.st_ino);
    lua_setfield(L, -2, "ino");
    return 1;
}

/* free_bytes(path) -> bytes this user may still write on path's file system (statvfs: f_bavail * f_frsize)
 * | nil, err, code */
static int l_free_bytes(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct statvfs vfs;
    if (statvfs(path, &vfs))
        return push_errno(L, path);
    lua_pushinteger(L, (lua_Integer)vfs.f_bavail * (lua_Integer)vfs.f_frsize);
    return 1;
}

static int l_chmod(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    if (chmod(path, (mode_t)luaL_checkinteger(L, 2)))
        return push_errno(L, path);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_realpath(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    char buf[PATH_MAX];
    if (!realpath(path, buf))
        return push_errno(L, path);
    lua_pushstring(L, buf);
    return 1;
}

static int l_readdir(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    DIR *d = opendir(path);
    if (!d)
        return push_errno(L, path);
    lua_newtable(L);
    int i = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            lua_pushstring(L, e->d_name);
            lua_rawseti(L, -2, ++i);
        }
    closedir(d);
    return 1;
}

static int l_getpid(lua_State *L)
{
    lua_pushinteger(L, getpid());
    return 1;
}

/* fd_path(file) -> "/proc/PID/fd/N": a path by which a child of odp opens the same open Lua file, also one with
 * no name (memfile()): what odp hands a helper to write into leaves nothing behind when odp is killed. */
static int l_fd_path(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    luaL_argcheck(L, s->closef != NULL, 1, "attempt to use a closed file");
    lua_pushfstring(L, "/proc/%d/fd/%d", (int)getpid(), fileno(s->f));
    return 1;
}

/* A memfile's close, as io's own (liolib's is static): the file is at 1, its result in io's convention. */
static int memfile_close(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    return luaL_fileresult(L, fclose(s->f) == 0, NULL);
}

/* memfile() -> file | nil, err, code: an io file with no name that lives in memory (memfd_create(2)), what
 * io.tmpfile() gives without a file system: a file made and freed in a busy /tmp cost 0.35 ms (ext4 looking
 * for a free inode that was not freed lately) of every runner process the host target measures. */
static int l_memfile(lua_State *L)
{
    luaL_Stream *s = lua_newuserdatauv(L, sizeof *s, 0);
    s->closef = NULL; /* closed until it is open, as io makes its files */
    luaL_setmetatable(L, LUA_FILEHANDLE);
    int fd = memfd_create("odp", MFD_CLOEXEC);
    if (fd < 0)
        return push_errno(L, "memfd_create");
    s->f = fdopen(fd, "w+");
    if (!s->f) {
        int e = errno;
        close(fd);
        errno = e;
        return push_errno(L, "fdopen");
    }
    s->closef = memfile_close;
    return 1;
}

static int l_hostname(lua_State *L)
{
    char buf[256] = "";
    gethostname(buf, sizeof buf - 1);
    lua_pushstring(L, buf);
    return 1;
}

/* Inside a task of the scheduler (odp.core.sched: a coroutine while it runs), a cancel raised or lifted from Lua is
 * the task's own (a board's cleanup lifts and raises it), kept per coroutine; the process's Ctrl-C still shows.
 * Returns the flag's table on the stack (weak keys: the coroutines), or 0 outside a task. */
static int task_cancels(lua_State *L)
{
    int main_thread = lua_pushthread(L);
    lua_pop(L, 1);
    if (main_thread || odp_scheduling(0) <= 0)
        return 0;
    if (luaL_getsubtable(L, LUA_REGISTRYINDEX, "odp.sys.task_cancel") == 0) {
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
    }
    return 1;
}

static int set_task_cancel(lua_State *L, int on)
{
    if (!task_cancels(L))
        return 0;
    lua_pushthread(L);
    if (on)
        lua_pushboolean(L, 1);
    else
        lua_pushnil(L);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    return 1;
}

/* Lifts a Ctrl-C once it has been handled (the REPL returns to its prompt). */
static int l_cancel_clear(lua_State *L)
{
    if (!set_task_cancel(L, 0))
        odp_cancel_clear();
    return 0;
}

/* Raises the Ctrl-C request again, after a cleanup that had to lift it to wait (stopping a run on a board). */
static int l_cancel_request(lua_State *L)
{
    if (!set_task_cancel(L, 1))
        odp_cancel_request();
    return 0;
}

static int l_cancel_requested(lua_State *L)
{
    if (task_cancels(L)) {
        lua_pushthread(L);
        lua_rawget(L, -2);
        lua_pushboolean(L, lua_toboolean(L, -1) || odp_interrupted());
        return 1;
    }
    lua_pushboolean(L, odp_cancel_requested());
    return 1;
}

/* terminating() -> the signal number (SIGHUP, SIGTERM) that asked odp to end, or nil. */
static int l_terminating(lua_State *L)
{
    int sig = odp_terminate_signal();
    if (sig)
        lua_pushinteger(L, sig);
    else
        lua_pushnil(L);
    return 1;
}

#define LOCK_MT "odp.sys.Lock"
typedef struct {
    int fd;
} llock;

/* lock(path) -> lock | nil, "EBUSY: PATH is held by pid N", "EBUSY", pid (0: a holder this machine does not
 * see). An flock on the file itself; lock:release() (also __gc, __close) gives it back and leaves the file. */
static int l_lock(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    llock *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->fd = -1;
    luaL_setmetatable(L, LOCK_MT);
    odp_err err;
    long holder = 0;
    int fd = odp_lock_file(path, &holder, &err);
    if (fd < 0) {
        int n = odp_pushfail(L, &err);
        lua_pushinteger(L, holder);
        return n + 1;
    }
    u->fd = fd;
    return 1;
}

static int lock_release(lua_State *L)
{
    llock *u = luaL_checkudata(L, 1, LOCK_MT);
    if (u->fd >= 0)
        odp_unlock_file(u->fd);
    u->fd = -1;
    return 0;
}

int luaopen_odp_sys(lua_State *L)
{
    static const luaL_Reg lock_methods[] = {{"release", lock_release}, {NULL, NULL}};
    static const luaL_Reg lock_meta[] = {{"__gc", lock_release}, {"__close", lock_release}, {NULL, NULL}};
    odp_newclass(L, LOCK_MT, lock_methods, lock_meta);
    static const luaL_Reg funcs[] = {
        {"sha256", l_sha256}, {"sha256_file", l_sha256_file},
        {"base64_encode", l_base64_encode}, {"base64_decode", l_base64_decode}, {"crc32", l_crc32},
        {"lz4_compress", l_lz4_compress},
        {"now", l_now}, {"time", l_time}, {"sleep", l_sleep},
        {"isatty", l_isatty}, {"term_width", l_term_width}, {"read_secret", l_read_secret},
        {"read_file", l_read_file}, {"file_contains", l_file_contains},
        {"write_file", l_write_file}, {"append_sync", l_append_sync}, {"mkdir_p", l_mkdir_p},
        {"rename", l_rename}, {"chmod", l_chmod}, {"stat", l_stat}, {"free_bytes", l_free_bytes}, {"realpath", l_realpath}, {"readdir", l_readdir},
        {"getpid", l_getpid}, {"fd_path", l_fd_path}, {"memfile", l_memfile}, {"hostname", l_hostname}, {"cancel_requested", l_cancel_requested},
        {"cancel_clear", l_cancel_clear}, {"cancel_request", l_cancel_request}, {"terminating", l_terminating},
        {"lock", l_lock}, {NULL, NULL}};
    static const char *const waiting[] = {"sleep", NULL};
    luaL_newlib(L, funcs);
    odp_waiting(L, -1, waiting);
    return 1;
}
