/* ETDump reader: ExecuTorch's profiling/debug dump (flatbuffer, identifier "ED00", normally size-prefixed).
 * Decodes every field of etdump_schema_flatcc.fbs into plain C structs whose strings and vectors point into
 * the caller's buffer (keep it alive until odp_etdump_free). The input is untrusted: every offset is checked
 * (src/flatbuf), and counts are capped so a small file cannot ask for unbounded memory. */
#ifndef ODP_ETDUMP_H
#define ODP_ETDUMP_H

#include <stddef.h>
#include <stdint.h>

#include "../flatbuf/flatbuf.h"
#include "../util/err.h"

/* Caps (a 100,000-event dump from a real runner is ~6 MB; these are far above anything real). */
#define ODP_ETDUMP_MAX_BYTES ((size_t)1 << 30)
#define ODP_ETDUMP_MAX_EVENTS 20000000u
#define ODP_ETDUMP_MAX_TENSORS 1000000u

typedef enum { ODP_ETDUMP_EMPTY = 0, ODP_ETDUMP_PROFILE, ODP_ETDUMP_ALLOCATION, ODP_ETDUMP_DEBUG } odp_etdump_kind;

/* Value.val: Null, Int, Bool, Float, Double, Tensor, TensorList, String. */
typedef struct {
    int8_t scalar_type;
    odp_fb_vec sizes;   /* int64 elements: read with odp_fb_rd64(buf + sizes.pos + 8*i) */
    odp_fb_vec strides; /* int64 elements */
    int64_t offset;
    int has_offset;
} odp_etdump_tensor;

typedef struct {
    int8_t val;
    int has_tensor, has_tensor_list, has_int, has_float, has_double, has_bool, has_output;
    odp_etdump_tensor tensor;
    odp_etdump_tensor *tensors; /* tensor_list.tensors */
    uint32_t ntensors;
    int64_t int_value;
    float float_value;
    double double_value;
    int bool_value, output;
} odp_etdump_value;

typedef struct {
    odp_etdump_kind kind;
    /* profile and debug events */
    odp_fb_str name;
    int64_t chain_index; /* ProfileEvent: int; DebugEvent: ulong (kept as the same 64 bits) */
    int32_t instruction_id;
    int32_t delegate_debug_id_int;
    odp_fb_str delegate_debug_id_str;
    /* profile events */
    odp_fb_str delegate_debug_metadata; /* [ubyte] */
    uint64_t start_time, end_time;
    /* allocation events */
    int32_t allocator_id;
    uint64_t allocation_size;
    /* debug events */
    int has_debug_entry;
    odp_etdump_value debug_entry;
} odp_etdump_event;

typedef struct {
    odp_fb_str name;
    int32_t bundled_input_index;
    odp_fb_str *allocators;
    uint32_t nallocators;
    odp_etdump_event *events;
    uint32_t nevents;
} odp_etdump_run;

typedef struct {
    uint32_t version;
    int size_prefixed;
    odp_etdump_run *runs;
    uint32_t nruns;
    /* A size-prefixed file cut short (its writer died): partial = 1, declared_bytes = what the prefix says;
     * the events and runs that lay past the cut are counted here, the rest read as usual. */
    int partial;
    uint32_t declared_bytes;
    uint32_t events_lost, runs_lost;
} odp_etdump;

/* Decodes buf (size-prefixed, or plain with "ED00" at bytes 4..8). A size-prefixed buf shorter than its
 * prefix is read as far as it goes (partial). On error the dump is left empty. */
int odp_etdump_read(const uint8_t *buf, size_t n, odp_etdump *d, odp_err *err);
void odp_etdump_free(odp_etdump *d);

/* One event of a merged block: its representative event (the profile event, or the debug event for a
 * debug-only instruction) and one duration sample (ticks) per run that had it. */
typedef struct {
    const odp_etdump_event *rep;
    int profile;
    uint64_t *samples;
    uint32_t nsamples, cap;
} odp_etdump_block_event;

typedef struct {
    odp_fb_str name;
    int32_t bundled_input_index;
    uint32_t runs;
    odp_etdump_block_event *events;
    uint32_t nevents;
} odp_etdump_block;

typedef struct {
    odp_etdump_block *blocks;
    uint32_t n;
} odp_etdump_blocks_t;

/* Merges runs into blocks the way ExecuTorch's Inspector does: events collated per instruction (instruction
 * id, chain, delegate ids), one signature per profile event (name, instruction id, delegate ids) plus the
 * instruction's first debug event; runs with the same name, bundled input and signature sequence form one
 * block (N Execute runs -> N samples per event). A signature repeated in a run keeps its first place and
 * its last event. Blocks come in first-seen order; they point into d (free them before d). */
int odp_etdump_blocks(const odp_etdump *d, odp_etdump_blocks_t *out, odp_err *err);
void odp_etdump_blocks_free(odp_etdump_blocks_t *bl);

/* end - start in ticks, surviving a 32-bit counter wrap (start > end, both < 2^32) the way ExecuTorch's
 * Inspector computes it: (2^32 - 1 - start) + end. Returns -1 (and leaves *out) for start > end otherwise. */
int odp_etdump_duration(uint64_t start, uint64_t end, uint64_t *out);

#endif
