/* adb USB transport over libusb; see usb.h. The bus is walked by the one USB enumeration (src/usb/).
 * Facts: docs/sources.md §3. */
#include "usb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libusb.h>

#include "../usb/usb.h"
#include "../util/wait.h"

#define ADB_CLASS 0xff
#define ADB_SUBCLASS 0x42
#define ADB_PROTOCOL 0x01
#define DOCS_HINT "see docs/devices.md, section Android"

typedef struct {
    libusb_context *ctx;
    libusb_device_handle *h;
    int iface;
    unsigned char ep_in, ep_out;
    unsigned max_packet;
    struct libusb_transfer *xfer;
} usb_ctx;

struct adb_ep {
    int iface;
    unsigned char in, out;
    unsigned max_packet;
};

int adb_usb_needs_zlp(size_t len, unsigned max_packet)
{
    return len > 0 && max_packet > 0 && len % max_packet == 0;
}

/* The adb interface of dev, if it has one: 0 and *ep filled, else -1. */
static int find_adb_interface(libusb_device *dev, struct adb_ep *ep)
{
    struct libusb_config_descriptor *cfg;
    if (libusb_get_active_config_descriptor(dev, &cfg) != 0 && libusb_get_config_descriptor(dev, 0, &cfg) != 0)
        return -1;
    int found = -1;
    for (int i = 0; i < cfg->bNumInterfaces && found < 0; i++) {
        const struct libusb_interface *itf = &cfg->interface[i];
        for (int a = 0; a < itf->num_altsetting && found < 0; a++) {
            const struct libusb_interface_descriptor *d = &itf->altsetting[a];
            if (d->bInterfaceClass != ADB_CLASS || d->bInterfaceSubClass != ADB_SUBCLASS ||
                d->bInterfaceProtocol != ADB_PROTOCOL)
                continue;
            ep->in = ep->out = 0;
            for (int e = 0; e < d->bNumEndpoints; e++) {
                const struct libusb_endpoint_descriptor *x = &d->endpoint[e];
                if ((x->bmAttributes & LIBUSB_TRANSFER_TYPE_MASK) != LIBUSB_TRANSFER_TYPE_BULK)
                    continue;
                if ((x->bEndpointAddress & LIBUSB_ENDPOINT_DIR_MASK) == LIBUSB_ENDPOINT_IN) {
                    if (!ep->in)
                        ep->in = x->bEndpointAddress;
                } else if (!ep->out) {
                    ep->out = x->bEndpointAddress;
                    ep->max_packet = x->wMaxPacketSize;
                }
            }
            if (ep->in && ep->out) {
                ep->iface = d->bInterfaceNumber;
                found = 0;
            }
        }
    }
    libusb_free_config_descriptor(cfg);
    return found;
}

static const char *busy_hint(void)
{
    return "another program holds the device's adb interface; when that is Google's adb server, odp goes "
           "through it: --adb auto (the default) or --adb server";
}

static const char *access_hint(void)
{
    return "no permission to open the USB device: install the udev rule for Android devices "
           "(Debian package android-sdk-platform-tools-common) and replug, " DOCS_HINT;
}

struct list_ctx {
    struct adb_usb_info *out;
    int max, count;
};

static int list_one(void *ud, odp_usb_dev *d)
{
    struct list_ctx *lc = ud;
    struct adb_ep ep;
    if (lc->count >= lc->max || find_adb_interface(d->dev, &ep) != 0)
        return 0;
    struct adb_usb_info *u = &lc->out[lc->count++];
    memset(u, 0, sizeof *u);
    u->bus = d->bus;
    u->address = d->address;
    if (d->open_rc == LIBUSB_ERROR_ACCESS) {
        snprintf(u->state, sizeof u->state, "no permissions");
        snprintf(u->hint, sizeof u->hint, "%s", access_hint());
        snprintf(u->serial, sizeof u->serial, "usb:%d-%d", u->bus, u->address);
        return 0;
    }
    if (!d->access) {
        snprintf(u->state, sizeof u->state, "offline");
        return 0;
    }
    snprintf(u->serial, sizeof u->serial, "%s", d->serial);
    snprintf(u->product, sizeof u->product, "%s", d->product);
    if (!u->serial[0])
        snprintf(u->serial, sizeof u->serial, "usb:%d-%d", u->bus, u->address);
    int rc = libusb_claim_interface(d->h, ep.iface);
    if (rc == LIBUSB_ERROR_BUSY) {
        snprintf(u->state, sizeof u->state, "busy");
        snprintf(u->hint, sizeof u->hint, "%s", busy_hint());
    } else {
        snprintf(u->state, sizeof u->state, "available");
        if (rc == 0)
            libusb_release_interface(d->h, ep.iface);
    }
    return 0;
}

