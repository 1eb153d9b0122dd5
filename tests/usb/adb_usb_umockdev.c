/* odp's libusb adb transport (src/adb/usb.c) against a USB device emulated with umockdev: unmodified libusb
 * enumerates it from a mocked sysfs, and an in-process ioctl handler answers usbdevfs SUBMITURB/REAPURB as an
 * adb device would (docs/sources.md §3). The device has a decoy ff/42/03 interface first, the adb ff/42/01
 * interface second. Asserts interface and endpoint selection, header and payload as separate transfers, the
 * zero-length-packet rule, read sizing, timeouts (with the URB discarded) and EBUSY. Run under umockdev-wrapper.
 * Prints TAP lines. */
#include <errno.h>
#include <glib.h>
#include <linux/ioctl.h>
#include <linux/usbdevice_fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <umockdev.h>

#include "adb/conn.h"
#include "usb/usb.h"
#include "adb/proto.h"
#include "adb/usb.h"
#include "util/wait.h"

#define EP_IN 0x82
#define EP_OUT 0x02
#define MAXLOG 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static GList *in_flight_in;   /* IN URBs waiting for device data */
static GList *done;           /* URBs ready to reap */
static GList *discarded;
static GQueue out_q = G_QUEUE_INIT; /* device -> host transfers (GBytes), one per bulk IN transfer */
static int mode_busy, mode_silent;
static int claimed = -1;
static int bad_endpoint;
/* what the host did: OUT transfer sizes (0 = ZLP) and IN request sizes */
static int out_log[MAXLOG], n_out;
static int in_req[MAXLOG], n_in;
/* device-side parser of host messages */
static uint8_t hdr[24];
static int want_payload = -1; /* -1: expecting a header */
static struct adb_hdr cur;
static int stdin_bytes;

static void queue_msg(uint32_t cmd, uint32_t a0, uint32_t a1, const void *data, uint32_t len)
{
    uint8_t h[24];
    adb_hdr_pack(h, cmd, a0, a1, data, len, cmd == ADB_CNXN);
    g_queue_push_tail(&out_q, g_bytes_new(h, 24));
    if (len)
        g_queue_push_tail(&out_q, g_bytes_new(data, len));
}

static void device_message(const struct adb_hdr *h, const uint8_t *p)
{
    if (h->cmd == ADB_CNXN) {
        if (mode_silent)
            return;
        static const char banner[] = "device::ro.product.model=UsbEmu;ro.product.name=usbemu;features=shell_v2";
        queue_msg(ADB_CNXN, ADB_VERSION, 4096, banner, sizeof banner - 1);
    } else if (h->cmd == ADB_OPEN) {
        stdin_bytes = 0;
        queue_msg(ADB_OKAY, 100 + h->arg0, h->arg0, NULL, 0);
    } else if (h->cmd == ADB_WRTE) {
        queue_msg(ADB_OKAY, h->arg1, h->arg0, NULL, 0);
        /* shell v2 from the host: stdin packets, then close-stdin */
        for (uint32_t off = 0; off + 5 <= h->len;) {
            uint32_t l = adb_le32(p + off + 1);
            if (p[off] == ADB_SHELL_STDIN)
                stdin_bytes += (int)l;
            if (p[off] == ADB_SHELL_CLOSE_STDIN) {
                char text[32];
                int n = snprintf(text, sizeof text, "n=%d\n", stdin_bytes);
                uint8_t out[64];
                adb_shell_pack_hdr(out, ADB_SHELL_STDOUT, (uint32_t)n);
                memcpy(out + 5, text, (size_t)n);
                adb_shell_pack_hdr(out + 5 + n, ADB_SHELL_EXIT, 1);
                out[10 + n] = 0;
                queue_msg(ADB_WRTE, h->arg1, h->arg0, out, (uint32_t)(11 + n));
                queue_msg(ADB_CLSE, h->arg1, h->arg0, NULL, 0);
            }
            off += 5 + l;
        }
    }
}

