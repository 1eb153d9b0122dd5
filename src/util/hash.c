#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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

static int b64_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* libcrypto's EVP_DecodeBlock does the decoding; what it is lenient about (missing padding, '=' inside the
 * text) is checked here first, on the text without whitespace, which is decoded in slices (its length is an
 * int). */
long odp_base64_decode(const char *in, size_t n, unsigned char *out)
{
    char *clean = malloc(n + 1);
    if (!clean)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!b64_space(in[i]))
            clean[m++] = in[i];
    long len = -1;
    size_t pad = m >= 1 && clean[m - 1] == '=' ? (m >= 2 && clean[m - 2] == '=' ? 2 : 1) : 0;
    if (m % 4 == 0 && !memchr(clean, '=', m - pad)) {
        const size_t slice = 4u << 20;
        len = 0;
        for (size_t off = 0; off < m; off += slice) {
            size_t k = m - off < slice ? m - off : slice;
            int r = EVP_DecodeBlock(out + len, (const unsigned char *)clean + off, (int)k);
            if (r < 0) {
                len = -1;
                break;
            }
            len += r;
        }
        if (len >= 0)
            len -= (long)pad; /* EVP_DecodeBlock counts the bytes the padding stands for */
    }
    free(clean);
    return len;
}
