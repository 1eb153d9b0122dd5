/* libFuzzer target: odp's ETDump reader on arbitrary bytes.
 * sources: src/etdump/etdump.c src/etdump/blocks.c src/flatbuf/flatbuf.c src/util/err.c
 * seeds: tests/fixtures/etdump
 * max_len: 65536 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etdump/etdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, so a read past the end hits ASan's redzone instead of the fuzzer's own buffer slack. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    odp_etdump d;
    odp_err err;
    if (odp_etdump_read(buf, size, &d, &err) == 0) {
        /* touch everything the bindings would: strings and vectors must lie inside the buffer */
        const uint8_t *base = d.size_prefixed ? buf + 4 : buf;
        volatile uint64_t sink = 0;
        for (uint32_t i = 0; i < d.nruns; i++) {
            const odp_etdump_run *r = &d.runs[i];
            for (uint32_t j = 0; j < r->nallocators; j++)
                for (uint32_t k = 0; k < r->allocators[j].n; k++)
                    sink += (uint8_t)r->allocators[j].s[k];
            for (uint32_t j = 0; j < r->nevents; j++) {
                const odp_etdump_event *e = &r->events[j];
                for (uint32_t k = 0; k < e->name.n; k++)
                    sink += (uint8_t)e->name.s[k];
                for (uint32_t k = 0; k < e->delegate_debug_metadata.n; k++)
                    sink += (uint8_t)e->delegate_debug_metadata.s[k];
                uint64_t dur;
                if (odp_etdump_duration(e->start_time, e->end_time, &dur) == 0)
                    sink += dur;
                const odp_etdump_value *v = &e->debug_entry;
                for (uint32_t k = 0; k < v->tensor.sizes.count; k++)
                    sink += odp_fb_rd64(base + v->tensor.sizes.pos + 8 * (size_t)k);
                for (uint32_t t = 0; t < v->ntensors; t++)
                    for (uint32_t k = 0; k < v->tensors[t].strides.count; k++)
                        sink += odp_fb_rd64(base + v->tensors[t].strides.pos + 8 * (size_t)k);
            }
        }
        odp_etdump_blocks_t bl;
        if (odp_etdump_blocks(&d, &bl, &err) == 0) {
            for (uint32_t i = 0; i < bl.n; i++)
                for (uint32_t j = 0; j < bl.blocks[i].nevents; j++)
                    sink += bl.blocks[i].events[j].nsamples + (uint64_t)bl.blocks[i].events[j].rep->instruction_id;
            odp_etdump_blocks_free(&bl);
        }
        (void)sink;
        odp_etdump_free(&d);
    }
    free(buf);
    return 0;
}
