/* libFuzzer target: the J-Link helper pipe's two decoders (src/probe/jlink_proto.c) behind the frame decoder they
 * share with the board helper (src/helper/frame.c): the helper's reading of odp's requests and odp's reading of
 * the helper's replies (a DLL in the helper is not trusted either). Every frame of the input goes to both.
 * Checks: a decoded request's strings are NUL-terminated within their buffers and hold no NUL; a read or write
 * is at most one chunk and does not wrap past 4 GiB; a write's bytes lie inside the frame; a reply's field lies
 * inside the frame; an error reply never decodes as success, and its message is one line.
 * sources: src/probe/jlink_proto.c src/helper/frame.c src/util/buf.c src/util/err.c
 * seeds: tests/fuzz/corpus/jlink_proto
 * max_len: 300000 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probe/jlink_proto.h"

static void check_str(const char *s, size_t cap)
{
    if (!memchr(s, 0, cap))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static odp_jl_request req;
    odp_frame_dec d;
    odp_frame_dec_init(&d);
    if (odp_frame_dec_feed(&d, data, size) == 0) {
        odp_frame f;
        while (odp_frame_next(&d, &f) == 1) {
            odp_err err = {0};
            if (odp_jl_request_decode(&f, &req, &err) == 0) {
                check_str(req.lib, sizeof req.lib);
                check_str(req.device, sizeof req.device);
                check_str(req.serial, sizeof req.serial);
                check_str(req.ip, sizeof req.ip);
                if (req.n > ODP_JLINK_CHUNK || (uint64_t)req.addr + req.n > 0x100000000ULL)
                    abort();
                if (req.type == ODP_JL_WRITE && (req.data < f.payload || req.data + req.n > f.payload + f.len))
                    abort();
            } else if (err.code != ODP_EPROTO || !memchr(err.msg, 0, sizeof err.msg)) {
                abort();
            }
            const uint8_t *p;
            uint32_t n;
            int rc = odp_jl_reply_decode(&f, &p, &n, &err);
            if (rc == 0 && (f.type != ODP_JL_OK || (p && (p < f.payload || p + n > f.payload + f.len))))
                abort();
            if (rc && (rc > 0 || strchr(err.msg, '\n') || strchr(err.msg, '\r')))
                abort();
        }
    }
    odp_frame_dec_free(&d);
    return 0;
}
