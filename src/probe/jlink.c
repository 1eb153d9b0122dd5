/* jlink backend. SEGGER's libjlinkarm.so serves one probe per process (global state) and its calls block inside
 * the DLL, so odp never loads it itself: each J-Link gets a helper process, odp re-executed as
 * `odp --jlink-helper PPID` (src/main.c), which dlopens the DLL (never linked: it is proprietary and often
 * absent) and serves framed requests on a socketpair (jlink_proto.h, docs/jlink-helper.md). odp's side waits
 * for each reply with odp_wait and the caller's deadline: on a fiber other boards run meanwhile, and a call the
 * DLL never returns from is ended by killing the helper. Call sequence from docs/sources.md §4. Memory reads
 * use the DLL's background access (the core keeps running). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proc/proc.h"
#include "../stream/stream.h"
#include "../util/fiber.h"
#include "../util/wait.h"
#include "jlink_proto.h"
#include "probe.h"

extern char **environ;

typedef struct {
    odp_probe base;
    void *lib;
    const char *(*OpenEx)(void *log, void *err);
    void (*Close)(void);
    int (*ExecCommand)(const char *cmd, char *err, int len);
    int (*TIF_Select)(int tif);
    void (*SetSpeed)(unsigned khz);
    int (*Connect)(void);
    int (*Reset)(void);
    void (*Go)(void);
    char (*Halt)(void);
    int (*ReadMemEx)(uint32_t addr, uint32_t n, void *buf, uint32_t width);
    int (*WriteMemEx)(uint32_t addr, uint32_t n, const void *buf, uint32_t width);
    int (*SelectByUSBSN)(uint32_t sn);
    char (*SelectIP)(const char *host, int port);
    int open;
} jlink_probe;

int odp_jlink_find_lib(const char *lib, char *path, size_t len, odp_err *err)
{
    if (!lib || !*lib)
        lib = getenv("ODP_JLINK_LIB");
    if (lib && *lib) {
        if (access(lib, R_OK))
            return odp_fail(err, ODP_ENOTFOUND, "J-Link library %s not found", lib);
        snprintf(path, len, "%s", lib);
        return 0;
    }
    static const char *const pats[] = {"/opt/SEGGER/JLink/libjlinkarm.so*", "/opt/SEGGER/JLink*/libjlinkarm.so*",
                                       "/usr/lib/libjlinkarm.so*", "/usr/local/lib/libjlinkarm.so*"};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        glob_t g;
        if (glob(pats[i], 0, NULL, &g) == 0 && g.gl_pathc) {
            snprintf(path, len, "%s", g.gl_pathv[g.gl_pathc - 1]); /* sorted: the newest version last */
            globfree(&g);
            return 0;
        }
        globfree(&g);
    }
    return odp_fail(err, ODP_ENOTFOUND,
                    "libjlinkarm.so not found: install SEGGER's J-Link Software (/opt/SEGGER/JLink) or set "
                    "ODP_JLINK_LIB / lib=");
}

static int jl_read(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    (void)deadline;
    jlink_probe *j = (jlink_probe *)p;
    int r = j->ReadMemEx(addr, (uint32_t)n, buf, 0);
    if (r < 0 || (size_t)r != n)
        return odp_fail(err, ODP_EIO, "J-Link cannot read 0x%08x+%zu (%d)", addr, n, r);
    return 0;
}

static int jl_write(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err)
{
    (void)deadline;
    jlink_probe *j = (jlink_probe *)p;
    int r = j->WriteMemEx(addr, (uint32_t)n, buf, 0);
    if (r < 0 || (size_t)r != n)
        return odp_fail(err, ODP_EIO, "J-Link cannot write 0x%08x+%zu (%d)", addr, n, r);
    return 0;
}

static int jl_halt(odp_probe *p, double deadline, odp_err *err)
{
    (void)deadline;
    jlink_probe *j = (jlink_probe *)p;
    if (j->Halt()) /* returns nonzero on error */
        return odp_fail(err, ODP_EIO, "J-Link could not halt the core");
    return 0;
}

static int jl_go(odp_probe *p, double deadline, odp_err *err)
{
    (void)deadline, (void)err;
    ((jlink_probe *)p)->Go();
    return 0;
}

