/* Iteration-line scanner (see scan.h): a hand-written mirror of the LPeg prefixes + the iteration body. */
#include "scan.h"

#include <stdlib.h>
#include <string.h>

#define NOPE ((size_t)-1)

static int isdig(char c) { return c >= '0' && c <= '9'; }
static int issp(char c) { return c == ' ' || c == '\t'; }
static int islevel(char c) { return c == 'D' || c == 'I' || c == 'E' || c == 'F' || c == 'W'; }
static int islogcat(char c) { return islevel(c) || c == 'V' || c == 'A'; }

/* End of the run of digits at p (p when there is none). */
static size_t digits(const char *s, size_t n, size_t p)
{
    while (p < n && isdig(s[p]))
        p++;
    return p;
}

static size_t spaces(const char *s, size_t n, size_t p)
{
    while (p < n && issp(s[p]))
        p++;
    return p;
}

/* The literal w at p: end offset, or NOPE. */
static size_t lit(const char *s, size_t n, size_t p, const char *w, size_t wl)
{
    return (p <= n && n - p >= wl && memcmp(s + p, w, wl) == 0) ? p + wl : NOPE;
}
#define LIT(p, w) lit(s, n, (p), (w), sizeof(w) - 1)

static size_t chr(const char *s, size_t n, size_t p, char c) { return (p < n && s[p] == c) ? p + 1 : NOPE; }

/* digit+ (NOPE when empty). */
static size_t digits1(const char *s, size_t n, size_t p)
{
    if (p == NOPE)
        return NOPE;
    size_t q = digits(s, n, p);
    return q > p ? q : NOPE;
}

/* HH:MM:SS.uuuuuu as [0-9]+:[0-9]+:[0-9]+.[0-9]+ */
static size_t timestamp(const char *s, size_t n, size_t p)
{
    p = digits1(s, n, p);
    p = p == NOPE ? NOPE : chr(s, n, p, ':');
    p = digits1(s, n, p);
    p = p == NOPE ? NOPE : chr(s, n, p, ':');
    p = digits1(s, n, p);
    p = p == NOPE ? NOPE : chr(s, n, p, '.');
    return digits1(s, n, p);
}

/* FILE = [^:\]\n]+ */
static size_t fname(const char *s, size_t n, size_t p)
{
    size_t q = p;
    while (q < n && s[q] != ':' && s[q] != ']' && s[q] != '\n')
        q++;
    return q > p ? q : NOPE;
}

/* TAG = [^: (\n]+ */
static size_t tag(const char *s, size_t n, size_t p)
{
    size_t q = p;
    while (q < n && s[q] != ':' && s[q] != ' ' && s[q] != '(' && s[q] != '\n')
        q++;
    return q > p ? q : NOPE;
}

static size_t opt_space(const char *s, size_t n, size_t p) { return (p < n && s[p] == ' ') ? p + 1 : p; }

/* `I 00:00:00.001029 executorch:executor_runner.cpp:476] ` (timestamp optional) */
static size_t posix_prefix(const char *s, size_t n, size_t p)
{
    if (n - p < 2 || !islevel(s[p]) || !issp(s[p + 1]))
        return NOPE;
    p += 2;
    size_t q = timestamp(s, n, p);
    if (q != NOPE && q < n && issp(s[q]))
        p = q + 1;
    p = LIT(p, "executorch:");
    p = p == NOPE ? NOPE : fname(s, n, p);
    p = p == NOPE ? NOPE : chr(s, n, p, ':');
    p = digits1(s, n, p);
    p = p == NOPE ? NOPE : chr(s, n, p, ']');
    return p == NOPE ? NOPE : opt_space(s, n, p);
}

/* `I [executorch:arm_executor_runner.cpp:512 main()] ` */
static size_t arm_prefix(const char *s, size_t n, size_t p)
{
    if (n - p < 2 || !islevel(s[p]) || !issp(s[p + 1]))
        return NOPE;
    p = LIT(p + 2, "[executorch:");
    p = p == NOPE ? NOPE : fname(s, n, p);
    p = p == NOPE ? NOPE : chr(s, n, p, ':');
    p = digits1(s, n, p);
    if (p == NOPE || p >= n || !issp(s[p]))
        return NOPE;
    p++;
    while (p < n && s[p] != '\n' && LIT(p, "()]") == NOPE) /* FUNC: up to the first "()]" of the line */
        p++;
    p = LIT(p, "()]");
    return p == NOPE ? NOPE : opt_space(s, n, p);
}

