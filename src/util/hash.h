/* SHA-256 of files over 1 MiB through OpenSSL's libcrypto (opened on first use: SHA extensions for multi-MB
 * runners), of smaller files and in-memory texts in plain C (src/util/sha256.c: series keys, build inputs, a
 * run's logs are short, and opening libcrypto cost ~7 ms of a ~50 ms host run); base64 (RFC 4648, standard
 * alphabet). */
#ifndef ODP_HASH_H
#define ODP_HASH_H

#include <stddef.h>

#include "err.h"

#define ODP_SHA256_HEX 65

void odp_sha256_hex(const void *data, size_t n, char out[ODP_SHA256_HEX]);
/* 0, or ENOTFOUND when a file over 1 MiB needs libcrypto and it cannot be loaded, or the read's error. */
int odp_sha256_file_hex(const char *path, char out[ODP_SHA256_HEX], odp_err *err);
/* out must hold 4 * ((n + 2) / 3) + 1 bytes; returns the length written (without the NUL). */
size_t odp_base64_encode(const void *in, size_t n, char *out);
/* Strict decode (standard alphabet, padding required, ASCII whitespace ignored). out must hold 3 * (n / 4) + 3
 * bytes. Returns the decoded length or -1 on malformed input. */
long odp_base64_decode(const char *in, size_t n, unsigned char *out);

#endif
