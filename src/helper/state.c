/* Device-state snapshot; see state.h. Every read is bounded, as in the shell script it replaces
 * (lua/odp/target/device_state.lua M.SCRIPT): the same items, the same bounds, the same order. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "state.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VALUE_MAX 256
#define PATH_MAX_LEN 4096
#define LEASE_LINE_MAX 256     /* bytes of a lease read, as the shell reads it */
#define LEASES_MAX 256         /* leases listed, as the shell listed them (head -n 256) */
#define LEASES_SCANNED_MAX 8192 /* entries of .odp/runs looked at */

struct gather {
    const odp_state_opts *o;
    odp_buf *out;
    int oom;
};

static void put(struct gather *g, const void *p, size_t n)
{
    if (odp_buf_append(g->out, p, n))
        g->oom = 1;
}

static void puts_(struct gather *g, const char *s) { put(g, s, strlen(s)); }

/* Reads at most max bytes of the file at path into buf (O_NONBLOCK: a FIFO put there never blocks the helper);
 * the count, or -1 when it cannot be opened. */
static ssize_t read_upto(const char *path, char *buf, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got < max) {
        ssize_t r = read(fd, buf + got, max - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    return (ssize_t)got;
}

/* read_upto of root+path. */
static ssize_t read_head(struct gather *g, const char *path, char *buf, size_t max)
{
    char full[PATH_MAX_LEN];
    if (snprintf(full, sizeof full, "%s%s", g->o->root, path) >= (int)sizeof full)
        return -1;
    return read_upto(full, buf, max);
}

/* @v: the first line, when there is one and it is not empty. */
static void value(struct gather *g, const char *path)
{
    char buf[VALUE_MAX + 1];
    ssize_t n = read_head(g, path, buf, VALUE_MAX);
    if (n <= 0)
        return;
    char *nl = memchr(buf, '\n', (size_t)n);
    size_t len = nl ? (size_t)(nl - buf) : (size_t)n;
    if (memchr(buf, '\0', len))
        len = strlen(buf); /* the shell's read stops at a NUL too */
    if (!len)
        return;
    puts_(g, "@v ");
    puts_(g, path);
    put(g, " ", 1);
    put(g, buf, len);
    put(g, "\n", 1);
}

/* @f: the first max bytes. */
static void file(struct gather *g, const char *path, size_t max)
{
    char *buf = malloc(max);
    if (!buf) {
        g->oom = 1;
        return;
    }
    ssize_t n = read_head(g, path, buf, max);
    if (n >= 0) {
        puts_(g, "@f ");
        puts_(g, path);
        put(g, "\n", 1);
        put(g, buf, (size_t)n);
        puts_(g, "\n@e\n");
    }
    free(buf);
}

static int starts_key(const char *line, size_t len, const char *key)
{
    size_t k = strlen(key);
    if (len < k || memcmp(line, key, k))
        return 0;
    while (k < len && (line[k] == ' ' || line[k] == '\t'))
        k++;
    return k < len && line[k] == ':';
}

/* /proc/cpuinfo: the lines that name cores and the board, at most 64 KiB of them. */
static void cpuinfo(struct gather *g)
{
    static const char *const keys[] = {"processor", "model name", "CPU implementer", "CPU part", "Hardware", "Model"};
    const size_t max_in = 1u << 20, max_out = 65536;
    char *buf = malloc(max_in);
    if (!buf) {
        g->oom = 1;
        return;
    }
    ssize_t n = read_head(g, "/proc/cpuinfo", buf, max_in);
    if (n >= 0) {
        puts_(g, "@f /proc/cpuinfo\n");
        size_t kept = 0;
        for (size_t at = 0; at < (size_t)n;) {
            char *nl = memchr(buf + at, '\n', (size_t)n - at);
            size_t len = nl ? (size_t)(nl - (buf + at)) : (size_t)n - at;
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
                if (starts_key(buf + at, len, keys[k])) {
                    size_t take = len + 1 <= max_out - kept ? len + 1 : max_out - kept;
                    put(g, buf + at, take < len ? take : len);
                    if (take > len)
                        put(g, "\n", 1);
                    kept += take;
                    break;
                }
            }
            at += len + 1;
        }
        puts_(g, "\n@e\n");
    }
    free(buf);
}

