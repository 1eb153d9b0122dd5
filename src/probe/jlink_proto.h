/* The pipe between odp and one J-Link helper (`odp --jlink-helper`, src/probe/jlink.c; docs/jlink-helper.md):
 * the frames of src/helper/frame.h on a socketpair, one request and exactly one reply at a time. Both
 * decoders are here, apart from the I/O, so that tests/fuzz/jlink_proto_fuzz.c can reach them.
 *   requests (odp -> helper)                          replies (helper -> odp)
 *   O open  {proto u32, lib, device, speed u32,       A {proto u32}: the helper's protocol version
 *            serial, ip}
 *   R read  {addr u32, n u32}  (n <= ODP_JLINK_CHUNK) A {n bytes}
 *   W write {addr u32, bytes}  (<= ODP_JLINK_CHUNK)   A {}
 *   H halt {}, G go {}, S reset {} (the DLL's raw reset) A {}
 *   anything else, or a request before open           ! {code name ("EIO", ...), message}
 * u32 fields are 4 bytes little-endian; strings carry no NUL. */
#ifndef ODP_JLINK_PROTO_H
#define ODP_JLINK_PROTO_H

#include <stdint.h>

#include "../helper/frame.h"
#include "../util/err.h"

#define ODP_JLINK_PROTO 1              /* bumped on any change to the requests or replies below */
#define ODP_JLINK_CHUNK (256u << 10)   /* bytes of one read or write: a frame holds 1 MiB at most */

enum {
    ODP_JL_OPEN = 'O',
    ODP_JL_READ = 'R',
    ODP_JL_WRITE = 'W',
    ODP_JL_HALT = 'H',
    ODP_JL_GO = 'G',
    ODP_JL_RESET = 'S',
    ODP_JL_OK = 'A',
    ODP_JL_ERROR = '!',
};

typedef struct {
    uint8_t type;
    uint32_t proto, speed_khz;               /* open */
    char lib[4096], device[256], serial[64], ip[300]; /* open; "" when not given */
    uint32_t addr, n;                        /* read, write */
    const uint8_t *data;                     /* write: n bytes inside the frame */
} odp_jl_request;

/* The helper's side: a request frame into *r. 0, or ODP_EPROTO with err naming what is wrong (an unknown
 * type, a wrong field count or size, a string too long or holding a NUL): the helper answers that with `!`. */
int odp_jl_request_decode(const odp_frame *f, odp_jl_request *r, odp_err *err);

/* odp's side: a reply frame. `A` -> 0, its one field (or none) in data, n; `!` -> the helper's error code,
 * err filled with its message; anything else -> ODP_EPROTO. */
int odp_jl_reply_decode(const odp_frame *f, const uint8_t **data, uint32_t *n, odp_err *err);

/* Encoding helpers for the u32 fields and for `!` replies (both ends). */
int odp_jl_add_u32(odp_buf *b, uint32_t v);
uint32_t odp_jl_u32(const uint8_t *p);
int odp_jl_error_reply(odp_buf *b, const odp_err *err);

#endif
