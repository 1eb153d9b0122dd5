/* Sessions through a running OpenSSH ControlMaster (ssh_config ControlMaster/ControlPath/ControlPersist): its
 * control socket speaks OpenSSH's mux protocol (PROTOCOL.mux in OpenSSH's sources, version 4), and a new session
 * there is one channel on the master's connection: no TCP connect, key exchange or authentication, only the
 * channel's open and its exec on the link. The board's host key was checked by ssh when the master connected,
 * against the same known_hosts files (docs/devices.md, "Through ssh's ControlMaster").
 *
 * A session's stdin and stdout are one end of a socketpair whose other end the master gets (SCM_RIGHTS), its
 * stderr another's: odp reads and writes plain local sockets, and the master moves the bytes. */
#ifndef ODP_SSH_MUX_H
#define ODP_SSH_MUX_H

#include "../stream/stream.h"
#include "../util/err.h"
#include "ssh.h"

typedef struct odp_ssh_mux odp_ssh_mux;

/* A master at path: the path must be a socket owned by this user (another user's master would get this user's
 * session), and a master must answer there (its pid in *pid). ENODEV with why (no socket, not this user's, no
 * master listening, not a mux peer); ETIMEDOUT; ECANCELED. */
int odp_ssh_mux_open(const char *path, double deadline, odp_ssh_mux **out, long *pid, odp_err *err);
/* Removes path when it is a socket of this user's that nobody listens on (a master that was killed leaves one,
 * and ssh refuses to become a master over it), as ssh does before it becomes the master. 1 when removed. */
int odp_ssh_mux_clear_stale(const char *path);
/* Asks the master whether it still runs (a local exchange: nothing on the link). 0 and its pid, or ENODEV. */
int odp_ssh_mux_alive(odp_ssh_mux *m, double deadline, long *pid, odp_err *err);
/* The master's path, as given. */
const char *odp_ssh_mux_path(const odp_ssh_mux *m);
/* A session running command (through the board user's login shell, as an exec) as an odp_stream: its stdout read,
 * its stdin written; odp_stream_diag gives its stderr, the first 4 KiB. Closing the stream ends its stdin (the
 * master sends the channel's EOF after what was written) and lets go of the session without waiting. */
int odp_ssh_mux_channel_open(odp_ssh_mux *m, const char *command, double deadline, odp_stream **out, odp_err *err);
/* What this mux's sessions carried, counted at their sockets as odp_ssh_traffic counts the wire: a session's
 * open is one round trip (the master's channel open), its exec's answer ends another, then every read that
 * brings bytes after odp wrote some; bytes are the sessions' payload (the master adds SSH's framing on the wire);
 * connect_ms the local exchange with the master. */
void odp_ssh_mux_traffic_get(const odp_ssh_mux *m, odp_ssh_traffic *out);
/* Lets go of m; its open streams keep what they need. NULL is fine. */
void odp_ssh_mux_close(odp_ssh_mux *m);

#endif
