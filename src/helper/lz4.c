#include "lz4.h"

/* A length continued in bytes of 255 (the token's nibble was 15): adds them to *len. -> 0, or -1 when the input
 * ends first or the length passes limit. */
static int more_length(const uint8_t **p, const uint8_t *end, size_t limit, size_t *len)
{
    uint8_t b;
    do {
        if (*p >= end)
            return -1;
        b = *(*p)++;
        *len += b;
        if (*len > limit)
            return -1;
    } while (b == 255);
    return 0;
}

long odp_lz4_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap)
{
    const uint8_t *p = src, *end = src + n;
    size_t out = 0;
    if (n == 0)
        return -1; /* an empty input is no block (an empty file is sent uncompressed) */
    for (;;) {
        if (p >= end)
            return -1;
        uint8_t token = *p++;
        size_t lit = token >> 4;
        if (lit == 15 && more_length(&p, end, cap, &lit))
            return -1;
        if (lit > (size_t)(end - p) || lit > cap - out)
            return -1;
        for (size_t i = 0; i < lit; i++)
            dst[out + i] = p[i];
        p += lit;
        out += lit;
        if (p == end)
            return (long)out; /* the last sequence: literals only */
        if (end - p < 2)
            return -1;
        size_t offset = (size_t)p[0] | (size_t)p[1] << 8;
        p += 2;
        if (offset == 0 || offset > out)
            return -1;
        size_t match = token & 15;
        if (match == 15 && more_length(&p, end, cap, &match))
            return -1;
        match += 4;
        if (match > cap - out)
            return -1;
        /* byte by byte: a match may overlap what it copies (offset < match repeats a run) */
        for (size_t i = 0; i < match; i++)
            dst[out + i] = dst[out + i - offset];
        out += match;
    }
}
