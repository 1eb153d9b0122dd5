/* libFuzzer target for the sample stream reader and the join (src/sample/sample.c): any input must read or fail
 * cleanly, and what it reads must hold together (every sample's frames inside the frame pool, the join's counts
 * adding up), and ELF symbol tables (src/elf/symtab.c) looked up at any offset.
 * sources: src/sample/sample.c src/elf/symtab.c src/elf/elf.c src/util/err.c
 * seeds: tests/fuzz/corpus/sample build/tests/sample_runner
 * max_len: 65536 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf/symtab.h"
#include "sample/sample.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    odp_sample_stream st;
    odp_err err;
    if (odp_sample_read(data, size, &st, &err) == 0) {
        for (uint32_t i = 0; i < st.nsamples; i++)
            if (st.samples[i].depth == 0 || st.samples[i].depth > ODP_SAMPLE_MAX_DEPTH ||
                (size_t)st.samples[i].chain + st.samples[i].depth > st.nframes)
                __builtin_trap();
        for (uint32_t i = 0; i < st.nmmaps; i++)
            if (st.mmaps[i].file < (const char *)data || st.mmaps[i].file + st.mmaps[i].file_len > (const char *)data + size)
                __builtin_trap();
        /* intervals from the input's own bytes: nested, overlapping, empty */
        odp_sample_interval iv[8];
        size_t n = 0;
        for (size_t k = 0; k + 16 <= size && n < 8; k += 16, n++) {
            uint64_t a, b;
            memcpy(&a, data + k, 8);
            memcpy(&b, data + k + 8, 8);
            iv[n] = (odp_sample_interval){a % 100000, a % 100000 + b % 50000, (int32_t)n + 1};
        }
        odp_sample_interval *flat;
        long m = odp_sample_flatten(iv, n, &flat);
        if (m < 0 || (size_t)m > 2 * n)
            __builtin_trap();
        for (long k = 1; k < m; k++)
            if (flat[k].start < flat[k - 1].end)
                __builtin_trap();
        int32_t *assign = malloc((st.nsamples ? st.nsamples : 1) * sizeof *assign);
        odp_sample_assign(&st, flat, (size_t)m, flat, (size_t)(m > 0 ? 1 : 0), assign);
        odp_sample_stack *stacks;
        long ns = odp_sample_fold(&st, assign, &stacks);
        uint64_t total = 0;
        for (long k = 0; k < ns; k++)
            total += stacks[k].count;
        if (ns < 0 || total != st.nsamples)
            __builtin_trap();
        for (uint32_t i = 0; i < st.nsamples && i < 64; i++)
            (void)odp_sample_mapping(&st, st.samples[i].pid, st.samples[i].time, st.frames[st.samples[i].chain]);
        free(stacks);
        free(assign);
        free(flat);
        odp_sample_free(&st);
    }
    odp_elf_symbols sy;
    if (odp_elf_symbols_parse(data, size, &sy, &err) == 0) {
        for (uint64_t off = 0; off < 4096; off += 97) {
            uint64_t addr, d;
            size_t len;
            const char *name;
            if (odp_elf_offset_to_addr(&sy, off, &addr) == 0 && (name = odp_elf_symbol_at(&sy, addr, &len, &d)) &&
                (name < (const char *)data || name + len >= (const char *)data + size))
                __builtin_trap();
        }
        odp_elf_symbols_free(&sy);
    }
    return 0;
}