static int numbered(const char *name, const char *prefix)
{
    size_t k = strlen(prefix);
    if (strncmp(name, prefix, k) || !name[k])
        return 0;
    for (const char *p = name + k; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entries of root+dir named prefix<digits>, sorted as a shell glob sorts them; NULL-terminated. */
static char **entries(struct gather *g, const char *dir, const char *prefix)
{
    char full[PATH_MAX_LEN];
    snprintf(full, sizeof full, "%s%s", g->o->root, dir);
    DIR *d = opendir(full);
    if (!d)
        return NULL;
    size_t n = 0, cap = 16;
    char **list = malloc(cap * sizeof *list);
    struct dirent *e;
    while (list && (e = readdir(d)) && n < 8192) {
        if (!numbered(e->d_name, prefix))
            continue;
        if (n + 1 >= cap) {
            char **l = realloc(list, (cap *= 2) * sizeof *list);
            if (!l)
                break;
            list = l;
        }
        if (!(list[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (!list) {
        g->oom = 1;
        return NULL;
    }
    list[n] = NULL;
    qsort(list, n, sizeof *list, by_name);
    return list;
}

static void free_list(char **l)
{
    for (char **p = l; p && *p; p++)
        free(*p);
    free(l);
}

/* Where a command is: root/bin/NAME under a root, else the first PATH entry that has it; 0 when nowhere. */
static int find_command(struct gather *g, const char *name, char *out, size_t n)
{
    if (g->o->root[0]) {
        snprintf(out, n, "%s/bin/%s", g->o->root, name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        const char *c = strchr(path, ':');
        size_t len = c ? (size_t)(c - path) : strlen(path);
        if (len && snprintf(out, n, "%.*s/%s", (int)len, path, name) < (int)n && access(out, X_OK) == 0)
            return 1;
        path += len + (c ? 1 : 0);
    }
    return 0;
}

static void command(struct gather *g, const char *label, const char *const argv[], size_t max)
{
    puts_(g, "@c ");
    puts_(g, label);
    put(g, "\n", 1);
    g->o->run(g->o->ctx, argv, max, g->out);
    puts_(g, "\n@e\n");
}

/* getprop's lines `[name]: [value]` for the properties asked, at most 8 KiB. */
static void getprop(struct gather *g, const char *exe)
{
    odp_buf all = {.limit = 1u << 20};
    const char *argv[] = {exe, NULL};
    g->o->run(g->o->ctx, argv, all.limit, &all);
    puts_(g, "@c getprop\n");
    size_t kept = 0, max = 8192;
    for (size_t at = 0; at < all.len;) {
        char *line = all.data + at;
        char *nl = memchr(line, '\n', all.len - at);
        size_t len = nl ? (size_t)(nl - line) : all.len - at;
        char *close = len > 1 && line[0] == '[' ? memchr(line, ']', len) : NULL;
        if (close && close + 1 < line + len && close[1] == ':') {
            size_t nlen = (size_t)(close - line - 1);
            for (const char *p = g->o->props; *p;) {
                const char *bar = strchr(p, '|');
                size_t plen = bar ? (size_t)(bar - p) : strlen(p);
                if (plen == nlen && !memcmp(p, line + 1, nlen)) {
                    size_t take = len + 1 <= max - kept ? len + 1 : max - kept;
                    put(g, line, take);
                    kept += take;
                    break;
                }
                p += plen + (bar ? 1 : 0);
            }
        }
        at += len + 1;
    }
    odp_buf_free(&all);
    puts_(g, "\n@e\n");
}

int odp_state_gather(const odp_state_opts *o, odp_buf *out)
{
    struct gather g = {o, out, 0};
    char path[PATH_MAX_LEN];
    value(&g, "/proc/sys/kernel/hostname");
    value(&g, "/proc/sys/kernel/osrelease");
    value(&g, "/proc/loadavg");
    value(&g, "/sys/devices/system/cpu/online");
    file(&g, "/etc/os-release", 4096);
    file(&g, "/proc/meminfo", 1024);
    file(&g, "/proc/device-tree/compatible", 512); /* NUL-separated names; QEMU's virt machine: emulated */
    cpuinfo(&g);
    char **cpus = entries(&g, "/sys/devices/system/cpu", "cpu");
    for (char **c = cpus; c && *c; c++) {
        for (const char *f = o->cpu_files; *f;) {
            while (*f == ' ')
                f++;
            size_t len = strcspn(f, " ");
            if (len && snprintf(path, sizeof path, "/sys/devices/system/cpu/%s/%.*s", *c, (int)len, f) <
                           (int)sizeof path)
                value(&g, path);
            f += len;
        }
    }
    free_list(cpus);
    char **zones = entries(&g, "/sys/class/thermal", "thermal_zone");
    for (char **z = zones; z && *z; z++) {
        snprintf(path, sizeof path, "/sys/class/thermal/%s/type", *z);
        value(&g, path);
        snprintf(path, sizeof path, "/sys/class/thermal/%s/temp", *z);
        value(&g, path);
    }
    free_list(zones);
    char exe[PATH_MAX_LEN];
    if (find_command(&g, "getprop", exe, sizeof exe))
        getprop(&g, exe);
    if (find_command(&g, "dumpsys", exe, sizeof exe)) {
        const char *thermal[] = {exe, "thermalservice", NULL}, *battery[] = {exe, "battery", NULL};
        command(&g, "thermalservice", thermal, 65536);
        command(&g, "battery", battery, 16384);
    }
    return g.oom ? -1 : 0;
}

/* A lease's first line, as `head -c 256 lease | head -n 1` reads it (a NUL ends it too: the shell drops it). */
static size_t lease_line(const char *path, char *buf, size_t max)
{
    ssize_t got = read_upto(path, buf, max);
    size_t len = 0;
    while ((ssize_t)len < got && buf[len] != '\n' && buf[len] != '\0')
        len++;
    return len;
}

/* A directory name the line format can carry: others_of reads it as one word. */
static int plain_name(const char *s)
{
    if (!*s || *s == '.')
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return 0;
    return 1;
}

int odp_leases_gather(const char *remote_dir, odp_buf *out)
{
    char path[PATH_MAX_LEN], line[LEASE_LINE_MAX + 1], text[PATH_MAX_LEN + 2 * LEASE_LINE_MAX];
    int n = snprintf(text, sizeof text, "now %lld\n", (long long)time(NULL));
    if (odp_buf_append(out, text, (size_t)n))
        return -1;
    snprintf(path, sizeof path, "%s/.odp/runs", remote_dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t count = 0, cap = 0;
    char **names = NULL;
    struct dirent *e;
    int oom = 0;
    while ((e = readdir(d)) && count < LEASES_SCANNED_MAX) {
        if (!plain_name(e->d_name))
            continue;
        if (count == cap) {
            char **l = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
            if (!l) {
                oom = 1;
                break;
            }
            names = l;
        }
        if (!(names[count] = strdup(e->d_name))) {
            oom = 1;
            break;
        }
        count++;
    }
    closedir(d);
    if (count)
        qsort(names, count, sizeof *names, by_name); /* as the shell's glob lists them */
    size_t shown = 0;
    for (size_t k = 0; k < count && shown < LEASES_MAX && !oom; k++) {
        struct stat st;
        if (snprintf(path, sizeof path, "%s/.odp/runs/%s/lease", remote_dir, names[k]) >= (int)sizeof path ||
            stat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        size_t len = lease_line(path, line, LEASE_LINE_MAX);
        snprintf(path, sizeof path, "%s/.odp/runs/%s/waiting", remote_dir, names[k]);
        struct stat w;
        int waiting = stat(path, &w) == 0 && S_ISREG(w.st_mode);
        snprintf(path, sizeof path, "%s/.odp/runs/%s", remote_dir, names[k]);
        if (stat(path, &st) || !S_ISDIR(st.st_mode))
            continue;
        n = snprintf(text, sizeof text, "lease %lld %s %.*s%s\n", (long long)st.st_mtime, names[k], (int)len, line,
                     waiting ? " waiting" : "");
        /* whole lines only: past the buffer's bound the rest is left out, never a line cut in two */
        if (n >= (int)sizeof text || (out->limit && out->len + (size_t)n > out->limit))
            break;
        if (odp_buf_append(out, text, (size_t)n))
            oom = 1;
        shown++;
    }
    for (size_t k = 0; k < count; k++)
        free(names[k]);
    free(names);
    return oom ? -1 : 0;
}
