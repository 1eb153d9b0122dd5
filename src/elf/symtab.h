/* Function symbols of an ELF file by address, for placing sampled instruction pointers (src/sample): the
 * .symtab (or .dynsym when stripped), the loadable segments (a mapping's file offset -> the address the
 * symbols use) and the GNU build-id. The file is untrusted: every offset, size and count is checked. */
#ifndef ODP_ELF_SYMTAB_H
#define ODP_ELF_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

#define ODP_ELF_MAX_SYMBOLS 4000000u
#define ODP_ELF_MAX_LOADS 32

typedef struct {
    uint64_t addr, size;
    uint32_t name; /* offset in the string table */
} odp_elf_sym;

typedef struct {
    uint64_t offset, vaddr, filesz;
} odp_elf_load;

typedef struct {
    uint8_t *map;
    size_t len;
    odp_elf_sym *syms; /* sorted by addr */
    uint32_t nsyms;
    const char *strtab;
    size_t strtab_len;
    const char *table; /* "symtab", "dynsym" or "none" */
    odp_elf_load loads[ODP_ELF_MAX_LOADS];
    int nloads;
    uint8_t build_id[64];
    int build_id_len;
    /* .eh_frame_hdr's table of function starts (a stripped file keeps it for unwinding): sdata4 pairs relative
     * to the header, the layout every toolchain odp meets writes; NULL when absent or laid out otherwise */
    const uint8_t *fde_table;
    uint32_t nfde;
    uint64_t eh_hdr_vaddr;
    int le;
} odp_elf_symbols;

/* Maps path and reads its function symbols (ENOTFOUND, EIO, EPROTO). */
int odp_elf_symbols_read(const char *path, odp_elf_symbols *s, odp_err *err);
/* The same over bytes in memory (not copied: keep them while s is used; odp_elf_symbols_free leaves them). */
int odp_elf_symbols_parse(const uint8_t *data, size_t len, odp_elf_symbols *s, odp_err *err);
void odp_elf_symbols_free(odp_elf_symbols *s);
/* A file offset (a mapping's pgoff + its distance into the mapping) -> the address symbols use; -1 when no
 * loadable segment holds it. */
int odp_elf_offset_to_addr(const odp_elf_symbols *s, uint64_t offset, uint64_t *addr);
/* The function holding addr: its name (length in *n) and addr's distance from its start, or NULL. */
const char *odp_elf_symbol_at(const odp_elf_symbols *s, uint64_t addr, size_t *n, uint64_t *off);

/* The start of the function holding addr from .eh_frame_hdr (found without symbols), or -1. */
int odp_elf_function_start(const odp_elf_symbols *s, uint64_t addr, uint64_t *start);
/* The inverse of odp_elf_offset_to_addr, or -1. */
int odp_elf_addr_to_offset(const odp_elf_symbols *s, uint64_t addr, uint64_t *offset);

#endif
