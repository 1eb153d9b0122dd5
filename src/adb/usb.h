/* adb over USB with libusb: the interface with class ff/42/01 (any interface number), its first
 * bulk IN and OUT endpoints; header and payload as separate transfers; a zero-length packet after a
 * payload that is a non-zero multiple of the OUT endpoint's wMaxPacketSize, never after a header-only
 * message; reads of exactly 24 bytes, then exactly data_length. Transfers are asynchronous and wait
 * in odp_wait on libusb's file descriptors. */
#ifndef ODP_ADB_USB_H
#define ODP_ADB_USB_H

#include <stddef.h>

#include "../util/err.h"
#include "conn.h"

struct adb_usb_info {
    char serial[128];
    char product[128]; /* the USB product string (often the model) */
    char state[32];    /* "available", "busy" (claimed by another program), "no permissions" */
    char hint[256];    /* what to do about busy / no permissions */
    int bus, address;
};

/* Lists adb interfaces on USB. Returns the count (<= max) or a negative odp_code. */
int adb_usb_list(struct adb_usb_info *out, int max, odp_err *e);

/* Opens the adb interface of the device with this serial (NULL: the only one). Fills *t and the serial. */
int adb_usb_open(const char *serial, double deadline, struct adb_transport *t, char *serial_out, size_t cap,
                 odp_err *e);

/* The ZLP rule, exposed for tests: must a payload of len bytes be followed by a zero-length packet? */
int adb_usb_needs_zlp(size_t len, unsigned max_packet);

#endif