static void device_out(const uint8_t *p, int len)
{
    if (n_out < MAXLOG)
        out_log[n_out++] = len;
    if (len == 0)
        return; /* ZLP */
    if (want_payload < 0) {
        if (len != 24 || adb_hdr_parse(p, &cur, 1u << 20) != ADB_HDR_OK) {
            fprintf(stderr, "# device: bad header transfer of %d bytes\n", len);
            return;
        }
        memcpy(hdr, p, 24);
        if (cur.len == 0)
            device_message(&cur, NULL);
        else
            want_payload = (int)cur.len;
        return;
    }
    if (len != want_payload)
        fprintf(stderr, "# device: payload transfer of %d bytes, announced %d\n", len, want_payload);
    want_payload = -1;
    device_message(&cur, p);
}

/* Completes IN URBs with queued device transfers. Called with mu held. */
static void pump_in(void)
{
    while (in_flight_in && !g_queue_is_empty(&out_q)) {
        UMockdevIoctlData *urb_data = in_flight_in->data;
        in_flight_in = g_list_delete_link(in_flight_in, in_flight_in);
        struct usbdevfs_urb *urb = (struct usbdevfs_urb *)urb_data->data;
        GBytes *b = g_queue_pop_head(&out_q);
        gsize n;
        const uint8_t *d = g_bytes_get_data(b, &n);
        if ((gsize)urb->buffer_length < n) {
            urb->status = -EOVERFLOW;
            urb->actual_length = 0;
        } else {
            memcpy(urb->buffer, d, n); /* same address space: the client's buffer */
            urb->actual_length = (int)n;
            urb->status = 0;
        }
        g_bytes_unref(b);
        done = g_list_append(done, urb_data);
    }
}

static const uint8_t *string_descriptor(int idx, int *len)
{
    static uint8_t buf[64];
    const char *s = idx == 1 ? "odp" : idx == 2 ? "X300 Pro Emu" : idx == 3 ? "EMU0001" : NULL;
    if (idx == 0) {
        static const uint8_t langs[] = {4, 3, 0x09, 0x04};
        *len = 4;
        return langs;
    }
    if (!s)
        return NULL;
    int n = 0;
    buf[n++] = 0;
    buf[n++] = 3;
    for (const char *c = s; *c; c++) {
        buf[n++] = (uint8_t)*c;
        buf[n++] = 0;
    }
    buf[0] = (uint8_t)n;
    *len = n;
    return buf;
}

