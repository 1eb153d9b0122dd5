/* gdb backend: a GDB remote-protocol client (QEMU's gdbstub, JLinkGDBServer, OpenOCD, pyOCD). Acks and
 * checksums, `m`/`M` in chunks, 0x03 + `c` around each access while the target runs (stubs such as QEMU's
 * only serve memory while the target is stopped), `qRcmd` for monitor commands (reset). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../stream/stream.h"
#include "../util/wait.h"
#include "probe.h"

#define CHUNK 512         /* bytes per m/M packet: well under every stub's PacketSize */
#define MAX_PACKET 16384  /* longest reply kept; longer replies from the stub are an error */
/* An exchange, once started, runs to its end with this much time even if the caller's deadline is nearer:
 * abandoning it halfway would leave a late reply that the next exchange would take for its own. */
#define EXCHANGE_S 3.0

typedef struct {
    odp_probe base;
    int fd;
    int running;
    int broken; /* an exchange failed halfway: the byte stream can no longer be trusted */
    char rx[4096];
    size_t rlen, rpos;
    char pkt[MAX_PACKET + 1];
    size_t plen;
} gdb_probe;

static int get_char(gdb_probe *g, double deadline, odp_err *err)
{
    if (g->rpos == g->rlen) {
        ssize_t r = odp_fd_read(g->fd, g->rx, sizeof g->rx, deadline, err);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_EIO, "the GDB stub closed the connection");
        g->rlen = (size_t)r;
        g->rpos = 0;
    }
    return (unsigned char)g->rx[g->rpos++];
}

static const char hexd[] = "0123456789abcdef";

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int send_packet(gdb_probe *g, const char *data, size_t n, double deadline, odp_err *err)
{
    char *buf = malloc(n + 4);
    if (!buf)
        return odp_fail(err, ODP_EIO, "out of memory");
    unsigned sum = 0;
    buf[0] = '$';
    for (size_t i = 0; i < n; i++) {
        buf[1 + i] = data[i];
        sum += (unsigned char)data[i];
    }
    buf[n + 1] = '#';
    buf[n + 2] = hexd[(sum >> 4) & 15];
    buf[n + 3] = hexd[sum & 15];
    int rc = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        ssize_t w = odp_fd_write(g->fd, buf, n + 4, deadline, err);
        if (w < 0) {
            rc = (int)w;
            break;
        }
        int c;
        do
            c = get_char(g, deadline, err);
        while (c >= 0 && c != '+' && c != '-');
        if (c < 0) {
            rc = c;
            break;
        }
        if (c == '+') {
            free(buf);
            return 0;
        }
        rc = odp_fail(err, ODP_EPROTO, "the GDB stub rejected a packet 4 times");
    }
    free(buf);
    return rc;
}

/* Reads one packet into g->pkt (run-length encoding expanded), acknowledging it. */
static int recv_packet(gdb_probe *g, double deadline, odp_err *err)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        int c;
        do
            c = get_char(g, deadline, err);
        while (c >= 0 && c != '$');
        if (c < 0)
            return c;
        unsigned sum = 0;
        g->plen = 0;
        int prev = -1;
        for (;;) {
            c = get_char(g, deadline, err);
            if (c < 0)
                return c;
            if (c == '#')
                break;
            sum += (unsigned)c;
            if (c == '*' && prev >= 0) { /* run-length: repeat prev (count - 29) more times */
                int k = get_char(g, deadline, err);
                if (k < 0)
                    return k;
                sum += (unsigned)k;
                int rep = k - 29;
                if (rep < 0 || g->plen + (size_t)rep > MAX_PACKET)
                    return odp_fail(err, ODP_EPROTO, "bad run-length encoding from the GDB stub");
                memset(g->pkt + g->plen, prev, (size_t)rep);
                g->plen += (size_t)rep;
                continue;
            }
            if (g->plen >= MAX_PACKET)
                return odp_fail(err, ODP_EPROTO, "GDB stub reply longer than %d bytes", MAX_PACKET);
            g->pkt[g->plen++] = (char)c;
            prev = c;
        }
        int h = get_char(g, deadline, err), l = h < 0 ? h : get_char(g, deadline, err);
        if (l < 0)
            return l;
        g->pkt[g->plen] = 0;
        int ok = hexval(h) >= 0 && hexval(l) >= 0 && (unsigned)(hexval(h) << 4 | hexval(l)) == (sum & 0xff);
        ssize_t w = odp_fd_write(g->fd, ok ? "+" : "-", 1, deadline, err);
        if (w < 0)
            return (int)w;
        if (ok)
            return 0;
    }
    return odp_fail(err, ODP_EPROTO, "4 corrupted packets in a row from the GDB stub");
}

