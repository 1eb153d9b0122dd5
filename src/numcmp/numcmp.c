#include "numcmp.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    odp_dtype dt;
    size_t bytes;
} DTYPES[] = {
    {"float32", ODP_DT_FLOAT32, 4}, {"float64", ODP_DT_FLOAT64, 8}, {"float16", ODP_DT_FLOAT16, 2},
    {"bfloat16", ODP_DT_BFLOAT16, 2}, {"int8", ODP_DT_INT8, 1},     {"uint8", ODP_DT_UINT8, 1},
    {"int16", ODP_DT_INT16, 2},       {"int32", ODP_DT_INT32, 4},   {"int64", ODP_DT_INT64, 8},
    {"bool", ODP_DT_BOOL, 1},         {"qint8", ODP_DT_INT8, 1},    {"quint8", ODP_DT_UINT8, 1},
    {"qint32", ODP_DT_INT32, 4},
};

int odp_dtype_parse(const char *name, odp_dtype *dt, size_t *elem_bytes, odp_err *err)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++) {
        if (strcmp(name, DTYPES[i].name) == 0) {
            *dt = DTYPES[i].dt;
            *elem_bytes = DTYPES[i].bytes;
            return 0;
        }
    }
    return odp_fail(err, ODP_ENOTFOUND, "odp cannot read elements of dtype '%s'", name);
}

static size_t elem_size(odp_dtype dt)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++)
        if (DTYPES[i].dt == dt)
            return DTYPES[i].bytes;
    return 0;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static float f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE 754 binary16 -> double, subnormals, infinities and NaN included. */
