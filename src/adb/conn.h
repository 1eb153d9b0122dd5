/* An adb connection to one device, as the host: CNXN/AUTH, streams in OKAY lock-step,
 * and the operations odp needs (shell, push, pull, stat). Transport-agnostic: USB and
 * TCP implement struct adb_transport. Blocking calls take an absolute deadline
 * (util/wait.h: odp_now() seconds). C never prints: progress and prompts are events. */
#ifndef ODP_ADB_CONN_H
#define ODP_ADB_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "proto.h"
#include "../util/buf.h"
#include "../util/err.h"

struct adb_transport {
    void *ctx;
    /* Send one message: the header, then the payload (USB: separate transfers, ZLP rule). */
    int (*send)(void *ctx, const uint8_t hdr[ADB_HDR_SIZE], const uint8_t *payload, size_t len,
                double deadline, odp_err *e);
    /* Read exactly n bytes. */
    int (*recv)(void *ctx, uint8_t *buf, size_t n, double deadline, odp_err *e);
    void (*close)(void *ctx);
};

enum adb_event {
    ADB_EV_AUTH_PROMPT, /* the public key was offered: the user must tap Allow on the device */
    ADB_EV_PROGRESS,    /* push/pull: done bytes of total */
};
typedef void (*adb_event_fn)(void *ud, enum adb_event ev, uint64_t done, uint64_t total);

struct adb_conn_opts {
    EVP_PKEY **keys; /* offered in order, then keys[0]'s public key */
    int nkeys;
    const char *key_comment; /* "user@host" after the public key */
    double auth_deadline;    /* how long the user has to tap Allow (absolute) */
    adb_event_fn on_event;
    void *ud;
};

struct adb_conn;

/* Takes ownership of the transport (closed by adb_conn_close, also on failure). */
struct adb_conn *adb_conn_open(struct adb_transport *t, const struct adb_conn_opts *o, double deadline,
                               odp_err *e);
void adb_conn_close(struct adb_conn *c);
const struct adb_banner *adb_conn_banner(const struct adb_conn *c);
uint32_t adb_conn_maxdata(const struct adb_conn *c);
uint32_t adb_conn_version(const struct adb_conn *c);
/* The transport failed or the framing is lost: only a new connection helps. */
int adb_conn_broken(const struct adb_conn *c);

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
int adb_conn_shell(struct adb_conn *c, const char *cmd, const uint8_t *in, size_t in_len,
                   adb_output_fn on_output, void *ctx, struct adb_shell_result *r, double deadline, odp_err *e);

int adb_conn_push(struct adb_conn *c, const char *local, const char *remote, uint32_t mode, double deadline,
                  adb_event_fn progress, void *ud, odp_err *e);
int adb_conn_pull(struct adb_conn *c, const char *remote, const char *local, double deadline,
                  adb_event_fn progress, void *ud, odp_err *e);
/* 0 with *st filled (st->error = errno on the device, e.g. 2 for a missing file), or -1. */
int adb_conn_stat(struct adb_conn *c, const char *remote, struct adb_sync_stat *st, double deadline,
                  odp_err *e);

#endif
