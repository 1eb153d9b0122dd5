/* libFuzzer target: the iteration-line scanner (src/parse/scan.c) on arbitrary bytes. Checks its invariants
 * (progress, bounds) and that every number it converts equals strtod on a NUL-terminated copy, bit for bit.
 * Seeds: the runner transcripts, and one iteration line per prefix spelling with odd numbers.
 * sources: src/parse/scan.c
 * seeds: tests/fixtures/transcripts tests/fuzz/corpus/scan
 * max_len: 65536 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/scan.h"

static void check_number(const char *s, size_t n, size_t pos)
{
    double v;
    size_t len = odp_scan_number(s, n, pos, &v);
    if (!len)
        return;
    if (len > n - pos)
        abort();
    char *c = malloc(len + 1);
    if (!c)
        return;
    memcpy(c, s + pos, len);
    c[len] = '\0';
    char *end;
    double w = strtod(c, &end);
    if (end != c + len || memcmp(&v, &w, sizeof v) != 0)
        abort(); /* a length or a value strtod does not agree with */
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes: ASan catches any read past the end */
    char *s = malloc(size ? size : 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    size_t pos = 0;
    while (pos < size) {
        size_t at = odp_scan_find_iter(s, size, pos);
        if (at < pos || at > size || (at > 0 && at < size && s[at - 1] != '\n'))
            abort();
        odp_scan_iter it;
        if (at < size) {
            if (!odp_scan_iter_line(s, size, at, &it))
                abort(); /* find said it is one */
            if (it.next <= at || it.next > size || it.body < at || it.body >= it.next)
                abort();
            pos = it.next;
        } else {
            pos = size;
        }
    }
    for (size_t p = 0; p < size && p < 1024; p++)
        check_number(s, size, p);
    free(s);
    return 0;
}
