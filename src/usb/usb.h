/* The one USB enumeration (libusb): every device with its ids, place, descriptor strings and whether this user
 * may open it. Debug probes (`odp devices`, probe.usb_list) and adb (listing and opening a phone) walk the bus
 * through it. */
#ifndef ODP_USB_H
#define ODP_USB_H

#include <libusb.h>

#include "../util/err.h"

typedef struct {
    int vid, pid, bus, address;
    int access;                /* the device could be opened */
    int open_rc;               /* libusb_open's result (LIBUSB_ERROR_ACCESS: no permission, udev rules) */
    char serial[128], product[128], open_error[64];
    libusb_device *dev;        /* valid during the callback */
    libusb_device_handle *h;   /* open during the callback when access; a callback that keeps it sets h = NULL */
} odp_usb_dev;

/* Calls fn for every USB device of vendor vid (-1: all) until fn returns non-zero. ctx: the libusb context the
 * handles belong to (NULL: a temporary one, so fn must not keep h). 0, or a negative code (no USB at all). */
int odp_usb_each(libusb_context *ctx, int vid, int (*fn)(void *ud, odp_usb_dev *d), void *ud, odp_err *err);

#endif