static int is_stop_reply(const gdb_probe *g) { return g->plen && (g->pkt[0] == 'T' || g->pkt[0] == 'S'); }

static int stop_target(gdb_probe *g, double deadline, odp_err *err)
{
    ssize_t w = odp_fd_write(g->fd, "\x03", 1, deadline, err);
    if (w < 0)
        return (int)w;
    for (int i = 0; i < 16; i++) {
        int rc = recv_packet(g, deadline, err);
        if (rc)
            return rc;
        if (is_stop_reply(g)) {
            g->running = 0;
            return 0;
        }
    }
    return odp_fail(err, ODP_EPROTO, "no stop reply after an interrupt");
}

static int continue_target(gdb_probe *g, double deadline, odp_err *err)
{
    int rc = send_packet(g, "c", 1, deadline, err);
    if (rc == 0)
        g->running = 1;
    return rc;
}

typedef int (*access_fn)(gdb_probe *g, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err);

/* Runs fn with the target stopped, resuming it afterwards if it was running. */
static int stopped(gdb_probe *g, access_fn fn, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    int was = g->running, rc;
    if (was && (rc = stop_target(g, deadline, err)) != 0)
        return rc;
    rc = fn(g, addr, buf, n, deadline, err);
    if (was) {
        odp_err e2;
        int rc2 = continue_target(g, deadline, rc ? &e2 : err);
        if (!rc)
            rc = rc2;
    }
    return rc;
}

static int do_read(gdb_probe *g, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    uint8_t *out = buf;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        char cmd[64];
        int len = snprintf(cmd, sizeof cmd, "m%x,%zx", (unsigned)(addr + off), k);
        int rc = send_packet(g, cmd, (size_t)len, deadline, err);
        if (!rc)
            rc = recv_packet(g, deadline, err);
        if (rc)
            return rc;
        if (g->plen != 2 * k) {
            if (g->plen && g->pkt[0] == 'E')
                return odp_fail(err, ODP_EIO, "the GDB stub cannot read 0x%08x+%zu (%s)", (unsigned)(addr + off), k,
                                g->pkt);
            return odp_fail(err, ODP_EPROTO, "short m reply (%zu hex digits for %zu bytes)", g->plen, k);
        }
        for (size_t i = 0; i < k; i++) {
            int h = hexval(g->pkt[2 * i]), l = hexval(g->pkt[2 * i + 1]);
            if (h < 0 || l < 0)
                return odp_fail(err, ODP_EPROTO, "non-hex m reply");
            out[off + i] = (uint8_t)(h << 4 | l);
        }
    }
    return 0;
}

static int do_write(gdb_probe *g, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    const uint8_t *in = buf;
    char cmd[64 + 2 * CHUNK];
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        int len = snprintf(cmd, 64, "M%x,%zx:", (unsigned)(addr + off), k);
        for (size_t i = 0; i < k; i++) {
            cmd[len++] = hexd[in[off + i] >> 4];
            cmd[len++] = hexd[in[off + i] & 15];
        }
        int rc = send_packet(g, cmd, (size_t)len, deadline, err);
        if (!rc)
            rc = recv_packet(g, deadline, err);
        if (rc)
            return rc;
        if (strcmp(g->pkt, "OK"))
            return odp_fail(err, ODP_EIO, "the GDB stub cannot write 0x%08x+%zu (%s)", (unsigned)(addr + off), k,
                            g->pkt);
    }
    return 0;
}

/* qRcmd: a monitor command; its output is ignored, "OK" is success. */
static int do_monitor(gdb_probe *g, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    (void)addr, (void)n;
    const char *cmd = buf;
    char pkt[300];
    int len = snprintf(pkt, sizeof pkt, "qRcmd,");
    for (const char *c = cmd; *c && len < (int)sizeof pkt - 2; c++) {
        pkt[len++] = hexd[(unsigned char)*c >> 4];
        pkt[len++] = hexd[*c & 15];
    }
    int rc = send_packet(g, pkt, (size_t)len, deadline, err);
    for (int i = 0; !rc && i < 1000; i++) {
        if ((rc = recv_packet(g, deadline, err)) != 0)
            break;
        if (g->plen && g->pkt[0] == 'O' && strcmp(g->pkt, "OK"))
            continue; /* console output */
        if (!strcmp(g->pkt, "OK"))
            return 0;
        if (g->plen == 0)
            return odp_fail(err, ODP_EPROTO, "the GDB stub does not support monitor commands (qRcmd)");
        return odp_fail(err, ODP_EIO, "monitor %s: %s", cmd, g->pkt);
    }
    return rc ? rc : odp_fail(err, ODP_EPROTO, "monitor %s: endless output", cmd);
}