static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(m | 0x400, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double value_at(const uint8_t *p, odp_dtype dt)
{
    switch (dt) {
    case ODP_DT_FLOAT32: return f32_bits(rd32(p));
    case ODP_DT_FLOAT64: {
        uint64_t u = rd64(p);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    case ODP_DT_FLOAT16: return half_to_double(rd16(p));
    case ODP_DT_BFLOAT16: return f32_bits((uint32_t)rd16(p) << 16);
    case ODP_DT_INT8: return (int8_t)p[0];
    case ODP_DT_UINT8: return p[0];
    case ODP_DT_BOOL: return p[0] != 0;
    case ODP_DT_INT16: return (int16_t)rd16(p);
    case ODP_DT_INT32: return (int32_t)rd32(p);
    case ODP_DT_INT64: return (double)(int64_t)rd64(p);
    }
    return 0;
}

static const double EDGES[] = {1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3};

static int bin_of(double e)
{
    if (e == 0)
        return 0;
    if (e < EDGES[0])
        return 1;
    for (int i = 1; i < (int)(sizeof EDGES / sizeof *EDGES); i++)
        if (e < EDGES[i])
            return 1 + i;
    return 14;
}

/* The k largest values' indices, largest first (ties: the lower index first; NaN never taken). */
static size_t topk(const uint8_t *p, size_t count, odp_dtype dt, size_t es, size_t k, size_t *idx)
{
    double best[ODP_NUMCMP_TOPK];
    size_t have = 0;
    for (size_t i = 0; i < count; i++) {
        double v = value_at(p + i * es, dt);
        if (isnan(v))
            continue;
        if (have == k && !(v > best[k - 1]))
            continue;
        size_t j = have < k ? have++ : k - 1;
        while (j > 0 && v > best[j - 1]) {
            best[j] = best[j - 1];
            idx[j] = idx[j - 1];
            j--;
        }
        best[j] = v;
        idx[j] = i;
    }
    return have;
}

/* The running sums of one comparison. */
typedef struct {
    double sum_abs, sum_sq, dot, ref2, got2, max_abs;
    size_t max_at, first_bad;
} sums;

/* One pair of elements (eq: exactly equal, as its dtype compares) into out and s. */
static inline void step(odp_numcmp *out, sums *s, double x, double y, int eq, int is_int, size_t i)
{
    if (is_int || (isfinite(x) && isfinite(y))) {
        double e = y - x, ae = fabs(e);
        out->equal += eq != 0;
        out->finite++;
        s->sum_abs += ae;
        s->sum_sq += e * e;
        s->dot += x * y;
        s->ref2 += x * x;
        s->got2 += y * y;
        if (ae > s->max_abs) {
            s->max_abs = ae;
            s->max_at = i;
        }
        out->hist[bin_of(ae)]++;
        return;
    }
    out->nan_ref += isnan(x) != 0;
    out->nan_got += isnan(y) != 0;
    out->inf_ref += isinf(x) != 0;
    out->inf_got += isinf(y) != 0;
    if (isinf(x) && x == y) { /* the same infinity: equal, in no sum */
        out->equal++;
        out->hist[0]++;
        return;
    }
    if (!out->nonfinite++)
        s->first_bad = i;
    out->hist[ODP_NUMCMP_BINS - 1]++;
}

/* One loop per dtype, its reader and element size constant inside it (no per-element switch). */
#define SCAN(DT, ES, IS_INT, EQ)                                                                              \
    for (size_t i = 0; i < count; i++) {                                                                     \
        const uint8_t *pa = a + i * (ES), *pb = b + i * (ES);                                                 \
        double x = value_at(pa, DT), y = value_at(pb, DT);                                                    \
        step(out, &s, x, y, EQ, IS_INT, i);                                                                   \
    }

int odp_numcmp_run(const void *ref, const void *got, size_t n, odp_dtype dt, int logits, odp_numcmp *out,
                   odp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t es = elem_size(dt);
    if (!es || n % es)
        return odp_fail(err, ODP_EPROTO, "%zu bytes are not a whole number of %zu-byte elements", n, es);
    const uint8_t *a = ref, *b = got;
    size_t count = n / es;
    sums s = {0};
    out->n = count;
    switch (dt) {
    case ODP_DT_FLOAT32: SCAN(ODP_DT_FLOAT32, 4, 0, x == y) break;
    case ODP_DT_FLOAT64: SCAN(ODP_DT_FLOAT64, 8, 0, x == y) break;
    case ODP_DT_FLOAT16: SCAN(ODP_DT_FLOAT16, 2, 0, x == y) break;
    case ODP_DT_BFLOAT16: SCAN(ODP_DT_BFLOAT16, 2, 0, x == y) break;
    case ODP_DT_INT8: SCAN(ODP_DT_INT8, 1, 1, pa[0] == pb[0]) break;
    case ODP_DT_UINT8: SCAN(ODP_DT_UINT8, 1, 1, pa[0] == pb[0]) break;
    case ODP_DT_BOOL: SCAN(ODP_DT_BOOL, 1, 1, (pa[0] != 0) == (pb[0] != 0)) break;
    case ODP_DT_INT16: SCAN(ODP_DT_INT16, 2, 1, rd16(pa) == rd16(pb)) break;
    case ODP_DT_INT32: SCAN(ODP_DT_INT32, 4, 1, rd32(pa) == rd32(pb)) break;
    /* as integers: an int64 beyond 2^53 is not equal to its neighbour as a double would be */
    case ODP_DT_INT64: SCAN(ODP_DT_INT64, 8, 1, rd64(pa) == rd64(pb)) break;
    }
    double max_abs = s.max_abs, sum_abs = s.sum_abs, sum_sq = s.sum_sq, dot = s.dot, ref2 = s.ref2, got2 = s.got2;
    size_t max_at = s.max_at, first_bad = s.first_bad;
    out->max_abs_err = out->nonfinite ? INFINITY : max_abs;
    out->max_abs_at = out->nonfinite ? first_bad : max_at;
    out->mean_abs_err = out->finite ? sum_abs / (double)out->finite : 0;
    out->rmse = out->finite ? sqrt(sum_sq / (double)out->finite) : 0;
    if (ref2 == 0 && got2 == 0)
        out->cosine = 1;
    else if (ref2 == 0 || got2 == 0)
        out->cosine = 0;
    else
        out->cosine = dot / sqrt(ref2 * got2);
    out->snr_db = sum_sq == 0 ? INFINITY : 10 * log10(ref2 / sum_sq);
    if (logits && count > 0) {
        out->logits = 1;
        out->k = count < ODP_NUMCMP_TOPK ? count : ODP_NUMCMP_TOPK;
        size_t kr = topk(a, count, dt, es, out->k, out->topk_ref), kg = topk(b, count, dt, es, out->k, out->topk_got);
        out->top1_ref = kr ? out->topk_ref[0] : SIZE_MAX;
        out->top1_got = kg ? out->topk_got[0] : SIZE_MAX;
        for (size_t i = 0; i < kr; i++)
            for (size_t j = 0; j < kg; j++)
                out->topk_overlap += out->topk_ref[i] == out->topk_got[j];
        /* all-NaN sides: fewer than k ranked; the missing ranks mark as SIZE_MAX */
        for (size_t i = kr; i < out->k; i++)
            out->topk_ref[i] = SIZE_MAX;
        for (size_t i = kg; i < out->k; i++)
            out->topk_got[i] = SIZE_MAX;
    }
    return 0;
}

typedef struct {
    int fd;
    void *p;
    size_t n;
} mapped;

static int map_file(const char *path, mapped *m, odp_err *err)
{
    struct stat st;
    m->p = NULL;
    m->n = 0;
    if ((m->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
    if (fstat(m->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(m->fd);
        return odp_fail(err, ODP_EPROTO, "%s is not a regular file", path);
    }
    m->n = (size_t)st.st_size;
    if (m->n && (m->p = mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, m->fd, 0)) == MAP_FAILED) {
        int e = errno;
        close(m->fd);
        return odp_fail_errno(err, ODP_EIO, e, "mmap %s", path);
    }
    if (m->n)
        madvise(m->p, m->n, MADV_SEQUENTIAL);
    return 0;
}

static void unmap_file(mapped *m)
{
    if (m->p)
        munmap(m->p, m->n);
    close(m->fd);
}

int odp_numcmp_files(const char *ref_path, const char *got_path, odp_dtype dt, int logits, odp_numcmp *out,
                     odp_err *err)
{
    mapped a, b;
    int rc = map_file(ref_path, &a, err);
    if (rc)
        return rc;
    if ((rc = map_file(got_path, &b, err))) {
        unmap_file(&a);
        return rc;
    }
    if (a.n != b.n)
        rc = odp_fail(err, ODP_EPROTO, "%zu bytes against %zu: the outputs differ in size", b.n, a.n);
    else
        rc = odp_numcmp_run(a.p ? a.p : "", b.p ? b.p : "", a.n, dt, logits, out, err);
    unmap_file(&b);
    unmap_file(&a);
    return rc;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void wr(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* a binary16 for v = k * 2^-10 with |k| <= 1024 (every value the generator makes is exact in it) */
static uint16_t half_of(double v)
{
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    double a = fabs(v);
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1 + 15;    /* a = (2m) * 2^(e-1) */
    if (exp <= 0)            /* subnormal: a = k * 2^-24 */
        return sign | (uint16_t)ldexp(a, 24);
    return sign | (uint16_t)(exp << 10) | (uint16_t)((ldexp(m, 11) - 1024));
}

int odp_numgen(void *buf, size_t n, odp_dtype dt, uint64_t seed, uint32_t index, odp_err *err)
{
    size_t es = elem_size(dt);
    if (!es || n % es)
        return odp_fail(err, ODP_EPROTO, "%zu bytes are not a whole number of %zu-byte elements", n, es);
    uint8_t *p = buf;
    uint64_t s = seed + ((uint64_t)index + 1) * 0x632BE59BD9B4E019ull;
    for (size_t i = 0; i < n / es; i++, p += es) {
        uint64_t x = splitmix64(&s);
        switch (dt) {
        case ODP_DT_FLOAT32: {
            float f = (float)ldexp((double)(x >> 40), -23) - 1.0f;
            uint32_t u;
            memcpy(&u, &f, 4);
            wr(p, u, 4);
            break;
        }
        case ODP_DT_FLOAT64: {
            double d = ldexp((double)(x >> 11), -52) - 1.0;
            uint64_t u;
            memcpy(&u, &d, 8);
            wr(p, u, 8);
            break;
        }
        case ODP_DT_FLOAT16: wr(p, half_of(ldexp((double)(x >> 53), -10) - 1.0), 2); break;
        case ODP_DT_BFLOAT16: {
            float f = (float)(ldexp((double)(x >> 56), -7) - 1.0);
            uint32_t u;
            memcpy(&u, &f, 4);
            wr(p, u >> 16, 2);
            break;
        }
        case ODP_DT_INT8:
        case ODP_DT_UINT8: p[0] = (uint8_t)(x >> 56); break;
        case ODP_DT_BOOL: p[0] = (uint8_t)(x >> 63); break;
        case ODP_DT_INT16:
        case ODP_DT_INT32:
        case ODP_DT_INT64: wr(p, (x >> 32) % 100, es); break;
        }
    }
    return 0;
}
