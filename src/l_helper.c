/* odp.helper: the helper protocol's frames (src/helper/frame.h) for odp's client (lua/odp/target/helper.lua),
 * and the in-process device-state snapshot the host target serves (src/helper/state.h). */
#include <string.h>

#include "l_util.h"
#include "helper/frame.h"
#include "helper/state.h"
#include "proc/proc.h"
#include "util/wait.h"

#define DECODER "odp.helper.Decoder"

/* helper.encode(type, {field, ...}) -> frame bytes. A type is one character; more than 1 MiB of fields raises. */
static int l_encode(lua_State *L)
{
    size_t tl;
    const char *t = luaL_checklstring(L, 1, &tl);
    luaL_argcheck(L, tl == 1, 1, "a frame type is one character");
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n <= ODP_FRAME_FIELDS_MAX, 2, "more than 4096 fields");
    odp_buf b = {0};
    size_t at = odp_frame_begin(&b, (uint8_t)t[0]);
    int ok = 1;
    for (lua_Integer i = 1; i <= n && ok; i++) {
        lua_geti(L, 2, i);
        size_t fl;
        const char *f = lua_tolstring(L, -1, &fl);
        if (!f) {
            odp_buf_free(&b);
            return luaL_argerror(L, 2, "fields must be strings or numbers");
        }
        ok = odp_frame_add(&b, f, fl) == 0;
        lua_pop(L, 1);
    }
    if (!ok || odp_frame_end(&b, at)) {
        odp_buf_free(&b);
        return luaL_argerror(L, 2, "a frame holds at most 1 MiB");
    }
    lua_pushlstring(L, b.data, b.len);
    odp_buf_free(&b);
    return 1;
}

static odp_frame_dec *check_decoder(lua_State *L)
{
    return luaL_checkudata(L, 1, DECODER);
}

/* helper.decoder() -> a Decoder of one byte stream's frames */
static int l_decoder(lua_State *L)
{
    odp_frame_dec *d = lua_newuserdatauv(L, sizeof *d, 0);
    odp_frame_dec_init(d);
    luaL_setmetatable(L, DECODER);
    return 1;
}

/* d:feed(bytes) -> d */
static int l_feed(lua_State *L)
{
    odp_frame_dec *d = check_decoder(L);
    size_t n;
    const char *p = luaL_checklstring(L, 2, &n);
    if (odp_frame_dec_feed(d, p, n) && !d->error)
        return luaL_error(L, "out of memory");
    lua_settop(L, 1);
    return 1;
}

/* d:next() -> type, {fields} | nil (more bytes needed) | nil, "EPROTO: why", "EPROTO" (the stream is lost) */
static int l_next(lua_State *L)
{
    odp_frame_dec *d = check_decoder(L);
    odp_frame f;
    int r = odp_frame_next(d, &f);
    if (r == 0) {
        lua_pushnil(L);
        return 1;
    }
    if (r < 0) {
        odp_err e;
        odp_fail(&e, ODP_EPROTO, "helper stream: %s", d->error ? d->error : "out of memory");
        return odp_pushfail(L, &e);
    }
    lua_pushlstring(L, (const char *)&f.type, 1);
    lua_createtable(L, (int)f.nfields, 0);
    uint32_t pos = 0, n;
    const uint8_t *p;
    for (int i = 1; odp_frame_field(&f, &pos, &p, &n); i++) {
        lua_pushlstring(L, (const char *)p, n);
        lua_rawseti(L, -2, i);
    }
    return 2;
}

/* d:pending() -> bytes held that are not yet a whole frame */
static int l_pending(lua_State *L)
{
    odp_frame_dec *d = check_decoder(L);
    lua_pushinteger(L, (lua_Integer)(d->in.len - d->used));
    return 1;
}

static int l_decoder_gc(lua_State *L)
{
    odp_frame_dec_free(check_decoder(L));
    return 0;
}

/* The gatherer's commands here, through odp's process runner (its one waiting point, Ctrl-C included). */
static int host_run(void *ctx, const char *const argv[], size_t max, odp_buf *out)
{
    (void)ctx;
    odp_proc_opts o = {.argv = argv, .deadline = odp_deadline(10), .kill_grace = 1, .capture_limit = max};
    odp_proc_result r;
    odp_err e;
    if (odp_proc_run(&o, &r, &e))
        return -1;
    odp_buf_append(out, r.out.data, r.out.len);
    odp_proc_result_free(&r);
    return 0;
}

/* helper.state(root, cpu_files, props) -> the snapshot text (odp.target.device_state.parse reads it) */
static int l_state(lua_State *L)
{
    odp_state_opts o = {luaL_checkstring(L, 1), luaL_checkstring(L, 2), luaL_checkstring(L, 3), host_run, NULL};
    odp_buf text = {.limit = ODP_FRAME_MAX};
    if (odp_state_gather(&o, &text)) {
        odp_buf_free(&text);
        return luaL_error(L, "out of memory");
    }
    lua_pushlstring(L, text.data ? text.data : "", text.len);
    odp_buf_free(&text);
    return 1;
}

int luaopen_odp_helper(lua_State *L)
{
    static const luaL_Reg dmethods[] = {{"feed", l_feed}, {"next", l_next}, {"pending", l_pending}, {NULL, NULL}};
    static const luaL_Reg dmeta[] = {{"__gc", l_decoder_gc}, {NULL, NULL}};
    odp_newclass(L, DECODER, dmethods, dmeta);
    static const luaL_Reg fns[] = {{"encode", l_encode}, {"decoder", l_decoder}, {"state", l_state}, {NULL, NULL}};
    luaL_newlib(L, fns);
    lua_pushinteger(L, ODP_HELPER_PROTO);
    lua_setfield(L, -2, "PROTO");
    lua_pushinteger(L, ODP_FRAME_MAX);
    lua_setfield(L, -2, "FRAME_MAX");
    /* stdout chunks of a run whose arrival times are kept, by the helper's client (odp.target.helper) and by
     * the host target, which reads them itself: here, so a host run need not load the client for it */
    lua_pushinteger(L, 1 << 16);
    lua_setfield(L, -2, "STDOUT_TIMES_MAX");
    return 1;
}
