#include "elf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PT_DYNAMIC 2
#define PT_INTERP 3
#define SHT_GNU_VERNEED 0x6ffffffeu
#define MAX_HEADERS 65535
#define MAX_VERNEED 4096       /* entries (files) and auxiliaries in total */

typedef struct {
    const uint8_t *d;
    size_t len;
    int le, is64;
} image;

/* Bounds-checked reads: 0 when [off, off+n) lies outside the image. */
static int in_bounds(const image *im, uint64_t off, uint64_t n) { return off <= im->len && n <= im->len - off; }

static uint64_t rd(const image *im, uint64_t off, int n, int *ok)
{
    if (!in_bounds(im, off, (uint64_t)n)) {
        *ok = 0;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        int k = im->le ? n - 1 - i : i;
        v = v << 8 | im->d[off + (uint64_t)k];
    }
    return v;
}

/* A word of the file's class: 4 bytes for ELF32, 8 for ELF64. */
static uint64_t rdw(const image *im, uint64_t off, int *ok) { return rd(im, off, im->is64 ? 8 : 4, ok); }

int odp_version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        char *ea, *eb;
        unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
        if (x != y)
            return x < y ? -1 : 1;
        a = *ea == '.' ? ea + 1 : ea;
        b = *eb == '.' ? eb + 1 : eb;
        if (ea == a && eb == b && *a != '.' && *b != '.') /* no progress: non-numeric tails */
            return strcmp(a, b);
    }
    return 0;
}

const char *odp_elf_machine_name(unsigned m)
{
    switch (m) {
    case 3: return "i386";
    case 8: return "mips";
    case 20: return "ppc";
    case 21: return "ppc64";
    case 22: return "s390x";
    case 40: return "arm";
    case 62: return "x86_64";
    case 183: return "aarch64";
    case 243: return "riscv";
    case 258: return "loongarch";
    default: return NULL;
    }
}

static void add_glibc(odp_elf_info *info, const char *name, size_t n)
{
    if (n < 7 || n >= sizeof info->glibc[0] || memcmp(name, "GLIBC_", 6) != 0)
        return;
    for (size_t i = 6; i < n; i++)
        if (!(name[i] == '.' || (name[i] >= '0' && name[i] <= '9')))
            return; /* GLIBC_PRIVATE and the like are not versions */
    char v[sizeof info->glibc[0]];
    memcpy(v, name + 6, n - 6);
    v[n - 6] = 0;
    int pos = 0;
    for (; pos < info->n_glibc; pos++) {
        int c = odp_version_cmp(info->glibc[pos], v);
        if (c == 0 && strcmp(info->glibc[pos], v) == 0)
            return;
        if (c > 0)
            break;
    }
    if (info->n_glibc == ODP_ELF_MAX_VERSIONS) {
        info->truncated_versions = 1;
        return;
    }
    memmove(info->glibc[pos + 1], info->glibc[pos], (size_t)(info->n_glibc - pos) * sizeof info->glibc[0]);
    snprintf(info->glibc[pos], sizeof info->glibc[0], "%s", v);
    info->n_glibc++;
}

/* NUL-terminated string at strtab[off] inside the image; NULL if unterminated or outside. */
static const char *str_at(const image *im, uint64_t tab, uint64_t tab_size, uint64_t off, size_t *n)
{
    if (off >= tab_size || !in_bounds(im, tab, tab_size))
        return NULL;
    const char *s = (const char *)im->d + tab + off;
    const char *e = memchr(s, 0, (size_t)(tab_size - off));
    if (!e)
        return NULL;
    *n = (size_t)(e - s);
    return s;
}

static void read_verneed(const image *im, uint64_t off, uint64_t size, uint64_t count, uint64_t strtab,
                         uint64_t strsz, odp_elf_info *info)
{
    int budget = MAX_VERNEED, ok = 1;
    uint64_t vn = off;
    for (uint64_t i = 0; i < count && budget-- > 0; i++) {
        if (vn < off || vn - off > size || !in_bounds(im, vn, 16))
            return;
        uint64_t cnt = rd(im, vn + 2, 2, &ok), aux = rd(im, vn + 8, 4, &ok), next = rd(im, vn + 12, 4, &ok);
        uint64_t a = vn + aux;
        for (uint64_t j = 0; j < cnt && budget-- > 0 && ok; j++) {
            if (a < vn || !in_bounds(im, a, 16))
                break;
            uint64_t name = rd(im, a + 8, 4, &ok), anext = rd(im, a + 12, 4, &ok);
            size_t n;
            const char *s = str_at(im, strtab, strsz, name, &n);
            if (s)
                add_glibc(info, s, n);
            if (!anext)
                break;
            a += anext;
        }
        if (!next || !ok)
            return;
        vn += next;
    }
}

