#include "pte.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x)                                                                                           \
    do {                                                                                                 \
        int rc_ = (x);                                                                                   \
        if (rc_)                                                                                         \
            return rc_;                                                                                  \
    } while (0)

int odp_vela_scratch_size(const uint8_t *p, size_t n, uint64_t *scratch, odp_err *err)
{
    size_t pos = 0;
    int found = 0;
    for (int blocks = 0; blocks < ODP_VELA_MAX_BLOCKS; blocks++) {
        if (n - pos < 32)
            return odp_fail(err, ODP_EPROTO, "Vela stream ends at byte %zu without vela_end_stream", pos);
        char name[17];
        memcpy(name, p + pos, 16);
        name[16] = 0;
        if (strcmp(name, "vela_end_stream") == 0) {
            if (!found)
                return odp_fail(err, ODP_ENOTFOUND, "Vela stream has no scratch_size block");
            return 0;
        }
        int32_t size = (int32_t)odp_fb_rd32(p + pos + 16);
        size_t padded = ((size_t)(uint32_t)size + 15) & ~(size_t)15;
        if (size < 0 || padded > n - pos - 32)
            return odp_fail(err, ODP_EPROTO, "Vela block '%.16s' at byte %zu claims %d bytes, past the stream's end",
                            name, pos, size);
        if (strcmp(name, "scratch_size") == 0) {
            if (size < 4)
                return odp_fail(err, ODP_EPROTO, "Vela scratch_size block holds %d bytes, expected 4", size);
            *scratch = odp_fb_rd32(p + pos + 32);
            found = 1;
        }
        pos += 32 + padded;
    }
    return odp_fail(err, ODP_EPROTO, "Vela stream has more than %d blocks", ODP_VELA_MAX_BLOCKS);
}

static int looks_like_vela(const uint8_t *p, size_t n) { return n >= 16 && memcmp(p, "vela_bin_stream", 16) == 0; }

/* BackendDelegate{id, processed: BackendDelegateDataReference{location:byte, index:uint}, compile_specs} */
static int read_delegate(const odp_fb *b, const odp_fb_table *prog, const odp_pte *p, const odp_fb_table *t,
                         odp_pte_delegate *d, odp_err *err)
{
    odp_fb_table ref;
    int has;
    TRY(odp_fb_string(b, t, 0, &d->id, err));
    TRY(odp_fb_sub(b, t, 1, &ref, &has, err));
    if (!has)
        return 0;
    TRY(odp_fb_u8(b, &ref, 0, 0, &d->location, err));
    TRY(odp_fb_u32(b, &ref, 1, 0, &d->index, err));
    if (d->location == 0) {
        odp_fb_vec inl, data;
        odp_fb_table blob;
        TRY(odp_fb_vector(b, prog, 3, 4, &inl, err));
        if (d->index >= inl.count)
            return odp_fail(err, ODP_EPROTO, "corrupt .pte: delegate data index %u of %u inline blobs", d->index,
                            inl.count);
        TRY(odp_fb_vec_table(b, &inl, d->index, &blob, err));
        TRY(odp_fb_vector(b, &blob, 0, 1, &data, err));
        d->data = b->p + data.pos;
        d->ndata = data.count;
    } else if (d->location == 1) {
        odp_fb_vec segs;
        odp_fb_table seg;
        uint64_t off, size;
        TRY(odp_fb_vector(b, prog, 4, 4, &segs, err));
        if (d->index >= segs.count)
            return odp_fail(err, ODP_EPROTO, "corrupt .pte: delegate segment index %u of %u segments", d->index,
                            segs.count);
        TRY(odp_fb_vec_table(b, &segs, d->index, &seg, err));
        TRY(odp_fb_u64(b, &seg, 0, 0, &off, err));
        TRY(odp_fb_u64(b, &seg, 1, 0, &size, err));
        if (!p->has_extended_header)
            return odp_fail(err, ODP_EPROTO, "corrupt .pte: a delegate lives in a segment but there is no extended header");
        uint64_t start = p->segment_base_offset + off;
        if (start < off || start > p->bytes || size > p->bytes - start)
            return odp_fail(err, ODP_EPROTO, "truncated .pte: delegate segment %u (%llu bytes at %llu) is past the file's end",
                            d->index, (unsigned long long)size, (unsigned long long)start);
        /* segments follow the program data: resolved against the whole file once all methods are read */
        d->segment_start = (size_t)start;
        d->ndata = (size_t)size;
    } else {
        return odp_fail(err, ODP_EPROTO, "corrupt .pte: unknown delegate data location %u", d->location);
    }
    return 0;
}

/* ExecutionPlan.inputs or .outputs (field `id`): each an index into values, resolved to its EValue's kind and,
 * for a tensor, its dtype and shape. Bounded: ODP_PTE_MAX_IO entries, ODP_PTE_MAX_DIMS dimensions. */
