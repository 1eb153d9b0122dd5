/* adb RSA keys; see auth.h. Format facts: docs/sources.md §3. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "auth.h"

#include "../util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int write_pub(EVP_PKEY *key, const char *path)
{
    char text[1024];
    char host[256] = "unknown";
    const char *user = getenv("USER");
    gethostname(host, sizeof host - 1);
    char comment[400];
    snprintf(comment, sizeof comment, "%s@%s", user && *user ? user : "odp", host);
    int n = adb_pubkey_encode(key, comment, text, sizeof text - 1);
    if (n < 0)
        return -1;
    text[n++] = '\n';
    char pub[PATH_MAX];
    if (snprintf(pub, sizeof pub, "%s.pub", path) >= (int)sizeof pub)
        return -1;
    int fd = open(pub, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int ok = write(fd, text, (size_t)n) == n;
    close(fd);
    return ok ? 0 : -1;
}

EVP_PKEY *adb_key_load(const char *path, int create, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (f) {
        EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        if (!k)
            snprintf(err, errlen, "%s: not a PEM private key", path);
        else if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA || EVP_PKEY_get_bits(k) != 2048) {
            snprintf(err, errlen, "%s: adb needs an RSA-2048 key", path);
            EVP_PKEY_free(k);
            k = NULL;
        }
        return k;
    }
    if (errno != ENOENT || !create) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        odp_err ignored; /* open() below reports the failure that matters */
        odp_mkdir_p(dir, 0750, &ignored);
    }
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (!k) {
        snprintf(err, errlen, "RSA key generation failed");
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out || !PEM_write_PrivateKey(out, k, NULL, NULL, 0, NULL, NULL) || fclose(out) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        if (!out && fd >= 0)
            close(fd);
        EVP_PKEY_free(k);
        return NULL;
    }
    if (write_pub(k, path) != 0) {
        snprintf(err, errlen, "cannot write %s.pub: %s", path, strerror(errno));
        EVP_PKEY_free(k);
        return NULL;
    }
    return k;
}

int adb_pubkey_encode(EVP_PKEY *key, const char *comment, char *out, size_t cap)
{
    BIGNUM *n = NULL, *e = NULL;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n) != 1 ||
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e) != 1 || BN_num_bytes(n) != 256) {
        BN_free(n);
        BN_free(e);
        return -1;
    }
    uint8_t s[ADB_PUBKEY_STRUCT_SIZE];
    BN_CTX *ctx = BN_CTX_new();
    BIGNUM *r32 = BN_new(), *n0inv = BN_new(), *rr = BN_new();
    /* n0inv = -1/n mod 2^32 */
    BN_set_bit(r32, 32);
    BN_mod_inverse(n0inv, n, r32, ctx);
    BN_sub(n0inv, r32, n0inv);
    /* rr = 2^4096 mod n */
    BN_set_bit(rr, 4096);
    BN_mod(rr, rr, n, ctx);
    put32(s, 64);
    put32(s + 4, (uint32_t)BN_get_word(n0inv));
    BN_bn2lebinpad(n, s + 8, 256);
    BN_bn2lebinpad(rr, s + 264, 256);
    put32(s + 520, (uint32_t)BN_get_word(e));
    BN_free(r32);
    BN_free(n0inv);
    BN_free(rr);
    BN_free(n);
    BN_free(e);
    BN_CTX_free(ctx);
    size_t b64 = 4 * ((ADB_PUBKEY_STRUCT_SIZE + 2) / 3);
    size_t cl = strlen(comment);
    if (b64 + 1 + cl + 1 > cap)
        return -1;
    EVP_EncodeBlock((unsigned char *)out, s, (int)ADB_PUBKEY_STRUCT_SIZE);
    out[b64] = ' ';
    memcpy(out + b64 + 1, comment, cl);
    out[b64 + 1 + cl] = 0;
    return (int)(b64 + 1 + cl);
}

EVP_PKEY *adb_pubkey_decode(const char *text, size_t n)
{
    size_t b64 = 0;
    while (b64 < n && text[b64] && text[b64] != ' ' && text[b64] != '\n')
        b64++;
    if (b64 != 4 * ((ADB_PUBKEY_STRUCT_SIZE + 2) / 3))
        return NULL;
    uint8_t raw[4 * ((ADB_PUBKEY_STRUCT_SIZE + 2) / 3)];
    if (EVP_DecodeBlock(raw, (const unsigned char *)text, (int)b64) < (int)ADB_PUBKEY_STRUCT_SIZE ||
        get32(raw) != 64)
        return NULL;
    BIGNUM *bn = BN_lebin2bn(raw + 8, 256, NULL), *be = BN_new();
    BN_set_word(be, get32(raw + 520));
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn);
    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    EVP_PKEY *k = NULL;
    if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 || EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        k = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return k;
}

int adb_sign_token(EVP_PKEY *key, const uint8_t *token, size_t token_len, uint8_t *sig, size_t cap)
{
    if (token_len != ADB_TOKEN_SIZE)
        return -1;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(key, NULL);
    size_t len = cap;
    int ok = ctx && EVP_PKEY_sign_init(ctx) > 0 && EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) > 0 &&
             EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha1()) > 0 &&
             EVP_PKEY_sign(ctx, sig, &len, token, token_len) > 0;
    EVP_PKEY_CTX_free(ctx);
    return ok ? (int)len : -1;
}

static int add_key_file(EVP_PKEY **keys, int n, int max, const char *path)
{
    char err[256];
    if (n >= max)
        return n;
    EVP_PKEY *k = adb_key_load(path, 0, err, sizeof err);
    if (k)
        keys[n++] = k;
    return n;
}

int adb_keys_load(EVP_PKEY **keys, int max, const char *home, const char *vendor_keys, char *err, size_t errlen)
{
    int n = 0;
    if (vendor_keys && *vendor_keys) {
        char *copy = strdup(vendor_keys), *save = NULL;
        for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
            struct stat st;
            if (stat(p, &st) != 0)
                continue;
            if (!S_ISDIR(st.st_mode)) {
                n = add_key_file(keys, n, max, p);
                continue;
            }
            DIR *d = opendir(p);
            struct dirent *de;
            while (d && (de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (l > 8 && !strcmp(de->d_name + l - 8, ".adb_key")) {
                    char full[PATH_MAX];
                    snprintf(full, sizeof full, "%s/%s", p, de->d_name);
                    n = add_key_file(keys, n, max, full);
                }
            }
            if (d)
                closedir(d);
        }
        free(copy);
    }
    if (!home || !*home) {
        snprintf(err, errlen, "HOME is not set: cannot find ~/.android/adbkey");
        return n ? n : -1;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.android/adbkey", home);
    EVP_PKEY *k = n < max ? adb_key_load(path, 1, err, errlen) : NULL;
    if (k)
        keys[n++] = k;
    else if (n == 0)
        return -1;
    return n;
}
