/* libFuzzer target for the ELF reader (src/elf/elf.c): any input must parse or fail cleanly.
 * sources: src/elf/elf.c src/util/err.c
 * seeds: /bin/true build/odp-rusage-x86_64 build/odp-rusage-aarch64
 * max_len: 65536 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "elf/elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    odp_elf_info info;
    odp_err err;
    if (odp_elf_parse(data, size, &info, &err) == 0) {
        /* the result must be self-consistent */
        if (info.n_glibc < 0 || info.n_glibc > ODP_ELF_MAX_VERSIONS || strlen(info.interpreter) >= sizeof info.interpreter)
            __builtin_trap();
        for (int i = 1; i < info.n_glibc; i++)
            if (odp_version_cmp(info.glibc[i - 1], info.glibc[i]) > 0)
                __builtin_trap();
    }
    return 0;
}
