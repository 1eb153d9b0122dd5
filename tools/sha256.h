/* SHA-256 (FIPS 180-4) for the static board helper, which links no libcrypto (odp itself hashes through
 * libcrypto: src/util/hash.c). Checked against sha256sum by tests/lua/helper_test.lua. */
#ifndef ODP_TOOLS_SHA256_H
#define ODP_TOOLS_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *p, size_t n);
void sha256_hex(sha256_ctx *c, char out[65]);

#endif
