#include "serial.h"

#include <errno.h>
#include <fcntl.h>
#include <libserialport.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const char *str_or_empty(const char *s) { return s ? s : ""; }

int odp_serial_list(int (*fn)(void *ctx, const odp_serial_info *p), void *ctx, odp_err *err)
{
    struct sp_port **ports;
    if (sp_list_ports(&ports) != SP_OK)
        return odp_fail(err, ODP_EIO, "libserialport could not list ports");
    int rc = 0;
    for (size_t i = 0; ports[i] && !rc; i++) {
        struct sp_port *p = ports[i];
        odp_serial_info info = {.name = sp_get_port_name(p), .vid = -1, .pid = -1};
        info.description = str_or_empty(sp_get_port_description(p));
        enum sp_transport t = sp_get_port_transport(p);
        info.transport = t == SP_TRANSPORT_USB ? "usb" : t == SP_TRANSPORT_NATIVE ? "native"
                         : t == SP_TRANSPORT_BLUETOOTH ? "bluetooth" : "unknown";
        info.manufacturer = info.product = info.serial = "";
        if (t == SP_TRANSPORT_USB) {
            sp_get_port_usb_vid_pid(p, &info.vid, &info.pid);
            info.manufacturer = str_or_empty(sp_get_port_usb_manufacturer(p));
            info.product = str_or_empty(sp_get_port_usb_product(p));
            info.serial = str_or_empty(sp_get_port_usb_serial(p));
        }
        info.readable = access(info.name, R_OK) == 0;
        info.writable = access(info.name, W_OK) == 0;
        rc = fn(ctx, &info);
    }
    sp_free_port_list(ports);
    return 0;
}

typedef struct {
    odp_stream base;
    int fd;
    struct sp_port *sp; /* NULL on the termios path */
} serial_stream;

static ssize_t serial_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    return odp_fd_read(((serial_stream *)s)->fd, buf, n, deadline, err);
}

static ssize_t serial_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err)
{
    return odp_fd_write(((serial_stream *)s)->fd, buf, n, deadline, err);
}

static void serial_close(odp_stream *s)
{
    serial_stream *p = (serial_stream *)s;
    if (p->sp) {
        sp_close(p->sp);
        sp_free_port(p->sp);
    } else {
        close(p->fd);
    }
    free(p);
}

static speed_t baud_constant(int baud)
{
    static const struct { int baud; speed_t c; } t[] = {
        {1200, B1200}, {2400, B2400}, {4800, B4800}, {9600, B9600}, {19200, B19200}, {38400, B38400},
        {57600, B57600}, {115200, B115200}, {230400, B230400}, {460800, B460800}, {500000, B500000},
        {921600, B921600}, {1000000, B1000000}, {1500000, B1500000}, {2000000, B2000000}, {3000000, B3000000},
        {4000000, B4000000}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].baud == baud)
            return t[i].c;
    return 0;
}

static int termios_open(const char *path, int baud, odp_err *err)
{
    speed_t sp = baud_constant(baud);
    if (!sp) {
        odp_fail(err, ODP_EIO, "%s: baud rate %d is not a standard rate", path, baud);
        return -1;
    }
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
        return -1;
    }
    struct termios t;
    if (tcgetattr(fd, &t) < 0) {
        odp_fail_errno(err, ODP_ENODEV, errno, "%s is not a terminal device", path);
        close(fd);
        return -1;
    }
    cfmakeraw(&t);
    t.c_cflag |= CLOCAL | CREAD;
    t.c_cflag &= ~(tcflag_t)(CSTOPB | CRTSCTS);
    t.c_iflag &= ~(tcflag_t)(IXON | IXOFF | IXANY);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    cfsetispeed(&t, sp);
    cfsetospeed(&t, sp);
    if (tcsetattr(fd, TCSANOW, &t) < 0) {
        odp_fail_errno(err, ODP_EIO, errno, "%s: setting raw mode", path);
        close(fd);
        return -1;
    }
    return fd;
}

odp_stream *odp_serial_open(const char *path, int baud, const char **how, odp_err *err)
{
    static const odp_stream_ops ops[1] = {{"serial", serial_read, serial_write, serial_close, NULL}};
    serial_stream *s = calloc(1, sizeof *s);
    if (!s) {
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    s->base.ops = ops;
    s->fd = -1;
    /* libserialport first: it knows real ports (USB CDC-ACM, UARTs). It refuses ptys and sysfs-less ttys. */
    struct sp_port *port;
    if (sp_get_port_by_name(path, &port) == SP_OK) {
        if (sp_open(port, SP_MODE_READ_WRITE) == SP_OK && sp_set_baudrate(port, baud) == SP_OK &&
            sp_set_bits(port, 8) == SP_OK && sp_set_parity(port, SP_PARITY_NONE) == SP_OK &&
            sp_set_stopbits(port, 1) == SP_OK && sp_set_flowcontrol(port, SP_FLOWCONTROL_NONE) == SP_OK) {
            int fd;
            if (sp_get_port_handle(port, &fd) == SP_OK) {
                /* libserialport leaves VMIN=0: a read with no data would return 0, which looks like the end
                 * of the stream. VMIN=1 + O_NONBLOCK gives EAGAIN, and odp_wait does the waiting. */
                struct termios t;
                if (tcgetattr(fd, &t) == 0) {
                    t.c_cc[VMIN] = 1;
                    t.c_cc[VTIME] = 0;
                    tcsetattr(fd, TCSANOW, &t);
                }
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                s->sp = port;
                s->fd = fd;
                *how = "libserialport";
                return &s->base;
            }
        }
        sp_close(port);
        sp_free_port(port);
    }
    s->fd = termios_open(path, baud, err);
    if (s->fd < 0) {
        free(s);
        return NULL;
    }
    *how = "termios";
    return &s->base;
}
