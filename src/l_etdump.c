/* odp.etdumpcore: decode(bytes) -> the ETDump as plain Lua tables (lua/odp/parse/etdump.lua builds on it). */
#include <stdlib.h>
#include <string.h>

#include "etdump/etdump.h"
#include "l_util.h"

static const char *const value_types[] = {"Null", "Int", "Bool", "Float", "Double", "Tensor", "TensorList", "String"};
static const char *const scalar_types[] = {"BYTE", "CHAR", "SHORT", "INT", "LONG", "HALF", "FLOAT", "DOUBLE",
                                           "COMPLEXHALF", "COMPLEXFLOAT", "COMPLEXDOUBLE", "BOOL", "QINT8",
                                           "QUINT8", "QINT32", "BFLOAT16", "QUINT4X2", "QUINT2X4"};

static void set_str(lua_State *L, const char *key, const odp_fb_str *s)
{
    if (!s->s)
        return;
    lua_pushlstring(L, s->s, s->n);
    lua_setfield(L, -2, key);
}

static void set_int(lua_State *L, const char *key, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, key);
}

static void push_i64_vec(lua_State *L, const uint8_t *base, const odp_fb_vec *v)
{
    lua_createtable(L, (int)v->count, 0);
    for (uint32_t i = 0; i < v->count; i++) {
        lua_pushinteger(L, (lua_Integer)odp_fb_rd64(base + v->pos + 8 * (size_t)i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static void push_tensor(lua_State *L, const uint8_t *base, const odp_etdump_tensor *t)
{
    lua_createtable(L, 0, 5);
    set_int(L, "scalar_type", t->scalar_type);
    if (t->scalar_type >= 0 && (size_t)t->scalar_type < sizeof scalar_types / sizeof *scalar_types) {
        lua_pushstring(L, scalar_types[t->scalar_type]);
        lua_setfield(L, -2, "scalar_type_name");
    }
    push_i64_vec(L, base, &t->sizes);
    lua_setfield(L, -2, "sizes");
    push_i64_vec(L, base, &t->strides);
    lua_setfield(L, -2, "strides");
    if (t->has_offset)
        set_int(L, "offset", t->offset);
}

static void push_value(lua_State *L, const uint8_t *base, const odp_etdump_value *v)
{
    lua_createtable(L, 0, 4);
    if (v->val >= 0 && (size_t)v->val < sizeof value_types / sizeof *value_types)
        lua_pushstring(L, value_types[v->val]);
    else
        lua_pushinteger(L, v->val);
    lua_setfield(L, -2, "val");
    if (v->has_tensor) {
        push_tensor(L, base, &v->tensor);
        lua_setfield(L, -2, "tensor");
    }
    if (v->has_tensor_list) {
        lua_createtable(L, (int)v->ntensors, 0);
        for (uint32_t i = 0; i < v->ntensors; i++) {
            push_tensor(L, base, &v->tensors[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "tensor_list");
    }
    if (v->has_int)
        set_int(L, "int_value", v->int_value);
    if (v->has_float) {
        lua_pushnumber(L, v->float_value);
        lua_setfield(L, -2, "float_value");
    }
    if (v->has_double) {
        lua_pushnumber(L, v->double_value);
        lua_setfield(L, -2, "double_value");
    }
    if (v->has_bool) {
        lua_pushboolean(L, v->bool_value);
        lua_setfield(L, -2, "bool_value");
    }
    if (v->has_output) {
        lua_pushboolean(L, v->output);
        lua_setfield(L, -2, "output");
    }
}

static void push_event(lua_State *L, const uint8_t *base, const odp_etdump_event *e)
{
    uint64_t d;
    switch (e->kind) {
    case ODP_ETDUMP_PROFILE:
        lua_createtable(L, 0, 10);
        lua_pushliteral(L, "profile");
        lua_setfield(L, -2, "kind");
        set_str(L, "name", &e->name);
        set_int(L, "chain_index", e->chain_index);
        set_int(L, "instruction_id", e->instruction_id);
        set_int(L, "delegate_debug_id_int", e->delegate_debug_id_int);
        set_str(L, "delegate_debug_id_str", &e->delegate_debug_id_str);
        set_str(L, "delegate_debug_metadata", &e->delegate_debug_metadata);
        set_int(L, "start_time", (lua_Integer)e->start_time);
        set_int(L, "end_time", (lua_Integer)e->end_time);
        if (odp_etdump_duration(e->start_time, e->end_time, &d) == 0)
            set_int(L, "duration", (lua_Integer)d);
        break;
    case ODP_ETDUMP_ALLOCATION:
        lua_createtable(L, 0, 3);
        lua_pushliteral(L, "allocation");
        lua_setfield(L, -2, "kind");
        set_int(L, "allocator_id", e->allocator_id);
        set_int(L, "allocation_size", (lua_Integer)e->allocation_size);
        break;
    case ODP_ETDUMP_DEBUG:
        lua_createtable(L, 0, 8);
        lua_pushliteral(L, "debug");
        lua_setfield(L, -2, "kind");
        set_str(L, "name", &e->name);
        set_int(L, "chain_index", e->chain_index);
        set_int(L, "instruction_id", e->instruction_id);
        set_int(L, "delegate_debug_id_int", e->delegate_debug_id_int);
        set_str(L, "delegate_debug_id_str", &e->delegate_debug_id_str);
        if (e->has_debug_entry) {
            push_value(L, base, &e->debug_entry);
            lua_setfield(L, -2, "debug_entry");
        }
        break;
    default:
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "empty");
        lua_setfield(L, -2, "kind");
    }
}

/* {name, bundled_input_index, allocators}: a run as both decode() and the lazy header() start it. */
static void push_run_header(lua_State *L, const odp_etdump_run *run)
{
    lua_createtable(L, 0, 4);
    set_str(L, "name", &run->name);
    set_int(L, "bundled_input_index", run->bundled_input_index);
    lua_createtable(L, (int)run->nallocators, 0);
    for (uint32_t j = 0; j < run->nallocators; j++) {
        lua_createtable(L, 0, 1);
        set_str(L, "name", &run->allocators[j]);
        lua_rawseti(L, -2, (lua_Integer)j + 1);
    }
    lua_setfield(L, -2, "allocators");
}

/* A dump cut short (its writer died): t.partial = {declared_bytes, bytes, events_lost, runs_lost}; n = the
 * file's bytes. Nothing for a whole dump. */
static void set_partial(lua_State *L, const odp_etdump *d, size_t n)
{
    if (!d->partial)
        return;
    lua_createtable(L, 0, 4);
    set_int(L, "declared_bytes", d->declared_bytes);
    set_int(L, "bytes", (lua_Integer)n);
    set_int(L, "events_lost", d->events_lost);
    set_int(L, "runs_lost", d->runs_lost);
    lua_setfield(L, -2, "partial");
}

/* decode(bytes) -> {version, size_prefixed, partial?, run_data = {...}} | nil, "EPROTO: ...", "EPROTO" */
static int l_decode(lua_State *L)
{
    size_t n;
    const uint8_t *buf = (const uint8_t *)luaL_checklstring(L, 1, &n);
    odp_etdump d;
    odp_err err;
    if (odp_etdump_read(buf, n, &d, &err))
        return odp_pushfail(L, &err);
    /* Vectors point into the (size-prefix-stripped) flatbuffer: the same base the core used. */
    const uint8_t *base = d.size_prefixed ? buf + 4 : buf;
    lua_createtable(L, 0, 3);
    set_int(L, "version", d.version);
    lua_pushboolean(L, d.size_prefixed);
    lua_setfield(L, -2, "size_prefixed");
    set_partial(L, &d, n);
    lua_createtable(L, (int)d.nruns, 0);
    for (uint32_t i = 0; i < d.nruns; i++) {
        const odp_etdump_run *run = &d.runs[i];
        push_run_header(L, run);
        lua_createtable(L, (int)run->nevents, 0);
        for (uint32_t j = 0; j < run->nevents; j++) {
            push_event(L, base, &run->events[j]);
            lua_rawseti(L, -2, (lua_Integer)j + 1);
        }
        lua_setfield(L, -2, "events");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "run_data");
    odp_etdump_free(&d);
    return 1;
}

/* odp.etdump.Dump: a decoded ETDump kept in C (the bytes it points into are its user value), so a reader
 * can build Lua tables for one run at a time, or only the columns the op table needs: 100,000 events as
 * tables cost ~10x more than the decode itself. */
#define DUMP_MT "odp.etdump.Dump"

typedef struct {
    odp_etdump d;
    const uint8_t *base;
    int open;
} ldump;

static ldump *check_dump(lua_State *L)
{
    ldump *u = luaL_checkudata(L, 1, DUMP_MT);
    if (!u->open)
        luaL_argerror(L, 1, "ETDump handle is closed");
    return u;
}

static int dump_close(lua_State *L)
{
    ldump *u = luaL_checkudata(L, 1, DUMP_MT);
    if (u->open) {
        odp_etdump_free(&u->d);
        u->open = 0;
    }
    return 0;
}

/* open(bytes) -> Dump | nil, "EPROTO: ...", "EPROTO" */
static int l_open(lua_State *L)
{
    size_t n;
    const uint8_t *buf = (const uint8_t *)luaL_checklstring(L, 1, &n);
    ldump *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->open = 0; /* created closed: a failed decode leaves nothing to free */
    luaL_setmetatable(L, DUMP_MT);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1); /* keeps the bytes alive: every string and vector points into them */
    odp_err err;
    if (odp_etdump_read(buf, n, &u->d, &err))
        return odp_pushfail(L, &err);
    u->open = 1;
    u->base = u->d.size_prefixed ? buf + 4 : buf;
    return 1;
}

/* dump:header() -> {version, size_prefixed, partial?, run_data = {{name, bundled_input_index, allocators,
 * nevents}}} */
static int dump_header(lua_State *L)
{
    ldump *u = check_dump(L);
    lua_createtable(L, 0, 3);
    set_int(L, "version", u->d.version);
    lua_pushboolean(L, u->d.size_prefixed);
    lua_setfield(L, -2, "size_prefixed");
    lua_getiuservalue(L, 1, 1);
    size_t n = lua_rawlen(L, -1);
    lua_pop(L, 1);
    set_partial(L, &u->d, n);
    lua_createtable(L, (int)u->d.nruns, 0);
    for (uint32_t i = 0; i < u->d.nruns; i++) {
        const odp_etdump_run *run = &u->d.runs[i];
        push_run_header(L, run);
        set_int(L, "nevents", run->nevents);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "run_data");
    return 1;
}

static const odp_etdump_run *check_run(lua_State *L, ldump *u)
{
    lua_Integer i = luaL_checkinteger(L, 2);
    luaL_argcheck(L, i >= 1 && i <= (lua_Integer)u->d.nruns, 2, "run index out of range");
    return &u->d.runs[i - 1];
}

/* dump:events(i) -> the events of run i as tables (like decode's) */
static int dump_events(lua_State *L)
{
    ldump *u = check_dump(L);
    const odp_etdump_run *run = check_run(L, u);
    lua_createtable(L, (int)run->nevents, 0);
    for (uint32_t j = 0; j < run->nevents; j++) {
        push_event(L, u->base, &run->events[j]);
        lua_rawseti(L, -2, (lua_Integer)j + 1);
    }
    return 1;
}

/* dump:columns(i) -> what the op table needs of run i, as parallel arrays over its profile and debug
 * events: kind (1 profile, 3 debug), name, iid, chain, did, dstr (false when absent), dur (ticks; false
 * when not computable), out (debug events marked as run output). */
static int dump_columns(lua_State *L)
{
    ldump *u = check_dump(L);
    const odp_etdump_run *run = check_run(L, u);
    static const char *const cols[] = {"kind", "name", "iid", "chain", "did", "dstr", "dur", "out"};
    enum { NCOLS = 8 };
    int top = lua_gettop(L);
    lua_createtable(L, 0, NCOLS + 1);
    for (int c = 0; c < NCOLS; c++)
        lua_createtable(L, (int)run->nevents, 0); /* stack: result, col1..col8 */
    lua_Integer n = 0;
    for (uint32_t j = 0; j < run->nevents; j++) {
        const odp_etdump_event *e = &run->events[j];
        if (e->kind != ODP_ETDUMP_PROFILE && e->kind != ODP_ETDUMP_DEBUG)
            continue;
        n++;
        uint64_t d;
        lua_pushinteger(L, e->kind == ODP_ETDUMP_PROFILE ? 1 : 3);
        lua_rawseti(L, top + 2, n);
        if (e->name.s)
            lua_pushlstring(L, e->name.s, e->name.n);
        else
            lua_pushliteral(L, "");
        lua_rawseti(L, top + 3, n);
        lua_pushinteger(L, e->instruction_id);
        lua_rawseti(L, top + 4, n);
        lua_pushinteger(L, e->chain_index);
        lua_rawseti(L, top + 5, n);
        lua_pushinteger(L, e->delegate_debug_id_int);
        lua_rawseti(L, top + 6, n);
        if (e->delegate_debug_id_str.s)
            lua_pushlstring(L, e->delegate_debug_id_str.s, e->delegate_debug_id_str.n);
        else
            lua_pushboolean(L, 0);
        lua_rawseti(L, top + 7, n);
        if (e->kind == ODP_ETDUMP_PROFILE && odp_etdump_duration(e->start_time, e->end_time, &d) == 0)
            lua_pushinteger(L, (lua_Integer)d);
        else
            lua_pushboolean(L, 0);
        lua_rawseti(L, top + 8, n);
        lua_pushboolean(L, e->kind == ODP_ETDUMP_DEBUG && e->has_debug_entry && e->debug_entry.has_output &&
                               e->debug_entry.output);
        lua_rawseti(L, top + 9, n);
    }
    for (int c = NCOLS - 1; c >= 0; c--)
        lua_setfield(L, top + 1, cols[c]); /* pops col c+1 (the top) */
    set_int(L, "n", n);
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* dump:blocks([sorted]) -> {{name, bundled_input_index, runs, events = {{name, instruction_id, delegate_id,
 * profile, samples = {ticks...}}}}} (odp_etdump_blocks: the Inspector's merge; samples in run order, or
 * ascending when sorted is true) | nil, err, code */
static int dump_blocks(lua_State *L)
{
    ldump *u = check_dump(L);
    int sorted = lua_toboolean(L, 2);
    odp_etdump_blocks_t bl;
    odp_err err;
    if (odp_etdump_blocks(&u->d, &bl, &err))
        return odp_pushfail(L, &err);
    lua_createtable(L, (int)bl.n, 0);
    for (uint32_t i = 0; i < bl.n; i++) {
        const odp_etdump_block *b = &bl.blocks[i];
        lua_createtable(L, 0, 4);
        if (b->name.s)
            lua_pushlstring(L, b->name.s, b->name.n);
        else
            lua_pushliteral(L, "");
        lua_setfield(L, -2, "name");
        set_int(L, "bundled_input_index", b->bundled_input_index);
        set_int(L, "runs", b->runs);
        lua_createtable(L, (int)b->nevents, 0);
        for (uint32_t j = 0; j < b->nevents; j++) {
            const odp_etdump_block_event *be = &b->events[j];
            const odp_etdump_event *e = be->rep;
            lua_createtable(L, 0, 5);
            if (e->name.s)
                lua_pushlstring(L, e->name.s, e->name.n);
            else
                lua_pushliteral(L, "");
            lua_setfield(L, -2, "name");
            set_int(L, "instruction_id", e->instruction_id);
            if (e->delegate_debug_id_int != -1)
                set_int(L, "delegate_id", e->delegate_debug_id_int);
            else if (e->delegate_debug_id_str.s && e->delegate_debug_id_str.n)
                set_str(L, "delegate_id", &e->delegate_debug_id_str);
            lua_pushboolean(L, be->profile);
            lua_setfield(L, -2, "profile");
            if (sorted && be->nsamples > 1)
                qsort(be->samples, be->nsamples, sizeof *be->samples, cmp_u64);
            lua_createtable(L, (int)be->nsamples, 0);
            for (uint32_t k = 0; k < be->nsamples; k++) {
                lua_pushinteger(L, (lua_Integer)be->samples[k]);
                lua_rawseti(L, -2, (lua_Integer)k + 1);
            }
            lua_setfield(L, -2, "samples");
            lua_rawseti(L, -2, (lua_Integer)j + 1);
        }
        lua_setfield(L, -2, "events");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    odp_etdump_blocks_free(&bl);
    return 1;
}

/* duration(start, end) -> ticks | nil (start > end without a 32-bit wrap) */
static int l_duration(lua_State *L)
{
    uint64_t d;
    if (odp_etdump_duration((uint64_t)luaL_checkinteger(L, 1), (uint64_t)luaL_checkinteger(L, 2), &d))
        return 0;
    lua_pushinteger(L, (lua_Integer)d);
    return 1;
}

int luaopen_odp_etdumpcore(lua_State *L)
{
    static const luaL_Reg methods[] = {{"header", dump_header}, {"events", dump_events},
                                       {"columns", dump_columns}, {"blocks", dump_blocks}, {"close", dump_close}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", dump_close}, {"__close", dump_close}, {NULL, NULL}};
    odp_newclass(L, DUMP_MT, methods, meta);
    static const luaL_Reg funcs[] = {{"decode", l_decode}, {"open", l_open}, {"duration", l_duration}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
