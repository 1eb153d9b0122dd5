/* Tensors as raw bytes (what executor_runner reads with --inputs and writes with --output_file): element by
 * element agreement of two of them, and deterministic inputs for a method's signature.
 *
 * Comparison (docs/outputs.md): `ref` is the reference, `got` the run compared with it; every element is read
 * as a double. A pair where both are finite enters the sums; a pair of the same infinity is equal and enters
 * no sum; any other pair (a NaN on either side, an infinity against anything else) is a non-finite mismatch:
 * it is never equal, enters no sum, and makes max_abs_err infinite. Over the finite pairs:
 *   err = got - ref; max_abs_err = max |err|; mean_abs_err = sum |err| / finite; rmse = sqrt(sum err^2 / finite);
 *   cosine = sum ref*got / sqrt(sum ref^2 * sum got^2) (1 when both are all zeros, 0 when one is);
 *   snr_db = 10 log10(sum ref^2 / sum err^2) (+inf when sum err^2 = 0).
 * equal counts exactly equal pairs (integers compared as integers; -0 == +0; NaN never). For logits (the caller
 * says: a [N] or [1, N] output) the top-1 index (first of ties, NaN skipped) and the top-k sets (k = min(5, N))
 * of each are compared. The histogram counts |err| per bin: [0] exactly 0, [1] below 1e-9, [2 + d] in
 * [1e(d-9), 1e(d-8)) for d = 0..11 (up to 1e3), [14] 1e3 and above, [15] non-finite mismatches. */
#ifndef ODP_NUMCMP_H
#define ODP_NUMCMP_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

typedef enum {
    ODP_DT_FLOAT32,
    ODP_DT_FLOAT64,
    ODP_DT_FLOAT16,
    ODP_DT_BFLOAT16,
    ODP_DT_INT8,
    ODP_DT_UINT8,
    ODP_DT_INT16,
    ODP_DT_INT32,
    ODP_DT_INT64,
    ODP_DT_BOOL,
} odp_dtype;

/* The dtype called `name` (odp.parse.pte's names: "float32", "int8", ...; qint8/quint8/qint32 are read as
 * int8/uint8/int32) and its element size. -> 0 | ODP_ENOTFOUND for a dtype odp cannot compare. */
int odp_dtype_parse(const char *name, odp_dtype *dt, size_t *elem_bytes, odp_err *err);

#define ODP_NUMCMP_BINS 16
#define ODP_NUMCMP_TOPK 5

typedef struct {
    size_t n, equal, finite, nonfinite;
    size_t nan_ref, nan_got, inf_ref, inf_got;
    double max_abs_err, mean_abs_err, rmse, cosine, snr_db;
    size_t max_abs_at;   /* the element of max_abs_err (the first non-finite mismatch when infinite) */
    int logits;          /* 1: the top-k fields are set */
    size_t k, top1_ref, top1_got, topk_overlap;
    size_t topk_ref[ODP_NUMCMP_TOPK], topk_got[ODP_NUMCMP_TOPK];
    uint64_t hist[ODP_NUMCMP_BINS];
} odp_numcmp;

/* Compares n bytes of ref and got as dtype dt. n must be a whole number of elements (else ODP_EPROTO). */
int odp_numcmp_run(const void *ref, const void *got, size_t n, odp_dtype dt, int logits, odp_numcmp *out,
                   odp_err *err);

/* The same for two files, mapped (not copied: outputs of hundreds of MB). Files of different sizes, or that
 * are not regular files, are ODP_EPROTO; one that cannot be opened, the errno's code (ODP_ENOTFOUND, ...). */
int odp_numcmp_files(const char *ref_path, const char *got_path, odp_dtype dt, int logits, odp_numcmp *out,
                     odp_err *err);

/* Fills buf (n bytes, a whole number of elements) with input `index`'s deterministic values for `seed`.
 * SplitMix64 (Steele, Lea, Flood 2014; Java's SplittableRandom) with its state starting at
 * seed + (index + 1) * 0x632BE59BD9B4E019, one 64-bit draw x per element:
 *   float32: (x >> 40) * 2^-23 - 1     float64: (x >> 11) * 2^-52 - 1      (uniform in [-1, 1), exact)
 *   float16: (x >> 53) * 2^-10 - 1     bfloat16: (x >> 56) * 2^-7 - 1      (exactly representable)
 *   int8: (int8)(x >> 56)  uint8: x >> 56 (the whole range)
 *   int16, int32, int64: (x >> 32) % 100 (0..99: an index into a small table, no overflow in arithmetic)
 *   bool: x >> 63. Little-endian bytes. */
int odp_numgen(void *buf, size_t n, odp_dtype dt, uint64_t seed, uint32_t index, odp_err *err);

#endif