static gboolean handle_ioctl(UMockdevIoctlBase *handler, UMockdevIoctlClient *client, gpointer unused)
{
    (void)handler, (void)unused;
    UMockdevIoctlData *arg = umockdev_ioctl_client_get_arg(client);
    gulong request = umockdev_ioctl_client_get_request(client);
    pthread_mutex_lock(&mu);
    gboolean handled = TRUE;
    switch (request) {
    case USBDEVFS_GET_CAPABILITIES: {
        g_autoptr(UMockdevIoctlData) d = umockdev_ioctl_data_resolve(arg, 0, sizeof(guint32), NULL);
        *(guint32 *)d->data = USBDEVFS_CAP_BULK_SCATTER_GATHER | USBDEVFS_CAP_BULK_CONTINUATION |
                              USBDEVFS_CAP_NO_PACKET_SIZE_LIM | USBDEVFS_CAP_REAP_AFTER_DISCONNECT |
                              USBDEVFS_CAP_ZERO_PACKET;
        umockdev_ioctl_client_complete(client, 0, 0);
        break;
    }
    case USBDEVFS_CLAIMINTERFACE:
    case USBDEVFS_DISCONNECT_CLAIM: {
        g_autoptr(UMockdevIoctlData) d = umockdev_ioctl_data_resolve(arg, 0, sizeof(unsigned int), NULL);
        if (mode_busy) {
            umockdev_ioctl_client_complete(client, -1, EBUSY);
        } else {
            claimed = (int)*(unsigned int *)d->data;
            umockdev_ioctl_client_complete(client, 0, 0);
        }
        break;
    }
    case USBDEVFS_RELEASEINTERFACE:
    case USBDEVFS_CLEAR_HALT:
    case USBDEVFS_RESET:
    case USBDEVFS_RESETEP:
    case USBDEVFS_SETCONFIGURATION:
        umockdev_ioctl_client_complete(client, 0, 0);
        break;
    case USBDEVFS_IOCTL:
    case USBDEVFS_GETDRIVER:
        umockdev_ioctl_client_complete(client, -1, ENODATA); /* no kernel driver bound */
        break;
    case USBDEVFS_SUBMITURB: {
        UMockdevIoctlData *urb_data = umockdev_ioctl_data_resolve(arg, 0, sizeof(struct usbdevfs_urb), NULL);
        struct usbdevfs_urb *urb = (struct usbdevfs_urb *)urb_data->data;
        g_autoptr(UMockdevIoctlData) buf = urb->buffer_length > 0 ?
            umockdev_ioctl_data_resolve(urb_data, G_STRUCT_OFFSET(struct usbdevfs_urb, buffer), (gsize)urb->buffer_length, NULL)
            : NULL;
        if (urb->type == USBDEVFS_URB_TYPE_CONTROL) {
            const uint8_t *setup = buf->data;
            int idx = setup[2], len = 0;
            const uint8_t *s = setup[1] == 6 && setup[3] == 3 ? string_descriptor(idx, &len) : NULL;
            int want = setup[6] | setup[7] << 8;
            if (s) {
                if (len > want)
                    len = want;
                memcpy((uint8_t *)urb->buffer + 8, s, (size_t)len);
                urb->actual_length = len;
                urb->status = 0;
            } else {
                urb->actual_length = 0;
                urb->status = -EPIPE;
            }
            done = g_list_append(done, urb_data);
        } else if (urb->endpoint == EP_OUT) {
            device_out(buf ? buf->data : NULL, urb->buffer_length);
            urb->actual_length = urb->buffer_length;
            urb->status = 0;
            done = g_list_append(done, urb_data);
        } else if (urb->endpoint == EP_IN) {
            if (n_in < MAXLOG)
                in_req[n_in++] = urb->buffer_length;
            in_flight_in = g_list_append(in_flight_in, urb_data);
        } else {
            bad_endpoint = urb->endpoint;
            urb->status = -EPIPE;
            done = g_list_append(done, urb_data);
        }
        pump_in();
        umockdev_ioctl_client_complete(client, 0, 0);
        break;
    }
    case USBDEVFS_REAPURB:
    case USBDEVFS_REAPURBNDELAY: {
        UMockdevIoctlData *urb_data = NULL;
        if (discarded) {
            urb_data = discarded->data;
            discarded = g_list_delete_link(discarded, discarded);
            ((struct usbdevfs_urb *)urb_data->data)->status = -ENOENT;
        } else if (done) {
            urb_data = done->data;
            done = g_list_delete_link(done, done);
        }
        if (!urb_data) {
            umockdev_ioctl_client_complete(client, -1, EAGAIN);
            break;
        }
        g_autoptr(UMockdevIoctlData) ptr = umockdev_ioctl_data_resolve(arg, 0, sizeof(gpointer), NULL);
        umockdev_ioctl_data_set_ptr(ptr, 0, urb_data);
        umockdev_ioctl_data_unref(urb_data);
        umockdev_ioctl_client_complete(client, 0, 0);
        break;
    }
    case USBDEVFS_DISCARDURB: {
        GList *l = in_flight_in;
        while (l && ((UMockdevIoctlData *)l->data)->client_addr != (gulong) * (void **)arg->data)
            l = l->next;
        if (l) {
            discarded = g_list_append(discarded, l->data);
            in_flight_in = g_list_delete_link(in_flight_in, l);
            umockdev_ioctl_client_complete(client, 0, 0);
        } else {
            umockdev_ioctl_client_complete(client, -1, EINVAL);
        }
        break;
    }
    default:
        handled = FALSE;
    }
    pthread_mutex_unlock(&mu);
    return handled;
}

static int n_test, n_fail;
static void check(int ok, const char *what)
{
    n_test++;
    if (!ok)
        n_fail++;
    printf("%sok %d - %s\n", ok ? "" : "not ", n_test, what);
    fflush(stdout);
}

static void reset_logs(void)
{
    pthread_mutex_lock(&mu);
    n_out = n_in = 0;
    pthread_mutex_unlock(&mu);
}

