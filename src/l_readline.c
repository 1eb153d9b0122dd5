/* odp.readline: line editing and history (libedit) for the REPL, which is Lua (lua/odp/cli/repl.lua). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <editline/readline.h>

#include "l_util.h"
#include "util/wait.h"

static lua_State *completion_L;
static int completer_ref = LUA_NOREF;

/* Candidates come from the Lua completer: completer(text, line) -> {candidates}. */
static char *complete_next(const char *text, int state)
{
    static int idx;
    lua_State *L = completion_L;
    if (!L || completer_ref == LUA_NOREF)
        return NULL;
    if (state == 0) {
        idx = 0;
        lua_rawgeti(L, LUA_REGISTRYINDEX, completer_ref);
        lua_pushstring(L, text);
        lua_pushstring(L, rl_line_buffer ? rl_line_buffer : "");
        if (lua_pcall(L, 2, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
            lua_pop(L, 1);
            lua_newtable(L);
        }
        lua_setfield(L, LUA_REGISTRYINDEX, "odp.readline.candidates");
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "odp.readline.candidates");
    lua_rawgeti(L, -1, ++idx);
    char *r = lua_isstring(L, -1) ? strdup(lua_tostring(L, -1)) : NULL;
    lua_pop(L, 2);
    return r;
}

static char **complete(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1;
    rl_completion_append_character = 0; /* "odp.sys" may go on with "." or ":" */
    return rl_completion_matches(text, complete_next);
}

/* readline(prompt) -> line | nil at end of input | false, "interrupted" on Ctrl-C (libedit's read returns
 * with nothing on SIGINT; the cancel request it set is lifted here: the prompt handled it) */
static int l_readline(lua_State *L)
{
    const char *prompt = luaL_optstring(L, 1, "> ");
    completion_L = L;
    char *line = readline(prompt);
    completion_L = NULL;
    if (!line) {
        if (odp_cancel_requested()) {
            odp_cancel_clear();
            lua_pushboolean(L, 0);
            lua_pushliteral(L, "interrupted");
            return 2;
        }
        luaL_pushfail(L);
        return 1;
    }
    lua_pushstring(L, line);
    free(line);
    return 1;
}

static int l_add_history(lua_State *L)
{
    add_history(luaL_checkstring(L, 1));
    return 0;
}

static int l_read_history(lua_State *L)
{
    read_history(luaL_checkstring(L, 1));
    return 0;
}

static int l_write_history(lua_State *L)
{
    lua_pushboolean(L, write_history(luaL_checkstring(L, 1)) == 0);
    return 1;
}

static int l_set_completer(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_unref(L, LUA_REGISTRYINDEX, completer_ref);
    lua_pushvalue(L, 1);
    completer_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    rl_attempted_completion_function = complete;
    rl_basic_word_break_characters = " \t\n\"'()[]{},;=+-*/%^<>~";
    return 0;
}

int luaopen_odp_readline(lua_State *L)
{
    /* libedit's readline API keeps its state in libedit's globals for the life of the process: keep libedit
     * mapped when Lua unloads this module at exit (it was loaded on first require, Makefile LAZY). */
    dlopen("libedit.so.2", RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    static const luaL_Reg funcs[] = {{"readline", l_readline}, {"add_history", l_add_history},
                                     {"read_history", l_read_history}, {"write_history", l_write_history},
                                     {"set_completer", l_set_completer}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
