/* USB listing of debug probes (J-Link: VID 0x1366) through libusb, for `odp devices`. */
#include <libusb.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

int odp_usb_list(int vid, int (*fn)(void *ctx, const odp_usb_info *d), void *ctx, odp_err *err)
{
    libusb_context *u;
    if (libusb_init(&u) < 0)
        return odp_fail(err, ODP_ENODEV, "libusb could not start (no /dev/bus/usb?)");
    libusb_device **list;
    ssize_t n = libusb_get_device_list(u, &list);
    if (n < 0) {
        libusb_exit(u);
        return odp_fail(err, ODP_EIO, "libusb: %s", libusb_error_name((int)n));
    }
    for (ssize_t i = 0; i < n; i++) {
        struct libusb_device_descriptor d;
        if (libusb_get_device_descriptor(list[i], &d) < 0 || (vid >= 0 && d.idVendor != vid))
            continue;
        odp_usb_info info = {.vid = d.idVendor, .pid = d.idProduct, .bus = libusb_get_bus_number(list[i]),
                             .address = libusb_get_device_address(list[i]), .access = 0};
        libusb_device_handle *h;
        int rc = libusb_open(list[i], &h);
        if (rc == 0) {
            info.access = 1;
            if (d.iSerialNumber)
                libusb_get_string_descriptor_ascii(h, d.iSerialNumber, (unsigned char *)info.serial,
                                                   sizeof info.serial);
            if (d.iProduct)
                libusb_get_string_descriptor_ascii(h, d.iProduct, (unsigned char *)info.product, sizeof info.product);
            libusb_close(h);
        } else {
            snprintf(info.open_error, sizeof info.open_error, "%s", libusb_error_name(rc));
        }
        if (fn(ctx, &info))
            break;
    }
    libusb_free_device_list(list, 1);
    libusb_exit(u);
    return 0;
}
