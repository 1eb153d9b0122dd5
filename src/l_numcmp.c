/* odp.numcmp: tensors as raw bytes compared element by element, and deterministic inputs (src/numcmp). */
#include <math.h>
#include <stdint.h>

#include "l_util.h"
#include "numcmp/numcmp.h"

static odp_dtype check_dtype(lua_State *L, int idx, size_t *es)
{
    odp_dtype dt;
    odp_err err;
    if (odp_dtype_parse(luaL_checkstring(L, idx), &dt, es, &err))
        luaL_argerror(L, idx, err.msg);
    return dt;
}

static void set_num(lua_State *L, const char *k, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* an index (0-based) or nil for SIZE_MAX (no element ranked) */
static void push_index(lua_State *L, size_t i)
{
    if (i == SIZE_MAX)
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)i);
}

/* compare(ref, got, dtype, {logits = bool}?) -> {n, equal, finite, nonfinite, nan_ref, nan_got, inf_ref,
 * inf_got, max_abs_err, max_abs_at, mean_abs_err, rmse, cosine, snr_db, histogram, logits?} | nil, err, code.
 * Misuse (an unknown dtype) raises; bytes that are not whole elements, or of different lengths, are EPROTO. */
static void push_result(lua_State *L, const odp_numcmp *rp);

static int l_compare(lua_State *L)
{
    size_t na, nb, es;
    const char *a = luaL_checklstring(L, 1, &na), *b = luaL_checklstring(L, 2, &nb);
    odp_dtype dt = check_dtype(L, 3, &es);
    static const char *const allowed[] = {"logits", NULL};
    odp_checkopts(L, 4, allowed);
    int logits = odp_optboolean(L, 4, "logits", 0);
    odp_err err;
    if (na != nb) {
        odp_fail(&err, ODP_EPROTO, "%zu bytes against %zu: the outputs differ in size", nb, na);
        return odp_pushfail(L, &err);
    }
    odp_numcmp r;
    if (odp_numcmp_run(a, b, na, dt, logits, &r, &err))
        return odp_pushfail(L, &err);
    push_result(L, &r);
    return 1;
}

/* compare_files(ref_path, got_path, dtype, {logits}?) -> the same as compare, the files mapped, not read */
static int l_compare_files(lua_State *L)
{
    const char *a = luaL_checkstring(L, 1), *b = luaL_checkstring(L, 2);
    size_t es;
    odp_dtype dt = check_dtype(L, 3, &es);
    static const char *const allowed[] = {"logits", NULL};
    odp_checkopts(L, 4, allowed);
    odp_numcmp r;
    odp_err err;
    if (odp_numcmp_files(a, b, dt, odp_optboolean(L, 4, "logits", 0), &r, &err))
        return odp_pushfail(L, &err);
    push_result(L, &r);
    return 1;
}

static void push_result(lua_State *L, const odp_numcmp *rp)
{
    const odp_numcmp r = *rp;
    lua_createtable(L, 0, 20);
    set_int(L, "n", (lua_Integer)r.n);
    set_int(L, "equal", (lua_Integer)r.equal);
    set_int(L, "finite", (lua_Integer)r.finite);
    set_int(L, "nonfinite", (lua_Integer)r.nonfinite);
    set_int(L, "nan_ref", (lua_Integer)r.nan_ref);
    set_int(L, "nan_got", (lua_Integer)r.nan_got);
    set_int(L, "inf_ref", (lua_Integer)r.inf_ref);
    set_int(L, "inf_got", (lua_Integer)r.inf_got);
    set_num(L, "max_abs_err", r.max_abs_err);
    if (r.n)
        set_int(L, "max_abs_at", (lua_Integer)r.max_abs_at);
    set_num(L, "mean_abs_err", r.mean_abs_err);
    set_num(L, "rmse", r.rmse);
    set_num(L, "cosine", r.cosine);
    set_num(L, "snr_db", r.snr_db);
    lua_createtable(L, ODP_NUMCMP_BINS, 0);
    for (int i = 0; i < ODP_NUMCMP_BINS; i++) {
        lua_pushinteger(L, (lua_Integer)r.hist[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "histogram");
    if (r.logits) {
        lua_createtable(L, 0, 6);
        set_int(L, "k", (lua_Integer)r.k);
        push_index(L, r.top1_ref);
        lua_setfield(L, -2, "top1_ref");
        push_index(L, r.top1_got);
        lua_setfield(L, -2, "top1_got");
        set_int(L, "topk_overlap", (lua_Integer)r.topk_overlap);
        for (int side = 0; side < 2; side++) {
            const size_t *idx = side ? r.topk_got : r.topk_ref;
            lua_createtable(L, (int)r.k, 0);
            for (size_t i = 0; i < r.k; i++) {
                push_index(L, idx[i]);
                lua_rawseti(L, -2, (lua_Integer)i + 1);
            }
            lua_setfield(L, -2, side ? "topk_got" : "topk_ref");
        }
        lua_setfield(L, -2, "logits");
    }
}

/* generate(bytes, dtype, seed, index) -> string: input `index`'s deterministic values (numcmp.h). */
static int l_generate(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    size_t es;
    odp_dtype dt = check_dtype(L, 2, &es);
    lua_Integer seed = luaL_checkinteger(L, 3), index = luaL_checkinteger(L, 4);
    luaL_argcheck(L, n >= 0 && (uint64_t)n % es == 0, 1, "not a whole number of elements");
    luaL_argcheck(L, index >= 0 && index <= UINT32_MAX, 4, "out of range");
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, (size_t)n);
    odp_err err;
    if (odp_numgen(p, (size_t)n, dt, (uint64_t)seed, (uint32_t)index, &err))
        return luaL_error(L, "%s", err.msg); /* checked above: cannot happen */
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

/* element_bytes(dtype) -> n | nil, err, "ENOTFOUND": whether odp can read and compare this dtype. */
static int l_element_bytes(lua_State *L)
{
    odp_dtype dt;
    size_t es;
    odp_err err;
    if (odp_dtype_parse(luaL_checkstring(L, 1), &dt, &es, &err))
        return odp_pushfail(L, &err);
    lua_pushinteger(L, (lua_Integer)es);
    return 1;
}

int luaopen_odp_numcmp(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"compare", l_compare}, {"compare_files", l_compare_files}, {"generate", l_generate}, {"element_bytes", l_element_bytes}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    set_int(L, "BINS", ODP_NUMCMP_BINS);
    return 1;
}
