#include "flatbuf.h"

#include <string.h>

uint16_t odp_fb_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
uint32_t odp_fb_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint64_t odp_fb_rd64(const uint8_t *p) { return (uint64_t)odp_fb_rd32(p) | (uint64_t)odp_fb_rd32(p + 4) << 32; }

/* Does [pos, pos+len) lie inside the buffer? (Written so that no addition can overflow.) */
static int inside(const odp_fb *b, size_t pos, size_t len) { return pos <= b->n && len <= b->n - pos; }

static int bad(odp_err *err, const char *what, size_t pos)
{
    return odp_fail(err, ODP_EPROTO, "corrupt flatbuffer: %s at byte %zu", what, pos);
}

/* Follows the uoffset stored at ref_pos. */
static int follow(const odp_fb *b, size_t ref_pos, size_t *target, odp_err *err)
{
    if (!inside(b, ref_pos, 4))
        return bad(err, "offset outside the buffer", ref_pos);
    uint32_t off = odp_fb_rd32(b->p + ref_pos);
    if (off == 0 || off > b->n - ref_pos)
        return bad(err, "offset points outside the buffer", ref_pos);
    *target = ref_pos + off;
    return 0;
}

int odp_fb_table_at(const odp_fb *b, size_t ref_pos, odp_fb_table *t, odp_err *err)
{
    size_t pos;
    int rc = follow(b, ref_pos, &pos, err);
    if (rc)
        return rc;
    if (!inside(b, pos, 4))
        return bad(err, "table outside the buffer", pos);
    int32_t soff = (int32_t)odp_fb_rd32(b->p + pos);
    /* vtable = table - soffset, computed in 64 bits signed so neither direction can wrap. */
    int64_t vt = (int64_t)pos - (int64_t)soff;
    if (vt < 0 || !inside(b, (size_t)vt, 4))
        return bad(err, "vtable outside the buffer", pos);
    uint16_t vtlen = odp_fb_rd16(b->p + vt), tlen = odp_fb_rd16(b->p + vt + 2);
    if (vtlen < 4 || (vtlen & 1) || !inside(b, (size_t)vt, vtlen))
        return bad(err, "bad vtable size", (size_t)vt);
    if (tlen < 4 || !inside(b, pos, tlen))
        return bad(err, "table size outside the buffer", pos);
    t->pos = pos;
    t->vt = (size_t)vt;
    t->vtlen = vtlen;
    t->tlen = tlen;
    return 0;
}

int odp_fb_field(const odp_fb *b, const odp_fb_table *t, unsigned id, size_t width, size_t *pos, odp_err *err)
{
    size_t slot = 4 + 2 * (size_t)id;
    *pos = 0;
    if (slot + 2 > t->vtlen)
        return 0;
    uint16_t off = odp_fb_rd16(b->p + t->vt + slot);
    if (off == 0)
        return 0;
    if (off < 4 || (size_t)off + width > t->tlen)
        return bad(err, "field outside its table", t->pos);
    *pos = t->pos + off;
    return 0;
}

int odp_fb_has(const odp_fb *b, const odp_fb_table *t, unsigned id, int *present, odp_err *err)
{
    size_t pos;
    int rc = odp_fb_field(b, t, id, 1, &pos, err);
    *present = pos != 0;
    return rc;
}

#define SCALAR(fn, type, width, rd)                                                                      \
    int fn(const odp_fb *b, const odp_fb_table *t, unsigned id, type def, type *out, odp_err *err)       \
    {                                                                                                    \
        size_t pos;                                                                                      \
        int rc = odp_fb_field(b, t, id, width, &pos, err);                                               \
        *out = pos ? (type)rd : def;                                                                     \
        return rc;                                                                                       \
    }
SCALAR(odp_fb_u8, uint8_t, 1, b->p[pos])
SCALAR(odp_fb_i32, int32_t, 4, odp_fb_rd32(b->p + pos))
SCALAR(odp_fb_u32, uint32_t, 4, odp_fb_rd32(b->p + pos))
SCALAR(odp_fb_u64, uint64_t, 8, odp_fb_rd64(b->p + pos))

int odp_fb_sub(const odp_fb *b, const odp_fb_table *t, unsigned id, odp_fb_table *sub, int *present, odp_err *err)
{
    size_t pos;
    *present = 0;
    int rc = odp_fb_field(b, t, id, 4, &pos, err);
    if (rc || !pos)
        return rc;
    *present = 1;
    return odp_fb_table_at(b, pos, sub, err);
}

static int vector_at(const odp_fb *b, const odp_fb_table *t, unsigned id, size_t elem, odp_fb_vec *v,
                     odp_err *err)
{
    size_t pos, start;
    v->pos = 0;
    v->count = 0;
    int rc = odp_fb_field(b, t, id, 4, &pos, err);
    if (rc || !pos)
        return rc;
    if ((rc = follow(b, pos, &start, err)))
        return rc;
    if (!inside(b, start, 4))
        return bad(err, "vector length outside the buffer", start);
    uint32_t count = odp_fb_rd32(b->p + start);
    if (count > (b->n - start - 4) / elem)
        return bad(err, "vector longer than the buffer", start);
    v->pos = start + 4;
    v->count = count;
    return 0;
}

int odp_fb_string(const odp_fb *b, const odp_fb_table *t, unsigned id, odp_fb_str *s, odp_err *err)
{
    odp_fb_vec v;
    int rc = vector_at(b, t, id, 1, &v, err);
    s->s = (rc || !v.pos) ? NULL : (const char *)b->p + v.pos;
    s->n = s->s ? v.count : 0;
    return rc;
}

int odp_fb_vector(const odp_fb *b, const odp_fb_table *t, unsigned id, size_t elem, odp_fb_vec *v, odp_err *err)
{
    return vector_at(b, t, id, elem ? elem : 1, v, err); /* elem 0 would divide by zero */
}

int odp_fb_vec_table(const odp_fb *b, const odp_fb_vec *v, uint32_t i, odp_fb_table *t, odp_err *err)
{
    if (i >= v->count)
        return bad(err, "vector index out of range", v->pos);
    return odp_fb_table_at(b, v->pos + 4 * (size_t)i, t, err);
}