int odp_elf_parse(const uint8_t *data, size_t len, odp_elf_info *info, odp_err *err)
{
    memset(info, 0, sizeof *info);
    if (len < 16 || memcmp(data, "\177ELF", 4) != 0)
        return odp_fail(err, ODP_EPROTO, "not an ELF file");
    if ((data[4] != 1 && data[4] != 2) || (data[5] != 1 && data[5] != 2))
        return odp_fail(err, ODP_EPROTO, "ELF header has an unknown class or byte order");
    image im = {.d = data, .len = len, .le = data[5] == 1, .is64 = data[4] == 2};
    info->elf_class = im.is64 ? 64 : 32;
    info->little_endian = im.le;
    info->osabi = data[7];
    int ok = 1;
    if (len < (im.is64 ? 64u : 52u))
        return odp_fail(err, ODP_EPROTO, "ELF header truncated");
    info->type = (unsigned)rd(&im, 16, 2, &ok);
    info->machine = (unsigned)rd(&im, 18, 2, &ok);
    uint64_t phoff = rdw(&im, im.is64 ? 32 : 28, &ok), shoff = rdw(&im, im.is64 ? 40 : 32, &ok);
    uint64_t b = im.is64 ? 54 : 42;
    uint64_t phentsize = rd(&im, b, 2, &ok), phnum = rd(&im, b + 2, 2, &ok);
    uint64_t shentsize = rd(&im, b + 4, 2, &ok), shnum = rd(&im, b + 6, 2, &ok);

    /* Program headers: interpreter and dynamic segment. */
    if (phoff && phentsize >= (im.is64 ? 56u : 32u) && phnum <= MAX_HEADERS) {
        for (uint64_t i = 0; i < phnum; i++) {
            uint64_t ph = phoff + i * phentsize;
            if (ph < phoff || !in_bounds(&im, ph, phentsize))
                break;
            uint32_t type = (uint32_t)rd(&im, ph, 4, &ok);
            uint64_t off = rdw(&im, ph + (im.is64 ? 8 : 4), &ok);
            uint64_t filesz = rdw(&im, ph + (im.is64 ? 32 : 16), &ok);
            if (type == PT_DYNAMIC)
                info->has_dynamic = 1;
            if (type == PT_INTERP && in_bounds(&im, off, filesz) && filesz > 0) {
                size_t n = filesz < sizeof info->interpreter ? (size_t)filesz : sizeof info->interpreter - 1;
                const char *s = (const char *)data + off, *nul = memchr(s, 0, n);
                n = nul ? (size_t)(nul - s) : n;
                memcpy(info->interpreter, s, n);
                info->interpreter[n] = 0;
                info->has_interp = 1;
            }
        }
    }
    /* Section headers: SHT_GNU_verneed, whose sh_link names its string table. */
    uint64_t shsz = im.is64 ? 64 : 40;
    if (shoff && shentsize >= shsz && shnum <= MAX_HEADERS) {
        for (uint64_t i = 0; i < shnum; i++) {
            uint64_t sh = shoff + i * shentsize;
            if (sh < shoff || !in_bounds(&im, sh, shentsize))
                break;
            ok = 1;
            uint32_t type = (uint32_t)rd(&im, sh + 4, 4, &ok);
            if (type != SHT_GNU_VERNEED)
                continue;
            uint64_t off = rdw(&im, sh + (im.is64 ? 24 : 16), &ok), size = rdw(&im, sh + (im.is64 ? 32 : 20), &ok);
            uint64_t link = rd(&im, sh + (im.is64 ? 40 : 24), 4, &ok), info_n = rd(&im, sh + (im.is64 ? 44 : 28), 4, &ok);
            if (!ok || link >= shnum || !in_bounds(&im, off, size))
                continue;
            uint64_t ls = shoff + link * shentsize;
            if (!in_bounds(&im, ls, shsz))
                continue;
            uint64_t stroff = rdw(&im, ls + (im.is64 ? 24 : 16), &ok), strsz = rdw(&im, ls + (im.is64 ? 32 : 20), &ok);
            if (ok && in_bounds(&im, stroff, strsz))
                read_verneed(&im, off, size, info_n, stroff, strsz, info);
        }
    }
    return 0;
}

int odp_elf_map(const char *path, uint8_t **map, size_t *len, odp_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return odp_fail(err, ODP_EIO, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return odp_fail(err, ODP_EPROTO, "%s is empty, not an ELF file", path);
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return odp_fail_errno(err, ODP_EIO, errno, "cannot map %s", path);
    *map = m;
    *len = (size_t)st.st_size;
    return 0;
}

int odp_elf_read_file(const char *path, odp_elf_info *info, odp_err *err)
{
    uint8_t *m;
    size_t len;
    int rc = odp_elf_map(path, &m, &len, err);
    if (rc)
        return rc;
    rc = odp_elf_parse(m, len, info, err);
    munmap(m, len);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return odp_fail(err, ODP_EPROTO, "%s: %s", path, why);
    }
    return 0;
}
