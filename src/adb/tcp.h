/* adb over TCP (`adb tcpip` devices, emulators): the same messages on a socket with TCP_NODELAY
 * (docs/sources.md §3: 49 ms -> 3 ms per round trip). */
#ifndef ODP_ADB_TCP_H
#define ODP_ADB_TCP_H

#include "../util/err.h"
#include "conn.h"

/* Connects to host:port before the deadline and fills *t. host is an address or a name. */
int adb_tcp_open(const char *host, int port, double deadline, struct adb_transport *t, odp_err *e);

#endif
