/* Function symbols by address (symtab.h). */
#include "symtab.h"
#include "elf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SHT_SYMTAB 2
#define SHT_NOTE 7
#define SHT_DYNSYM 11
#define PT_LOAD 1
#define STT_FUNC 2
#define STT_GNU_IFUNC 10
#define NT_GNU_BUILD_ID 3
#define PT_GNU_EH_FRAME 0x6474e550u

typedef struct {
    const uint8_t *d;
    size_t len;
    int le, is64;
    int ok;
} img;

static uint64_t get(img *im, uint64_t off, int n)
{
    if (off > im->len || (uint64_t)n > im->len - off) {
        im->ok = 0;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | im->d[off + (uint64_t)(im->le ? n - 1 - i : i)];
    return v;
}

static int cmp_sym(const void *a, const void *b)
{
    const odp_elf_sym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return (x->size < y->size) - (x->size > y->size); /* the larger (the whole function) first */
}

/* the GNU build-id of a note area [off, off + size) */
static void read_notes(img *im, uint64_t off, uint64_t size, odp_elf_symbols *s)
{
    uint64_t end = off + size, at = off;
    for (int k = 0; k < 64 && at + 12 <= end && at + 12 <= im->len; k++) {
        uint64_t namesz = get(im, at, 4), descsz = get(im, at + 4, 4), type = get(im, at + 8, 4);
        uint64_t name = at + 12, desc = name + ((namesz + 3) & ~3ull);
        uint64_t next = desc + ((descsz + 3) & ~3ull);
        if (!im->ok || next > end || next > im->len)
            return;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(im->d + name, "GNU", 4) == 0 && descsz <= 64) {
            memcpy(s->build_id, im->d + desc, (size_t)descsz);
            s->build_id_len = (int)descsz;
            return;
        }
        at = next;
    }
}

/* version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4, table datarel|sdata4 (what GCC's and LLVM's
 * linkers write); anything else is left alone */
static void read_eh_frame_hdr(img *im, uint64_t off, uint64_t vaddr, uint64_t size, odp_elf_symbols *s)
{
    if (size < 12 || get(im, off, 1) != 1 || get(im, off + 1, 1) != 0x1b || get(im, off + 2, 1) != 0x03 ||
        get(im, off + 3, 1) != 0x3b || !im->ok)
        return;
    uint64_t n = get(im, off + 8, 4);
    if (!im->ok || n > (size - 12) / 8 || n > ODP_ELF_MAX_SYMBOLS)
        return;
    s->fde_table = im->d + off + 12;
    s->nfde = (uint32_t)n;
    s->eh_hdr_vaddr = vaddr;
    s->le = im->le;
}

static int read_table(img *im, uint64_t shoff, uint64_t shentsize, uint64_t sh, uint64_t shnum,
                      odp_elf_symbols *s, odp_err *err)
{
    uint64_t base = shoff + sh * shentsize;
    uint64_t off = get(im, base + (im->is64 ? 24 : 16), im->is64 ? 8 : 4);
    uint64_t size = get(im, base + (im->is64 ? 32 : 20), im->is64 ? 8 : 4);
    uint64_t link = get(im, base + (im->is64 ? 40 : 24), 4);
    uint64_t entsize = get(im, base + (im->is64 ? 56 : 36), im->is64 ? 8 : 4);
    if (!im->ok || link >= shnum || entsize < (im->is64 ? 24u : 16u) || off > im->len || size > im->len - off)
        return odp_fail(err, ODP_EPROTO, "ELF: a damaged symbol table");
    uint64_t lbase = shoff + link * shentsize;
    uint64_t stroff = get(im, lbase + (im->is64 ? 24 : 16), im->is64 ? 8 : 4);
    uint64_t strsize = get(im, lbase + (im->is64 ? 32 : 20), im->is64 ? 8 : 4);
    if (!im->ok || stroff > im->len || strsize > im->len - stroff)
        return odp_fail(err, ODP_EPROTO, "ELF: a damaged string table");
    uint64_t n = size / entsize;
    if (n > ODP_ELF_MAX_SYMBOLS)
        n = ODP_ELF_MAX_SYMBOLS;
    s->syms = malloc((size_t)(n ? n : 1) * sizeof *s->syms);
    if (!s->syms)
        return odp_fail(err, ODP_EIO, "ELF: out of memory for %llu symbols", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = off + i * entsize, name, value, sz;
        unsigned info;
        if (im->is64) {
            name = get(im, e, 4);
            info = (unsigned)get(im, e + 4, 1);
            value = get(im, e + 8, 8);
            sz = get(im, e + 16, 8);
        } else {
            name = get(im, e, 4);
            value = get(im, e + 4, 4);
            sz = get(im, e + 8, 4);
            info = (unsigned)get(im, e + 12, 1);
        }
        unsigned type = info & 15;
        if (!im->ok)
            break;
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || !value || name >= strsize)
            continue;
        s->syms[s->nsyms++] = (odp_elf_sym){value, sz, (uint32_t)name};
    }
    im->ok = 1;
    qsort(s->syms, s->nsyms, sizeof *s->syms, cmp_sym);
    s->strtab = (const char *)im->d + stroff;
    s->strtab_len = (size_t)strsize;
    return 0;
}

