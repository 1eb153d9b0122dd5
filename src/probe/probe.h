/* One memory-access interface for debug probes: read, write, halt, go, reset (and run), each with a deadline.
 * Backends: jlink (SEGGER's DLL, loaded with dlopen in a helper process per J-Link), gdb (GDB remote protocol over TCP), qemu (QEMU's DDR
 * mapped from its shared file + QMP). RTT (src/rtt) is written once above this. */
#ifndef ODP_PROBE_H
#define ODP_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "../net/tcp.h" /* odp_tcp_connect for the gdb, QMP and telnet ports */
#include "../util/err.h"

typedef struct odp_probe odp_probe;

typedef struct {
    const char *kind;
    int (*read)(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err);
    int (*write)(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err);
    int (*halt)(odp_probe *p, double deadline, odp_err *err);
    int (*go)(odp_probe *p, double deadline, odp_err *err);
    /* Resets the core; it may be left halted (odp_probe_reset then runs it). */
    int (*reset)(odp_probe *p, double deadline, odp_err *err);
    void (*close)(odp_probe *p);
} odp_probe_ops;

#define ODP_PROBE_MAX_SCRUB 8

/* Backends embed this first. */
struct odp_probe {
    const odp_probe_ops *ops;
    int refs;
    unsigned resets; /* incremented by every odp_probe_reset: RTT re-finds its block when it changes */
    /* RTT control blocks attached through this probe: their IDs are cleared (by RTT's scrub hook, while the
     * core is halted) just before a reset, so that after it an ID can only come from the re-initialised
     * firmware, never from RAM that survived the reset. */
    uint32_t scrub[ODP_PROBE_MAX_SCRUB];
    int nscrub;
    int (*scrub_fn)(odp_probe *p, const uint32_t *addrs, int n, double deadline, odp_err *err);
};

int odp_probe_read(odp_probe *p, uint32_t addr, void *buf, size_t n, double deadline, odp_err *err);
int odp_probe_write(odp_probe *p, uint32_t addr, const void *buf, size_t n, double deadline, odp_err *err);
int odp_probe_halt(odp_probe *p, double deadline, odp_err *err);
int odp_probe_go(odp_probe *p, double deadline, odp_err *err);
/* halt, clear the scrub addresses (scrub_fn), reset, go. */
int odp_probe_reset(odp_probe *p, double deadline, odp_err *err);
void odp_probe_add_scrub(odp_probe *p, uint32_t addr,
                         int (*fn)(odp_probe *p, const uint32_t *addrs, int n, double deadline, odp_err *err));
void odp_probe_retain(odp_probe *p);
void odp_probe_release(odp_probe *p); /* closes at the last reference */

/* Backends. */
/* shm: path of QEMU's memory-backend-file; base: guest address of its offset 0; qmp: "host:port" or NULL. */
odp_probe *odp_probe_qemu_open(const char *shm, uint32_t base, const char *qmp, double deadline, odp_err *err);
/* address: "host:port" of a GDB remote stub (QEMU -gdb, JLinkGDBServer, OpenOCD, pyOCD). */
odp_probe *odp_probe_gdb_open(const char *address, double deadline, odp_err *err);
/* lib: path of libjlinkarm.so, or NULL (ODP_JLINK_LIB, then /opt/SEGGER/JLink*\/libjlinkarm.so*).
 * serial: pick the USB J-Link with that serial number; ip: reach one through J-Link Remote Server at "host" or
 * "host:port" (the DLL's JLINKARM_SelectIP; port 0 = its default, 19020). At most one of them.
 * The DLL is never loaded into odp: each open starts a helper process (odp re-executed, `odp --jlink-helper`)
 * that owns it (one probe per process is all the DLL serves) and answers one request per call over a
 * socketpair (docs/jlink-helper.md). A call waits for its reply with odp_wait (a fiber yields meanwhile); one
 * whose reply misses the deadline (at least 1 s once sent) or is cancelled kills the helper, and every later
 * call on the probe fails with "reopen the probe". Closing ends the helper (JLINKARM_Close first). */
odp_probe *odp_probe_jlink_open(const char *lib, const char *device, int speed_khz, const char *serial,
                                const char *ip, double deadline, odp_err *err);
/* The same with env: NULL, or "NAME=VALUE" strings (NULL-terminated) added to the helper's environment only:
 * the test DLL (tests/twin/jlinkarm_twin.c) finds its twin in ODP_TWIN_STATE, one per J-Link process. */
odp_probe *odp_probe_jlink_open_env(const char *lib, const char *device, int speed_khz, const char *serial,
                                    const char *ip, const char *const *env, double deadline, odp_err *err);
/* `odp --jlink-helper PPID` (src/main.c, before any Lua): serves one DLL on fds 0/1 until its input closes. */
int odp_jlink_helper_main(int argc, char **argv);
/* The library the jlink backend would load (for hints): fills path, returns 0 or ODP_ENOTFOUND. */
int odp_jlink_find_lib(const char *lib, char *path, size_t len, odp_err *err);

#endif
