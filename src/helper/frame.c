/* The helper protocol's frames; see frame.h. */
#include "frame.h"

#include <string.h>

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

int odp_frame_field(const odp_frame *f, uint32_t *pos, const uint8_t **p, uint32_t *n)
{
    if (*pos + 4 > f->len)
        return 0;
    uint32_t l = get32(f->payload + *pos);
    if (l > f->len - *pos - 4)
        return 0; /* odp_frame_next checked every length: only a caller's bad pos gets here */
    *p = f->payload + *pos + 4;
    *n = l;
    *pos += 4 + l;
    return 1;
}

void odp_frame_dec_init(odp_frame_dec *d) { memset(d, 0, sizeof *d); }

void odp_frame_dec_free(odp_frame_dec *d)
{
    odp_buf_free(&d->in);
    memset(d, 0, sizeof *d);
}

static void drop_used(odp_frame_dec *d)
{
    if (!d->used)
        return;
    memmove(d->in.data, d->in.data + d->used, d->in.len - d->used);
    d->in.len -= d->used;
    d->used = 0;
}

int odp_frame_dec_feed(odp_frame_dec *d, const void *p, size_t n)
{
    if (d->error)
        return -1;
    drop_used(d);
    return odp_buf_append(&d->in, p, n);
}

static int malformed(odp_frame_dec *d, const char *why)
{
    d->error = why;
    return -1;
}

int odp_frame_next(odp_frame_dec *d, odp_frame *f)
{
    if (d->error)
        return -1;
    drop_used(d);
    const uint8_t *h = (const uint8_t *)d->in.data;
    size_t have = d->in.len;
    if (have < ODP_FRAME_HDR) {
        if ((have >= 1 && h[0] != 'O') || (have >= 2 && h[1] != 'H'))
            return malformed(d, "not a helper frame (bad magic)");
        return 0;
    }
    if (h[0] != 'O' || h[1] != 'H')
        return malformed(d, "not a helper frame (bad magic)");
    if (h[3] != 0)
        return malformed(d, "reserved header byte is not 0");
    uint32_t len = get32(h + 4);
    if (len > ODP_FRAME_MAX)
        return malformed(d, "frame longer than 1 MiB");
    if (have - ODP_FRAME_HDR < len)
        return 0;
    const uint8_t *p = h + ODP_FRAME_HDR;
    uint32_t pos = 0, nf = 0;
    while (pos < len) {
        if (len - pos < 4)
            return malformed(d, "field length cut short");
        uint32_t l = get32(p + pos);
        if (l > len - pos - 4)
            return malformed(d, "field longer than its frame");
        pos += 4 + l;
        if (++nf > ODP_FRAME_FIELDS_MAX)
            return malformed(d, "more than 4096 fields");
    }
    f->type = h[2];
    f->nfields = nf;
    f->payload = p;
    f->len = len;
    d->used = ODP_FRAME_HDR + len;
    return 1;
}

size_t odp_frame_begin(odp_buf *b, uint8_t type)
{
    size_t start = b->len;
    uint8_t h[ODP_FRAME_HDR] = {'O', 'H', type, 0, 0, 0, 0, 0};
    odp_buf_append(b, h, sizeof h);
    return start;
}

int odp_frame_add(odp_buf *b, const void *p, size_t n)
{
    uint8_t l[4];
    if (n > ODP_FRAME_MAX)
        return -1;
    put32(l, (uint32_t)n);
    if (odp_buf_append(b, l, 4) || odp_buf_append(b, p, n))
        return -1;
    return 0;
}

int odp_frame_add_str(odp_buf *b, const char *s) { return odp_frame_add(b, s, strlen(s)); }

int odp_frame_end(odp_buf *b, size_t start)
{
    if (b->dropped || b->len < start + ODP_FRAME_HDR)
        return -1;
    size_t len = b->len - start - ODP_FRAME_HDR;
    if (len > ODP_FRAME_MAX)
        return -1;
    put32((uint8_t *)b->data + start + 4, (uint32_t)len);
    return 0;
}
