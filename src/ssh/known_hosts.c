#include "known_hosts.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/fs.h"
#include "../util/hash.h"

#define MAX_LINE 16384

void odp_kh_hostname(const char *host, int port, char *out, size_t n)
{
    if (port == 22 || port <= 0)
        snprintf(out, n, "%s", host);
    else
        snprintf(out, n, "[%s]:%d", host, port);
}

int odp_kh_keytype(const unsigned char *key, size_t key_len, char *out, size_t n)
{
    if (key_len < 4)
        return -1;
    size_t tlen = (size_t)key[0] << 24 | (size_t)key[1] << 16 | (size_t)key[2] << 8 | key[3];
    if (tlen == 0 || tlen > key_len - 4 || tlen >= n)
        return -1;
    memcpy(out, key + 4, tlen);
    out[tlen] = 0;
    return 0;
}

void odp_kh_fingerprint(const unsigned char *key, size_t key_len, char *out, size_t n)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_Digest(key, key_len, md, &mdlen, EVP_sha256(), NULL);
    char b64[64];
    size_t l = odp_base64_encode(md, mdlen, b64);
    while (l > 0 && b64[l - 1] == '=')
        b64[--l] = 0;
    snprintf(out, n, "SHA256:%s", b64);
}

/* `|1|salt|hash`: HMAC-SHA1 of the name keyed with the salt. */
static int hashed_match(const char *pat, size_t plen, const char *name)
{
    const char *salt = pat + 3, *bar = memchr(salt, '|', plen - 3);
    if (!bar)
        return 0;
    unsigned char s[64], h[64], mine[EVP_MAX_MD_SIZE];
    size_t slen = (size_t)(bar - salt), hlen = plen - 3 - slen - 1;
    if (slen > 80 || hlen > 80)
        return 0;
    long sn = odp_base64_decode(salt, slen, s), hn = odp_base64_decode(bar + 1, hlen, h);
    unsigned int mlen = 0;
    if (sn <= 0 || hn != 20 || !HMAC(EVP_sha1(), s, (int)sn, (const unsigned char *)name, strlen(name), mine, &mlen))
        return 0;
    return mlen == 20 && memcmp(mine, h, 20) == 0;
}

/* OpenSSH's host patterns: `*` and `?` only, case-insensitive (`[` is literal, as in `[host]:port`). */
static int glob_match(const char *pat, size_t plen, const char *s)
{
    size_t p = 0, star = (size_t)-1, mark = 0, i = 0, n = strlen(s);
    while (i < n) {
        if (p < plen && (pat[p] == '?' || tolower((unsigned char)pat[p]) == tolower((unsigned char)s[i]))) {
            p++;
            i++;
        } else if (p < plen && pat[p] == '*') {
            star = p++;
            mark = i;
        } else if (star != (size_t)-1) {
            p = star + 1;
            i = ++mark;
        } else {
            return 0;
        }
    }
    while (p < plen && pat[p] == '*')
        p++;
    return p == plen;
}

/* 1 when the comma-separated pattern list matches name (and no negated pattern does). */
static int hosts_match(const char *list, size_t len, const char *name)
{
    int matched = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && list[j] != ',')
            j++;
        size_t plen = j - i;
        const char *p = list + i;
        if (plen > 3 && memcmp(p, "|1|", 3) == 0) {
            if (hashed_match(p, plen, name))
                matched = 1;
        } else if (plen > 0) {
            int neg = p[0] == '!';
            if (glob_match(p + neg, plen - (size_t)neg, name)) {
                if (neg)
                    return 0;
                matched = 1;
            }
        }
        i = j + 1;
    }
    return matched;
}

static void add_type(char *types, size_t n, const char *t)
{
    if (!types || !n)
        return;
    size_t tl = strlen(t);
    for (const char *p = types; (p = strstr(p, t)); p += tl)
        if ((p == types || p[-1] == ',') && (p[tl] == ',' || p[tl] == 0))
            return;
    size_t used = strlen(types);
    if (used + tl + 2 > n)
        return;
    snprintf(types + used, n - used, "%s%s", used ? "," : "", t);
}

