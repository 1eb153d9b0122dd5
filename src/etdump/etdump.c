#include "etdump.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    odp_fb b;
    odp_err *err;
    uint64_t events_left;
    uint64_t tensors_left;
    int partial; /* the file is shorter than its size prefix: what lies past the cut is counted, not read */
    odp_etdump *d;
} reader;

#define TRY(x)                                                                                           \
    do {                                                                                                 \
        int rc_ = (x);                                                                                   \
        if (rc_)                                                                                         \
            return rc_;                                                                                  \
    } while (0)

static int too_many(reader *r, const char *what)
{
    return odp_fail(r->err, ODP_EPROTO, "corrupt ETDump: more %s than odp accepts", what);
}

/* Tensor{scalar_type:byte, sizes:[long], strides:[long], offset:long} */
static int read_tensor(reader *r, const odp_fb_table *t, odp_etdump_tensor *out)
{
    uint8_t st;
    size_t pos;
    TRY(odp_fb_u8(&r->b, t, 0, 0, &st, r->err));
    out->scalar_type = (int8_t)st;
    TRY(odp_fb_vector(&r->b, t, 1, 8, &out->sizes, r->err));
    TRY(odp_fb_vector(&r->b, t, 2, 8, &out->strides, r->err));
    TRY(odp_fb_field(&r->b, t, 3, 8, &pos, r->err));
    out->has_offset = pos != 0;
    out->offset = pos ? (int64_t)odp_fb_rd64(r->b.p + pos) : 0;
    return 0;
}

/* A Value's scalar lives in a one-field sub-table (Int{int_val}, Bool{bool_val}, ...). */
static int scalar_sub(reader *r, const odp_fb_table *v, unsigned id, size_t width, int *has, size_t *pos)
{
    odp_fb_table sub;
    *pos = 0;
    TRY(odp_fb_sub(&r->b, v, id, &sub, has, r->err));
    if (*has)
        TRY(odp_fb_field(&r->b, &sub, 0, width, pos, r->err));
    return 0;
}

/* Value{val:byte, tensor, tensor_list, int_value, float_value, double_value, bool_value, output} */
static int read_value(reader *r, const odp_fb_table *v, odp_etdump_value *out)
{
    uint8_t val;
    size_t pos;
    odp_fb_table sub;
    TRY(odp_fb_u8(&r->b, v, 0, 0, &val, r->err));
    out->val = (int8_t)val;
    TRY(odp_fb_sub(&r->b, v, 1, &sub, &out->has_tensor, r->err));
    if (out->has_tensor)
        TRY(read_tensor(r, &sub, &out->tensor));
    TRY(odp_fb_sub(&r->b, v, 2, &sub, &out->has_tensor_list, r->err));
    if (out->has_tensor_list) {
        odp_fb_vec tv;
        TRY(odp_fb_vector(&r->b, &sub, 0, 4, &tv, r->err));
        if (tv.count > r->tensors_left)
            return too_many(r, "tensors");
        r->tensors_left -= tv.count;
        if (tv.count) {
            out->tensors = calloc(tv.count, sizeof *out->tensors);
            if (!out->tensors)
                return odp_fail(r->err, ODP_EIO, "out of memory for %u tensors", tv.count);
            out->ntensors = tv.count;
            for (uint32_t i = 0; i < tv.count; i++) {
                odp_fb_table tt;
                TRY(odp_fb_vec_table(&r->b, &tv, i, &tt, r->err));
                TRY(read_tensor(r, &tt, &out->tensors[i]));
            }
        }
    }
    TRY(scalar_sub(r, v, 3, 8, &out->has_int, &pos));
    out->int_value = pos ? (int64_t)odp_fb_rd64(r->b.p + pos) : 0;
    TRY(scalar_sub(r, v, 4, 4, &out->has_float, &pos));
    if (pos) {
        uint32_t bits = odp_fb_rd32(r->b.p + pos);
        memcpy(&out->float_value, &bits, sizeof bits);
    }
    TRY(scalar_sub(r, v, 5, 8, &out->has_double, &pos));
    if (pos) {
        uint64_t bits = odp_fb_rd64(r->b.p + pos);
        memcpy(&out->double_value, &bits, sizeof bits);
    }
    TRY(scalar_sub(r, v, 6, 1, &out->has_bool, &pos));
    out->bool_value = pos ? r->b.p[pos] != 0 : 0;
    TRY(scalar_sub(r, v, 7, 1, &out->has_output, &pos));
    out->output = pos ? r->b.p[pos] != 0 : 0;
    return 0;
}

/* ProfileEvent{name, chain_index:int, instruction_id:int=-1, delegate_debug_id_int:int=-1,
 *              delegate_debug_id_str, delegate_debug_metadata:[ubyte], start_time:ulong, end_time:ulong} */
