/* An adb connection to one device, as the host: CNXN/AUTH, streams in OKAY lock-step,
 * each one a service's byte stream for services.c (shell, push, pull, stat). Transport-agnostic: USB and
 * TCP implement struct adb_transport. Blocking calls take an absolute deadline
 * (util/wait.h: odp_now() seconds). C never prints: progress and prompts are events. */
#ifndef ODP_ADB_CONN_H
#define ODP_ADB_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "proto.h"
#include "services.h"
#include "../util/buf.h"
#include "../util/err.h"

struct adb_transport {
    void *ctx;
    /* Send one message: the header, then the payload (USB: separate transfers, ZLP rule). */
    int (*send)(void *ctx, const uint8_t hdr[ADB_HDR_SIZE], const uint8_t *payload, size_t len,
                double deadline, odp_err *e);
    /* Read exactly n bytes. ODP_ETIMEDOUT and ODP_ECANCELED mean none of the n was consumed (bytes that had
     * arrived are kept for the next call), so the caller may stop and read the same message later; a stop that
     * cannot keep them is another code (the framing is lost). */
    int (*recv)(void *ctx, uint8_t *buf, size_t n, double deadline, odp_err *e);
    void (*close)(void *ctx);
};

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

/* The connection as a link for services.h (adb_link_close closes the connection). */
void adb_conn_link(struct adb_conn *c, struct adb_link *l);

#endif