/* Checks the caller's deadline before an exchange and gives the exchange its own time (EXCHANGE_S). */
static int begin(gdb_probe *g, double *deadline, odp_err *err)
{
    if (g->broken)
        return odp_fail(err, ODP_EIO, "the GDB connection was lost in the middle of an exchange; reopen the probe");
    double now = odp_now();
    if (now >= *deadline)
        return odp_fail(err, ODP_ETIMEDOUT, "deadline passed before the GDB exchange");
    if (*deadline < now + EXCHANGE_S)
        *deadline = now + EXCHANGE_S;
    return 0;
}

static int end(gdb_probe *g, int rc, odp_err *err)
{
    /* an E reply is an answer; a timeout, cancel or protocol error halfway leaves the stream out of step */
    if (rc && !(rc == ODP_EIO && strstr(err->msg, "the GDB stub cannot")) && !strstr(err->msg, "monitor"))
        g->broken = 1;
    return rc;
}

static int gdb_read(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    gdb_probe *g = (gdb_probe *)p;
    int rc = begin(g, &deadline, err);
    return rc ? rc : end(g, stopped(g, do_read, addr, buf, n, deadline, err), err);
}

static int gdb_write(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err)
{
    gdb_probe *g = (gdb_probe *)p;
    int rc = begin(g, &deadline, err);
    return rc ? rc : end(g, stopped(g, do_write, addr, (void *)buf, n, deadline, err), err);
}

static int gdb_halt(odp_probe *p, double deadline, odp_err *err)
{
    gdb_probe *g = (gdb_probe *)p;
    int rc = begin(g, &deadline, err);
    return rc ? rc : g->running ? end(g, stop_target(g, deadline, err), err) : 0;
}

static int gdb_go(odp_probe *p, double deadline, odp_err *err)
{
    gdb_probe *g = (gdb_probe *)p;
    int rc = begin(g, &deadline, err);
    return rc ? rc : g->running ? 0 : end(g, continue_target(g, deadline, err), err);
}

static int gdb_reset(odp_probe *p, double deadline, odp_err *err)
{
    gdb_probe *g = (gdb_probe *)p;
    int rc0 = begin(g, &deadline, err);
    if (rc0)
        return rc0;
    /* QEMU: "system_reset"; JLinkGDBServer/OpenOCD: "reset" (tried when the first is refused) */
    odp_err first;
    int rc = stopped(g, do_monitor, 0, "system_reset", 0, deadline, &first);
    if (rc == 0)
        return 0;
    rc = stopped(g, do_monitor, 0, "reset", 0, deadline, err);
    if (rc)
        odp_fail(err, err->code, "reset: monitor system_reset: %s; monitor reset: %s", first.msg, err->msg);
    return rc;
}

static void gdb_close(odp_probe *p)
{
    gdb_probe *g = (gdb_probe *)p;
    if (g->fd >= 0) {
        odp_err ignored;
        if (!g->running && !g->broken) /* leave the target running, as found */
            continue_target(g, odp_deadline(0.5), &ignored);
        close(g->fd);
    }
    free(g);
}

odp_probe *odp_probe_gdb_open(const char *address, double deadline, odp_err *err)
{
    static const odp_probe_ops ops = {"gdb", gdb_read, gdb_write, gdb_halt, gdb_go, gdb_reset, gdb_close};
    gdb_probe *g = calloc(1, sizeof *g);
    if (!g) {
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    g->base.ops = &ops;
    g->base.refs = 1;
    g->fd = odp_tcp_connect(address, deadline, err);
    if (g->fd < 0) {
        free(g);
        return NULL;
    }
    /* Stubs stop the target when a debugger attaches; ask why, then let it run (access stops it briefly). */
    int rc = send_packet(g, "?", 1, deadline, err);
    if (!rc)
        rc = recv_packet(g, deadline, err);
    if (!rc && !is_stop_reply(g))
        rc = odp_fail(err, ODP_EPROTO, "%s: unexpected reply to '?': %.40s", address, g->pkt);
    if (!rc)
        rc = continue_target(g, deadline, err);
    if (rc) {
        close(g->fd);
        free(g);
        return NULL;
    }
    return &g->base;
}