static int read_io(const odp_fb *b, const odp_fb_table *t, unsigned id, const char *what, odp_pte_io **out,
                   uint32_t *nout, odp_err *err)
{
    odp_fb_vec idx, values;
    TRY(odp_fb_vector(b, t, id, 4, &idx, err));
    if (!idx.count)
        return 0;
    if (idx.count > ODP_PTE_MAX_IO)
        return odp_fail(err, ODP_EPROTO, "corrupt .pte: %u method %s (odp reads at most %d)", idx.count, what,
                        ODP_PTE_MAX_IO);
    TRY(odp_fb_vector(b, t, 2, 4, &values, err));
    if (!(*out = calloc(idx.count, sizeof **out)))
        return odp_fail(err, ODP_EIO, "out of memory for %u method %s", idx.count, what);
    *nout = idx.count;
    for (uint32_t i = 0; i < idx.count; i++) {
        odp_pte_io *io = &(*out)[i];
        int32_t vi = (int32_t)odp_fb_rd32(b->p + idx.pos + 4 * (size_t)i);
        if (vi < 0 || (uint32_t)vi >= values.count)
            return odp_fail(err, ODP_EPROTO, "corrupt .pte: method %s %u is value %d of %u", what, i, vi,
                            values.count);
        io->value_index = (uint32_t)vi;
        odp_fb_table ev, val;
        int has;
        TRY(odp_fb_vec_table(b, &values, (uint32_t)vi, &ev, err));
        /* EValue{val: KernelTypes}: a union is two fields, its type tag (id 0) and its table (id 1) */
        TRY(odp_fb_u8(b, &ev, 0, 0, &io->kind, err));
        if (io->kind != 5)
            continue;
        TRY(odp_fb_sub(b, &ev, 1, &val, &has, err));
        if (!has)
            return odp_fail(err, ODP_EPROTO, "corrupt .pte: method %s %u is a tensor without its table", what, i);
        uint8_t st, dyn;
        odp_fb_vec sizes;
        TRY(odp_fb_u8(b, &val, 0, 0, &st, err));
        TRY(odp_fb_vector(b, &val, 2, 4, &sizes, err));
        TRY(odp_fb_u8(b, &val, 8, 0, &dyn, err));
        if (sizes.count > ODP_PTE_MAX_DIMS)
            return odp_fail(err, ODP_EPROTO, "corrupt .pte: method %s %u has %u dimensions (odp reads at most %d)",
                            what, i, sizes.count, ODP_PTE_MAX_DIMS);
        io->scalar_type = (int8_t)st;
        io->dynamism = dyn;
        io->ndim = (uint8_t)sizes.count;
        for (uint32_t d = 0; d < sizes.count; d++) {
            io->sizes[d] = (int32_t)odp_fb_rd32(b->p + sizes.pos + 4 * (size_t)d);
            if (io->sizes[d] < 0)
                return odp_fail(err, ODP_EPROTO, "corrupt .pte: method %s %u has a negative size %d", what, i,
                                io->sizes[d]);
        }
    }
    return 0;
}

static int read_method(const odp_fb *b, const odp_fb_table *prog, const odp_pte *p, const odp_fb_table *t,
                       odp_pte_method *m, odp_err *err)
{
    odp_fb_vec ops, dels;
    TRY(odp_fb_string(b, t, 0, &m->name, err));
    /* ExecutionPlan{name, container_meta_type, values, inputs, outputs, chains, operators, delegates, ...} */
    TRY(read_io(b, t, 3, "inputs", &m->inputs, &m->ninputs, err));
    TRY(read_io(b, t, 4, "outputs", &m->outputs, &m->noutputs, err));
    TRY(odp_fb_vector(b, t, 6, 4, &ops, err));
    if (ops.count) {
        if (!(m->operators = calloc(ops.count, sizeof *m->operators)))
            return odp_fail(err, ODP_EIO, "out of memory for %u operators", ops.count);
        m->noperators = ops.count;
        for (uint32_t i = 0; i < ops.count; i++) {
            odp_fb_table ot;
            TRY(odp_fb_vec_table(b, &ops, i, &ot, err));
            TRY(odp_fb_string(b, &ot, 0, &m->operators[i].name, err));
            TRY(odp_fb_string(b, &ot, 1, &m->operators[i].overload, err));
        }
    }
    TRY(odp_fb_vector(b, t, 7, 4, &dels, err));
    if (dels.count) {
        if (!(m->delegates = calloc(dels.count, sizeof *m->delegates)))
            return odp_fail(err, ODP_EIO, "out of memory for %u delegates", dels.count);
        m->ndelegates = dels.count;
        for (uint32_t i = 0; i < dels.count; i++) {
            odp_fb_table dt;
            TRY(odp_fb_vec_table(b, &dels, i, &dt, err));
            TRY(read_delegate(b, prog, p, &dt, &m->delegates[i], err));
        }
    }
    return odp_fb_vector(b, t, 8, 8, &m->non_const_buffer_sizes, err);
}

