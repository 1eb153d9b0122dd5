/* libFuzzer target: the helper's LZ4 block decoder (src/helper/lz4.c), which turns odp's compressed upload chunks
 * back into a file's bytes on the board. Each input is used twice:
 * - as a block, decoded into a buffer whose size the first byte picks: never a read past the input or a write
 *   past the buffer (ASan), and never a length over the buffer's;
 * - as data, compressed by liblz4 itself (the oracle, opened as odp opens it: liblz4.so.1), whose block must
 *   decode to exactly the data, also into a buffer of exactly its size.
 * sources: src/helper/lz4.c
 * seeds: tests/fuzz/corpus/lz4
 * max_len: 70000 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helper/lz4.h"

typedef int bound_fn(int);
typedef int compress_fn(const char *, char *, int, int);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t out[1 << 17], block[1 << 17];
    static bound_fn *bound;
    static compress_fn *compress;
    if (!compress) {
        void *h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
        bound = h ? (bound_fn *)dlsym(h, "LZ4_compressBound") : NULL;
        compress = h ? (compress_fn *)dlsym(h, "LZ4_compress_default") : NULL;
        if (!bound || !compress)
            abort(); /* the oracle must be there */
    }
    size_t cap = size ? ((size_t)data[0] * 613) % sizeof out : 0;
    long n = odp_lz4_decode(data, size, out, cap);
    if (n > (long)cap)
        abort();
    if (size == 0 || bound((int)size) > (int)sizeof block)
        return 0;
    int got = compress((const char *)data, (char *)block, (int)size, (int)sizeof block);
    if (got <= 0)
        abort();
    n = odp_lz4_decode(block, (size_t)got, out, size);
    if (n != (long)size || memcmp(out, data, size) != 0)
        abort();
    return 0;
}
