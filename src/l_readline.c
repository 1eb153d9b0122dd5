/* odp.readline: line editing and history (libedit) for the REPL, which is Lua (lua/odp/cli/repl.lua). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
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

/* The REPL's input, when it is a terminal; -1 when it is not (a pipe, a file: every line of it is meant). */
static int terminal_fd(void)
{
    int fd = fileno(rl_instream ? rl_instream : stdin);
    return isatty(fd) ? fd : -1;
}

/* Is terminal input ready to be read now (through the one waiting point, with a deadline already passed)? */
static int input_ready(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    odp_err err;
    return odp_wait(&p, 1, odp_now(), &err) == 0 && (p.revents & (POLLIN | POLLHUP));
}

/* input_waiting() -> boolean: input already typed or pasted that readline would read at once (the rest of a
 * paste of several lines); false when the input is not a terminal */
static int l_input_waiting(lua_State *L)
{
    int fd = terminal_fd();
    lua_pushboolean(L, fd >= 0 && input_ready(fd));
    return 1;
}

/* discard_typeahead() -> text, eof: takes what was typed on the terminal while a statement ran, so that it is
 * never read as input: text holds the keys (whole lines first, then a half-typed line), eof is true when a
 * Ctrl-D began a line among them. Between two readline calls the terminal is in its own (canonical) mode, where
 * a read of 0 bytes is exactly a Ctrl-D at the start of a line; the half-typed rest is readable only without
 * ICANON. Nothing happens when the input is not a terminal. */
static int l_discard_typeahead(lua_State *L)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int eof = 0;
    int fd = terminal_fd();
    struct termios saved;
    if (fd >= 0 && tcgetattr(fd, &saved) == 0) {
        char chunk[256];
        ssize_t n;
        if (saved.c_lflag & ICANON) {
            int zeros = 0; /* a terminal that hung up reads 0 for ever: two in a row end the loop */
            while (zeros < 2 && input_ready(fd) && (n = read(fd, chunk, sizeof chunk)) >= 0) {
                zeros = n == 0 ? zeros + 1 : 0;
                eof |= n == 0;
                luaL_addlstring(&b, chunk, (size_t)n);
            }
        }
        struct termios now = saved;
        now.c_lflag &= ~(tcflag_t)ICANON;
        now.c_cc[VMIN] = 0;
        now.c_cc[VTIME] = 0;
        if (tcsetattr(fd, TCSANOW, &now) == 0) {
            while ((n = read(fd, chunk, sizeof chunk)) > 0)
                luaL_addlstring(&b, chunk, (size_t)n);
            tcsetattr(fd, TCSANOW, &saved);
        }
        tcflush(fd, TCIFLUSH); /* whatever could not be read above */
    }
    luaL_pushresult(&b);
    lua_pushboolean(L, eof);
    return 2;
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
                                     {"set_completer", l_set_completer}, {"input_waiting", l_input_waiting},
                                     {"discard_typeahead", l_discard_typeahead}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    return 1;
}
