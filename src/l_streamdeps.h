/* Modules that return odp.Stream objects load `odp.core.stream` first: it registers the odp.Stream metatable
 * (odp.streamcore) and adds expect/lines to its methods, so a stream from any module has them. */
#ifndef ODP_L_STREAMDEPS_H
#define ODP_L_STREAMDEPS_H

#include <lauxlib.h>
#include <lua.h>

static inline void odp_require_stream(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushliteral(L, "odp.core.stream");
    lua_call(L, 1, 0);
}

#endif