static int read_program(const uint8_t *buf, size_t n, odp_pte *p, odp_err *err)
{
    if (n > ODP_PTE_MAX_BYTES)
        return odp_fail(err, ODP_EPROTO, ".pte of %zu bytes is larger than odp accepts", n);
    if (n < 8)
        return odp_fail(err, ODP_EPROTO, "not a .pte: %zu bytes", n);
    p->bytes = n;
    for (int i = 0; i < 4; i++) {
        unsigned char c = buf[4 + i];
        p->identifier[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (memcmp(buf + 4, "ET12", 4) != 0) {
        if (memcmp(buf + 4, "BP", 2) == 0)
            return odp_fail(err, ODP_EPROTO, "a bundled program (identifier '%s'), not a plain .pte", p->identifier);
        return odp_fail(err, ODP_EPROTO, "not a .pte this odp reads: identifier '%s' != expected 'ET12'", p->identifier);
    }
    size_t extent = n;
    if (n >= 16 && memcmp(buf + 8, "eh00", 4) == 0) {
        p->has_extended_header = 1;
        p->header_length = odp_fb_rd32(buf + 12);
        if (p->header_length < 24 || n < 8 + (size_t)p->header_length)
            return odp_fail(err, ODP_EPROTO, "truncated .pte: extended header of %u bytes", p->header_length);
        p->program_size = odp_fb_rd64(buf + 16);
        p->segment_base_offset = odp_fb_rd64(buf + 24);
        if (p->header_length >= 32)
            p->segment_data_size = odp_fb_rd64(buf + 32);
        /* the runtime's own check (program.cpp): segments end the file when present */
        if (p->segment_base_offset && p->segment_data_size)
            p->expected_size = p->segment_base_offset + p->segment_data_size;
        else
            p->expected_size = p->program_size;
        if (p->expected_size > n || p->program_size > n)
            return odp_fail(err, ODP_EPROTO,
                            "truncated .pte: the extended header expects %llu bytes, the file has %zu",
                            (unsigned long long)(p->expected_size > p->program_size ? p->expected_size : p->program_size), n);
        if (p->program_size >= 16)
            extent = (size_t)p->program_size;
    }
    odp_fb b = {buf, extent};
    odp_fb_table prog;
    odp_fb_vec plans, segs;
    TRY(odp_fb_table_at(&b, 0, &prog, err));
    TRY(odp_fb_u32(&b, &prog, 0, 0, &p->version, err));
    TRY(odp_fb_vector(&b, &prog, 4, 4, &segs, err));
    p->nsegments = segs.count;
    TRY(odp_fb_vector(&b, &prog, 1, 4, &plans, err));
    if (plans.count) {
        if (!(p->methods = calloc(plans.count, sizeof *p->methods)))
            return odp_fail(err, ODP_EIO, "out of memory for %u methods", plans.count);
        p->nmethods = plans.count;
        for (uint32_t i = 0; i < plans.count; i++) {
            odp_fb_table mt;
            TRY(odp_fb_vec_table(&b, &plans, i, &mt, err));
            TRY(read_method(&b, &prog, p, &mt, &p->methods[i], err));
        }
    }
    /* Resolve segment positions against the whole file, then look for Vela streams. */
    for (uint32_t i = 0; i < p->nmethods; i++) {
        for (uint32_t j = 0; j < p->methods[i].ndelegates; j++) {
            odp_pte_delegate *d = &p->methods[i].delegates[j];
            if (d->location == 1)
                d->data = buf + d->segment_start;
            if (d->data && looks_like_vela(d->data, d->ndata)) {
                odp_err verr;
                if (odp_vela_scratch_size(d->data, d->ndata, &d->scratch_size, &verr) == 0)
                    d->vela = 1;
                else
                    snprintf(d->vela_error, sizeof d->vela_error, "%s", verr.msg);
            }
        }
    }
    return 0;
}

int odp_pte_read(const uint8_t *buf, size_t n, odp_pte *p, odp_err *err)
{
    memset(p, 0, sizeof *p);
    int rc = read_program(buf, n, p, err);
    if (rc) {
        char id[5];
        memcpy(id, p->identifier, 5);
        odp_pte_free(p);
        memcpy(p->identifier, id, 5);
    }
    return rc;
}

void odp_pte_free(odp_pte *p)
{
    for (uint32_t i = 0; i < p->nmethods; i++) {
        free(p->methods[i].operators);
        free(p->methods[i].inputs);
        free(p->methods[i].outputs);
        free(p->methods[i].delegates);
    }
    free(p->methods);
    memset(p, 0, sizeof *p);
}
