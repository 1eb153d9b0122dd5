/* libFuzzer target: odp's .pte reader (and its Vela stream parser) on arbitrary bytes.
 * sources: src/pte/pte.c src/flatbuf/flatbuf.c src/util/err.c
 * seeds: tests/fixtures/pte tests/fuzz/corpus/pte
 * max_len: 131072 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pte/pte.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    odp_pte p;
    odp_err err;
    volatile uint64_t sink = 0;
    if (odp_pte_read(buf, size, &p, &err) == 0) {
        for (uint32_t i = 0; i < p.nmethods; i++) {
            const odp_pte_method *m = &p.methods[i];
            for (uint32_t k = 0; k < m->name.n; k++)
                sink += (uint8_t)m->name.s[k];
            for (uint32_t j = 0; j < m->noperators; j++)
                for (uint32_t k = 0; k < m->operators[j].overload.n; k++)
                    sink += (uint8_t)m->operators[j].overload.s[k];
            for (uint32_t j = 0; j < m->ninputs; j++)
                for (uint8_t d = 0; d < m->inputs[j].ndim; d++)
                    sink += (uint32_t)m->inputs[j].sizes[d] + m->inputs[j].value_index;
            for (uint32_t j = 0; j < m->noutputs; j++)
                for (uint8_t d = 0; d < m->outputs[j].ndim; d++)
                    sink += (uint32_t)m->outputs[j].sizes[d] + (uint8_t)m->outputs[j].scalar_type;
            for (uint32_t k = 0; k < m->non_const_buffer_sizes.count; k++)
                sink += odp_fb_rd64(buf + m->non_const_buffer_sizes.pos + 8 * (size_t)k);
            for (uint32_t j = 0; j < m->ndelegates; j++) {
                const odp_pte_delegate *d = &m->delegates[j];
                for (uint32_t k = 0; k < d->id.n; k++)
                    sink += (uint8_t)d->id.s[k];
                if (d->data && d->ndata)
                    sink += d->data[0] + d->data[d->ndata - 1];
            }
        }
        odp_pte_free(&p);
    }
    uint64_t scratch;
    if (odp_vela_scratch_size(buf, size, &scratch, &err) == 0)
        sink += scratch;
    (void)sink;
    free(buf);
    return 0;
}
