/* libFuzzer target: odp's output comparison and input generator on arbitrary bytes (device output).
 * The first byte picks the dtype and the logits mode, the rest is split into reference and run halves.
 * sources: src/numcmp/numcmp.c src/util/err.c
 * seeds: tests/fuzz/corpus/numcmp
 * max_len: 65536 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numcmp/numcmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    odp_dtype dt = (odp_dtype)(data[0] % (ODP_DT_BOOL + 1));
    int logits = data[0] >> 7;
    size_t half = (size - 1) / 2;
    /* copies: the core must not read past what it is given */
    uint8_t *a = malloc(half ? half : 1), *b = malloc(half ? half : 1);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memcpy(a, data + 1, half);
    memcpy(b, data + 1 + half, half);
    odp_numcmp r;
    odp_err err;
    volatile double sink = 0;
    if (odp_numcmp_run(a, b, half, dt, logits, &r, &err) == 0) {
        sink += r.cosine + r.rmse + (double)r.equal + (double)r.top1_ref;
        if (r.equal + r.nonfinite > r.n || r.finite > r.n)
            abort(); /* the counts never exceed the elements */
    }
    if (odp_numgen(a, half, dt, size, data[0], &err) == 0)
        sink += a[0];
    (void)sink;
    free(a);
    free(b);
    return 0;
}
