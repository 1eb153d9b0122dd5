/* odp.sample: the sample stream of odp-rusage --sample (core: src/sample/sample.h).
 *   sample.read(bytes) -> stream | nil, err, code
 *   stream:info() -> {event, freq_hz, clockid, ncpus, user_only, paranoid, pid, ring_bytes, start_time, end_time,
 *                     complete, samples, kernel_samples, preempted_samples, switches, switch_records, lost,
 *                     lost_records, records, unknown_records}
 *   stream:lines() -> {{time, text}}        stream:counters() -> {{time, kind, index, value}}
 *   stream:mmaps() -> {{time, pid, start, len, pgoff, exec, file, build_id?}}
 *   stream:comms() -> {{time, pid, tid, name, exec}}   stream:tasks() -> {{time, pid, ppid, tid, kind}}
 *   stream:times() -> {t...}  (every sample's time)
 *   stream:columns() -> {time = {}, tid = {}, leaf = {}}  (every sample's; leaf: -1 kernel, -2 preempted)
 *   stream:mapping(addr[, pid, time]) -> index into mmaps() (1-based) | nil
 *   stream:join{ops = {start = {}, stop = {}, id = {}}, execs = {start = {}, stop = {}}, offset = ns}
 *     -> {total, in_execute, attributed, between, outside, per_op = {[id] = n},
 *         stacks = {{owner = id | -1 (between) | -2 (outside), count, frames = {addr (leaf first; -1 = kernel,
 *         -2 = preempted: a sample made for a period the thread waited for a CPU)}}}} */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l_util.h"
#include "sample/sample.h"

#define STREAM_MT "odp.SampleStream"

typedef struct {
    odp_sample_stream st;
    int open;
} lstream;

