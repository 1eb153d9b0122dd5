/* libFuzzer target: the helper protocol's frame decoder (src/helper/frame.c), the one parser both ends use: odp
 * reading the board helper's answers (src/l_helper.c) and the helper reading odp's requests (tools/serve.c).
 * Arbitrary bytes, fed in pieces whose sizes come from the input itself. Checks: a frame's fields exactly fill
 * its payload; re-encoding a decoded frame gives back its bytes; once malformed, the decoder stays so; memory
 * held never exceeds one frame plus the last piece. Seeds: a hello, requests (a run with memory by phase:
 * memory=BYTES, marks), answers (output, a run's memory timeline in 'T' frames as a real helper sent it, its
 * end; an LLM runner's pieces in 'O' frames with the µs each was read, protocol 5), an error, an upload (two
 * 'P' chunks and an 'L') and its answers, runs queued behind one going with the 'Z' that drops them and the
 * answers to that (protocol 6: a 'D', then '!' EAGAIN for each dropped run). The 'O' time field's own checks are odp's client's
 * (tests/lua/helper_test.lua: 3000 mutated conversations).
 * sources: src/helper/frame.c src/util/buf.c
 * seeds: tests/fuzz/corpus/helper_frame
 * max_len: 70000 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helper/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    odp_frame_dec d;
    odp_frame_dec_init(&d);
    size_t pos = 0;
    int lost = 0;
    uint8_t split = size ? data[0] : 1;
    while (pos < size) {
        size_t n = 1 + (split = (uint8_t)(split * 31 + 7)) % 4096;
        if (n > size - pos)
            n = size - pos;
        if (odp_frame_dec_feed(&d, data + pos, n)) {
            if (!lost)
                abort(); /* feed fails only once malformed (or out of memory, which a fuzzer does not reach) */
            break;
        }
        pos += n;
        odp_frame f;
        int r;
        while ((r = odp_frame_next(&d, &f)) == 1) {
            if (lost || f.len > ODP_FRAME_MAX || f.nfields > ODP_FRAME_FIELDS_MAX)
                abort();
            odp_buf again = {0};
            size_t at = odp_frame_begin(&again, f.type);
            uint32_t fp = 0, fl, count = 0, sum = 0;
            const uint8_t *p;
            while (odp_frame_field(&f, &fp, &p, &fl)) {
                if (p < f.payload || p + fl > f.payload + f.len)
                    abort();
                odp_frame_add(&again, p, fl);
                count++;
                sum += 4 + fl;
            }
            if (count != f.nfields || sum != f.len || odp_frame_end(&again, at) ||
                again.len != ODP_FRAME_HDR + f.len || memcmp(again.data + ODP_FRAME_HDR, f.payload, f.len))
                abort();
            odp_buf_free(&again);
        }
        if (r < 0) {
            if (!d.error)
                abort();
            lost = 1;
        }
        if (d.in.len - d.used > ODP_FRAME_HDR + ODP_FRAME_MAX + 4096)
            abort();
    }
    odp_frame_dec_free(&d);
    return 0;
}
