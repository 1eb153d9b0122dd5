/* Google's adb server as a link (services.h): its host protocol on a TCP socket. A request is "%04x" and
 * its text; the reply is "OKAY" (then, for queries, "%04x" and text) or "FAIL", "%04x" and a message.
 * host:version, host:devices-l and host-serial:SERIAL:features are queries; host:transport:SERIAL switches
 * the socket to the device, and the next request names a device service (shell,v2:..., sync:, exec:...)
 * whose bytes then flow on the socket as they would on a direct adb stream. One socket per service: the
 * server keeps holding the phone's USB interface, and other adb users (Android Studio) keep working. */
#ifndef ODP_ADB_SERVER_H
#define ODP_ADB_SERVER_H

#include <stddef.h>

#include "proto.h"
#include "services.h"
#include "../util/err.h"

struct adb_server_addr {
    char host[256];
    int port;
};
#define ADB_SERVER_DEFAULT_PORT 5037

/* "tcp:PORT" or "tcp:HOST:PORT" (ADB_SERVER_SOCKET's forms; HOST defaults to default_host). 0, or -1 with e. */
int adb_server_addr_parse(const char *spec, const char *default_host, struct adb_server_addr *a, odp_err *e);

/* host:version: the server's protocol version, or a negative code: ODP_ENODEV when nothing listens there,
 * ODP_EPROTO when what listens is not an adb server or speaks a version odp cannot use. */
int adb_server_version(const struct adb_server_addr *a, double deadline, odp_err *e);

/* host:devices-l: the count of devices filled (<= max) or a negative code. */
int adb_server_devices(const struct adb_server_addr *a, struct adb_host_device *out, int max, double deadline,
                       odp_err *e);

struct adb_server_opts {
    const char *serial;   /* NULL: the only device */
    double auth_deadline; /* how long an unauthorized device is given to be allowed (absolute) */
    adb_event_fn on_event;
    void *ud;
};
/* Chooses the device, waits while it is unauthorized, reads its features: a link whose services go through
 * the server. serial_out receives the device's serial. */
int adb_server_link(const struct adb_server_addr *a, const struct adb_server_opts *o, double deadline,
                    struct adb_link *l, char *serial_out, size_t cap, odp_err *e);

#endif
