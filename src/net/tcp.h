/* TCP connections with a deadline: host name resolution and connect both wait in odp_wait(), so a timeout
 * or Ctrl-C ends them. getaddrinfo() itself cannot be interrupted, so it runs on a helper thread that
 * reports through a pipe; a lookup given up at the deadline finishes (and frees itself) in the background.
 * Numeric addresses and localhost never start a thread. The one connect for ssh, adb over TCP and the probes. */
#ifndef ODP_NET_TCP_H
#define ODP_NET_TCP_H

#include "../util/err.h"

/* Connects to host (name, IPv4 or IPv6 address) and port, trying each address in turn. Returns a connected
 * non-blocking, close-on-exec socket with TCP_NODELAY, or -1 with err: ENOTFOUND (no such host),
 * ENODEV (connection refused), ETIMEDOUT, ECANCELED, EIO (other). */
int odp_tcp_connect_to(const char *host, int port, double deadline, odp_err *err);

/* The same for "host:port" or "[v6]:port". */
int odp_tcp_connect(const char *address, double deadline, odp_err *err);

#endif
