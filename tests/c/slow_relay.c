/* A slow link for fault tests, used as an SSH ProxyCommand: connects to HOST:PORT and relays stdin to it at
 * no more than RATE bytes per second (the upload direction), and what comes back to stdout at full speed.
 * `tc`/netem would need a network namespace; this needs nothing.
 *   slow_relay RATE HOST PORT
 * Ends when either side closes. Test tool, not odp. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_all(int fd, const char *p, ssize_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, (size_t)n);
        if (w <= 0)
            return -1;
        p += w;
        n -= w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: slow_relay RATE HOST PORT\n");
        return 2;
    }
    double rate = atof(argv[1]);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
    if (rate <= 0 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
        fprintf(stderr, "slow_relay: bad RATE or HOST\n");
        return 2;
    }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) {
        perror("slow_relay: connect");
        return 1;
    }
    /* chunks of a tenth of a second's worth, so the rate is smooth at the scale of a transfer */
    size_t chunk = (size_t)(rate / 10) > 0 ? (size_t)(rate / 10) : 1;
    if (chunk > 65536)
        chunk = 65536;
    char *buf = malloc(chunk > 65536 ? chunk : 65536);
    if (!buf)
        return 1;
    double start = now(), sent = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = s, .events = POLLIN}};
        if (poll(p, 2, -1) < 0)
            return 1;
        if (p[1].revents) {
            ssize_t n = read(s, buf, 65536);
            if (n <= 0 || write_all(1, buf, n))
                return 0;
        }
        if (p[0].revents) {
            ssize_t n = read(0, buf, chunk);
            if (n <= 0 || write_all(s, buf, n))
                return 0;
            sent += (double)n;
            double due = start + sent / rate, t = now();
            if (due > t)
                usleep((useconds_t)((due - t) * 1e6));
        }
    }
}
