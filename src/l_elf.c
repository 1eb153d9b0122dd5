/* odp.elf: elf.read(path) -> {class, machine, machine_id, endian, type, osabi, interpreter, static,
 * glibc_required, glibc_versions} | nil, err, code. Core: src/elf/elf.h. */
#include "elf/elf.h"
#include "l_util.h"

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

int luaopen_odp_elf(lua_State *L)
{
    static const luaL_Reg funcs[] = {{"read", l_read}, {"version_cmp", l_version_cmp}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
