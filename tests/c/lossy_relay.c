/* A lossy channel for XMODEM tests: creates two ptys, links them at PATH_A and PATH_B, and relays bytes
 * both ways; each byte is, with probability RATE, corrupted (xor a nonzero value), dropped or duplicated
 * (one third each), from a fixed SEED so a failure can be replayed. Runs until SIGTERM.
 *   lossy_relay RATE SEED PATH_A PATH_B
 * Prints "ready" on stdout once both links exist, and the counts on stderr at exit. Test tool, not odp. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static unsigned long long rng_state;
static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int open_pty(const char *link)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m))
        return -1;
    struct termios t;
    int s = open(ptsname(m), O_RDWR | O_NOCTTY);
    if (s < 0)
        return -1;
    tcgetattr(s, &t); /* raw on the far side too, before the peer opens it */
    cfmakeraw(&t);
    tcsetattr(s, TCSANOW, &t);
    unlink(link);
    if (symlink(ptsname(m), link))
        return -1;
    /* keep s open: the master must not see EIO before the peer opens the slave */
    return m;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: lossy_relay RATE SEED PATH_A PATH_B\n");
        return 2;
    }
    double rate = atof(argv[1]);
    rng_state = strtoull(argv[2], NULL, 0) * 2654435761ULL + 1;
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    int fd[2] = {open_pty(argv[3]), open_pty(argv[4])};
    if (fd[0] < 0 || fd[1] < 0) {
        perror("pty");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    unsigned long long moved = 0, corrupted = 0, dropped = 0, duplicated = 0;
    while (!stop) {
        struct pollfd p[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
        if (poll(p, 2, 200) < 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & POLLIN))
                continue;
            unsigned char in[4096], out[8192];
            ssize_t n = read(fd[i], in, sizeof in);
            if (n <= 0)
                continue;
            size_t k = 0;
            for (ssize_t j = 0; j < n; j++) {
                unsigned char c = in[j];
                moved++;
                if (rate > 0 && rnd() < rate) {
                    double w = rnd();
                    if (w < 1.0 / 3) {
                        c ^= (unsigned char)(1 + (int)(rnd() * 255));
                        corrupted++;
                    } else if (w < 2.0 / 3) {
                        dropped++;
                        continue;
                    } else {
                        out[k++] = c;
                        duplicated++;
                    }
                }
                out[k++] = c;
            }
            size_t done = 0;
            while (done < k) {
                ssize_t w = write(fd[1 - i], out + done, k - done);
                if (w < 0 && errno != EINTR && errno != EAGAIN)
                    break;
                if (w > 0)
                    done += (size_t)w;
            }
        }
    }
    fprintf(stderr, "lossy_relay: %llu bytes, %llu corrupted, %llu dropped, %llu duplicated\n", moved, corrupted,
            dropped, duplicated);
    unlink(argv[3]);
    unlink(argv[4]);
    return 0;
}
