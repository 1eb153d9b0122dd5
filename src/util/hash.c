#include "hash.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

/* libcrypto is opened on the first hash, not linked: relocating it costs more than all of a short odp run
 * (bench/README.md, startup). Only the EVP calls below are used; their types come from the real header. */
static struct {
    int tried, ok;
    char why[160];
    __typeof__(EVP_sha256) *sha256;
    __typeof__(EVP_Digest) *digest;
    __typeof__(EVP_MD_CTX_new) *ctx_new;
    __typeof__(EVP_MD_CTX_free) *ctx_free;
    __typeof__(EVP_DigestInit_ex) *init;
    __typeof__(EVP_DigestUpdate) *update;
    __typeof__(EVP_DigestFinal_ex) *final;
} evp;

static int load_libcrypto(odp_err *err)
{
    if (!evp.tried) {
        evp.tried = 1;
        void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
        if (h) {
            evp.sha256 = (__typeof__(evp.sha256))dlsym(h, "EVP_sha256");
            evp.digest = (__typeof__(evp.digest))dlsym(h, "EVP_Digest");
            evp.ctx_new = (__typeof__(evp.ctx_new))dlsym(h, "EVP_MD_CTX_new");
            evp.ctx_free = (__typeof__(evp.ctx_free))dlsym(h, "EVP_MD_CTX_free");
            evp.init = (__typeof__(evp.init))dlsym(h, "EVP_DigestInit_ex");
            evp.update = (__typeof__(evp.update))dlsym(h, "EVP_DigestUpdate");
            evp.final = (__typeof__(evp.final))dlsym(h, "EVP_DigestFinal_ex");
            evp.ok = evp.sha256 && evp.digest && evp.ctx_new && evp.ctx_free && evp.init && evp.update && evp.final;
        }
        if (!evp.ok)
            snprintf(evp.why, sizeof evp.why, "%s", h ? "libcrypto.so.3 lacks the EVP digest calls" : dlerror());
    }
    return evp.ok ? 0 : odp_fail(err, ODP_ENOTFOUND, "SHA-256 needs OpenSSL 3's libcrypto: %s", evp.why);
}

static void to_hex(const unsigned char *md, unsigned len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * len] = 0;
}

void odp_sha256_hex(const void *data, size_t n, char out[ODP_SHA256_HEX])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_hex(&c, out);
}

/* Files up to this size are hashed in plain C: opening libcrypto (its dlopen and configuration) costs ~10 ms,
 * as much as the plain hash of 2 MiB, and a run hashes only small files of its own (logs, samples.csv); a
 * multi-MB runner or model, when its sha256 is not cached, gets libcrypto's SHA extensions (~5x faster). */
#define PLAIN_MAX (1 << 20)

int odp_sha256_file_hex(const char *path, char out[ODP_SHA256_HEX], odp_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
    struct stat st;
    int plain = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= PLAIN_MAX;
    if (!plain && load_libcrypto(err)) {
        close(fd);
        return err->code;
    }
    sha256_ctx c;
    EVP_MD_CTX *ctx = NULL;
    if (plain) {
        sha256_init(&c);
    } else {
        ctx = evp.ctx_new();
        evp.init(ctx, evp.sha256(), NULL);
    }
    static unsigned char buf[1 << 18];
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = odp_fail_errno(err, ODP_EIO, errno, "%s", path);
            break;
        }
        if (plain)
            sha256_update(&c, buf, (size_t)r);
        else
            evp.update(ctx, buf, (size_t)r);
    }
    close(fd);
    if (plain) {
        if (!rc)
            sha256_hex(&c, out);
        return rc;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    evp.final(ctx, md, &len);
    evp.ctx_free(ctx);
    if (!rc)
        to_hex(md, len, out);
    return rc;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t odp_base64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned long w = (unsigned long)p[i] << 16;
        if (i + 1 < n)
            w |= (unsigned long)p[i + 1] << 8;
        if (i + 2 < n)
            w |= p[i + 2];
        out[o++] = B64[(w >> 18) & 63];
        out[o++] = B64[(w >> 12) & 63];
        out[o++] = i + 1 < n ? B64[(w >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? B64[w & 63] : '=';
    }
    out[o] = 0;
    return o;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

long odp_base64_decode(const char *in, size_t n, unsigned char *out)
{
    long len = 0;
    int quad[4], q = 0, pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        int v;
        if (c == '=') {
            if (q < 2)
                return -1;
            pad++;
            v = 0;
        } else {
            if (pad)
                return -1; /* data after padding */
            v = b64_value(c);
            if (v < 0)
                return -1;
        }
        quad[q++] = v;
        if (q == 4) {
            unsigned long w = ((unsigned long)quad[0] << 18) | ((unsigned long)quad[1] << 12) |
                              ((unsigned long)quad[2] << 6) | (unsigned long)quad[3];
            out[len++] = (unsigned char)(w >> 16);
            if (pad < 2)
                out[len++] = (unsigned char)(w >> 8);
            if (pad < 1)
                out[len++] = (unsigned char)w;
            q = 0;
            if (pad) {
                /* only whitespace may follow the padding */
                for (size_t j = i + 1; j < n; j++)
                    if (in[j] != ' ' && in[j] != '\n' && in[j] != '\r' && in[j] != '\t')
                        return -1;
                return len;
            }
        }
    }
    return q == 0 ? len : -1;
}
