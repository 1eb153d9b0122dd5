/* A small bounded ELF32 (little-endian) symbol reader for `_SEGGER_RTT`: checks every offset and size
 * against the file before using it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rtt.h"

#define MAX_SYMTAB (64u << 20)

static uint32_t rd32(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static uint16_t rd16(const uint8_t *b) { return (uint16_t)(b[0] | b[1] << 8); }

static int read_at(int fd, uint64_t off, void *buf, size_t n, uint64_t fsize, odp_err *err)
{
    if (off > fsize || n > fsize - off)
        return odp_fail(err, ODP_EPROTO, "ELF: offset %llu+%zu outside the file", (unsigned long long)off, n);
    if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
        return odp_fail_errno(err, ODP_EIO, errno, "ELF read");
    return 0;
}

int odp_elf32_symbol(const char *path, const char *name, uint32_t *value, odp_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
    struct stat st;
    uint8_t eh[52], sh[40];
    uint8_t *syms = NULL;
    char *strs = NULL;
    int rc = fstat(fd, &st) < 0 ? odp_fail_errno(err, ODP_EIO, errno, "%s", path) : 0;
    uint64_t fsize = (uint64_t)st.st_size;
    if (!rc)
        rc = read_at(fd, 0, eh, sizeof eh, fsize, err);
    if (!rc && (memcmp(eh, "\177ELF", 4) || eh[4] != 1 || eh[5] != 1))
        rc = odp_fail(err, ODP_EPROTO, "%s is not a 32-bit little-endian ELF file (Cortex-M firmware)", path);
    uint32_t shoff = rd32(eh + 32);
    uint16_t shentsize = rd16(eh + 46), shnum = rd16(eh + 48);
    if (!rc && shentsize < 40)
        rc = odp_fail(err, ODP_EPROTO, "%s: bad section header size", path);
    int found = 0;
    for (unsigned i = 0; !rc && !found && i < shnum; i++) {
        if ((rc = read_at(fd, (uint64_t)shoff + (uint64_t)i * shentsize, sh, sizeof sh, fsize, err)))
            break;
        if (rd32(sh + 4) != 2) /* SHT_SYMTAB */
            continue;
        uint32_t off = rd32(sh + 16), size = rd32(sh + 20), link = rd32(sh + 24), entsize = rd32(sh + 36);
        if (entsize < 16 || size > MAX_SYMTAB || link >= shnum) {
            rc = odp_fail(err, ODP_EPROTO, "%s: bad symbol table header", path);
            break;
        }
        uint8_t lsh[40];
        if ((rc = read_at(fd, (uint64_t)shoff + (uint64_t)link * shentsize, lsh, sizeof lsh, fsize, err)))
            break;
        uint32_t stroff = rd32(lsh + 16), strsize = rd32(lsh + 20);
        if (strsize > MAX_SYMTAB || strsize == 0) {
            rc = odp_fail(err, ODP_EPROTO, "%s: bad string table", path);
            break;
        }
        syms = malloc(size ? size : 1);
        strs = malloc((size_t)strsize + 1);
        if (!syms || !strs) {
            rc = odp_fail(err, ODP_EIO, "out of memory");
            break;
        }
        if ((rc = read_at(fd, off, syms, size, fsize, err)) || (rc = read_at(fd, stroff, strs, strsize, fsize, err)))
            break;
        strs[strsize] = 0;
        for (uint32_t s = 0; s + entsize <= size; s += entsize) {
            uint32_t nm = rd32(syms + s);
            if (nm < strsize && strcmp(strs + nm, name) == 0) {
                *value = rd32(syms + s + 4);
                found = 1;
                break;
            }
        }
        free(syms), free(strs);
        syms = NULL, strs = NULL;
    }
    free(syms), free(strs);
    close(fd);
    if (!rc && !found)
        rc = odp_fail(err, ODP_ENOTFOUND, "%s has no symbol %s (stripped? not an RTT firmware?)", path, name);
    return rc;
}
