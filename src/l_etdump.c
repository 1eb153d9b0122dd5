/* odp.etdumpcore: decode(bytes) -> the ETDump as plain Lua tables (lua/odp/etdump.lua builds on it). */
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

/* decode(bytes) -> {version, size_prefixed, run_data = {...}} | nil, "EPROTO: ...", "EPROTO" */
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
    lua_createtable(L, (int)d.nruns, 0);
    for (uint32_t i = 0; i < d.nruns; i++) {
        const odp_etdump_run *run = &d.runs[i];
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
    static const luaL_Reg funcs[] = {{"decode", l_decode}, {"duration", l_duration}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
