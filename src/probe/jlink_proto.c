/* The J-Link helper pipe's requests and replies; see jlink_proto.h. */
#include "jlink_proto.h"

#include <string.h>

uint32_t odp_jl_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int odp_jl_add_u32(odp_buf *b, uint32_t v)
{
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return odp_frame_add(b, p, 4);
}

static int field_u32(const odp_frame *f, uint32_t *pos, uint32_t *v, const char *what, odp_err *err)
{
    const uint8_t *p;
    uint32_t n;
    if (!odp_frame_field(f, pos, &p, &n) || n != 4)
        return odp_fail(err, ODP_EPROTO, "J-Link request '%c': %s is not a 4-byte integer", f->type, what);
    *v = odp_jl_u32(p);
    return 0;
}

static int field_str(const odp_frame *f, uint32_t *pos, char *out, size_t len, const char *what, odp_err *err)
{
    const uint8_t *p;
    uint32_t n;
    if (!odp_frame_field(f, pos, &p, &n) || n >= len || memchr(p, 0, n))
        return odp_fail(err, ODP_EPROTO, "J-Link request '%c': %s is missing, longer than %zu bytes or holds a NUL",
                        f->type, what, len - 1);
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
}

static int want_fields(const odp_frame *f, uint32_t n, odp_err *err)
{
    if (f->nfields != n)
        return odp_fail(err, ODP_EPROTO, "J-Link request '%c' has %u fields, not %u", f->type, f->nfields, n);
    return 0;
}

int odp_jl_request_decode(const odp_frame *f, odp_jl_request *r, odp_err *err)
{
    uint32_t pos = 0, n;
    const uint8_t *p;
    int rc;
    memset(r, 0, sizeof *r);
    r->type = f->type;
    switch (f->type) {
    case ODP_JL_OPEN:
        if ((rc = want_fields(f, 6, err)) || (rc = field_u32(f, &pos, &r->proto, "protocol", err)) ||
            (rc = field_str(f, &pos, r->lib, sizeof r->lib, "lib", err)) ||
            (rc = field_str(f, &pos, r->device, sizeof r->device, "device", err)) ||
            (rc = field_u32(f, &pos, &r->speed_khz, "speed", err)) ||
            (rc = field_str(f, &pos, r->serial, sizeof r->serial, "serial", err)) ||
            (rc = field_str(f, &pos, r->ip, sizeof r->ip, "ip", err)))
            return rc;
        return 0;
    case ODP_JL_READ:
        if ((rc = want_fields(f, 2, err)) || (rc = field_u32(f, &pos, &r->addr, "address", err)) ||
            (rc = field_u32(f, &pos, &r->n, "size", err)))
            return rc;
        break;
    case ODP_JL_WRITE:
        if ((rc = want_fields(f, 2, err)) || (rc = field_u32(f, &pos, &r->addr, "address", err)))
            return rc;
        odp_frame_field(f, &pos, &p, &n); /* the count said it is there */
        r->data = p, r->n = n;
        break;
    case ODP_JL_HALT:
    case ODP_JL_GO:
    case ODP_JL_RESET:
        return want_fields(f, 0, err);
    default:
        return odp_fail(err, ODP_EPROTO, "unknown J-Link request type 0x%02x", f->type);
    }
    if (r->n > ODP_JLINK_CHUNK)
        return odp_fail(err, ODP_EPROTO, "J-Link request '%c' of %u bytes: at most %u", f->type, r->n,
                        ODP_JLINK_CHUNK);
    if ((uint64_t)r->addr + r->n > 0x100000000ULL)
        return odp_fail(err, ODP_EPROTO, "J-Link request '%c': 0x%08x+%u wraps past 4 GiB", f->type, r->addr, r->n);
    return 0;
}

/* odp_code_name backwards; an unknown name is EIO (the message still says what happened). */
static odp_code code_from_name(const uint8_t *p, uint32_t n)
{
    for (int c = ODP_ETIMEDOUT; c >= ODP_ECANCELED; c--) {
        const char *name = odp_code_name((odp_code)c);
        if (strlen(name) == n && memcmp(name, p, n) == 0)
            return (odp_code)c;
    }
    return ODP_EIO;
}

int odp_jl_reply_decode(const odp_frame *f, const uint8_t **data, uint32_t *n, odp_err *err)
{
    uint32_t pos = 0, cn, mn;
    const uint8_t *c, *m;
    *data = NULL, *n = 0;
    if (f->type == ODP_JL_OK) {
        if (f->nfields > 1)
            return odp_fail(err, ODP_EPROTO, "J-Link helper: an answer of %u fields", f->nfields);
        if (f->nfields == 1)
            odp_frame_field(f, &pos, data, n);
        return 0;
    }
    if (f->type != ODP_JL_ERROR)
        return odp_fail(err, ODP_EPROTO, "J-Link helper: unknown reply type 0x%02x", f->type);
    if (f->nfields != 2 || !odp_frame_field(f, &pos, &c, &cn) || !odp_frame_field(f, &pos, &m, &mn))
        return odp_fail(err, ODP_EPROTO, "J-Link helper: an error reply of %u fields, not 2", f->nfields);
    /* one line: the message stops at its first control character */
    uint32_t k = 0;
    while (k < mn && k < 400 && m[k] >= 0x20)
        k++;
    odp_code code = code_from_name(c, cn);
    return odp_fail(err, code, "%.*s", (int)k, (const char *)m);
}

int odp_jl_error_reply(odp_buf *b, const odp_err *err)
{
    size_t at = odp_frame_begin(b, ODP_JL_ERROR);
    if (odp_frame_add_str(b, odp_code_name(err->code)) || odp_frame_add_str(b, err->msg))
        return -1;
    return odp_frame_end(b, at);
}
