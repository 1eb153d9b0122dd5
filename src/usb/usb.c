/* The one USB enumeration; see usb.h. */
#include "usb.h"

#include <stdio.h>
#include <string.h>

static void read_string(libusb_device_handle *h, uint8_t idx, char *out, size_t cap)
{
    out[0] = 0;
    if (idx && libusb_get_string_descriptor_ascii(h, idx, (unsigned char *)out, (int)cap) < 0)
        out[0] = 0;
}

int odp_usb_each(libusb_context *ctx, int vid, int (*fn)(void *ud, odp_usb_dev *d), void *ud, odp_err *err)
{
    libusb_context *own = NULL;
    if (!ctx && libusb_init(&own) < 0)
        return odp_fail(err, ODP_ENODEV, "libusb could not start (no /dev/bus/usb?)");
    libusb_device **list;
    ssize_t n = libusb_get_device_list(ctx ? ctx : own, &list);
    if (n < 0) {
        if (own)
            libusb_exit(own);
        return odp_fail(err, ODP_EIO, "libusb: %s", libusb_error_name((int)n));
    }
    for (ssize_t i = 0; i < n; i++) {
        struct libusb_device_descriptor dd;
        if (libusb_get_device_descriptor(list[i], &dd) < 0 || (vid >= 0 && dd.idVendor != vid))
            continue;
        odp_usb_dev d;
        memset(&d, 0, sizeof d);
        d.vid = dd.idVendor;
        d.pid = dd.idProduct;
        d.bus = libusb_get_bus_number(list[i]);
        d.address = libusb_get_device_address(list[i]);
        d.dev = list[i];
        d.open_rc = libusb_open(list[i], &d.h);
        if (d.open_rc == 0) {
            d.access = 1;
            read_string(d.h, dd.iSerialNumber, d.serial, sizeof d.serial);
            read_string(d.h, dd.iProduct, d.product, sizeof d.product);
        } else {
            d.h = NULL;
            snprintf(d.open_error, sizeof d.open_error, "%s", libusb_error_name(d.open_rc));
        }
        int stop = fn(ud, &d);
        if (d.h)
            libusb_close(d.h);
        if (stop)
            break;
    }
    libusb_free_device_list(list, 1);
    if (own)
        libusb_exit(own);
    return 0;
}
