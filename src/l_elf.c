/* odp.elf: elf.read(path) -> {class, machine, machine_id, endian, type, osabi, interpreter, static,
 * glibc_required, glibc_versions} | nil, err, code. Core: src/elf/elf.h.
 * elf.symbols(path) -> symbols | nil, err, code (src/elf/symtab.h): symbols:table() -> "symtab"|"dynsym"|"none",
 * symbols:build_id() -> hex | nil, symbols:count() -> n, symbols:lookup(file_offset) -> name, distance | nil
 * (a mapping's file offset placed through the loadable segments, then the function holding it),
 * symbols:function_start(file_offset) -> the file offset where the function holding it starts | nil (from
 * .eh_frame_hdr: known without symbols). */
#include <stdio.h>

#include "elf/elf.h"
#include "elf/symtab.h"
#include "l_util.h"

#define SYMBOLS_MT "odp.ElfSymbols"

static odp_elf_symbols *check_symbols(lua_State *L)
{
    odp_elf_symbols *s = luaL_checkudata(L, 1, SYMBOLS_MT);
    if (!s->map)
        luaL_error(L, "ELF symbols are closed");
    return s;
}

static int l_symbols(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    odp_elf_symbols *s = lua_newuserdatauv(L, sizeof *s, 0);
    odp_err err;
    if (odp_elf_symbols_read(path, s, &err))
        return odp_pushfail(L, &err);
    luaL_setmetatable(L, SYMBOLS_MT);
    return 1;
}

static int sym_close(lua_State *L)
{
    odp_elf_symbols *s = luaL_checkudata(L, 1, SYMBOLS_MT);
    if (s->map)
        odp_elf_symbols_free(s);
    return 0;
}

static int sym_table(lua_State *L)
{
    lua_pushstring(L, check_symbols(L)->table);
    return 1;
}

static int sym_count(lua_State *L)
{
    lua_pushinteger(L, check_symbols(L)->nsyms);
    return 1;
}

static int sym_build_id(lua_State *L)
{
    const odp_elf_symbols *s = check_symbols(L);
    if (!s->build_id_len)
        return 0;
    char hex[129];
    for (int k = 0; k < s->build_id_len; k++)
        snprintf(hex + 2 * k, 3, "%02x", s->build_id[k]);
    lua_pushstring(L, hex);
    return 1;
}

static int sym_lookup(lua_State *L)
{
    const odp_elf_symbols *s = check_symbols(L);
    uint64_t off = (uint64_t)luaL_checkinteger(L, 2), addr, dist;
    size_t n;
    const char *name;
    if (odp_elf_offset_to_addr(s, off, &addr) || !(name = odp_elf_symbol_at(s, addr, &n, &dist)))
        return 0;
    lua_pushlstring(L, name, n);
    lua_pushinteger(L, (lua_Integer)dist);
    return 2;
}

static const char *type_name(unsigned t)
{
    switch (t) {
    case 1: return "rel";
    case 2: return "exec";
    case 3: return "dyn";
    case 4: return "core";
    default: return "unknown";
    }
}

static int l_read(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    odp_elf_info info;
    odp_err err;
    if (odp_elf_read_file(path, &info, &err))
        return odp_pushfail(L, &err);
    lua_createtable(L, 0, 10);
    lua_pushinteger(L, info.elf_class);
    lua_setfield(L, -2, "class");
    const char *m = odp_elf_machine_name(info.machine);
    if (m)
        lua_pushstring(L, m);
    else
        lua_pushfstring(L, "machine-%d", (int)info.machine);
    lua_setfield(L, -2, "machine");
    lua_pushinteger(L, info.machine);
    lua_setfield(L, -2, "machine_id");
    lua_pushstring(L, info.little_endian ? "little" : "big");
    lua_setfield(L, -2, "endian");
    lua_pushstring(L, type_name(info.type));
    lua_setfield(L, -2, "type");
    lua_pushinteger(L, info.osabi);
    lua_setfield(L, -2, "osabi");
    if (info.has_interp) {
        lua_pushstring(L, info.interpreter);
        lua_setfield(L, -2, "interpreter");
    }
    lua_pushboolean(L, !info.has_interp);
    lua_setfield(L, -2, "static");
    lua_createtable(L, info.n_glibc, 0);
    for (int i = 0; i < info.n_glibc; i++) {
        lua_pushstring(L, info.glibc[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "glibc_versions");
    if (info.n_glibc) {
        lua_pushstring(L, info.glibc[info.n_glibc - 1]); /* sorted: the last is the newest needed */
        lua_setfield(L, -2, "glibc_required");
    }
    return 1;
}

/* elf.version_cmp("2.9", "2.34") -> -1 | 0 | 1 */
static int l_version_cmp(lua_State *L)
{
    int c = odp_version_cmp(luaL_checkstring(L, 1), luaL_checkstring(L, 2));
    lua_pushinteger(L, c < 0 ? -1 : c > 0);
    return 1;
}

static int sym_function_start(lua_State *L)
{
    const odp_elf_symbols *s = check_symbols(L);
    uint64_t off = (uint64_t)luaL_checkinteger(L, 2), addr, start, start_off;
    if (odp_elf_offset_to_addr(s, off, &addr) || odp_elf_function_start(s, addr, &start) ||
        odp_elf_addr_to_offset(s, start, &start_off))
        return 0;
    lua_pushinteger(L, (lua_Integer)start_off);
    return 1;
}

int luaopen_odp_elf(lua_State *L)
{
    static const luaL_Reg methods[] = {{"table", sym_table}, {"count", sym_count}, {"build_id", sym_build_id},
                                       {"lookup", sym_lookup}, {"function_start", sym_function_start}, {"close", sym_close},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", sym_close}, {"__close", sym_close}, {NULL, NULL}};
    odp_newclass(L, SYMBOLS_MT, methods, meta);
    static const luaL_Reg funcs[] = {{"read", l_read}, {"symbols", l_symbols}, {"version_cmp", l_version_cmp}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
