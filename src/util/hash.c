#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

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
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    to_hex(md, len, out);
}

int odp_sha256_file_hex(const char *path, char out[ODP_SHA256_HEX], odp_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
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
        EVP_DigestUpdate(ctx, buf, (size_t)r);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (!rc)
        to_hex(md, len, out);
    return rc;
}

size_t odp_base64_encode(const void *in, size_t n, char *out)
{
    size_t total = 0;
    /* EVP_EncodeBlock takes an int length: feed it in slices that are multiples of 3. */
    const size_t slice = 3u << 20;
    const unsigned char *p = in;
    while (n > 0) {
        size_t k = n < slice ? n : slice;
        total += (size_t)EVP_EncodeBlock((unsigned char *)out + total, p, (int)k);
        p += k;
        n -= k;
    }
    out[total] = 0;
    return total;
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
