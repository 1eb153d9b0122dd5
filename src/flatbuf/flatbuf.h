/* Bounds-checked reading of FlatBuffers from untrusted bytes (ETDump, .pte). No schema compiler: callers
 * walk tables by field id. Every offset, length and vector count is checked against the buffer before it is
 * used; a bad file gives ODP_EPROTO with the byte position, never a read outside the buffer. */
#ifndef ODP_FLATBUF_H
#define ODP_FLATBUF_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} odp_fb;

/* A table: its position, and the vtable's field count and the table's inline size (both checked). */
typedef struct {
    size_t pos;
    size_t vt;
    uint16_t vtlen;
    uint16_t tlen;
} odp_fb_table;

/* A string or byte vector inside the buffer (s == NULL when the field is absent). */
typedef struct {
    const char *s;
    uint32_t n;
} odp_fb_str;

/* A vector of scalars or offsets: data position and element count (count == 0 when absent). */
typedef struct {
    size_t pos;
    uint32_t count;
} odp_fb_vec;

uint16_t odp_fb_rd16(const uint8_t *p);
uint32_t odp_fb_rd32(const uint8_t *p);
uint64_t odp_fb_rd64(const uint8_t *p);

/* The table whose uoffset is stored at ref_pos (the root: ref_pos = 0, or 4 for size-prefixed buffers). */
int odp_fb_table_at(const odp_fb *b, size_t ref_pos, odp_fb_table *t, odp_err *err);

/* Position of field `id` of `width` bytes, or 0 when absent (a present field is inside the table). */
int odp_fb_field(const odp_fb *b, const odp_fb_table *t, unsigned id, size_t width, size_t *pos, odp_err *err);

/* Scalars with their schema default when absent. */
int odp_fb_u8(const odp_fb *b, const odp_fb_table *t, unsigned id, uint8_t def, uint8_t *out, odp_err *err);
int odp_fb_i32(const odp_fb *b, const odp_fb_table *t, unsigned id, int32_t def, int32_t *out, odp_err *err);
int odp_fb_u32(const odp_fb *b, const odp_fb_table *t, unsigned id, uint32_t def, uint32_t *out, odp_err *err);
int odp_fb_u64(const odp_fb *b, const odp_fb_table *t, unsigned id, uint64_t def, uint64_t *out, odp_err *err);
/* Presence-reporting variants (ExecuTorch's Value keeps scalars in optional sub-tables). */
int odp_fb_has(const odp_fb *b, const odp_fb_table *t, unsigned id, int *present, odp_err *err);

/* Sub-table field: *present = 0 when absent. */
int odp_fb_sub(const odp_fb *b, const odp_fb_table *t, unsigned id, odp_fb_table *sub, int *present, odp_err *err);
/* String field (length-checked; the terminating NUL is not required). */
int odp_fb_string(const odp_fb *b, const odp_fb_table *t, unsigned id, odp_fb_str *s, odp_err *err);
/* Vector field of `elem`-byte elements (offset vectors: elem = 4). */
int odp_fb_vector(const odp_fb *b, const odp_fb_table *t, unsigned id, size_t elem, odp_fb_vec *v, odp_err *err);
/* Element i of an offset vector as a table. */
int odp_fb_vec_table(const odp_fb *b, const odp_fb_vec *v, uint32_t i, odp_fb_table *t, odp_err *err);

#endif