static lstream *check_stream(lua_State *L)
{
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (!u->open)
        luaL_error(L, "sample stream is closed");
    return u;
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static int l_read(lua_State *L)
{
    size_t n;
    const char *buf = luaL_checklstring(L, 1, &n);
    lstream *u = lua_newuserdatauv(L, sizeof *u, 1);
    memset(u, 0, sizeof *u);
    odp_err err;
    if (odp_sample_read((const uint8_t *)buf, n, &u->st, &err))
        return odp_pushfail(L, &err);
    u->open = 1;
    lua_pushvalue(L, 1); /* the stream's pointers are into these bytes */
    lua_setiuservalue(L, -2, 1);
    luaL_setmetatable(L, STREAM_MT);
    return 1;
}

static int st_close(lua_State *L)
{
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (u->open) {
        odp_sample_free(&u->st);
        u->open = 0;
    }
    return 0;
}

static int st_info(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    const struct odp_sample_file_header *h = &st->header;
    lua_createtable(L, 0, 18);
    lua_pushstring(L, h->event == ODP_SAMPLE_EVENT_CYCLES ? "cycles" : h->event == ODP_SAMPLE_EVENT_CPU_CLOCK ? "cpu-clock" : "unknown");
    lua_setfield(L, -2, "event");
    set_int(L, "freq_hz", h->freq_hz);
    set_int(L, "clockid", h->clockid);
    set_int(L, "ncpus", h->ncpus);
    lua_pushboolean(L, (h->flags & ODP_SAMPLE_FLAG_USER_ONLY) != 0);
    lua_setfield(L, -2, "user_only");
    set_int(L, "paranoid", h->paranoid);
    set_int(L, "pid", h->pid);
    set_int(L, "ring_bytes", h->ring_bytes);
    set_int(L, "start_time", (lua_Integer)h->start_time);
    set_int(L, "end_time", (lua_Integer)st->end_time);
    lua_pushboolean(L, st->complete);
    lua_setfield(L, -2, "complete");
    set_int(L, "samples", st->nsamples);
    set_int(L, "kernel_samples", (lua_Integer)st->kernel_samples);
    set_int(L, "preempted_samples", (lua_Integer)st->preempted_samples);
    set_int(L, "switches", (lua_Integer)st->switches);
    lua_pushboolean(L, (h->flags & ODP_SAMPLE_FLAG_SWITCHES) != 0);
    lua_setfield(L, -2, "switch_records");
    set_int(L, "lost", (lua_Integer)st->lost);
    set_int(L, "lost_records", (lua_Integer)st->lost_records);
    set_int(L, "records", (lua_Integer)st->records);
    set_int(L, "unknown_records", (lua_Integer)st->unknown_records);
    return 1;
}

static int st_lines(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, (int)st->nlines, 0);
    for (uint32_t i = 0; i < st->nlines; i++) {
        lua_createtable(L, 0, 2);
        set_int(L, "time", (lua_Integer)st->lines[i].time);
        lua_pushstring(L, st->lines[i].text);
        lua_setfield(L, -2, "text");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int st_counters(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, (int)st->ncounters, 0);
    for (uint32_t i = 0; i < st->ncounters; i++) {
        const odp_sample_counter *c = &st->counters[i];
        lua_createtable(L, 0, 4);
        set_int(L, "time", (lua_Integer)c->time);
        lua_pushstring(L, c->kind == ODP_SAMPLE_COUNTER_FREQ_KHZ ? "freq_khz" : c->kind == ODP_SAMPLE_COUNTER_TEMP_MC ? "temp_mc" : "unknown");
        lua_setfield(L, -2, "kind");
        set_int(L, "index", c->index);
        set_int(L, "value", c->value);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int st_mmaps(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, (int)st->nmmaps, 0);
    for (uint32_t i = 0; i < st->nmmaps; i++) {
        const odp_sample_mmap *m = &st->mmaps[i];
        lua_createtable(L, 0, 8);
        set_int(L, "time", (lua_Integer)m->time);
        set_int(L, "pid", m->pid);
        set_int(L, "start", (lua_Integer)m->start);
        set_int(L, "len", (lua_Integer)m->len);
        set_int(L, "pgoff", (lua_Integer)m->pgoff);
        lua_pushboolean(L, (m->prot & 4) != 0);
        lua_setfield(L, -2, "exec");
        lua_pushlstring(L, m->file, m->file_len);
        lua_setfield(L, -2, "file");
        if (m->build_id_len) {
            char hex[41];
            for (int k = 0; k < m->build_id_len; k++)
                snprintf(hex + 2 * k, 3, "%02x", m->build_id[k]);
            lua_pushstring(L, hex);
            lua_setfield(L, -2, "build_id");
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int st_comms(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, (int)st->ncomms, 0);
    for (uint32_t i = 0; i < st->ncomms; i++) {
        const odp_sample_comm *c = &st->comms[i];
        lua_createtable(L, 0, 5);
        set_int(L, "time", (lua_Integer)c->time);
        set_int(L, "pid", c->pid);
        set_int(L, "tid", c->tid);
        lua_pushstring(L, c->name);
        lua_setfield(L, -2, "name");
        lua_pushboolean(L, c->exec);
        lua_setfield(L, -2, "exec");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int st_tasks(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, (int)st->ntasks, 0);
    for (uint32_t i = 0; i < st->ntasks; i++) {
        const odp_sample_task *t = &st->tasks[i];
        lua_createtable(L, 0, 5);
        set_int(L, "time", (lua_Integer)t->time);
        set_int(L, "pid", t->pid);
        set_int(L, "ppid", t->ppid);
        set_int(L, "tid", t->tid);
        lua_pushstring(L, t->exit ? "exit" : "fork");
        lua_setfield(L, -2, "kind");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int st_times(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, (int)st->nsamples, 0);
    for (uint32_t i = 0; i < st->nsamples; i++) {
        lua_pushinteger(L, (lua_Integer)st->samples[i].time);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int st_columns(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    lua_createtable(L, 0, 3);
    static const char *const names[] = {"time", "tid", "leaf"};
    for (int c = 0; c < 3; c++) {
        lua_createtable(L, (int)st->nsamples, 0);
        for (uint32_t i = 0; i < st->nsamples; i++) {
            const odp_sample *x = &st->samples[i];
            uint64_t f = st->frames[x->chain];
            lua_Integer v = c == 0 ? (lua_Integer)x->time : c == 1 ? (lua_Integer)x->tid
                          : f == ODP_SAMPLE_KERNEL ? -1 : f == ODP_SAMPLE_PREEMPTED ? -2 : (lua_Integer)f;
            lua_pushinteger(L, v);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, names[c]);
    }
    return 1;
}

static int st_mapping(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    uint64_t addr = (uint64_t)luaL_checkinteger(L, 2);
    uint32_t pid = (uint32_t)luaL_optinteger(L, 3, st->header.pid);
    uint64_t t = (uint64_t)luaL_optinteger(L, 4, INT64_MAX);
    int32_t k = odp_sample_mapping(st, pid, t, addr);
    if (k < 0)
        return 0;
    lua_pushinteger(L, (lua_Integer)k + 1);
    return 1;
}

/* the intervals of opts[field] = {start = {}, stop = {}, id = {}?} shifted by offset -> flattened, or raises */
static long intervals(lua_State *L, const char *field, lua_Integer offset, int with_id, odp_sample_interval **out)
{
    *out = NULL;
    if (lua_getfield(L, 2, field) != LUA_TTABLE)
        luaL_error(L, "join: %s must be a table {start = {...}, stop = {...}}", field);
    int t = lua_gettop(L);
    lua_getfield(L, t, "start");
    lua_getfield(L, t, "stop");
    lua_getfield(L, t, "id");
    luaL_checktype(L, t + 1, LUA_TTABLE);
    luaL_checktype(L, t + 2, LUA_TTABLE);
    if (with_id)
        luaL_checktype(L, t + 3, LUA_TTABLE);
    lua_Unsigned n = lua_rawlen(L, t + 1);
    if (lua_rawlen(L, t + 2) != n || (with_id && lua_rawlen(L, t + 3) != n))
        luaL_error(L, "join: %s.start, .stop and .id differ in length", field);
    odp_sample_interval *iv = malloc((size_t)(n ? n : 1) * sizeof *iv);
    if (!iv)
        luaL_error(L, "join: out of memory");
    for (lua_Unsigned i = 1; i <= n; i++) {
        lua_rawgeti(L, t + 1, (lua_Integer)i);
        lua_rawgeti(L, t + 2, (lua_Integer)i);
        lua_Integer a = lua_tointeger(L, -2), b = lua_tointeger(L, -1);
        lua_pop(L, 2);
        lua_Integer id = 0;
        if (with_id) {
            lua_rawgeti(L, t + 3, (lua_Integer)i);
            id = lua_tointeger(L, -1);
            lua_pop(L, 1);
            if (id < 1 || id > INT32_MAX) {
                free(iv);
                luaL_error(L, "join: %s.id[%d] must be a positive integer", field, (int)i);
            }
        }
        iv[i - 1] = (odp_sample_interval){(uint64_t)(a + offset), (uint64_t)(b + offset), (int32_t)id};
    }
    lua_settop(L, t - 1);
    long m = odp_sample_flatten(iv, (size_t)n, out);
    free(iv);
    if (m < 0)
        luaL_error(L, "join: out of memory");
    return m;
}

static int st_join(lua_State *L)
{
    const odp_sample_stream *st = &check_stream(L)->st;
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const allowed[] = {"ops", "execs", "offset", NULL};
    odp_checkopts(L, 2, allowed);
    lua_Integer offset = odp_optinteger(L, 2, "offset", 0);
    odp_sample_interval *ops, *execs;
    long nops = intervals(L, "ops", offset, 1, &ops);
    long nexecs = intervals(L, "execs", offset, 0, &execs);
    int32_t *assign = malloc((st->nsamples ? st->nsamples : 1) * sizeof *assign);
    if (!assign) {
        free(ops), free(execs);
        return luaL_error(L, "join: out of memory");
    }
    odp_sample_assign(st, ops, (size_t)nops, execs, (size_t)nexecs, assign);
    free(ops);
    free(execs);
    odp_sample_stack *stacks;
    long nstacks = odp_sample_fold(st, assign, &stacks);
    if (nstacks < 0) {
        free(assign);
        return luaL_error(L, "join: out of memory");
    }
    lua_Integer between = 0, outside = 0;
    lua_createtable(L, 0, 8);
    lua_newtable(L); /* per_op */
    for (uint32_t i = 0; i < st->nsamples; i++) {
        if (assign[i] == ODP_SAMPLE_BETWEEN)
            between++;
        else if (assign[i] == ODP_SAMPLE_OUTSIDE)
            outside++;
    }
    lua_Integer attributed = 0;
    lua_createtable(L, (int)nstacks, 0);
    for (long k = 0; k < nstacks; k++) {
        const odp_sample_stack *s = &stacks[k];
        if (s->owner > 0) {
            attributed += s->count;
            lua_rawgeti(L, -2, s->owner);
            lua_Integer c = lua_tointeger(L, -1) + s->count;
            lua_pop(L, 1);
            lua_pushinteger(L, c);
            lua_rawseti(L, -3, s->owner);
        }
        lua_createtable(L, 0, 3);
        set_int(L, "owner", s->owner);
        set_int(L, "count", s->count);
        lua_createtable(L, (int)s->depth, 0);
        for (uint32_t d = 0; d < s->depth; d++) {
            uint64_t f = st->frames[s->chain + d];
            lua_pushinteger(L, f == ODP_SAMPLE_KERNEL ? -1 : f == ODP_SAMPLE_PREEMPTED ? -2 : (lua_Integer)f);
            lua_rawseti(L, -2, (lua_Integer)d + 1);
        }
        lua_setfield(L, -2, "frames");
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    lua_setfield(L, -3, "stacks");
    lua_setfield(L, -2, "per_op");
    free(stacks);
    free(assign);
    set_int(L, "total", st->nsamples);
    set_int(L, "between", between);
    set_int(L, "outside", outside);
    set_int(L, "attributed", attributed);
    set_int(L, "in_execute", attributed + between);
    return 1;
}

int luaopen_odp_sample(lua_State *L)
{
    static const luaL_Reg methods[] = {{"info", st_info},       {"lines", st_lines}, {"counters", st_counters},
                                       {"mmaps", st_mmaps},     {"comms", st_comms}, {"tasks", st_tasks},
                                       {"times", st_times},     {"columns", st_columns}, {"mapping", st_mapping}, {"join", st_join},
                                       {"close", st_close},     {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", st_close}, {"__close", st_close}, {NULL, NULL}};
    odp_newclass(L, STREAM_MT, methods, meta);
    static const luaL_Reg funcs[] = {{"read", l_read}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
