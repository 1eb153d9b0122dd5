/* adb RSA keys: ~/.android/adbkey (PKCS#8 PEM, 0600) and adbkey.pub in Google adb's
 * format, so one key pair serves odp and Google's adb. OpenSSL 3 EVP only. */
#ifndef ODP_ADB_AUTH_H
#define ODP_ADB_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define ADB_TOKEN_SIZE 20u
#define ADB_PUBKEY_STRUCT_SIZE 524u
#define ADB_KEYS_MAX 16

/* Load `path` (a PEM private key); when it does not exist and `create` is set, generate an
 * RSA-2048 key, write it with mode 0600 and `path`.pub beside it. Returns NULL with `err`. */
EVP_PKEY *adb_key_load(const char *path, int create, char *err, size_t errlen);

/* "<base64 of the 524-byte Android key struct> <comment>" (no NUL, no newline); returns the
 * length written or -1 when `cap` is too small or the key is not RSA-2048. */
int adb_pubkey_encode(EVP_PKEY *key, const char *comment, char *out, size_t cap);

/* Parse the base64 text of adbkey.pub back into a public key (tests, and checking .pub files). */
EVP_PKEY *adb_pubkey_decode(const char *text, size_t n);

/* RSA PKCS#1 v1.5 signature over DigestInfo(SHA-1) || token (the token is the digest).
 * `sig` needs 256 bytes. Returns the signature length or -1. */
int adb_sign_token(EVP_PKEY *key, const uint8_t *token, size_t token_len, uint8_t *sig, size_t cap);

/* The keys odp offers, in order: each ADB_VENDOR_KEYS entry (':'-separated files, or
 * directories whose *.adb_key files are read), then ~/.android/adbkey (created if absent).
 * Returns the count; keys[] are owned by the caller (EVP_PKEY_free). */
int adb_keys_load(EVP_PKEY **keys, int max, const char *home, const char *vendor_keys, char *err, size_t errlen);

#endif