int odp_elf_symbols_parse(const uint8_t *data, size_t len, odp_elf_symbols *s, odp_err *err)
{
    memset(s, 0, sizeof *s);
    s->table = "none";
    if (len < 52 || memcmp(data, "\177ELF", 4) != 0 || (data[4] != 1 && data[4] != 2) || (data[5] != 1 && data[5] != 2))
        return odp_fail(err, ODP_EPROTO, "not an ELF file");
    img im = {data, len, data[5] == 1, data[4] == 2, 1};
    uint64_t phoff = get(&im, im.is64 ? 32 : 28, im.is64 ? 8 : 4);
    uint64_t shoff = get(&im, im.is64 ? 40 : 32, im.is64 ? 8 : 4);
    uint64_t phentsize = get(&im, im.is64 ? 54 : 42, 2), phnum = get(&im, im.is64 ? 56 : 44, 2);
    uint64_t shentsize = get(&im, im.is64 ? 58 : 46, 2), shnum = get(&im, im.is64 ? 60 : 48, 2);
    if (!im.ok)
        return odp_fail(err, ODP_EPROTO, "ELF: a truncated header");
    for (uint64_t i = 0; i < phnum && phentsize >= (im.is64 ? 56u : 32u); i++) {
        uint64_t p = phoff + i * phentsize;
        uint64_t type = get(&im, p, 4);
        uint64_t off = get(&im, p + (im.is64 ? 8 : 4), im.is64 ? 8 : 4);
        uint64_t vaddr = get(&im, p + (im.is64 ? 16 : 8), im.is64 ? 8 : 4);
        uint64_t filesz = get(&im, p + (im.is64 ? 32 : 16), im.is64 ? 8 : 4);
        if (!im.ok)
            break;
        if (type == PT_LOAD && s->nloads < ODP_ELF_MAX_LOADS)
            s->loads[s->nloads++] = (odp_elf_load){off, vaddr, filesz};
        else if (type == 4 /* PT_NOTE */ && !s->build_id_len)
            read_notes(&im, off, filesz, s);
        else if (type == PT_GNU_EH_FRAME)
            read_eh_frame_hdr(&im, off, vaddr, filesz, s);
    }
    im.ok = 1;
    uint64_t symtab = 0, dynsym = 0;
    if (shentsize >= (im.is64 ? 64u : 40u))
        for (uint64_t i = 1; i < shnum; i++) {
            uint64_t type = get(&im, shoff + i * shentsize + 4, 4);
            if (!im.ok)
                break;
            if (type == SHT_SYMTAB && !symtab)
                symtab = i;
            else if (type == SHT_DYNSYM && !dynsym)
                dynsym = i;
            else if (type == SHT_NOTE && !s->build_id_len) {
                uint64_t b = shoff + i * shentsize;
                read_notes(&im, get(&im, b + (im.is64 ? 24 : 16), im.is64 ? 8 : 4),
                           get(&im, b + (im.is64 ? 32 : 20), im.is64 ? 8 : 4), s);
            }
        }
    im.ok = 1;
    uint64_t table = symtab ? symtab : dynsym;
    if (table) {
        int rc = read_table(&im, shoff, shentsize, table, shnum, s, err);
        if (rc) {
            odp_elf_symbols_free(s);
            return rc;
        }
        s->table = symtab ? "symtab" : "dynsym";
    }
    return 0;
}

int odp_elf_symbols_read(const char *path, odp_elf_symbols *s, odp_err *err)
{
    memset(s, 0, sizeof *s);
    uint8_t *m;
    size_t len;
    int rc = odp_elf_map(path, &m, &len, err);
    if (rc)
        return rc;
    if ((rc = odp_elf_symbols_parse(m, len, s, err))) {
        munmap(m, len);
        return rc;
    }
    s->map = m;
    s->len = len;
    return 0;
}

void odp_elf_symbols_free(odp_elf_symbols *s)
{
    free(s->syms);
    if (s->map)
        munmap(s->map, s->len);
    memset(s, 0, sizeof *s);
}

int odp_elf_offset_to_addr(const odp_elf_symbols *s, uint64_t offset, uint64_t *addr)
{
    for (int i = 0; i < s->nloads; i++) {
        const odp_elf_load *l = &s->loads[i];
        if (offset >= l->offset && offset - l->offset < l->filesz) {
            *addr = l->vaddr + (offset - l->offset);
            return 0;
        }
    }
    return -1;
}

const char *odp_elf_symbol_at(const odp_elf_symbols *s, uint64_t addr, size_t *n, uint64_t *off)
{
    size_t lo = 0, hi = s->nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* the nearest start at or before addr whose extent holds it (a sized symbol), else an unsized one */
    for (size_t k = lo; k > 0 && lo - k < 8; k--) {
        const odp_elf_sym *y = &s->syms[k - 1];
        if (y->size ? addr - y->addr < y->size : k == lo) {
            const char *name = s->strtab + y->name;
            const char *end = memchr(name, 0, s->strtab_len - y->name);
            if (!end)
                return NULL;
            *n = (size_t)(end - name);
            *off = addr - y->addr;
            return name;
        }
    }
    return NULL;
}

static int64_t fde_start(const odp_elf_symbols *s, uint32_t i)
{
    const uint8_t *p = s->fde_table + 8 * (size_t)i;
    uint32_t v = s->le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                       : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
    return (int64_t)s->eh_hdr_vaddr + (int32_t)v;
}

int odp_elf_function_start(const odp_elf_symbols *s, uint64_t addr, uint64_t *start)
{
    uint32_t lo = 0, hi = s->nfde;
    while (lo < hi) { /* the table is sorted by start (the unwinder's binary search relies on it) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (fde_start(s, mid) <= (int64_t)addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    *start = (uint64_t)fde_start(s, lo - 1);
    return 0;
}

int odp_elf_addr_to_offset(const odp_elf_symbols *s, uint64_t addr, uint64_t *offset)
{
    for (int i = 0; i < s->nloads; i++) {
        const odp_elf_load *l = &s->loads[i];
        if (addr >= l->vaddr && addr - l->vaddr < l->filesz) {
            *offset = l->offset + (addr - l->vaddr);
            return 0;
        }
    }
    return -1;
}