/* Splits the next whitespace-separated field from [*p, end). */
static int field(const char **p, const char *end, const char **f, size_t *flen)
{
    while (*p < end && isspace((unsigned char)**p))
        (*p)++;
    if (*p >= end)
        return 0;
    *f = *p;
    while (*p < end && !isspace((unsigned char)**p))
        (*p)++;
    *flen = (size_t)(*p - *f);
    return 1;
}

odp_kh_status odp_kh_check(const char *text, size_t len, const char *host, int port, const unsigned char *key,
                           size_t key_len, char *types, size_t types_len)
{
    char name[600], keytype[64];
    odp_kh_hostname(host, port, name, sizeof name);
    if (types && types_len)
        types[0] = 0;
    if (odp_kh_keytype(key, key_len, keytype, sizeof keytype))
        keytype[0] = 0;
    odp_kh_status st = ODP_KH_UNKNOWN;
    int revoked = 0;
    const char *line = text, *end = text + len;
    unsigned char *blob = malloc(MAX_LINE);
    if (!blob)
        return ODP_KH_UNKNOWN;
    while (line < end) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *le = nl ? nl : end, *p = line;
        line = nl ? nl + 1 : end;
        const char *f;
        size_t fl;
        if (!field(&p, le, &f, &fl) || f[0] == '#')
            continue;
        int is_revoked = 0;
        if (f[0] == '@') {
            if (fl == 8 && memcmp(f, "@revoked", 8) == 0)
                is_revoked = 1;
            else
                continue; /* @cert-authority: certificates are not used by odp */
            if (!field(&p, le, &f, &fl))
                continue;
        }
        const char *hosts = f;
        size_t hosts_len = fl;
        const char *t, *k;
        size_t tl, kl;
        if (!field(&p, le, &t, &tl) || !field(&p, le, &k, &kl) || tl >= 64 || kl >= MAX_LINE)
            continue;
        long bl = odp_base64_decode(k, kl, blob);
        if (bl <= 0)
            continue;
        int same_key = (size_t)bl == key_len && memcmp(blob, key, key_len) == 0;
        if (is_revoked) {
            revoked |= same_key;
            continue;
        }
        if (!hosts_match(hosts, hosts_len, name))
            continue;
        char ty[64];
        memcpy(ty, t, tl);
        ty[tl] = 0;
        add_type(types, types_len, ty);
        if (strcmp(ty, keytype) != 0)
            continue;
        if (same_key)
            st = ODP_KH_MATCH;
        else if (st != ODP_KH_MATCH)
            st = ODP_KH_CHANGED;
    }
    free(blob);
    return revoked ? ODP_KH_REVOKED : st;
}

int odp_kh_append(const char *path, const char *host, int port, const unsigned char *key, size_t key_len,
                  odp_err *err)
{
    char name[600], type[64];
    odp_kh_hostname(host, port, name, sizeof name);
    if (odp_kh_keytype(key, key_len, type, sizeof type))
        return odp_fail(err, ODP_EPROTO, "malformed host key from %s", name);
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash && slash != dir) {
        *slash = 0;
        if (odp_mkdir_p(dir, 0700, err)) {
            free(dir);
            return err->code;
        }
    }
    free(dir);
    size_t n = strlen(name) + strlen(type) + 4 * ((key_len + 2) / 3) + 8;
    char *line = malloc(n);
    if (!line)
        return odp_fail(err, ODP_EIO, "out of memory");
    int off = snprintf(line, n, "%s %s ", name, type);
    off += (int)odp_base64_encode(key, key_len, line + off);
    line[off++] = '\n';
    int rc = odp_append_sync(path, line, (size_t)off, err);
    free(line);
    return rc;
}
