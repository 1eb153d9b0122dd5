/* SSH sessions over libssh2 in non-blocking mode. Every EAGAIN waits in odp_wait() on the directions
 * libssh2 reports (libssh2_session_block_directions), with the call's deadline, so a timeout or Ctrl-C
 * ends any step: connect, handshake, auth, exec, SFTP. One session carries many execs and transfers. */
#ifndef ODP_SSH_H
#define ODP_SSH_H

#include <stddef.h>
#include <sys/types.h>

#include "../stream/stream.h"
#include "../util/buf.h"
#include "../util/err.h"

typedef struct odp_ssh odp_ssh;

typedef struct {
    const char *host;
    int port;                      /* 0 = 22 */
    const char *user;
    const char *identity;          /* private key file; when set, the only key tried */
    const char *passphrase;        /* for identity / keys; NULL = none */
    int use_agent;                 /* try ssh-agent when no identity is given */
    const char *agent_socket;      /* the agent's socket; NULL = $SSH_AUTH_SOCK */
    const char *const *keys;       /* NULL-terminated, tried after the agent (absent files skipped) */
    const char *known_hosts;       /* path; required; a new host key is added here */
    const char *const *known_hosts_also; /* NULL-terminated, also read (ssh_config's other UserKnownHostsFiles,
                                          * GlobalKnownHostsFile); NULL = none */
    const char *host_key_alias;    /* name to look the host key up under instead of host (ssh_config HostKeyAlias) */
    int accept_new;                /* unknown host key: add it to known_hosts instead of refusing */
    /* The transport, instead of a TCP connection to host:port (ssh_config ProxyCommand / ProxyJump): */
    const char *proxy_command;     /* run by /bin/sh; its stdin/stdout carry the session */
    odp_ssh *via;                  /* a direct-tcpip channel of this session to host:port carries the new one;
                                    * on success the new session owns via (and closes it with itself) */
    /* Keepalives (ServerAliveInterval/CountMax): a peer silent for interval * count_max seconds while odp
     * waits on it is lost (EIO). 0 = off. */
    int alive_interval, alive_count_max;
    double deadline;
} odp_ssh_opts;

/* Connects, verifies the host key and authenticates. EHOSTKEY: unknown (message has the SHA256
 * fingerprint and the --accept-new-host-key hint) or changed key; EAUTH: no key was accepted; EIO with the
 * ProxyCommand's stderr when it ended before the handshake; ENODEV when the jump host refuses the channel. */
int odp_ssh_connect(const odp_ssh_opts *opts, odp_ssh **out, odp_err *err);
/* The linked libssh2's version (at run time), and whether it signs RSA keys with rsa-sha2-256/512 (>= 1.11):
 * older ones sign only with SHA-1 ssh-rsa, which OpenSSH >= 8.8 refuses. */
const char *odp_ssh_libssh2_version(void);
int odp_ssh_rsa_sha2(void);
/* Disconnects (bounded wait) and frees. NULL is fine. */
void odp_ssh_close(odp_ssh *s);
/* "user@host:port", the host key's fingerprint. */
const char *odp_ssh_uri(const odp_ssh *s);
const char *odp_ssh_fingerprint(const odp_ssh *s);
/* NULL while the connection is up; once a call saw it drop (the socket closed or failed, keepalives went
 * unanswered), the message of that failure: the session is dead and its owner reconnects. */
const char *odp_ssh_lost(const odp_ssh *s);

/* What the session's own transport (its socket, ProxyCommand pipe or tunnel) carried since it connected:
 * round_trips counts turnarounds, a read that brought bytes after odp had sent some since the last bytes came
 * in (odp waited on the board: a request and its answer, the handshake's steps, a keepalive's reply);
 * bytes are the encrypted bytes on the wire, both ways; connect_ms is how long connecting took (TCP or
 * ProxyCommand, handshake, authentication). tests/c/delay_relay.c counts the same turnarounds on the wire. */
typedef struct {
    unsigned long long round_trips, bytes_up, bytes_down;
    double connect_ms;
} odp_ssh_traffic;
void odp_ssh_traffic_get(const odp_ssh *s, odp_ssh_traffic *out);

typedef struct {
    const char *command;           /* shell command line for the remote login shell */
    const char *stdin_data;        /* NULL = none (EOF at once) */
    size_t stdin_len;
    double deadline;
    size_t capture_limit;          /* 0 = keep everything */
    /* Each chunk as it arrives (1 stdout, 2 stderr); non-zero stops the run like a timeout. */
    int (*on_output)(void *ctx, int stream, const char *data, size_t n);
    void *ctx;
} odp_ssh_exec_opts;

typedef struct {
    int status;                    /* exit status; 0 when a signal ended the process */
    int signal;                    /* Linux signal number, 0 = none */
    char signal_name[32];          /* "TERM", "KILL", ... as the server named it */
    int timed_out, canceled, aborted;
    int killed_group;              /* the remote process group was sent TERM/KILL after a stop */
    long pgid;                     /* remote process group of the command, 0 if unknown */
    odp_buf out, err;
    double wall_s;
} odp_ssh_exec_result;

/* Runs command in a new channel. The remote login shell first reports its pid (sshd makes it a session
 * and process group leader) on a first stderr line that is stripped; on timeout, cancel or abort that
 * group is sent TERM and then KILL over a second channel, so nothing is left running on the board.
 * Returns 0 when the command ran (its exit is data), or a negative code (connection lost, ...). */
int odp_ssh_exec(odp_ssh *s, const odp_ssh_exec_opts *opts, odp_ssh_exec_result *r, odp_err *err);
void odp_ssh_exec_result_free(odp_ssh_exec_result *r);

/* A long-lived channel running one command as an odp_stream: its stdout read, its stdin written (the resident
 * helper's channel: docs/helper-protocol.md); odp_stream_diag gives its stderr, the first 4 KiB. Closing the
 * stream sends EOF first. Closing the session first leaves the stream dead (EIO), never dangling. */
int odp_ssh_channel_open(odp_ssh *s, const char *command, double deadline, odp_stream **out, odp_err *err);

/* Progress: bytes done of total (total -1 when unknown). Non-zero aborts the transfer (ECANCELED). */
typedef int (*odp_ssh_progress)(void *ctx, long long done, long long total);

/* SFTP upload to `<remote>.odp-part-<n>`, fsync, chmod mode (< 0: the local file's permission bits),
 * then renamed over remote. An interrupted upload never leaves a file at `remote`. */
int odp_ssh_put(odp_ssh *s, const char *local, const char *remote, int mode, double deadline,
                odp_ssh_progress progress, void *ctx, long long *bytes, odp_err *err);
/* SFTP download into a temporary file next to local, fsynced and renamed when complete. */
int odp_ssh_get(odp_ssh *s, const char *remote, const char *local, double deadline, odp_ssh_progress progress,
                void *ctx, long long *bytes, odp_err *err);

#endif
