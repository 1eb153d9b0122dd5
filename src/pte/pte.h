/* .pte reader: an ExecuTorch program (flatbuffer "ET12", not size-prefixed, optional extended header "eh00"
 * at byte 8). Reports what preflight and reports need: the header and truncation check, methods (execution
 * plans) with their operators and planned buffer sizes, delegates with their backend id and, for Ethos-U,
 * the Vela stream's scratch size. Untrusted input: every offset is checked (src/flatbuf). */
#ifndef ODP_PTE_H
#define ODP_PTE_H

#include <stddef.h>
#include <stdint.h>

#include "../flatbuf/flatbuf.h"
#include "../util/err.h"

#define ODP_PTE_MAX_BYTES ((size_t)4 << 30)
#define ODP_VELA_MAX_BLOCKS 4096

typedef struct {
    odp_fb_str id;           /* backend id, e.g. "EthosUBackend" */
    uint8_t location;        /* 0 INLINE (Program.backend_delegate_data), 1 SEGMENT (Program.segments) */
    uint32_t index;
    const uint8_t *data;     /* the processed blob inside the caller's buffer (NULL when absent) */
    size_t ndata;
    size_t segment_start;    /* SEGMENT: the blob's file offset */
    int vela;                /* 1: data is a Vela stream that parsed; scratch_size valid */
    uint64_t scratch_size;
    char vela_error[sizeof(((odp_err *)0)->msg)]; /* why a Vela stream did not parse (empty otherwise) */
} odp_pte_delegate;

typedef struct {
    odp_fb_str name, overload;
} odp_pte_operator;

/* One input or output of a method (ExecutionPlan.inputs/outputs -> values[i] -> EValue). kind is the EValue's
 * KernelTypes tag (5 Tensor; 0 when the value is absent); for a tensor, scalar_type is ExecuTorch's ScalarType
 * (0 BYTE=uint8, 1 CHAR=int8, 2 SHORT, 3 INT, 4 LONG, 5 HALF, 6 FLOAT, 7 DOUBLE, 11 BOOL, 15 BFLOAT16, ...),
 * sizes its shape (the upper bound when dynamism is 1 DYNAMIC_BOUND; meaningless for 2 DYNAMIC_UNBOUND). */
#define ODP_PTE_MAX_DIMS 16
#define ODP_PTE_MAX_IO 4096
typedef struct {
    uint32_t value_index;
    uint8_t kind;
    int8_t scalar_type;
    uint8_t dynamism;
    uint8_t ndim;
    int32_t sizes[ODP_PTE_MAX_DIMS];
} odp_pte_io;

typedef struct {
    odp_fb_str name;
    odp_pte_io *inputs, *outputs;
    uint32_t ninputs, noutputs;
    odp_pte_operator *operators;
    uint32_t noperators;
    odp_fb_vec non_const_buffer_sizes; /* int64 elements (index 0 is reserved by ExecuTorch) */
    odp_pte_delegate *delegates;
    uint32_t ndelegates;
} odp_pte_method;

typedef struct {
    char identifier[5];
    uint32_t version;
    size_t bytes;
    int has_extended_header;
    uint32_t header_length;
    uint64_t program_size, segment_base_offset, segment_data_size;
    uint64_t expected_size; /* from the extended header (0 without one) */
    uint32_t nsegments;
    odp_pte_method *methods;
    uint32_t nmethods;
} odp_pte;

/* Decodes buf. A truncated file (shorter than its extended header says), a wrong identifier or a corrupt
 * flatbuffer gives ODP_EPROTO with a message saying which. Strings and blobs point into buf. */
int odp_pte_read(const uint8_t *buf, size_t n, odp_pte *p, odp_err *err);
void odp_pte_free(odp_pte *p);

/* Parses a Vela stream (blocks of a 16-byte NUL-padded name, a 16-byte header whose first int32 is the data
 * size, data padded to 16, until "vela_end_stream") and returns its scratch_size block. */
int odp_vela_scratch_size(const uint8_t *p, size_t n, uint64_t *scratch, odp_err *err);

#endif