int adb_usb_list(struct adb_usb_info *out, int max, odp_err *e)
{
    struct list_ctx lc = {out, max, 0};
    int rc = odp_usb_each(NULL, -1, list_one, &lc, e);
    return rc ? rc : lc.count;
}

static void LIBUSB_CALL transfer_done(struct libusb_transfer *x)
{
    *(int *)x->user_data = 1;
}

/* One bulk transfer, waiting in odp_wait on libusb's fds. Returns bytes moved or a negative code. */
static int bulk(usb_ctx *u, unsigned char ep, uint8_t *buf, int len, double deadline, odp_err *e)
{
    int done = 0;
    libusb_fill_bulk_transfer(u->xfer, u->h, ep, buf, len, transfer_done, &done, 0);
    int rc = libusb_submit_transfer(u->xfer);
    if (rc == LIBUSB_ERROR_NO_DEVICE)
        return odp_fail(e, ODP_ENODEV, "the USB device is gone (unplugged or rebooted)");
    if (rc != 0)
        return odp_fail(e, ODP_EIO, "USB transfer: %s", libusb_error_name(rc));
    int wait_rc = 0;
    while (!done) {
        const struct libusb_pollfd **pf = libusb_get_pollfds(u->ctx);
        struct pollfd fds[16];
        nfds_t n = 0;
        for (int i = 0; pf && pf[i] && n < 16; i++)
            fds[n++] = (struct pollfd){.fd = pf[i]->fd, .events = pf[i]->events};
        libusb_free_pollfds(pf);
        if (!wait_rc) {
            /* an fd that is always ready (usbfs reports POLLOUT for reapable URBs) must not outlive the deadline */
            wait_rc = odp_now() >= deadline ? odp_fail(e, ODP_ETIMEDOUT, "the USB device did not answer in time")
                                            : odp_wait(fds, n, deadline, e);
            if (wait_rc) {
                libusb_cancel_transfer(u->xfer);
                deadline = odp_now() + 1.0; /* the cancellation completes quickly */
            }
        } else {
            odp_err ignored;
            if (odp_now() >= deadline || odp_wait(fds, n, deadline, &ignored))
                break;
        }
        struct timeval zero = {0, 0};
        libusb_handle_events_timeout_completed(u->ctx, &zero, &done);
    }
    if (wait_rc)
        return wait_rc;
    switch (u->xfer->status) {
    case LIBUSB_TRANSFER_COMPLETED:
        return u->xfer->actual_length;
    case LIBUSB_TRANSFER_NO_DEVICE:
        return odp_fail(e, ODP_ENODEV, "the USB device is gone (unplugged or rebooted)");
    case LIBUSB_TRANSFER_OVERFLOW:
        return odp_fail(e, ODP_EPROTO, "the device sent more than the adb message announced");
    default:
        return odp_fail(e, ODP_EIO, "USB transfer failed (status %d)", u->xfer->status);
    }
}

