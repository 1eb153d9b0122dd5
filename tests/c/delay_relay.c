/* A link with a round-trip time, for the round-trip tests (tests/lua/link_test.lua) and bench/link_bench.lua:
 * a TCP proxy on 127.0.0.1 that holds every byte DELAY_MS milliseconds in each direction before passing it on
 * (netem is not available here; slow_relay.c limits a rate and adds no delay), and counts what a round trip
 * is on the wire: a turnaround, bytes from the server after bytes from the client since the server's last
 * ones. odp counts the same from its side (odp_ssh_traffic): this is the independent count.
 *   delay_relay DELAY_MS HOST PORT COUNTS
 * Prints the port it listens on (one line), then serves any number of connections, each to HOST:PORT. When a
 * connection ends, and for each live one when it gets SIGUSR1 or SIGTERM (then it exits), it appends one line
 * to the file COUNTS:  conn N round_trips N bytes_up N bytes_down N closed|live
 * Test tool, not odp. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 32
#define QUEUE_MAX (4 << 20) /* bytes held in one direction before the relay stops reading that side */
#define CHUNK 65536

typedef struct chunk {
    struct chunk *next;
    double due;
    size_t len, off;
    char data[];
} chunk;

typedef struct {
    int fd;          /* where the bytes of this direction come from */
    int eof;         /* it closed: once the queue is out, the other side's write half is shut */
    int shut;
    chunk *head, *tail;
    size_t queued;
    unsigned long long bytes;
} direction;

typedef struct {
    int used, id;
    direction up, down; /* up: client -> server; down: server -> client */
    int sent_since_down;
    unsigned long long round_trips;
} conn;

static conn conns[MAX_CONNS];
static volatile sig_atomic_t report_live, stop;
static const char *counts_path;
static double delay_s;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        report_live = 1;
    else
        stop = 1;
}

static void report(const conn *c, const char *state)
{
    char line[256];
    int n = snprintf(line, sizeof line, "conn %d round_trips %llu bytes_up %llu bytes_down %llu %s\n", c->id,
                     c->round_trips, c->up.bytes, c->down.bytes, state);
    int fd = open(counts_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n)
            perror("delay_relay: counts");
        close(fd);
    }
}

static void drop_queue(direction *d)
{
    while (d->head) {
        chunk *next = d->head->next;
        free(d->head);
        d->head = next;
    }
    d->tail = NULL;
}

static void finish(conn *c, const char *state)
{
    report(c, state);
    close(c->up.fd);
    close(c->down.fd);
    drop_queue(&c->up);
    drop_queue(&c->down);
    c->used = 0;
}

/* Reads what d's side has; 0 = fine, -1 = the connection failed. */
static int take(conn *c, direction *d, int is_down)
{
    chunk *k = malloc(sizeof *k + CHUNK);
    if (!k)
        return -1;
    ssize_t n = read(d->fd, k->data, CHUNK);
    if (n <= 0) {
        free(k);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n < 0)
            return -1;
        d->eof = 1;
        return 0;
    }
    k->len = (size_t)n;
    k->off = 0;
    k->due = now() + delay_s;
    k->next = NULL;
    if (d->tail)
        d->tail->next = k;
    else
        d->head = k;
    d->tail = k;
    d->queued += k->len;
    d->bytes += (unsigned long long)n;
    if (is_down) {
        if (c->sent_since_down)
            c->round_trips++;
        c->sent_since_down = 0;
    } else {
        c->sent_since_down = 1;
    }
    return 0;
}

/* Writes d's due bytes to to_fd; 0 = fine, -1 = the connection failed. */
static int give(direction *d, int to_fd)
{
    double t = now();
    while (d->head && d->head->due <= t) {
        chunk *k = d->head;
        ssize_t n = write(to_fd, k->data + k->off, k->len - k->off);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        k->off += (size_t)n;
        d->queued -= (size_t)n;
        if (k->off < k->len)
            return 0;
        d->head = k->next;
        if (!d->head)
            d->tail = NULL;
        free(k);
    }
    if (!d->head && d->eof && !d->shut) {
        shutdown(to_fd, SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

static int connect_server(const struct sockaddr_in *a)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (const struct sockaddr *)a, sizeof *a)) {
        if (s >= 0)
            close(s);
        return -1;
    }
    return s;
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: delay_relay DELAY_MS HOST PORT COUNTS\n");
        return 2;
    }
    char *end;
    double ms = strtod(argv[1], &end);
    struct sockaddr_in server = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
    if (*end || ms < 0 || inet_pton(AF_INET, argv[2], &server.sin_addr) != 1) {
        fprintf(stderr, "delay_relay: bad DELAY_MS or HOST\n");
        return 2;
    }
    delay_s = ms / 1e3;
    counts_path = argv[4];
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 16) ||
        getsockname(lfd, (struct sockaddr *)&a, &alen)) {
        perror("delay_relay: listen");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    int next_id = 1;
    while (!stop) {
        if (report_live) {
            report_live = 0;
            for (int i = 0; i < MAX_CONNS; i++)
                if (conns[i].used)
                    report(&conns[i], "live");
        }
        struct pollfd p[1 + 2 * MAX_CONNS];
        int owner[1 + 2 * MAX_CONNS];
        nfds_t n = 0;
        p[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
        owner[n++] = -1;
        double t = now(), next_due = -1;
        for (int i = 0; i < MAX_CONNS; i++) {
            conn *c = &conns[i];
            if (!c->used)
                continue;
            direction *ds[2] = {&c->up, &c->down};
            for (int j = 0; j < 2; j++) {
                direction *d = ds[j], *other = ds[1 - j];
                short ev = 0;
                if (!d->eof && d->queued < QUEUE_MAX)
                    ev |= POLLIN;
                /* d's fd is where other's bytes go */
                if (other->head && other->head->due <= t)
                    ev |= POLLOUT;
                else if (other->head && (next_due < 0 || other->head->due < next_due))
                    next_due = other->head->due;
                p[n] = (struct pollfd){.fd = ev ? d->fd : -1, .events = ev}; /* no POLLHUP spin once closed */
                owner[n++] = i;
            }
        }
        int timeout = next_due < 0 ? -1 : (int)((next_due - t) * 1e3) + 1;
        if (poll(p, n, timeout) < 0 && errno != EINTR) {
            perror("delay_relay: poll");
            return 1;
        }
        if (p[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            int sfd = cfd >= 0 ? connect_server(&server) : -1;
            int slot = -1;
            for (int i = 0; i < MAX_CONNS && slot < 0; i++)
                if (!conns[i].used)
                    slot = i;
            if (cfd >= 0 && (sfd < 0 || slot < 0)) {
                close(cfd);
                if (sfd >= 0)
                    close(sfd);
            } else if (cfd >= 0) {
                nonblock(cfd);
                nonblock(sfd);
                conns[slot] = (conn){.used = 1, .id = next_id++, .up = {.fd = cfd}, .down = {.fd = sfd}};
            }
        }
        for (nfds_t k = 1; k < n; k += 2) {
            conn *c = &conns[owner[k]];
            if (!c->used)
                continue;
            int bad = 0;
            if (!c->up.eof && (p[k].revents & (POLLIN | POLLHUP | POLLERR)))
                bad |= take(c, &c->up, 0);
            if (!c->down.eof && (p[k + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                bad |= take(c, &c->down, 1);
            bad |= give(&c->up, c->down.fd);
            bad |= give(&c->down, c->up.fd);
            if (bad || (c->up.shut && c->down.shut))
                finish(c, "closed");
        }
    }
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i].used)
            finish(&conns[i], "live");
    return 0;
}