static int jl_reset(odp_probe *p, double deadline, odp_err *err)
{
    (void)deadline;
    int r = ((jlink_probe *)p)->Reset(); /* leaves the core halted: odp_probe_reset runs Go */
    if (r < 0)
        return odp_fail(err, ODP_EIO, "J-Link reset failed (%d)", r);
    return 0;
}

static void jl_close(odp_probe *p)
{
    jlink_probe *j = (jlink_probe *)p;
    if (j->open && j->Close)
        j->Close();
    if (j->lib)
        dlclose(j->lib);
    free(j);
}

#define SYM(field, name, required)                                                                            \
    do {                                                                                                      \
        *(void **)&j->field = dlsym(j->lib, name);                                                            \
        if (!j->field && required) {                                                                          \
            odp_fail(err, ODP_EPROTO, "%s does not export %s: not a J-Link DLL?", path, name);                 \
            goto fail;                                                                                        \
        }                                                                                                     \
    } while (0)

/* The DLL in this process (the helper's side): path is the library's resolved path. */
static odp_probe *jlink_dll_open(const char *path, const char *device, int speed_khz, const char *serial,
                                 const char *ip, odp_err *err)
{
    static const odp_probe_ops ops = {"jlink-dll", jl_read, jl_write, jl_halt, jl_go, jl_reset, jl_close};
    jlink_probe *j = calloc(1, sizeof *j);
    if (!j) {
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    j->base.ops = &ops;
    j->base.refs = 1;
    j->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!j->lib) {
        odp_fail(err, ODP_EIO, "dlopen %s: %s", path, dlerror());
        goto fail;
    }
    SYM(OpenEx, "JLINKARM_OpenEx", 1);
    SYM(Close, "JLINKARM_Close", 1);
    SYM(ExecCommand, "JLINKARM_ExecCommand", 1);
    SYM(TIF_Select, "JLINKARM_TIF_Select", 1);
    SYM(SetSpeed, "JLINKARM_SetSpeed", 1);
    SYM(Connect, "JLINKARM_Connect", 1);
    SYM(Reset, "JLINKARM_Reset", 1);
    SYM(Go, "JLINKARM_Go", 1);
    SYM(Halt, "JLINKARM_Halt", 1);
    SYM(ReadMemEx, "JLINKARM_ReadMemEx", 1);
    SYM(WriteMemEx, "JLINKARM_WriteMemEx", 1);
    SYM(SelectByUSBSN, "JLINKARM_EMU_SelectByUSBSN", 0);
    if (serial && *serial) {
        if (!j->SelectByUSBSN) {
            odp_fail(err, ODP_EPROTO, "%s cannot select a probe by serial number", path);
            goto fail;
        }
        if (j->SelectByUSBSN((uint32_t)strtoul(serial, NULL, 10)) < 0) {
            odp_fail(err, ODP_ENODEV, "no J-Link with serial number %s", serial);
            goto fail;
        }
    }
    SYM(SelectIP, "JLINKARM_SelectIP", 0);
    if (ip && *ip) {
        char host[256];
        int port = 0;
        const char *colon = strrchr(ip, ':');
        size_t n = colon && !strchr(colon, ']') ? (size_t)(colon - ip) : strlen(ip);
        if (colon && !strchr(colon, ']'))
            port = atoi(colon + 1);
        if (n == 0 || n >= sizeof host || port < 0 || port > 65535) {
            odp_fail(err, ODP_ENOTFOUND, "J-Link Remote Server address '%s': give HOST or HOST:PORT", ip);
            goto fail;
        }
        memcpy(host, ip, n);
        host[n] = 0;
        if (!j->SelectIP) {
            odp_fail(err, ODP_EPROTO, "%s cannot select a probe by IP (no JLINKARM_SelectIP)", path);
            goto fail;
        }
        if (j->SelectIP(host, port)) { /* the DLL returns 1 when it cannot reach the server */
            odp_fail(err, ODP_ENODEV, "no J-Link Remote Server at %s", ip);
            goto fail;
        }
    }
    const char *e = j->OpenEx(NULL, NULL);
    if (e) {
        odp_fail(err, ODP_ENODEV, "J-Link: %s", e);
        goto fail;
    }
    j->open = 1;
    char cmd[300], ebuf[256] = "";
    if (device && *device) {
        snprintf(cmd, sizeof cmd, "Device = %s", device);
        j->ExecCommand(cmd, ebuf, sizeof ebuf);
        if (ebuf[0]) {
            odp_fail(err, ODP_ENODEV, "J-Link: %s: %s", cmd, ebuf);
            goto fail;
        }
    }
    j->TIF_Select(1); /* SWD */
    j->SetSpeed((unsigned)(speed_khz > 0 ? speed_khz : 4000));
    int c = j->Connect();
    if (c < 0) {
        odp_fail(err, ODP_ENODEV, "J-Link could not connect to %s (%d): check power, wiring, device name",
                 device && *device ? device : "the target", c);
        goto fail;
    }
    return &j->base;
fail:
    jl_close(&j->base);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ the helper */

/* Writes all of b to fd 1 (blocking: the helper has nothing else to do). */
static int send_all(const odp_buf *b)
{
    for (size_t off = 0; off < b->len;) {
        ssize_t k = write(1, b->data + off, b->len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

/* One request: the DLL call it names, its reply appended to out. */
static void serve(odp_probe **p, const odp_frame *f, odp_buf *out, uint8_t *scratch)
{
    static odp_jl_request req; /* 5 KiB of strings: kept off the stack */
    odp_err err = {0};
    int rc = odp_jl_request_decode(f, &req, &err);
    if (rc == 0 && req.type == ODP_JL_OPEN) {
        if (req.proto != ODP_JLINK_PROTO)
            rc = odp_fail(&err, ODP_EPROTO, "the J-Link helper speaks protocol %u; odp asked for %u",
                          ODP_JLINK_PROTO, req.proto);
        else if (*p)
            rc = odp_fail(&err, ODP_EPROTO, "the J-Link helper is already open");
        else if (!(*p = jlink_dll_open(req.lib, req.device, (int)req.speed_khz, req.serial, req.ip, &err)))
            rc = err.code;
    } else if (rc == 0 && !*p) {
        rc = odp_fail(&err, ODP_EPROTO, "J-Link request '%c' before open", req.type);
    } else if (rc == 0) {
        switch (req.type) {
        case ODP_JL_READ: rc = jl_read(*p, req.addr, scratch, req.n, 0, &err); break;
        case ODP_JL_WRITE: rc = jl_write(*p, req.addr, req.data, req.n, 0, &err); break;
        case ODP_JL_HALT: rc = jl_halt(*p, 0, &err); break;
        case ODP_JL_GO: rc = jl_go(*p, 0, &err); break;
        default: rc = jl_reset(*p, 0, &err); break; /* the raw DLL reset: odp_probe_reset's scrub runs in odp */
        }
    }
    if (rc) {
        odp_jl_error_reply(out, &err);
        return;
    }
    size_t at = odp_frame_begin(out, ODP_JL_OK);
    if (req.type == ODP_JL_OPEN)
        odp_jl_add_u32(out, ODP_JLINK_PROTO);
    else if (req.type == ODP_JL_READ)
        odp_frame_add(out, scratch, req.n);
    odp_frame_end(out, at);
}

int odp_jlink_helper_main(int argc, char **argv)
{
    /* never outlive odp: killed when it dies, and gone at once if it died before this line */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (argc < 3 || getppid() != (pid_t)atol(argv[2]))
        return 1;
    static uint8_t scratch[ODP_JLINK_CHUNK];
    char in[65536];
    odp_frame_dec d;
    odp_frame_dec_init(&d);
    odp_buf out = {0};
    odp_probe *p = NULL;
    for (;;) {
        odp_frame f;
        int r;
        while ((r = odp_frame_next(&d, &f)) == 1) {
            out.len = 0;
            serve(&p, &f, &out, scratch);
            if (send_all(&out))
                goto done;
        }
        if (r < 0) { /* a malformed stream is lost for good: say why, then end */
            odp_err err;
            odp_fail(&err, ODP_EPROTO, "J-Link helper: %s", d.error);
            out.len = 0;
            odp_jl_error_reply(&out, &err);
            send_all(&out);
            break;
        }
        ssize_t k = read(0, in, sizeof in);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || odp_frame_dec_feed(&d, in, (size_t)k))
            break; /* odp closed the pipe (or died): JLINKARM_Close, then exit */
    }
done:
    if (p)
        jl_close(p);
    odp_frame_dec_free(&d);
    odp_buf_free(&out);
    return 0;
}

/* ------------------------------------------------------------------------------------------ odp's side */

/* An exchange once sent gets at least this long: a deadline nearly over when the call began (an RTT poll at
 * its end) must not kill a helper in the middle of an ordinary sub-millisecond call. */
#define MIN_EXCHANGE_S 1.0
/* How long closing waits for the helper's JLINKARM_Close before killing it. */
#define CLOSE_GRACE_S 5.0

typedef struct {
    odp_probe base;
    pid_t pid; /* 0 once the helper is gone */
    int fd, pidfd;
    odp_frame_dec dec;
    odp_buf req;
    char name[360];  /* "J-Link 600112233", "J-Link at HOST:PORT" or "J-Link": messages name it */
    char gone[300];  /* why the helper is gone, for the calls after */
    char in[65536];
} jlink_client;

static void describe_status(int st, char *out, size_t len)
{
    if (WIFSIGNALED(st))
        snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(out, len, "exited with status %d", WEXITSTATUS(st));
}

/* Ends the helper: waits up to grace seconds for it to exit by itself (its input is closed first), then
 * SIGKILLs it; reaps it either way. Writes how it ended into status. */
static void stop_helper(jlink_client *j, double grace, char *status, size_t len)
{
    if (j->fd >= 0) {
        close(j->fd);
        j->fd = -1;
    }
    if (!j->pid)
        return;
    int st = 0;
    pid_t r = waitpid(j->pid, &st, WNOHANG);
    if (r == 0 && grace > 0 && j->pidfd >= 0) {
        /* not parked on a fiber: close may run from a __gc, which cannot yield */
        odp_fiber *held = odp_fiber_hold();
        struct pollfd pfd = {j->pidfd, POLLIN, 0};
        odp_wait(&pfd, 1, odp_now() + grace, &(odp_err){0});
        odp_fiber_unhold(held);
        r = waitpid(j->pid, &st, WNOHANG);
    }
    if (r == 0) {
        kill(j->pid, SIGKILL);
        while ((r = waitpid(j->pid, &st, 0)) < 0 && errno == EINTR) {
        }
    }
    if (status)
        describe_status(st, status, len);
    odp_child_untrack(j->pid);
    j->pid = 0;
    if (j->pidfd >= 0) {
        close(j->pidfd);
        j->pidfd = -1;
    }
}

/* The helper is lost in the middle of `what`: stop it, remember why, fail with one line. */
static int lost(jlink_client *j, const char *what, odp_code code, const char *why, double grace, odp_err *err)
{
    char status[200];
    long pid = (long)j->pid;
    stop_helper(j, grace, status, sizeof status);
    snprintf(j->gone, sizeof j->gone, "%.60s: %.200s", what, why); /* why may be err's own message */
    return odp_fail(err, code, "%s: %s; its helper (pid %ld) %s", j->name, j->gone, pid,
                    code == ODP_EIO ? status : "was killed");
}

/* Sends the request in j->req and waits for its reply: 0 with the reply's field in data/n, or the failure. */
static int exchange(jlink_client *j, const char *what, double deadline, const uint8_t **data, uint32_t *n,
                    odp_err *err)
{
    if (!j->pid)
        return odp_fail(err, ODP_EIO, "%s: %s: its helper was stopped (%s); reopen the probe", j->name, what,
                        j->gone);
    if (odp_now() >= deadline)
        return odp_fail(err, ODP_ETIMEDOUT, "%s: %s: the deadline passed before it was sent", j->name, what);
    if (deadline < odp_now() + MIN_EXCHANGE_S)
        deadline = odp_now() + MIN_EXCHANGE_S;
    odp_err werr;
    ssize_t w = odp_fd_write(j->fd, j->req.data, j->req.len, deadline, &werr);
    for (;;) {
        if (w == ODP_ETIMEDOUT || w == ODP_ECANCELED)
            return lost(j, what, (odp_code)w, w == ODP_ETIMEDOUT ? "no reply before the deadline" : "cancelled", 0, err);
        if (w < 0)
            return lost(j, what, ODP_EIO, "the helper ended in the middle of the call", 2.0, err);
        odp_frame f;
        int r = odp_frame_next(&j->dec, &f);
        if (r == 1) {
            int rc = odp_jl_reply_decode(&f, data, n, err);
            if (rc && f.type != ODP_JL_ERROR)
                return lost(j, what, ODP_EPROTO, err->msg, 0, err);
            return rc; /* an error reply is the DLL's own (its message as in-process): the helper stays usable */
        }
        if (r < 0)
            return lost(j, what, ODP_EPROTO, j->dec.error, 0, err);
        w = odp_fd_read(j->fd, j->in, sizeof j->in, deadline, &werr);
        if (w == 0)
            w = ODP_EIO; /* end of stream: the helper died */
        else if (w > 0 && odp_frame_dec_feed(&j->dec, j->in, (size_t)w))
            return lost(j, what, ODP_EIO, "out of memory", 0, err);
    }
}

/* A read (into in) or a write (from out) of n bytes at addr, one request per chunk of at most a frame's worth. */
static int transfer(odp_probe *p, uint32_t addr, uint8_t *in, const uint8_t *out, size_t n, double deadline,
                    odp_err *err)
{
    jlink_client *j = (jlink_client *)p;
    for (size_t off = 0; off < n;) {
        uint32_t k = n - off > ODP_JLINK_CHUNK ? ODP_JLINK_CHUNK : (uint32_t)(n - off), got;
        const uint8_t *data;
        char what[64];
        snprintf(what, sizeof what, "%s 0x%08x+%u", in ? "read" : "write", addr + (uint32_t)off, k);
        j->req.len = 0;
        size_t at = odp_frame_begin(&j->req, in ? ODP_JL_READ : ODP_JL_WRITE);
        odp_jl_add_u32(&j->req, addr + (uint32_t)off);
        if (in)
            odp_jl_add_u32(&j->req, k);
        else
            odp_frame_add(&j->req, out + off, k);
        odp_frame_end(&j->req, at);
        int rc = exchange(j, what, deadline, &data, &got, err);
        if (rc)
            return rc;
        if (in && got != k)
            return lost(j, what, ODP_EPROTO, "the reply has the wrong size", 0, err);
        if (in)
            memcpy(in + off, data, k);
        off += k;
    }
    return 0;
}

static int jc_read(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err)
{
    return transfer(p, addr, buf, NULL, n, deadline, err);
}

static int jc_write(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err)
{
    return transfer(p, addr, NULL, buf, n, deadline, err);
}

static int control(odp_probe *p, uint8_t type, const char *what, double deadline, odp_err *err)
{
    jlink_client *j = (jlink_client *)p;
    const uint8_t *data;
    uint32_t n;
    j->req.len = 0;
    odp_frame_end(&j->req, odp_frame_begin(&j->req, type));
    return exchange(j, what, deadline, &data, &n, err);
}

static int jc_halt(odp_probe *p, double deadline, odp_err *err) { return control(p, ODP_JL_HALT, "halt", deadline, err); }
static int jc_go(odp_probe *p, double deadline, odp_err *err) { return control(p, ODP_JL_GO, "go", deadline, err); }
static int jc_reset(odp_probe *p, double deadline, odp_err *err)
{
    return control(p, ODP_JL_RESET, "reset", deadline, err);
}

static void jc_close(odp_probe *p)
{
    jlink_client *j = (jlink_client *)p;
    stop_helper(j, CLOSE_GRACE_S, NULL, 0); /* its input closes: it calls JLINKARM_Close and exits */
    odp_frame_dec_free(&j->dec);
    odp_buf_free(&j->req);
    free(j);
}

/* The environment of the helper: odp's, with env's NAME=VALUE entries added or replacing odp's own. A NULL
 * return (out of memory) is reported by the caller. */
static char **helper_environ(const char *const *env)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (env && env[m])
        m++;
    char **out = calloc(n + m + 1, sizeof *out);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (size_t e = 0; e < m && !replaced; e++) {
            const char *eq = strchr(env[e], '=');
            size_t key = eq ? (size_t)(eq - env[e]) + 1 : strlen(env[e]);
            replaced = strncmp(environ[i], env[e], key) == 0;
        }
        if (!replaced)
            out[k++] = environ[i];
    }
    for (size_t e = 0; e < m; e++)
        out[k++] = (char *)env[e];
    return out;
}

/* Starts `odp --jlink-helper PPID` on the child's end of a socketpair (its fd 0 and 1; stderr is odp's). */
static int spawn_helper(jlink_client *j, const char *const *env, odp_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return odp_fail_errno(err, ODP_EIO, errno, "socketpair for the J-Link helper");
    char ppid[24];
    snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
    /* /proc/self/exe is this very binary even if its file was replaced since; the path odp was started from
     * (AT_EXECFN) where /proc is not mounted */
    const char *exe[2] = {"/proc/self/exe", (const char *)(uintptr_t)getauxval(AT_EXECFN)};
    char **envp = env ? helper_environ(env) : environ;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    odp_spawnattr_child(&attr); /* a group of its own: the terminal's Ctrl-C goes to odp, which decides what to stop */
    int rc = envp ? ENOENT : ENOMEM;
    char self[4096]; /* argv[0]: odp's own path, for ps */
    ssize_t sl = readlink(exe[0], self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    for (int i = 0; i < 2 && envp && rc && exe[i]; i++) {
        char *argv[] = {i == 0 && *self ? self : (char *)exe[i], "--jlink-helper", ppid, NULL};
        rc = posix_spawn(&j->pid, exe[i], &fa, &attr, argv, envp);
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (envp && envp != environ)
        free(envp);
    close(sv[1]);
    if (rc) {
        j->pid = 0;
        close(sv[0]);
        return odp_fail_errno(err, ODP_EIO, rc, "cannot start the J-Link helper (odp --jlink-helper)");
    }
    odp_child_track(j->pid); /* waited for by its closer, not by odp_reap_orphans */
    j->fd = sv[0];
    fcntl(j->fd, F_SETFL, O_NONBLOCK);
    j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
    if (j->pidfd >= 0)
        fcntl(j->pidfd, F_SETFD, FD_CLOEXEC);
    return 0;
}

odp_probe *odp_probe_jlink_open_env(const char *lib, const char *device, int speed_khz, const char *serial,
                                    const char *ip, const char *const *env, double deadline, odp_err *err)
{
    static const odp_probe_ops ops = {"jlink", jc_read, jc_write, jc_halt, jc_go, jc_reset, jc_close};
    char path[4096];
    if (odp_jlink_find_lib(lib, path, sizeof path, err))
        return NULL;
    jlink_client *j = calloc(1, sizeof *j);
    if (!j) {
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    j->base.ops = &ops;
    j->base.refs = 1;
    j->fd = j->pidfd = -1;
    odp_frame_dec_init(&j->dec);
    if (serial && *serial)
        snprintf(j->name, sizeof j->name, "J-Link %s", serial);
    else if (ip && *ip)
        snprintf(j->name, sizeof j->name, "J-Link at %s", ip);
    else
        snprintf(j->name, sizeof j->name, "J-Link");
    if (spawn_helper(j, env, err)) {
        jc_close(&j->base);
        return NULL;
    }
    size_t at = odp_frame_begin(&j->req, ODP_JL_OPEN);
    odp_jl_add_u32(&j->req, ODP_JLINK_PROTO);
    odp_frame_add_str(&j->req, path);
    odp_frame_add_str(&j->req, device ? device : "");
    odp_jl_add_u32(&j->req, (uint32_t)(speed_khz > 0 ? speed_khz : 4000));
    odp_frame_add_str(&j->req, serial ? serial : "");
    odp_frame_add_str(&j->req, ip ? ip : "");
    const uint8_t *data;
    uint32_t n;
    if (odp_frame_end(&j->req, at)) {
        odp_fail(err, ODP_EIO, "J-Link open: options too long");
        goto fail;
    }
    if (exchange(j, "open", deadline, &data, &n, err))
        goto fail;
    if (n != 4 || odp_jl_u32(data) != ODP_JLINK_PROTO) {
        odp_fail(err, ODP_EPROTO, "%s: the J-Link helper speaks protocol %u; odp speaks %u", j->name,
                 n == 4 ? odp_jl_u32(data) : 0, ODP_JLINK_PROTO);
        goto fail;
    }
    return &j->base;
fail:
    jc_close(&j->base);
    return NULL;
}

odp_probe *odp_probe_jlink_open(const char *lib, const char *device, int speed_khz, const char *serial,
                                const char *ip, double deadline, odp_err *err)
{
    return odp_probe_jlink_open_env(lib, device, speed_khz, serial, ip, NULL, deadline, err);
}