static int read_profile(reader *r, const odp_fb_table *t, odp_etdump_event *e)
{
    int32_t chain;
    e->kind = ODP_ETDUMP_PROFILE;
    TRY(odp_fb_string(&r->b, t, 0, &e->name, r->err));
    TRY(odp_fb_i32(&r->b, t, 1, 0, &chain, r->err));
    e->chain_index = chain;
    TRY(odp_fb_i32(&r->b, t, 2, -1, &e->instruction_id, r->err));
    TRY(odp_fb_i32(&r->b, t, 3, -1, &e->delegate_debug_id_int, r->err));
    TRY(odp_fb_string(&r->b, t, 4, &e->delegate_debug_id_str, r->err));
    TRY(odp_fb_string(&r->b, t, 5, &e->delegate_debug_metadata, r->err));
    TRY(odp_fb_u64(&r->b, t, 6, 0, &e->start_time, r->err));
    TRY(odp_fb_u64(&r->b, t, 7, 0, &e->end_time, r->err));
    return 0;
}

/* DebugEvent{chain_index:ulong, instruction_id:int=-1, debug_entry:Value, delegate_debug_id_int:int=-1,
 *            delegate_debug_id_str, name} */
static int read_debug(reader *r, const odp_fb_table *t, odp_etdump_event *e)
{
    uint64_t chain;
    odp_fb_table v;
    e->kind = ODP_ETDUMP_DEBUG;
    TRY(odp_fb_u64(&r->b, t, 0, 0, &chain, r->err));
    e->chain_index = (int64_t)chain;
    TRY(odp_fb_i32(&r->b, t, 1, -1, &e->instruction_id, r->err));
    TRY(odp_fb_sub(&r->b, t, 2, &v, &e->has_debug_entry, r->err));
    if (e->has_debug_entry)
        TRY(read_value(r, &v, &e->debug_entry));
    TRY(odp_fb_i32(&r->b, t, 3, -1, &e->delegate_debug_id_int, r->err));
    TRY(odp_fb_string(&r->b, t, 4, &e->delegate_debug_id_str, r->err));
    TRY(odp_fb_string(&r->b, t, 5, &e->name, r->err));
    return 0;
}

/* Event{profile_event, allocation_event, debug_event}: exactly one is set; the first present one wins. */
static int read_event(reader *r, const odp_fb_table *t, odp_etdump_event *e)
{
    odp_fb_table sub;
    int has;
    e->instruction_id = -1;
    e->delegate_debug_id_int = -1;
    TRY(odp_fb_sub(&r->b, t, 0, &sub, &has, r->err));
    if (has)
        return read_profile(r, &sub, e);
    TRY(odp_fb_sub(&r->b, t, 1, &sub, &has, r->err));
    if (has) {
        e->kind = ODP_ETDUMP_ALLOCATION;
        TRY(odp_fb_i32(&r->b, &sub, 0, 0, &e->allocator_id, r->err));
        return odp_fb_u64(&r->b, &sub, 1, 0, &e->allocation_size, r->err);
    }
    TRY(odp_fb_sub(&r->b, t, 2, &sub, &has, r->err));
    if (has)
        return read_debug(r, &sub, e);
    e->kind = ODP_ETDUMP_EMPTY;
    return 0;
}

/* RunData{name, bundled_input_index:int=-1, allocators:[Allocator{name}], events:[Event]} */
static int read_run(reader *r, const odp_fb_table *t, odp_etdump_run *run)
{
    odp_fb_vec av, ev;
    TRY(odp_fb_string(&r->b, t, 0, &run->name, r->err));
    TRY(odp_fb_i32(&r->b, t, 1, -1, &run->bundled_input_index, r->err));
    TRY(odp_fb_vector(&r->b, t, 2, 4, &av, r->err));
    if (av.count) {
        run->allocators = calloc(av.count, sizeof *run->allocators);
        if (!run->allocators)
            return odp_fail(r->err, ODP_EIO, "out of memory for %u allocators", av.count);
        run->nallocators = av.count;
        for (uint32_t i = 0; i < av.count; i++) {
            odp_fb_table at;
            TRY(odp_fb_vec_table(&r->b, &av, i, &at, r->err));
            TRY(odp_fb_string(&r->b, &at, 0, &run->allocators[i], r->err));
        }
    }
    TRY(odp_fb_vector(&r->b, t, 3, 4, &ev, r->err));
    if (ev.count > r->events_left)
        return too_many(r, "events");
    r->events_left -= ev.count;
    if (ev.count) {
        run->events = calloc(ev.count, sizeof *run->events);
        if (!run->events)
            return odp_fail(r->err, ODP_EIO, "out of memory for %u events", ev.count);
        run->nevents = ev.count;
        uint32_t kept = 0;
        for (uint32_t i = 0; i < ev.count; i++) {
            odp_fb_table et;
            int rc = odp_fb_vec_table(&r->b, &ev, i, &et, r->err);
            if (!rc) {
                memset(&run->events[kept], 0, sizeof run->events[kept]);
                rc = read_event(r, &et, &run->events[kept]);
            }
            if (rc && !r->partial)
                return rc;
            if (rc) {
                /* past the cut: counted as lost; the events around it that lie whole before it are kept */
                free(run->events[kept].debug_entry.tensors);
                memset(&run->events[kept], 0, sizeof run->events[kept]);
                r->d->events_lost++;
                continue;
            }
            kept++;
        }
        run->nevents = kept;
    }
    return 0;
}

