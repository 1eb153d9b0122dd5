/* XMODEM over any odp_stream (serial port, RTT channel, pty, socket): send and receive, 128-byte (SOH) and
 * 1K (STX) blocks, CRC-16/CCITT or 8-bit checksum as the receiver asks (`C` or NAK), 0x1A padding, retries,
 * per-packet timeouts, CAN CAN both ways. Every wait goes through the stream's deadline (odp_wait). */
#ifndef ODP_XMODEM_H
#define ODP_XMODEM_H

#include <stddef.h>
#include <stdint.h>

#include "../stream/stream.h"
#include "../util/err.h"

typedef struct {
    uint64_t bytes;    /* send: file bytes sent; receive: bytes written (the last block's padding included) */
    uint64_t total;    /* send: file size; receive: 0 (XMODEM does not announce a size) */
    unsigned blocks;   /* blocks acknowledged */
    unsigned retries;  /* packets sent again (send) or NAKed (receive), summed over the transfer */
    int crc;           /* 1: CRC-16, 0: checksum */
} odp_xmodem_progress;

/* Called after every acknowledged block; a nonzero return cancels the transfer (CAN CAN, ODP_ECANCELED). */
typedef int (*odp_xmodem_progress_fn)(void *ctx, const odp_xmodem_progress *p);

typedef struct {
    int block_1k;         /* send: 1024-byte blocks (STX) while more than 896 bytes remain, then 128 */
    int checksum;         /* receive: ask with NAK (checksum) instead of `C` (CRC-16) */
    double timeout;       /* seconds to wait for each answer/packet before a retry (default 10) */
    double start_timeout; /* seconds to wait for the other side to start (default 60) */
    unsigned max_retries; /* consecutive failures of one packet before giving up (default 10) */
    uint64_t max_bytes;   /* receive: refuse more than this (0 = 4 GiB) */
    odp_xmodem_progress_fn progress;
    void *ctx;
} odp_xmodem_opts;

void odp_xmodem_opts_init(odp_xmodem_opts *o);

/* Sends n bytes produced by `source` (called with an offset and a length, fills buf, returns 0 or an odp_code).
 * The last block is padded with 0x1A. */
typedef int (*odp_xmodem_source_fn)(void *ctx, uint64_t off, void *buf, size_t n, odp_err *err);
int odp_xmodem_send(odp_stream *s, uint64_t n, odp_xmodem_source_fn source, void *src_ctx,
                    const odp_xmodem_opts *o, odp_xmodem_progress *res, odp_err *err);
/* Sends a file. */
int odp_xmodem_send_file(odp_stream *s, const char *path, const odp_xmodem_opts *o, odp_xmodem_progress *res,
                         odp_err *err);

/* Receives blocks into `sink` (data of each new block, in order; returns 0 or an odp_code). */
typedef int (*odp_xmodem_sink_fn)(void *ctx, const void *buf, size_t n, odp_err *err);
int odp_xmodem_receive(odp_stream *s, odp_xmodem_sink_fn sink, void *sink_ctx, const odp_xmodem_opts *o,
                       odp_xmodem_progress *res, odp_err *err);
/* Receives into path through a temporary file in the same directory, renamed only after EOT: a failed or
 * cancelled transfer leaves no file at path (and no temporary file). */
int odp_xmodem_receive_file(odp_stream *s, const char *path, const odp_xmodem_opts *o, odp_xmodem_progress *res,
                            odp_err *err);

/* CRC-16/CCITT (XMODEM: poly 0x1021, init 0). */
uint16_t odp_crc16_xmodem(const uint8_t *p, size_t n);

#endif
