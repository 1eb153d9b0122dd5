/* SHA-256 (FIPS 180-4) in plain C: the static board helper's (it links no libcrypto), and odp's for short
 * in-memory texts and files up to 1 MiB (src/util/hash.c), where opening libcrypto would cost more than the
 * hash. Checked against sha256sum and libcrypto by tests/lua/startup_test.lua and tests/lua/helper_test.lua. */
#ifndef ODP_SHA256_H
#define ODP_SHA256_H

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
