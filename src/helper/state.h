/* A device-state snapshot read in-process: /proc, /sys and /etc files read directly, getprop and dumpsys (Android)
 * through one child each, written in the line format lua/odp/target/device_state.lua parses (one parser for the
 * shell script of the fallback path, the board's helper and the host):
 *   @v PATH FIRST-LINE        (at most 256 bytes)
 *   @f PATH \n BYTES \n @e    (a file's first bytes)
 *   @c NAME \n BYTES \n @e    (a command's output)
 * Shared by the board's helper (tools/odp-rusage.c --serve) and odp's host target (src/l_helper.c). */
#ifndef ODP_HELPER_STATE_H
#define ODP_HELPER_STATE_H

#include <stddef.h>

#include "../util/buf.h"

/* Runs argv (argv[0] a path) with stdin from /dev/null, stderr discarded, and appends at most max bytes of its
 * stdout to out (the rest read and dropped). 0, or -1 when it could not run. */
typedef int (*odp_state_cmd_fn)(void *ctx, const char *const argv[], size_t max, odp_buf *out);

typedef struct {
    const char *root;      /* stands in for / ("" on a real device; tests serve recorded boards' trees) */
    const char *cpu_files; /* per-CPU files under /sys/devices/system/cpu/cpuN/, space-separated */
    const char *props;     /* Android properties kept from getprop, '|'-separated */
    odp_state_cmd_fn run;
    void *ctx;
} odp_state_opts;

/* Appends the snapshot to out. -1 only when out of memory. */
int odp_state_gather(const odp_state_opts *o, odp_buf *out);

/* Appends the leases of the odps on a shared board (docs/devices.md "A shared board") in the line format
 * lua/odp/target/shell.lua's others_of reads: "now SECONDS", then for each <remote_dir>/.odp/runs/NAME/lease
 * (names in byte order, at most 256; a name with a space or a control byte is left out: it would not read back
 * as one word) "lease MTIME-OF-THE-DIRECTORY NAME FIRST-LINE-OF-THE-LEASE[ waiting]" (at most 256 bytes of
 * it; " waiting" when NAME/waiting exists, --exclusive). Whole lines only, within out's limit. -1 only when out
 * of memory. */
int odp_leases_gather(const char *remote_dir, odp_buf *out);

#endif