static int read_root(reader *r, odp_etdump *d)
{
    const odp_fb *b = &r->b;
    size_t root;
    if (b->n > ODP_ETDUMP_MAX_BYTES)
        return odp_fail(r->err, ODP_EPROTO, "ETDump of %zu bytes is larger than odp accepts", b->n);
    if (b->n >= 12 && memcmp(b->p + 8, "ED00", 4) == 0) {
        uint32_t size = odp_fb_rd32(b->p);
        if ((size_t)size > b->n - 4) {
            /* A runner that died while writing it: read what lies whole before the cut (every offset is
             * checked against it), say how much is missing. */
            d->partial = 1;
            d->declared_bytes = size;
            r->partial = 1;
            size = (uint32_t)(b->n - 4);
        }
        /* Read inside the prefixed extent: offsets are relative to byte 4. */
        r->b.p = b->p + 4;
        r->b.n = size;
        d->size_prefixed = 1;
        root = 0;
    } else if (b->n >= 8 && memcmp(b->p + 4, "ED00", 4) == 0) {
        root = 0;
    } else {
        return odp_fail(r->err, ODP_EPROTO, "not an ETDump: no \"ED00\" identifier at byte 8 (or 4)");
    }
    odp_fb_table t;
    odp_fb_vec rv;
    int rc = odp_fb_table_at(&r->b, root, &t, r->err);
    if (!rc)
        rc = odp_fb_u32(&r->b, &t, 0, 0, &d->version, r->err);
    if (!rc)
        rc = odp_fb_vector(&r->b, &t, 1, 4, &rv, r->err);
    if (rc && r->partial)
        return odp_fail(r->err, ODP_EPROTO,
                        "truncated ETDump: the size prefix says %u bytes, the file holds %zu, too few to read "
                        "anything", d->declared_bytes, r->b.n);
    if (rc)
        return rc;
    if (rv.count) {
        d->runs = calloc(rv.count, sizeof *d->runs);
        if (!d->runs)
            return odp_fail(r->err, ODP_EIO, "out of memory for %u runs", rv.count);
        d->nruns = rv.count;
        for (uint32_t i = 0; i < rv.count; i++) {
            odp_fb_table rt;
            rc = odp_fb_vec_table(&r->b, &rv, i, &rt, r->err);
            if (!rc)
                rc = read_run(r, &rt, &d->runs[i]);
            if (rc && !r->partial)
                return rc;
            if (rc)
                d->runs_lost++; /* its events read so far stay; its name may be empty */
        }
    }
    return 0;
}

int odp_etdump_read(const uint8_t *buf, size_t n, odp_etdump *d, odp_err *err)
{
    reader r = {.b = {buf, n}, .err = err, .events_left = ODP_ETDUMP_MAX_EVENTS,
                .tensors_left = ODP_ETDUMP_MAX_TENSORS, .d = d};
    memset(d, 0, sizeof *d);
    int rc = read_root(&r, d);
    if (rc)
        odp_etdump_free(d);
    return rc;
}

void odp_etdump_free(odp_etdump *d)
{
    for (uint32_t i = 0; i < d->nruns; i++) {
        odp_etdump_run *run = &d->runs[i];
        for (uint32_t j = 0; j < run->nevents; j++)
            free(run->events[j].debug_entry.tensors);
        free(run->events);
        free(run->allocators);
    }
    free(d->runs);
    memset(d, 0, sizeof *d);
}

int odp_etdump_duration(uint64_t start, uint64_t end, uint64_t *out)
{
    const uint64_t max_u32 = 0xffffffffu;
    if (start <= end) {
        *out = end - start;
        return 0;
    }
    if (start > max_u32 || end > max_u32)
        return -1;
    *out = (max_u32 - start) + end;
    return 0;
}
