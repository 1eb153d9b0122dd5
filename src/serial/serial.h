/* Serial ports: listing through libserialport (USB VID/PID, description), opening as an odp_stream.
 * libserialport 0.1.1 cannot open a pty (no sysfs entry, no modem lines: docs/sources.md §7), so a port that
 * libserialport refuses is opened with plain termios (ptys, ser2net-style ttys). */
#ifndef ODP_SERIAL_H
#define ODP_SERIAL_H

#include "../stream/stream.h"
#include "../util/err.h"

typedef struct {
    const char *name;         /* /dev/ttyACM0 */
    const char *description;  /* libserialport's description, or "" */
    const char *transport;    /* "usb", "native", "bluetooth", "unknown" */
    int vid, pid;             /* USB ids, -1 when not USB */
    const char *manufacturer, *product, *serial; /* USB strings, "" when unknown */
    int readable, writable;   /* access(2) for the current user: the "permission denied" hint */
} odp_serial_info;

/* Calls fn for each port libserialport finds; fn returning nonzero stops. Returns 0 or an odp_code. */
int odp_serial_list(int (*fn)(void *ctx, const odp_serial_info *p), void *ctx, odp_err *err);

/* Opens path at baud (8N1, raw, no flow control). *how is set to "libserialport" or "termios". */
odp_stream *odp_serial_open(const char *path, int baud, const char **how, odp_err *err);

#endif
