/* The device services odp uses (shell, exec, sync: push, pull, stat), written once over a byte stream.
 * A service's stream comes from a link: a direct adb connection (conn.c: OPEN/WRTE/OKAY/CLSE over USB or
 * TCP) or Google's adb server (server.c: host:transport, then the service's bytes on the socket). */
#ifndef ODP_ADB_SERVICES_H
#define ODP_ADB_SERVICES_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "../stream/stream.h"
#include "../util/buf.h"
#include "../util/err.h"

/* Bytes from the device, as they arrive; non-zero (with e set) stops the operation. */
typedef int (*adb_data_fn)(void *ud, const uint8_t *p, size_t n, odp_err *e);

/* One open service: a byte stream in both directions. */
struct adb_svc {
    void *ctx;
    size_t chunk; /* the most bytes one write takes (the adb payload limit on a direct connection) */
    /* Sends n <= chunk bytes; whatever arrives meanwhile goes to on_data (NULL: discarded). */
    int (*write)(void *ctx, const uint8_t *p, size_t n, adb_data_fn on_data, void *ud, double deadline,
                 odp_err *e);
    /* Waits for bytes and hands them to on_data: 0, 1 when the device ended the stream, or a negative code. */
    int (*read)(void *ctx, adb_data_fn on_data, void *ud, double deadline, odp_err *e);
    /* Ends the service (the device kills a command still running) and frees ctx; waits briefly at most. */
    void (*close)(void *ctx);
    uint8_t *wbuf; /* small writes gathered into one (services.c) */
    size_t wlen;
};

/* Where services are opened: a direct connection or the adb server, with the device's banner. */
/* What a direct connection carried (adb messages, header and payload): round_trips counts turnarounds, a
 * message in after messages out since the last one in (odp waited on the device: a request and its answer, each
 * WRTE's OKAY); tests/c/delay_relay counts the same on the wire. */
struct adb_traffic {
    unsigned long long round_trips, bytes_up, bytes_down;
};

struct adb_link {
    void *ctx;
    /* NULL through the adb server (its link to the device is not odp's to count) */
    void (*traffic)(void *ctx, struct adb_traffic *out);
    int (*open)(void *ctx, const char *service, struct adb_svc *s, double deadline, odp_err *e);
    /* The link is lost for good (a direct connection whose framing broke): only a new one helps. */
    int (*broken)(void *ctx);
    void (*close)(void *ctx);
    struct adb_banner banner; /* state, model, features */
    struct adb_shell_stream *streams; /* long-lived streams open on it: ended when the link closes */
};

void adb_link_close(struct adb_link *l);

enum adb_event {
    ADB_EV_AUTH_PROMPT, /* the public key was offered: the user must tap Allow on the device */
    ADB_EV_PROGRESS,    /* push/pull: done bytes of total */
};
typedef void (*adb_event_fn)(void *ud, enum adb_event ev, uint64_t done, uint64_t total);

/* Output of one command; out/err are odp_bufs (their .limit caps what is kept, 0 = ADB_OUTPUT_LIMIT). */
#define ADB_OUTPUT_LIMIT (64u * 1024u * 1024u)
struct adb_shell_result {
    int status;   /* exit status, -1 when the device could not tell */
    int v2;       /* ran over shell protocol v2 (separate stderr) */
    int aborted;  /* on_output asked to stop: the stream was closed, adbd killed the command */
    odp_buf out, err;
};
/* Output as it arrives (stream 1 stdout, 2 stderr); non-zero stops the command. */
typedef int (*adb_output_fn)(void *ctx, int stream, const char *data, size_t n);
/* Runs `cmd` with /bin/sh on the device. stdin may be NULL. Without shell_v2, stderr is
 * merged into stdout, the status comes from an appended `printf` sentinel, and on_output sees stdout
 * once the command has ended. */
int adb_shell(struct adb_link *l, const char *cmd, const uint8_t *in, size_t in_len, adb_output_fn on_output,
              void *ctx, struct adb_shell_result *r, double deadline, odp_err *e);

/* A long-lived `shell,v2,raw:` command as an odp_stream: its stdout read, its stdin written (the resident helper's
 * channel, docs/helper-protocol.md); odp_stream_diag gives its stderr, the first 4 KiB. Needs the device's
 * shell_v2 (EPROTO without it: plain shell cannot close stdin). Closing the stream closes stdin and ends the
 * service (adbd kills a command still running); closing the link first leaves the stream dead (EIO). */
int adb_shell_stream_open(struct adb_link *l, const char *cmd, double deadline, odp_stream **out, odp_err *e);

int adb_push(struct adb_link *l, const char *local, const char *remote, uint32_t mode, double deadline,
             adb_event_fn progress, void *ud, odp_err *e);
int adb_pull(struct adb_link *l, const char *remote, const char *local, double deadline, adb_event_fn progress,
             void *ud, odp_err *e);
/* 0 with *st filled (st->error = errno on the device, e.g. 2 for a missing file), or -1. */
int adb_stat(struct adb_link *l, const char *remote, struct adb_sync_stat *st, double deadline, odp_err *e);

#endif
