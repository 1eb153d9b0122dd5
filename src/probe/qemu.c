/* qemu backend: the guest's DDR is a shared file (memory-backend-file,share=on) mapped here, so memory
 * access never stops the guest (like J-Link background access); QMP stop/cont/system_reset stand in for
 * SWD halt/go/reset. Accesses outside the mapped window fail: ITCM/DTCM are not in the file. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../stream/stream.h"
#include "../util/wait.h"
#include "probe.h"

typedef struct {
    odp_probe base;
    uint8_t *mem;
    size_t size;
    uint32_t addr;
    int qmp;         /* -1 without QMP */
    char line[4096]; /* QMP read buffer */
    size_t have;
    double alive_at; /* when QEMU was last seen running (its QMP connection open) */
} qemu_probe;

/* Memory access goes through the shared file, which outlives a QEMU that died (killed, crashed): reads would
 * go on returning the last RAM it had, and an RTT wait would last until its deadline. So every access checks,
 * at most every ALIVE_EVERY seconds, that QEMU still holds its end of the QMP connection: TCP_INFO says
 * CLOSE_WAIT once the kernel closed a dead QEMU's socket (no read, so QMP events stay queued). */
#define ALIVE_EVERY 0.2

static int alive(qemu_probe *q, odp_err *err)
{
    if (q->qmp < 0)
        return 0;
    double now = odp_now();
    if (now - q->alive_at < ALIVE_EVERY)
        return 0;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(q->qmp, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
        (ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_CLOSE))
        return odp_fail(err, ODP_ENODEV, "QEMU is gone (it closed its QMP connection): the board died");
    q->alive_at = now;
    return 0;
}

static int in_window(qemu_probe *q, uint32_t addr, size_t n, odp_err *err)
{
    if (addr < q->addr || (uint64_t)addr - q->addr + n > q->size)
        return odp_fail(err, ODP_EIO, "0x%08x+%zu is outside the shared memory window 0x%08x+0x%zx", addr, n,
                        q->addr, q->size);
    return 0;
}

static int qemu_read(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    (void)deadline;
    qemu_probe *q = (qemu_probe *)p;
    int rc = in_window(q, addr, n, err);
    if (!rc)
        rc = alive(q, err);
    if (rc)
        return rc;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    memcpy(buf, q->mem + (addr - q->addr), n);
    return 0;
}

static int qemu_write(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err)
{
    (void)deadline;
    qemu_probe *q = (qemu_probe *)p;
    int rc = in_window(q, addr, n, err);
    if (!rc)
        rc = alive(q, err);
    if (rc)
        return rc;
    memcpy(q->mem + (addr - q->addr), buf, n);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return 0;
}

/* Reads one QMP line (a JSON object). */
static int qmp_line(qemu_probe *q, char *out, size_t len, double deadline, odp_err *err)
{
    for (;;) {
        char *nl = memchr(q->line, '\n', q->have);
        if (nl) {
            size_t k = (size_t)(nl - q->line) + 1;
            size_t c = k < len ? k : len - 1;
            memcpy(out, q->line, c);
            out[c] = 0;
            memmove(q->line, q->line + k, q->have - k);
            q->have -= k;
            return 0;
        }
        if (q->have == sizeof q->line)
            q->have = 0; /* an absurdly long line (an event with a huge payload): drop it */
        ssize_t r = odp_fd_read(q->qmp, q->line + q->have, sizeof q->line - q->have, deadline, err);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return odp_fail(err, ODP_EIO, "QMP connection closed by QEMU");
        q->have += (size_t)r;
    }
}

static int qmp_cmd(qemu_probe *q, const char *cmd, double deadline, odp_err *err)
{
    if (q->qmp < 0)
        return odp_fail(err, ODP_ENODEV, "no QMP address given: halt/go/reset need qmp=\"host:port\"");
    char msg[256], line[4096];
    /* like the gdb backend: an exchange once started gets its own time, so no late reply is left behind */
    if (odp_now() >= deadline)
        return odp_fail(err, ODP_ETIMEDOUT, "deadline passed before QMP %s", cmd);
    if (deadline < odp_now() + 3.0)
        deadline = odp_now() + 3.0;
    int n = snprintf(msg, sizeof msg, "{\"execute\":\"%s\"}\r\n", cmd);
    ssize_t w = odp_fd_write(q->qmp, msg, (size_t)n, deadline, err);
    if (w < 0)
        return (int)w;
    for (;;) {
        int rc = qmp_line(q, line, sizeof line, deadline, err);
        if (rc)
            return rc;
        if (strstr(line, "\"return\""))
            return 0;
        if (strstr(line, "\"error\""))
            return odp_fail(err, ODP_EPROTO, "QMP %s: %.300s", cmd, line);
        /* events (RESET, STOP, RESUME) are skipped */
    }
}

static int qemu_halt(odp_probe *p, double d, odp_err *e) { return qmp_cmd((qemu_probe *)p, "stop", d, e); }
static int qemu_go(odp_probe *p, double d, odp_err *e) { return qmp_cmd((qemu_probe *)p, "cont", d, e); }
static int qemu_reset(odp_probe *p, double d, odp_err *e)
{
    return qmp_cmd((qemu_probe *)p, "system_reset", d, e);
}

static void qemu_close(odp_probe *p)
{
    qemu_probe *q = (qemu_probe *)p;
    if (q->mem)
        munmap(q->mem, q->size);
    if (q->qmp >= 0)
        close(q->qmp);
    free(q);
}

odp_probe *odp_probe_qemu_open(const char *shm, uint32_t base, const char *qmp, double deadline, odp_err *err)
{
    static const odp_probe_ops ops = {"qemu", qemu_read, qemu_write, qemu_halt, qemu_go, qemu_reset, qemu_close};
    qemu_probe *q = calloc(1, sizeof *q);
    if (!q) {
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    q->base.ops = &ops;
    q->base.refs = 1;
    q->addr = base;
    q->qmp = -1;
    int fd = open(shm, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s (QEMU's shared memory file)", shm);
        goto fail;
    }
    if (fstat(fd, &st) < 0 || st.st_size <= 0) {
        odp_fail(err, ODP_EIO, "%s is empty: is QEMU running with memory-backend-file,share=on?", shm);
        close(fd);
        goto fail;
    }
    q->size = (size_t)st.st_size;
    if ((uint64_t)base + q->size > 0x100000000ULL)
        q->size = (size_t)(0x100000000ULL - base);
    q->mem = mmap(NULL, q->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (q->mem == MAP_FAILED) {
        q->mem = NULL;
        odp_fail_errno(err, ODP_EIO, errno, "mmap %s", shm);
        goto fail;
    }
    if (qmp) {
        q->qmp = odp_tcp_connect(qmp, deadline, err);
        if (q->qmp < 0)
            goto fail;
        char line[4096];
        if (qmp_line(q, line, sizeof line, deadline, err))
            goto fail;
        if (!strstr(line, "\"QMP\"")) {
            odp_fail(err, ODP_EPROTO, "%s did not greet like QMP", qmp);
            goto fail;
        }
        if (qmp_cmd(q, "qmp_capabilities", deadline, err))
            goto fail;
    }
    return &q->base;
fail:
    qemu_close(&q->base);
    return NULL;
}
