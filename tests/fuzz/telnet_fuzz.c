/* libFuzzer target: the Telnet/RFC 2217 parser of odp's RFC 2217 client (odp_telnet_rx) on server bytes that
 * are entirely fuzzed, fed in chunks whose sizes the input's first byte picks. Checks: no crash or
 * out-of-bounds access; the data out is never longer than the bytes in; pending replies stay bounded.
 * sources: src/net/rfc2217.c src/net/tcp.c src/stream/stream.c src/util/err.c src/util/wait.c src/util/fiber.c src/util/buf.c
 * seeds: tests/fuzz/corpus/telnet
 * max_len: 4096 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/rfc2217.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = 1 + data[0] % 64;
    data++, size--;
    odp_telnet t;
    odp_telnet_init(&t);
    unsigned char out[64];
    for (size_t i = 0; i < size; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        size_t got = odp_telnet_rx(&t, data + i, n, out);
        if (got > n)
            abort();
        if (t.reply_len > sizeof t.reply || t.sb_len > sizeof t.sb)
            abort();
        if (i % 256 == 0)
            t.reply_len = 0; /* the stream sends its replies now and then */
    }
    return 0;
}
