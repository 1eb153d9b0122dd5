/* jlink backend: SEGGER's libjlinkarm.so, loaded with dlopen at run time (never linked: it is proprietary and
 * often absent). Call sequence from docs/sources.md §4. The DLL's calls block inside the DLL; deadlines are checked
 * between calls only. Memory reads use the DLL's background access (the core keeps running). */
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

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

odp_probe *odp_probe_jlink_open(const char *lib, const char *device, int speed_khz, const char *serial,
                                const char *ip, double deadline, odp_err *err)
{
    (void)deadline;
    static const odp_probe_ops ops = {"jlink", jl_read, jl_write, jl_halt, jl_go, jl_reset, jl_close};
    char path[4096];
    if (odp_jlink_find_lib(lib, path, sizeof path, err))
        return NULL;
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
