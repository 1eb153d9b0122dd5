/* odp.ptecore: decode(bytes) -> the .pte's header, methods and delegates as Lua tables (lua/odp/parse/pte.lua). */
#include "l_util.h"
#include "pte/pte.h"

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

static void push_delegate(lua_State *L, const odp_pte_delegate *d)
{
    lua_createtable(L, 0, 6);
    set_str(L, "backend", &d->id);
    lua_pushstring(L, d->location == 0 ? "inline" : "segment");
    lua_setfield(L, -2, "location");
    set_int(L, "index", d->index);
    if (d->data)
        set_int(L, "bytes", (lua_Integer)d->ndata);
    if (d->vela)
        set_int(L, "scratch_size", (lua_Integer)d->scratch_size);
    if (d->vela_error[0]) {
        lua_pushstring(L, d->vela_error);
        lua_setfield(L, -2, "vela_error");
    }
}

/* ExecuTorch's KernelTypes union tags (schema/program.fbs), 1-based; 0: no value */
static const char *const KINDS[] = {"none", "null", "int", "bool", "double", "tensor", "string", "int_list",
                                    "double_list", "bool_list", "tensor_list", "optional_tensor_list"};
/* ScalarType (runtime/core/portable_type/scalar_type.h) by number; NULL: a number odp has no name for */
static const char *const DTYPES[] = {"uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                                     "complex32", "complex64", "complex128", "bool", "qint8", "quint8", "qint32",
                                     "bfloat16", "quint4x2", "quint2x4"};

static void push_io(lua_State *L, const odp_pte_io *v, uint32_t n)
{
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        const odp_pte_io *io = &v[i];
        lua_createtable(L, 0, 6);
        set_int(L, "value", io->value_index);
        lua_pushstring(L, io->kind < sizeof KINDS / sizeof *KINDS ? KINDS[io->kind] : "unknown");
        lua_setfield(L, -2, "kind");
        if (io->kind == 5) {
            set_int(L, "scalar_type", io->scalar_type);
            if (io->scalar_type >= 0 && (size_t)io->scalar_type < sizeof DTYPES / sizeof *DTYPES) {
                lua_pushstring(L, DTYPES[io->scalar_type]);
                lua_setfield(L, -2, "dtype");
            }
            lua_pushstring(L, io->dynamism == 0 ? "static" : io->dynamism == 1 ? "bound" : "unbound");
            lua_setfield(L, -2, "dynamism");
            lua_createtable(L, io->ndim, 0);
            for (uint8_t d = 0; d < io->ndim; d++) {
                lua_pushinteger(L, io->sizes[d]);
                lua_rawseti(L, -2, (lua_Integer)d + 1);
            }
            lua_setfield(L, -2, "sizes");
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static void push_method(lua_State *L, const uint8_t *buf, const odp_pte_method *m)
{
    lua_createtable(L, 0, 4);
    set_str(L, "name", &m->name);
    lua_createtable(L, (int)m->noperators, 0);
    for (uint32_t i = 0; i < m->noperators; i++) {
        const odp_pte_operator *op = &m->operators[i];
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        if (op->name.s)
            luaL_addlstring(&b, op->name.s, op->name.n);
        if (op->overload.s && op->overload.n) {
            luaL_addchar(&b, '.');
            luaL_addlstring(&b, op->overload.s, op->overload.n);
        }
        luaL_pushresult(&b);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "operators");
    lua_createtable(L, (int)m->non_const_buffer_sizes.count, 0);
    for (uint32_t i = 0; i < m->non_const_buffer_sizes.count; i++) {
        lua_pushinteger(L, (lua_Integer)odp_fb_rd64(buf + m->non_const_buffer_sizes.pos + 8 * (size_t)i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "non_const_buffer_sizes");
    lua_createtable(L, (int)m->ndelegates, 0);
    for (uint32_t i = 0; i < m->ndelegates; i++) {
        push_delegate(L, &m->delegates[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "delegates");
    push_io(L, m->inputs, m->ninputs);
    lua_setfield(L, -2, "inputs");
    push_io(L, m->outputs, m->noutputs);
    lua_setfield(L, -2, "outputs");
}

/* decode(bytes) -> {identifier, version, bytes, extended_header?, segments, methods} | nil, "EPROTO: ...", "EPROTO" */
static int l_decode(lua_State *L)
{
    size_t n;
    const uint8_t *buf = (const uint8_t *)luaL_checklstring(L, 1, &n);
    odp_pte p;
    odp_err err;
    if (odp_pte_read(buf, n, &p, &err))
        return odp_pushfail(L, &err);
    lua_createtable(L, 0, 6);
    lua_pushstring(L, p.identifier);
    lua_setfield(L, -2, "identifier");
    set_int(L, "version", p.version);
    set_int(L, "bytes", (lua_Integer)p.bytes);
    set_int(L, "segments", p.nsegments);
    if (p.has_extended_header) {
        lua_createtable(L, 0, 5);
        set_int(L, "length", p.header_length);
        set_int(L, "program_size", (lua_Integer)p.program_size);
        set_int(L, "segment_base_offset", (lua_Integer)p.segment_base_offset);
        set_int(L, "segment_data_size", (lua_Integer)p.segment_data_size);
        set_int(L, "expected_size", (lua_Integer)p.expected_size);
        lua_setfield(L, -2, "extended_header");
    }
    lua_createtable(L, (int)p.nmethods, 0);
    for (uint32_t i = 0; i < p.nmethods; i++) {
        push_method(L, buf, &p.methods[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "methods");
    odp_pte_free(&p);
    return 1;
}

/* vela_scratch_size(bytes) -> n | nil, err, code: for a Vela stream found elsewhere (a firmware's blob). */
static int l_vela_scratch_size(lua_State *L)
{
    size_t n;
    const uint8_t *buf = (const uint8_t *)luaL_checklstring(L, 1, &n);
    uint64_t scratch;
    odp_err err;
    if (odp_vela_scratch_size(buf, n, &scratch, &err))
        return odp_pushfail(L, &err);
    lua_pushinteger(L, (lua_Integer)scratch);
    return 1;
}

int luaopen_odp_ptecore(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"decode", l_decode}, {"vela_scratch_size", l_vela_scratch_size}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
