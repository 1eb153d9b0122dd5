/* ELF facts needed before running a binary on a board: class, machine, type, interpreter, and the GLIBC_x.y
 * versions it needs (.gnu.version_r). The file is untrusted: every offset and count is checked against the
 * buffer, every loop is bounded. */
#ifndef ODP_ELF_H
#define ODP_ELF_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

#define ODP_ELF_MAX_VERSIONS 64

typedef struct {
    int elf_class;            /* 32 or 64 */
    int little_endian;
    unsigned type;            /* e_type: 1 rel, 2 exec, 3 dyn, 4 core */
    unsigned machine;         /* e_machine: 62 x86_64, 183 aarch64, 40 arm, ... */
    unsigned osabi;
    int has_interp;           /* PT_INTERP present: dynamically linked */
    int has_dynamic;          /* PT_DYNAMIC present (static-pie has it without an interpreter) */
    char interpreter[256];
    int n_glibc;              /* distinct GLIBC_x.y[.z] names needed, sorted by version */
    char glibc[ODP_ELF_MAX_VERSIONS][24];
    int truncated_versions;   /* more than ODP_ELF_MAX_VERSIONS distinct names */
} odp_elf_info;

/* Parses an ELF image in memory. EPROTO for anything that is not a well-formed ELF header; damaged
 * optional parts (program headers, version sections) are skipped rather than trusted. */
int odp_elf_parse(const uint8_t *data, size_t len, odp_elf_info *info, odp_err *err);
/* Maps a regular, non-empty file read-only (*map, *len: munmap them); ENOTFOUND, EIO, EPROTO. */
int odp_elf_map(const char *path, uint8_t **map, size_t *len, odp_err *err);
/* Maps and parses a file (ENOTFOUND, EIO, EPROTO). */
int odp_elf_read_file(const char *path, odp_elf_info *info, odp_err *err);
/* Compares dotted version strings numerically ("2.9" < "2.34"); returns <0, 0, >0. */
int odp_version_cmp(const char *a, const char *b);
/* Name for e_machine ("x86_64", "aarch64", "arm", ...) or NULL. */
const char *odp_elf_machine_name(unsigned machine);

#endif
