/* SEGGER RTT over the probe interface (src/probe): find the control block (ELF symbol, address, or a scan of
 * ranges), list channels, read up channels and write down channels with deadlines, as odp_streams.
 * Target memory is untrusted: every size, offset and pointer is checked, every loop is bounded, and a block
 * whose ID disappears (reset) or whose layout changes is re-found, never read stale. */
#ifndef ODP_RTT_H
#define ODP_RTT_H

#include <stdint.h>
#include <sys/types.h>

#include "../probe/probe.h"
#include "../stream/stream.h"

#define ODP_RTT_MAX_BUFFERS 16          /* per direction; SEGGER's default is 3 */
#define ODP_RTT_MAX_RING (16u << 20)    /* a larger SizeOfBuffer is corrupt */
#define ODP_RTT_MAX_SCAN (256u << 20)   /* bytes scanned over all ranges */
#define ODP_RTT_MAX_RANGES 16

typedef struct odp_rtt odp_rtt;

typedef struct {
    uint32_t start, size;
} odp_rtt_range;

typedef struct {
    int has_address;
    uint32_t address;
    int nranges;
    odp_rtt_range ranges[ODP_RTT_MAX_RANGES];
} odp_rtt_where;

typedef struct {
    char name[32];     /* "" when the name pointer is unreadable (e.g. in flash the probe cannot see) */
    int name_readable;
    uint32_t buffer, size, wr, rd, flags;
} odp_rtt_channel;

typedef struct {
    uint64_t bytes_up, bytes_down; /* moved by this host */
    uint64_t full_seen;            /* polls that found an up buffer full: in skip mode the target dropped data */
    uint64_t lost_on_reset;        /* unread up bytes discarded because the block went away (reset) */
    unsigned refinds;              /* times the block was found again after a reset or a change */
} odp_rtt_stats;

/* Finds the block (waiting for the firmware to write its ID until the deadline). Two IDs in the ranges is
 * ODP_EPROTO; none is ODP_ETIMEDOUT/ENOTFOUND. Retains the probe. */
int odp_rtt_attach(odp_probe *p, const odp_rtt_where *w, double deadline, odp_rtt **out, odp_err *err);
uint32_t odp_rtt_address(const odp_rtt *r);
/* Reads the descriptors now. up/down arrays hold ODP_RTT_MAX_BUFFERS entries. */
int odp_rtt_channels(odp_rtt *r, int *nup, odp_rtt_channel *up, int *ndown, odp_rtt_channel *down,
                     double deadline, odp_err *err);
/* Up channel ch -> buf: waits for at least one byte (polling with a short backoff through odp_wait). */
ssize_t odp_rtt_read(odp_rtt *r, int ch, void *buf, size_t n, double deadline, odp_err *err);
/* buf -> down channel ch: waits for room until everything is written. */
ssize_t odp_rtt_write(odp_rtt *r, int ch, const void *buf, size_t n, double deadline, odp_err *err);
void odp_rtt_get_stats(const odp_rtt *r, odp_rtt_stats *s);
/* A stream over up ch / down ch (retains r). */
odp_stream *odp_rtt_stream(odp_rtt *r, int ch, odp_err *err);
/* Marks r closed (streams then fail) and drops the caller's reference. */
void odp_rtt_close(odp_rtt *r);

/* Zeroes every RTT ID in w (the ranges scanned in bounded chunks, or the one address checked) so that the next
 * attach after a reset finds only the block the restarted firmware writes: RAM survives a reset. Call it with
 * the core halted. *cleared = IDs zeroed (also on failure, those before it). */
int odp_rtt_clear_ids(odp_probe *p, const odp_rtt_where *w, double deadline, int *cleared, odp_err *err);

/* Scans one memory image for the ID: returns the count of IDs found (first offset in *off). For tests/fuzz. */
int odp_rtt_scan_image(const uint8_t *mem, size_t n, size_t *off);

/* ELF32 symbol lookup (bounded reader): value of `name` in the .symtab of path. */
int odp_elf32_symbol(const char *path, const char *name, uint32_t *value, odp_err *err);

/* J-Link RTT telnet server (port 19021): banner check, optional `$$SEGGER_TELNET_ConfigStr=RTTCh;<n>$$`. */
odp_stream *odp_rtt_telnet_open(const char *address, int channel, double deadline, odp_err *err);

#endif
