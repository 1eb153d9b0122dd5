/* See tty.h. */
#include "tty.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "wait.h"

int odp_tty_read_secret(char *buf, size_t cap, double deadline, odp_err *err)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return odp_fail_errno(err, ODP_ENODEV, errno, "no terminal to read a passphrase from");
    struct termios old, quiet;
    if (tcgetattr(fd, &old)) {
        close(fd);
        return odp_fail_errno(err, ODP_ENODEV, errno, "no terminal to read a passphrase from");
    }
    quiet = old;
    quiet.c_lflag &= (tcflag_t) ~(ECHO | ECHONL);
    quiet.c_lflag |= ICANON | ISIG;
    tcsetattr(fd, TCSAFLUSH, &quiet);
    size_t n = 0;
    int rc = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if ((rc = odp_wait(&p, 1, deadline, err)))
            break;
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0 || c == '\n' || c == '\r')
            break;
        if (n + 1 >= cap) {
            rc = odp_fail(err, ODP_EIO, "passphrase longer than %zu bytes", cap - 1);
            break;
        }
        buf[n++] = c;
    }
    buf[rc ? 0 : n] = 0;
    tcsetattr(fd, TCSAFLUSH, &old);
    ssize_t w = write(fd, "\n", 1); /* the newline the user typed was not echoed */
    (void)w;
    close(fd);
    return rc;
}