/* logcat threadtime: `12-02 17:19:00.123  1234  1234 I ExecuTorch: ` */
static size_t threadtime_prefix(const char *s, size_t n, size_t p)
{
    size_t q = digits(s, n, p);
    if (q - p < 2)
        return NOPE;
    p = chr(s, n, q, '-');
    if (p == NOPE)
        return NOPE;
    q = digits(s, n, p);
    if (q - p < 2)
        return NOPE;
    p = q;
    if (p >= n || !issp(s[p]))
        return NOPE;
    p = timestamp(s, n, spaces(s, n, p));
    for (int k = 0; k < 2; k++) { /* pid, tid */
        if (p == NOPE || p >= n || !issp(s[p]))
            return NOPE;
        p = digits1(s, n, spaces(s, n, p));
    }
    if (p == NOPE || p >= n || !issp(s[p]))
        return NOPE;
    p = spaces(s, n, p);
    if (p >= n || !islogcat(s[p]) || p + 1 >= n || !issp(s[p + 1]))
        return NOPE;
    p = tag(s, n, spaces(s, n, p + 1));
    p = p == NOPE ? NOPE : chr(s, n, spaces(s, n, p), ':');
    return p == NOPE ? NOPE : opt_space(s, n, p);
}

/* logcat brief: `I/ExecuTorch( 1234): ` */
static size_t brief_prefix(const char *s, size_t n, size_t p)
{
    if (n - p < 2 || !islogcat(s[p]) || s[p + 1] != '/')
        return NOPE;
    p = tag(s, n, p + 2);
    if (p == NOPE)
        return NOPE;
    p = spaces(s, n, p);
    size_t q = chr(s, n, p, '(');
    q = q == NOPE ? NOPE : digits1(s, n, spaces(s, n, q));
    q = q == NOPE ? NOPE : chr(s, n, q, ')');
    if (q != NOPE)
        p = q;
    p = chr(s, n, p, ':');
    return p == NOPE ? NOPE : opt_space(s, n, p);
}

static const double POW10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
    1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };

size_t odp_scan_number(const char *s, size_t n, size_t pos, double *v)
{
    size_t p = pos;
    if (p > n)
        return 0;
    int neg = 0;
    if (p < n && (s[p] == '+' || s[p] == '-')) {
        neg = s[p] == '-';
        p++;
    }
    size_t ib = p, ie = digits(s, n, p), fb = ie, fe = ie;
    p = ie;
    if (p < n && s[p] == '.') {
        fb = p + 1;
        fe = digits(s, n, fb);
        if (ie == ib && fe == fb)
            return 0; /* "." alone */
        p = fe;
    } else if (ie == ib) {
        return 0;
    }
    long exp10 = 0;
    int slow = 0;
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        int eneg = 0;
        if (q < n && (s[q] == '+' || s[q] == '-')) {
            eneg = s[q] == '-';
            q++;
        }
        size_t qe = digits(s, n, q);
        if (qe > q) {
            for (size_t k = q; k < qe; k++) {
                if (exp10 > 100000) {
                    slow = 1;
                    break;
                }
                exp10 = exp10 * 10 + (s[k] - '0');
            }
            if (eneg)
                exp10 = -exp10;
            p = qe;
        }
    }
    size_t len = p - pos;
    /* Fast path (Clinger): at most 2^53 as the significand and |exponent| <= 22 are both exact doubles, so one
     * multiplication or division is correctly rounded, like strtod. */
    uint64_t m = 0;
    int sig = 0;
    for (size_t k = ib; k < fe && !slow; k++) {
        if (k == ie)
            continue; /* the '.' */
        int d = s[k] - '0';
        if (m == 0 && d == 0)
            continue; /* leading zeros are not significant */
        if (sig == 19)
            slow = 1;
        else {
            m = m * 10 + (uint64_t)d;
            sig++;
        }
    }
    exp10 -= (long)(fe - fb);
    if (!slow && m <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        double x = (double)m;
        x = exp10 < 0 ? x / POW10[-exp10] : x * POW10[exp10];
        *v = neg ? -x : x;
        return len;
    }
    /* strtod on a NUL-terminated copy (the text is not NUL-terminated; the C locale's '.' is odp's). */
    char buf[256], *c = buf;
    if (len >= sizeof buf && !(c = malloc(len + 1)))
        return 0;
    memcpy(c, s + pos, len);
    c[len] = '\0';
    *v = strtod(c, NULL);
    if (c != buf)
        free(c);
    return len;
}

