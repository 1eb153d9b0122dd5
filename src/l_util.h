/* Helpers shared by the Lua bindings (src/l_*.c): the error triple, option tables, classes, callbacks.
 * Bindings check arguments, call a C core, push results; nothing else. */
#ifndef ODP_L_UTIL_H
#define ODP_L_UTIL_H

#include <lauxlib.h>
#include <lua.h>

#include "stream/stream.h"
#include "util/buf.h"
#include "util/err.h"

/* Operational failure: pushes nil, "ECODE: message", "ECODE" and returns 3 (luv's convention). */
int odp_pushfail(lua_State *L, const odp_err *err);

/* Options tables. The table at idx may be absent (nil/none). odp_checkopts raises on a key that is not in
 * `allowed` (NULL-terminated): a typo in an option must not be silently ignored. */
void odp_checkopts(lua_State *L, int idx, const char *const allowed[]);
lua_Number odp_optnumber(lua_State *L, int idx, const char *key, lua_Number def);
lua_Integer odp_optinteger(lua_State *L, int idx, const char *key, lua_Integer def);
const char *odp_optstring(lua_State *L, int idx, const char *key, const char *def);
int odp_optboolean(lua_State *L, int idx, const char *key, int def);
/* Reads opts.timeout (seconds; absent = def, negative = forever) and returns an absolute deadline. */
double odp_optdeadline(lua_State *L, int idx, double def);
/* Pushes opts[key] (or nil) and returns its type. */
int odp_optfield(lua_State *L, int idx, const char *key);

/* Creates the metatable `name` with methods in __index, plus the given metamethods (__gc/__close etc.). */
void odp_newclass(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta);
/* Pushes what a link carried as the record's `transport` has it: {round_trips, bytes_up, bytes_down} (the SSH and
 * adb bindings' traffic(); a caller adds its own fields to the table on the top). */
void odp_pushtraffic(lua_State *L, unsigned long long round_trips, unsigned long long bytes_up,
                     unsigned long long bytes_down);

/* A Lua function called from a C core's callback. A Lua error inside it is kept, the core is asked to
 * stop (call returns -1), and odp_luacb_release re-raises the error once the core has cleaned up. */
typedef struct {
    lua_State *L;
    int fn_ref;
    int err_ref;
} odp_luacb;
/* fn_idx may hold nil: then the callback is absent (odp_luacb_present is false). */
void odp_luacb_init(odp_luacb *cb, lua_State *L, int fn_idx);
int odp_luacb_present(const odp_luacb *cb);
/* Pushes the function; push nargs arguments after it, then call odp_luacb_call. */
void odp_luacb_push(odp_luacb *cb);
int odp_luacb_call(odp_luacb *cb, int nargs);
void odp_luacb_release(odp_luacb *cb);

/* Waiting functions (NSE's model). A binding whose C core may wait registers those functions with
 * odp_waiting: called from a scheduled coroutine (odp.core.sched) the function runs on a fiber
 * (util/fiber.h), and a wait inside it yields the coroutine with lua_yieldk (values: odp_yield_sentinel(), the
 * fiber as a light userdata, the number of this call) to be continued when the scheduler's poll says the wait is over. Called anywhere
 * else it runs as it always did, blocking. names: NULL-terminated fields of the table at idx. */
void odp_waiting(lua_State *L, int idx, const char *const names[]);
/* The same for methods of a class made by odp_newclass. */
void odp_waiting_methods(lua_State *L, const char *class_name, const char *const names[]);
/* The first value of every yield the scheduler handles (NSE's sentinel: user coroutines pass such yields on). */
void *odp_yield_sentinel(void);
/* While positive, waiting functions called from a yieldable coroutine yield (the scheduler is running).
 * Adds delta and returns the new count. */
int odp_scheduling(int delta);

/* Streams (one userdata type odp.Stream for every odp_stream implementation). Takes ownership of s. */
void odp_pushstream(lua_State *L, odp_stream *s);
/* The same, the value at owner kept alive as long as the stream (a session whose channel it is). */
void odp_pushstream_owned(lua_State *L, odp_stream *s, int owner);
/* Returns the stream at idx or raises (wrong type, closed). */
odp_stream *odp_checkstream(lua_State *L, int idx);

#endif

/* What every exec-like call takes and returns (odp.proc.run, Session:exec, Device:shell): one shape,
 * written once. odp_exec_opts reads stdin=, capture_limit=, on_stdout=, on_stderr= from the options table
 * at idx (the stdin string stays valid while that table lives); pass odp_exec_on_output and &io->... as the
 * C core's output callback and context; odp_exec_io_release re-raises a callback's error. */
typedef struct {
    const char *stdin_data;
    size_t stdin_len;
    size_t capture_limit;
    odp_luacb on_stdout, on_stderr;
} odp_exec_io;
void odp_exec_opts(lua_State *L, int idx, odp_exec_io *io);
int odp_exec_on_output(void *ctx, int stream, const char *data, size_t n);
void odp_exec_io_release(odp_exec_io *io);

typedef struct {
    int status;
    int signal;              /* 0: none */
    const char *signal_name; /* NULL: not signalled */
    int timed_out, canceled, aborted;
    const odp_buf *out, *err;
    double wall_s;
} odp_exec_view;
/* Pushes {ok, status, signal, signal_name, timed_out, canceled, aborted, stdout, stderr, *_dropped, wall_s};
 * the caller may add fields (rusage, remote_pgid) to the table left on the stack. */
void odp_push_exec(lua_State *L, const odp_exec_view *v);