static int usb_send(void *ctx, const uint8_t hdr[ADB_HDR_SIZE], const uint8_t *payload, size_t len,
                    double deadline, odp_err *e)
{
    usb_ctx *u = ctx;
    int rc = bulk(u, u->ep_out, (uint8_t *)hdr, ADB_HDR_SIZE, deadline, e);
    if (rc < 0)
        return rc;
    if (len) {
        rc = bulk(u, u->ep_out, (uint8_t *)payload, (int)len, deadline, e);
        if (rc < 0)
            return rc;
        if (adb_usb_needs_zlp(len, u->max_packet)) {
            static uint8_t none[1];
            rc = bulk(u, u->ep_out, none, 0, deadline, e);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int usb_recv(void *ctx, uint8_t *buf, size_t n, double deadline, odp_err *e)
{
    usb_ctx *u = ctx;
    size_t want = n;
    while (n) {
        int rc = bulk(u, u->ep_in, buf, (int)n, deadline, e);
        /* a bulk transfer cannot be put back: a stop after part of the read has lost the framing */
        if (rc < 0 && n < want && (e->code == ODP_ETIMEDOUT || e->code == ODP_ECANCELED))
            return odp_fail(e, ODP_EIO, "stopped %zu bytes into a %zu-byte adb read: the framing is lost",
                            want - n, want);
        if (rc < 0)
            return rc;
        buf += rc;
        n -= (size_t)rc;
    }
    return 0;
}

static void usb_close(void *ctx)
{
    usb_ctx *u = ctx;
    if (u->xfer)
        libusb_free_transfer(u->xfer);
    if (u->h) {
        libusb_release_interface(u->h, u->iface);
        libusb_close(u->h);
    }
    if (u->ctx)
        libusb_exit(u->ctx);
    free(u);
}

struct open_ctx {
    usb_ctx *u;
    const char *serial;
    char *serial_out;
    size_t cap;
    int matches, denied;
    char seen[512];
};

/* Keeps the handle of the first adb device that matches; counts the others. */
static int open_one(void *ud, odp_usb_dev *d)
{
    struct open_ctx *oc = ud;
    struct adb_ep ep;
    if (find_adb_interface(d->dev, &ep) != 0)
        return 0;
    if (d->open_rc == LIBUSB_ERROR_ACCESS) {
        oc->denied++;
        return 0;
    }
    if (!d->access || (oc->serial && strcmp(oc->serial, d->serial) != 0))
        return 0;
    oc->matches++;
    size_t l = strlen(oc->seen);
    snprintf(oc->seen + l, sizeof oc->seen - l, "%s%s", l ? ", " : "", d->serial);
    if (oc->u->h) /* a second candidate: the user must choose */
        return 0;
    oc->u->h = d->h;
    d->h = NULL;
    oc->u->iface = ep.iface;
    oc->u->ep_in = ep.in;
    oc->u->ep_out = ep.out;
    oc->u->max_packet = ep.max_packet;
    snprintf(oc->serial_out, oc->cap, "%s", d->serial);
    return 0;
}

int adb_usb_open(const char *serial, double deadline, struct adb_transport *t, char *serial_out, size_t cap,
                 odp_err *e)
{
    (void)deadline; /* enumeration and claiming do not block on the device */
    usb_ctx *u = calloc(1, sizeof *u);
    if (!u || libusb_init(&u->ctx) != 0) {
        free(u);
        return odp_fail(e, ODP_EIO, "libusb_init failed");
    }
    struct open_ctx oc = {u, serial, serial_out, cap, 0, 0, ""};
    int rc = odp_usb_each(u->ctx, -1, open_one, &oc, e);
    if (rc)
        goto fail;
    int matches = oc.matches, denied = oc.denied;
    const char *seen = oc.seen;
    if (matches > 1) {
        rc = odp_fail(e, ODP_ENODEV, "several adb devices on USB (%s): choose one with --serial", seen);
        goto fail;
    }
    if (!u->h) {
        if (denied)
            rc = odp_fail(e, ODP_EAUTH, "%s", access_hint());
        else if (serial)
            rc = odp_fail(e, ODP_ENODEV, "no adb device with serial %s on USB", serial);
        else
            rc = odp_fail(e, ODP_ENODEV, "no adb device on USB: plug the phone in and turn on USB debugging (%s)",
                          DOCS_HINT);
        goto fail;
    }
    libusb_set_auto_detach_kernel_driver(u->h, 1);
    int crc = libusb_claim_interface(u->h, u->iface);
    if (crc == LIBUSB_ERROR_BUSY) {
        libusb_close(u->h);
        u->h = NULL;
        rc = odp_fail(e, ODP_EBUSY, "%s", busy_hint());
        goto fail;
    }
    if (crc == LIBUSB_ERROR_ACCESS) {
        libusb_close(u->h);
        u->h = NULL;
        rc = odp_fail(e, ODP_EAUTH, "%s", access_hint());
        goto fail;
    }
    if (crc != 0) {
        libusb_close(u->h);
        u->h = NULL;
        rc = odp_fail(e, ODP_EIO, "claiming the adb interface: %s", libusb_error_name(crc));
        goto fail;
    }
    u->xfer = libusb_alloc_transfer(0);
    if (!u->xfer) {
        rc = odp_fail(e, ODP_EIO, "out of memory");
        goto fail;
    }
    t->ctx = u;
    t->send = usb_send;
    t->recv = usb_recv;
    t->close = usb_close;
    return 0;
fail:
    usb_close(u);
    return rc;
}