/* `Iteration i of N: f ms` at p. */
static int body(const char *s, size_t n, size_t p, odp_scan_iter *it)
{
    p = LIT(p, "Iteration ");
    p = digits1(s, n, p);
    p = p == NOPE ? NOPE : LIT(p, " of ");
    size_t tb = p, te = digits1(s, n, p);
    if (te == NOPE)
        return 0;
    /* N like Lua's tonumber: an integer unless it overflows one, then a float */
    int64_t a = 0;
    it->total_is_int = 1;
    for (size_t k = tb; k < te; k++) {
        int d = s[k] - '0';
        if (a >= INT64_MAX / 10 && (a > INT64_MAX / 10 || d > (int)(INT64_MAX % 10))) {
            it->total_is_int = 0;
            break;
        }
        a = a * 10 + d;
    }
    it->total = a;
    if (!it->total_is_int && !odp_scan_number(s, n, tb, &it->total_f))
        return 0;
    p = chr(s, n, te, ':');
    if (p == NOPE)
        return 0;
    p = spaces(s, n, p);
    double ms;
    size_t len = odp_scan_number(s, n, p, &ms);
    if (!len)
        return 0;
    p = LIT(spaces(s, n, p + len), "ms");
    if (p == NOPE)
        return 0;
    it->ms = ms + 0.0; /* the parser's `tonumber(text) + 0.0`: a float, and -0 becomes 0 */
    const char *nl = memchr(s + p, '\n', n - p);
    it->next = nl ? (size_t)(nl - s) + 1 : n;
    return 1;
}

int odp_scan_iter_line(const char *s, size_t n, size_t pos, odp_scan_iter *it)
{
    odp_scan_iter t;
    if (pos >= n)
        return 0;
    /* PEG: the first prefix that matches is the one (they exclude one another in practice) */
    size_t p = posix_prefix(s, n, pos);
    if (p == NOPE)
        p = arm_prefix(s, n, pos);
    if (p == NOPE)
        p = threadtime_prefix(s, n, pos);
    if (p == NOPE)
        p = brief_prefix(s, n, pos);
    if (p == NOPE)
        p = pos; /* a bare line (logcat raw, RTT) */
    t.body = p;
    if (!body(s, n, p, &t))
        return 0;
    *it = t; /* only a whole line fills *it */
    return 1;
}

size_t odp_scan_find_iter(const char *s, size_t n, size_t pos)
{
    odp_scan_iter it;
    while (pos < n) {
        if (odp_scan_iter_line(s, n, pos, &it))
            return pos;
        const char *nl = memchr(s + pos, '\n', n - pos);
        if (!nl)
            return n;
        pos = (size_t)(nl - s) + 1;
    }
    return n;
}

size_t odp_scan_count_heads(const char *s, size_t n)
{
    static const char head[] = "Iteration ";
    size_t count = 0, pos = 0;
    const char *hit;
    /* memchr for the 'I' then a compare: a third of glibc memmem's instructions on runner logs */
    while (pos < n && (hit = memchr(s + pos, 'I', n - pos))) {
        pos = (size_t)(hit - s);
        if (n - pos >= sizeof head - 1 && memcmp(hit, head, sizeof head - 1) == 0) {
            count++;
            pos += sizeof head - 1;
        } else {
            pos++;
        }
    }
    return count;
}