/* After a message whose payload has `len` bytes: the OUT log holds 24, len, and a ZLP iff the rule says so. */
static int find_payload_then(int len, int *zlp)
{
    for (int i = 0; i + 1 < n_out; i++) {
        if (out_log[i] == 24 && out_log[i + 1] == len) {
            *zlp = i + 2 < n_out && out_log[i + 2] == 0;
            return 1;
        }
    }
    return 0;
}

static struct adb_conn *open_conn(double timeout, odp_err *e)
{
    struct adb_transport t;
    char serial[64];
    if (adb_usb_open(NULL, odp_deadline(timeout), &t, serial, sizeof serial, e) != 0)
        return NULL;
    struct adb_conn_opts o = {0};
    o.auth_deadline = odp_deadline(timeout);
    return adb_conn_open(&t, &o, odp_deadline(timeout), e);
}

struct each_seen {
    int n, pid, access;
    char serial[128], product[128];
};

static int count_dev(void *ud, odp_usb_dev *d)
{
    struct each_seen *s = ud;
    s->n++;
    s->pid = d->pid;
    s->access = d->access;
    snprintf(s->serial, sizeof s->serial, "%s", d->serial);
    snprintf(s->product, sizeof s->product, "%s", d->product);
    return 0;
}

int main(void)
{
    UMockdevTestbed *tb = umockdev_testbed_new();
    UMockdevIoctlBase *handler = umockdev_ioctl_base_new();
    g_signal_connect(handler, "handle-ioctl", G_CALLBACK(handle_ioctl), NULL);
    if (!umockdev_testbed_attach_ioctl(tb, "/dev/bus/usb/001/002", handler, NULL)) {
        printf("not ok 1 - umockdev attach (run under umockdev-wrapper)\n");
        return 1;
    }
    umockdev_testbed_add_from_string(tb,
        "P: /devices/usb1/1-1\n"
        "N: bus/usb/001/002\n"
        "E: SUBSYSTEM=usb\n"
        "E: DRIVER=usb\n"
        "E: BUSNUM=001\n"
        "E: DEVNUM=002\n"
        "E: DEVNAME=/dev/bus/usb/001/002\n"
        "E: DEVTYPE=usb_device\n"
        "A: bConfigurationValue=1\\n\n"
        "A: busnum=1\\n\n"
        "A: devnum=2\\n\n"
        "A: speed=480\\n\n"
        /* device 18d1:4ee7; config: decoy ff/42/03 (0x81/0x01), then adb ff/42/01 (0x82/0x02), 512-byte packets */
        "H: descriptors=12010002000000" "40d118e74e0001010203" "01"
        "09023700020100" "80fa"
        "090400000" "2ff420300" "0705810200020" "0" "07050102000200"
        "090401000" "2ff420100" "0705820200020" "0" "07050202000200\n",
        NULL);

    odp_err e;
    /* the one USB enumeration: a vendor filter, ids, place and strings */
    struct each_seen google = {0}, segger = {0};
    check(odp_usb_each(NULL, 0x18d1, count_dev, &google, &e) == 0 && google.n == 1 && google.pid == 0x4ee7 &&
              google.access && !strcmp(google.serial, "EMU0001") && !strcmp(google.product, "X300 Pro Emu"),
          "odp_usb_each with vendor 18d1: the device, its pid, serial and product");
    check(odp_usb_each(NULL, 0x1366, count_dev, &segger, &e) == 0 && segger.n == 0,
          "odp_usb_each with vendor 1366 (J-Link): nothing");
    struct adb_usb_info list[4];
    int n = adb_usb_list(list, 4, &e);
    check(n == 1, "adb_usb_list finds the one adb device");
    check(n == 1 && !strcmp(list[0].serial, "EMU0001") && !strcmp(list[0].product, "X300 Pro Emu") &&
              !strcmp(list[0].state, "available"),
          "serial and product from string descriptors; state available");

    reset_logs();
    struct adb_conn *c = open_conn(5, &e);
    check(c != NULL, c ? "connect over libusb (CNXN, banner)" : e.msg);
    check(claimed == 1, "the adb interface (1) was claimed, not the ff/42/03 decoy (0)");
    check(c && !strcmp(adb_conn_banner(c)->model, "UsbEmu") && adb_conn_maxdata(c) == 4096,
          "banner model and maxdata 4096 negotiated");
    struct adb_link link;
    if (c)
        adb_conn_link(c, &link);
    int zlp = 0;
    check(n_out >= 2 && out_log[0] == 24 && out_log[1] > 24 && !(n_out > 2 && out_log[2] == 0),
          "CNXN: header then payload as separate transfers, no ZLP after a payload that is not a multiple of 512");

    struct {
        int stdin_len, payload;
        int zlp;
    } cases[] = {{494, 504, 0}, {502, 512, 1}, {1014, 1024, 1}, {503, 513, 0}};
    for (size_t i = 0; c && i < sizeof cases / sizeof *cases; i++) {
        reset_logs();
        uint8_t in[2048];
        memset(in, 'x', sizeof in);
        struct adb_shell_result r;
        memset(&r, 0, sizeof r);
        int rc = adb_shell(&link, "cat", in, (size_t)cases[i].stdin_len, NULL, NULL, &r, odp_deadline(5), &e);
        char want[32], what[160];
        snprintf(want, sizeof want, "n=%d\n", cases[i].stdin_len);
        snprintf(what, sizeof what, "shell over USB with %d stdin bytes: status 0, device got them all",
                 cases[i].stdin_len);
        check(rc == 0 && r.status == 0 && r.out.len == strlen(want) && !memcmp(r.out.data, want, r.out.len), what);
        pthread_mutex_lock(&mu);
        int found = find_payload_then(cases[i].payload, &zlp);
        pthread_mutex_unlock(&mu);
        snprintf(what, sizeof what, "WRTE payload of %d bytes: %s", cases[i].payload,
                 cases[i].zlp ? "followed by a zero-length packet" : "no zero-length packet");
        check(found && zlp == cases[i].zlp, what);
        odp_buf_free(&r.out);
        odp_buf_free(&r.err);
    }
    pthread_mutex_lock(&mu);
    int header_zlp = 0;
    for (int i = 0; i + 1 < n_out; i++)
        if (out_log[i] == 24 && out_log[i + 1] == 0)
            header_zlp = 1;
    /* reads: 24, then exactly the announced length */
    int sized = n_in > 0;
    for (int i = 0; i < n_in; i++)
        if (in_req[i] != 24 && (i == 0 || in_req[i - 1] != 24))
            sized = 0;
    pthread_mutex_unlock(&mu);
    check(!header_zlp, "never a zero-length packet after a header-only message (OKAY, CLSE, empty payloads)");
    check(sized, "reads are exactly 24 bytes, then exactly data_length");
    check(bad_endpoint == 0, "every bulk transfer used the adb interface's endpoints (0x82/0x02)");
    adb_conn_close(c);

    /* a device that never answers: the deadline holds and the pending read is discarded */
    mode_silent = 1;
    double t0 = odp_now();
    c = open_conn(0.5, &e);
    double took = odp_now() - t0;
    check(!c && e.code == ODP_ETIMEDOUT && took < 3.0, "a silent device: ETIMEDOUT at the deadline");
    pthread_mutex_lock(&mu);
    int left = g_list_length(in_flight_in);
    pthread_mutex_unlock(&mu);
    check(left == 0, "the pending IN transfer was cancelled (DISCARDURB)");
    mode_silent = 0;

    mode_busy = 1;
    c = open_conn(2, &e);
    check(!c && e.code == ODP_EBUSY && strstr(e.msg, "--adb auto"), "claim busy: EBUSY with the hint to go through the adb server");
    n = adb_usb_list(list, 4, &e);
    check(n == 1 && !strcmp(list[0].state, "busy") && strstr(list[0].hint, "--adb auto"),
          "adb_usb_list reports busy with the hint");
    mode_busy = 0;

    struct adb_transport t;
    char serial[64];
    int rc = adb_usb_open("NOPE", odp_deadline(2), &t, serial, sizeof serial, &e);
    check(rc == ODP_ENODEV && strstr(e.msg, "NOPE"), "an unknown --serial is ENODEV naming it");
    rc = adb_usb_open("EMU0001", odp_deadline(2), &t, serial, sizeof serial, &e);
    check(rc == 0 && !strcmp(serial, "EMU0001"), "--serial EMU0001 selects the device");
    if (rc == 0)
        t.close(t.ctx);

    g_object_unref(handler);
    g_object_unref(tb);
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
