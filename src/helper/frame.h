/* Frames of the helper protocol (docs/helper-protocol.md), written once for both ends: the board's helper
 * (tools/odp-rusage.c --serve) and odp (src/l_helper.c). No Lua, no libc beyond memory: the helper is static.
 *   frame   = 'O' 'H' type:u8 0:u8 length:u32le payload[length]
 *   payload = field*, field = length:u32le bytes[length]
 * Every length is checked against the bounds below before a byte of it is trusted; a frame whose fields do
 * not exactly fill its payload is malformed. */
#ifndef ODP_HELPER_FRAME_H
#define ODP_HELPER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "../util/buf.h"

#define ODP_HELPER_PROTO 8               /* bumped on any change to frames or requests */
#define ODP_FRAME_HDR 8
#define ODP_FRAME_MAX (1u << 20)         /* payload bytes of one frame */
#define ODP_FRAME_FIELDS_MAX 4096

typedef struct {
    uint8_t type;
    uint32_t nfields;
    const uint8_t *payload; /* points into the decoder's buffer: valid until the next odp_frame_next */
    uint32_t len;
} odp_frame;

/* One field after another: start with *pos = 0; 1 with p/n set, 0 after the last. */
int odp_frame_field(const odp_frame *f, uint32_t *pos, const uint8_t **p, uint32_t *n);

typedef struct {
    odp_buf in;        /* bytes fed, not yet dropped */
    size_t used;       /* bytes of the frame last returned, dropped at the next call */
    const char *error; /* why the stream is malformed; sticky */
} odp_frame_dec;

void odp_frame_dec_init(odp_frame_dec *d);
void odp_frame_dec_free(odp_frame_dec *d);
/* Takes n more bytes of the stream. -1 when out of memory or already malformed. Never holds more than one
 * frame's worth beyond what is unread: the caller feeds only what it read after odp_frame_next said 0. */
int odp_frame_dec_feed(odp_frame_dec *d, const void *p, size_t n);
/* 1: a whole frame in *f; 0: more bytes needed; -1: malformed (d->error says why; the stream is lost). */
int odp_frame_next(odp_frame_dec *d, odp_frame *f);

/* Encoding into an odp_buf: begin, add fields, end. end fails (-1) when the payload outgrew ODP_FRAME_MAX
 * or memory ran out; the buffer then holds the partial frame, to be discarded by the caller. */
size_t odp_frame_begin(odp_buf *b, uint8_t type);
int odp_frame_add(odp_buf *b, const void *p, size_t n);
int odp_frame_add_str(odp_buf *b, const char *s);
int odp_frame_end(odp_buf *b, size_t start);

#endif
