#include "ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <libssh2_sftp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../net/tcp.h"
#include "../proc/proc.h"
#include "../util/hash.h"
#include "../util/wait.h"
#include "known_hosts.h"

#define IO_CHUNK (256 * 1024)       /* measured sweet spot for libssh2 SFTP (docs/sources.md §7) */
#define MAX_KNOWN_HOSTS (4 << 20)
#define STOP_GRACE_S 3.0            /* after a timeout: killing the remote group and collecting its end */
#define CLOSE_GRACE_S 2.0
#define PGID_HEAD_MAX 4096

#define TUNNEL_BUF (64 * 1024)
#define PROXY_ERR_MAX 400           /* bytes of a ProxyCommand's stderr quoted in an error */

typedef struct odp_ssh_channel odp_ssh_channel;

struct odp_ssh {
    LIBSSH2_SESSION *session;
    LIBSSH2_SFTP *sftp;
    int fd;
    char uri[600];
    char fingerprint[80];
    /* ProxyJump: this session's bytes travel in `tunnel`, a direct-tcpip channel of `via`. fd is one end of a
     * socketpair; pump() moves bytes between its other end, pump_fd, and the channel whenever a session of
     * the chain waits (wait_socket), so the chain needs no thread and no waiting point of its own. */
    odp_ssh *via;
    LIBSSH2_CHANNEL *tunnel;
    int pump_fd;
    int tunnel_eof, up_eof;
    size_t up_off, up_len;          /* read from pump_fd, not yet written to the channel */
    size_t down_off, down_len;      /* read from the channel, not yet written to pump_fd */
    char *up, *down;
    /* ProxyCommand: the process whose stdin/stdout is fd, in its own process group; its stderr goes to an
     * unlinked temporary file (a pipe could fill and stall it) that an error quotes. */
    pid_t proxy_pid;
    int proxy_err_fd;
    /* Keepalives: last_rx is when the transport last had bytes for us. */
    int alive_interval, alive_count_max;
    double last_rx;
    odp_ssh_channel *channels; /* open long-lived channels, made dead when the session closes */
    /* Why the connection is gone (the socket dropped, keepalives unanswered), "" while it is up: a session
     * never comes back, so every later call fails at once with this cause (odp_ssh_lost). */
    char lost[512];
    odp_ssh_traffic traffic;
    int sent_since_rx;         /* bytes went out since bytes last came in: the next ones in end a round trip */
};

struct odp_ssh_channel {
    odp_stream base;
    odp_ssh *s;                 /* NULL once the session closed */
    LIBSSH2_CHANNEL *ch;
    odp_buf err;
    odp_ssh_channel *next;
};

#define CHANNEL_STDERR_MAX 4096

static int lib_ready;
static void close_session(odp_ssh *s, odp_ssh *tunnel_via);

const char *odp_ssh_uri(const odp_ssh *s) { return s->uri; }
const char *odp_ssh_fingerprint(const odp_ssh *s) { return s->fingerprint; }
const char *odp_ssh_lost(const odp_ssh *s) { return s->lost[0] ? s->lost : NULL; }

void odp_ssh_traffic_get(const odp_ssh *s, odp_ssh_traffic *out) { *out = s->traffic; }

/* libssh2's socket I/O, counted (odp_ssh_traffic): its own send()/recv() with the session as the abstract. */
static LIBSSH2_SEND_FUNC(counted_send)
{
    odp_ssh *s = *abstract;
    ssize_t n = send(socket, buffer, length, flags);
    if (n > 0) {
        s->traffic.bytes_up += (unsigned long long)n;
        s->sent_since_rx = 1;
    }
    return n < 0 ? -errno : n;
}

static LIBSSH2_RECV_FUNC(counted_recv)
{
    odp_ssh *s = *abstract;
    ssize_t n = recv(socket, buffer, length, flags);
    if (n > 0) {
        s->traffic.bytes_down += (unsigned long long)n;
        if (s->sent_since_rx)
            s->traffic.round_trips++;
        s->sent_since_rx = 0;
    }
    return n < 0 ? -errno : n;
}

/* Marks s lost with the cause in err's message (the first cause is kept) and returns rc. */
static int mark_lost(odp_ssh *s, odp_err *err, int rc)
{
    if (!s->lost[0])
        snprintf(s->lost, sizeof s->lost, "%.*s", (int)sizeof s->lost - 1,
                 err && err->msg[0] ? err->msg : "connection lost");
    return rc;
}

/* Fails with libssh2's own last error appended; a dropped connection is EIO and says so. */
static int ssh_fail_err(odp_ssh *s, odp_err *err, odp_code code, const char *what)
{
    char *msg = NULL;
    int len = 0, rc = s->session ? libssh2_session_last_error(s->session, &msg, &len, 0) : 0;
    if (rc == LIBSSH2_ERROR_SOCKET_DISCONNECT || rc == LIBSSH2_ERROR_SOCKET_RECV || rc == LIBSSH2_ERROR_SOCKET_SEND)
        return mark_lost(s, err, odp_fail(err, ODP_EIO, "%s: connection to %s lost (%s)", what, s->uri,
                                          msg && *msg ? msg : "closed"));
    return odp_fail(err, code, "%s: %s (libssh2 %d)", what, msg && *msg ? msg : "failed", rc);
}

/* Moves what is ready between a tunnelled session's socketpair end and its channel, both ways, without
 * blocking. A closed channel shuts the socketpair down, so the session above sees the connection end. */
static void pump(odp_ssh *h)
{
    for (int moved = 1; moved && !h->tunnel_eof;) {
        moved = 0;
        if (h->down_len == 0) {
            ssize_t n = libssh2_channel_read(h->tunnel, h->down, TUNNEL_BUF);
            if (n > 0) {
                h->down_off = 0;
                h->down_len = (size_t)n;
            } else if ((n == 0 && libssh2_channel_eof(h->tunnel)) || (n < 0 && n != LIBSSH2_ERROR_EAGAIN)) {
                h->tunnel_eof = 1;
                shutdown(h->pump_fd, SHUT_RDWR);
                break;
            }
        }
        if (h->down_len) {
            ssize_t w = write(h->pump_fd, h->down + h->down_off, h->down_len);
            if (w > 0) {
                h->down_off += (size_t)w;
                h->down_len -= (size_t)w;
                moved = 1;
            }
        }
        if (h->up_len == 0) {
            ssize_t n = read(h->pump_fd, h->up, TUNNEL_BUF);
            if (n > 0) {
                h->up_off = 0;
                h->up_len = (size_t)n;
            } else if (n == 0 && !h->up_eof) {
                h->up_eof = 1;
                libssh2_channel_send_eof(h->tunnel); /* best effort: the session above is closing */
            }
        }
        if (h->up_len) {
            ssize_t w = libssh2_channel_write(h->tunnel, h->up + h->up_off, h->up_len);
            if (w > 0) {
                h->up_off += (size_t)w;
                h->up_len -= (size_t)w;
                moved = 1;
            } else if (w < 0 && w != LIBSSH2_ERROR_EAGAIN) {
                h->tunnel_eof = 1;
                shutdown(h->pump_fd, SHUT_RDWR);
            }
        }
    }
}

static short session_events(odp_ssh *h)
{
    int dir = libssh2_session_block_directions(h->session);
    return (short)(POLLIN | ((dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) ? POLLOUT : 0));
}

/* Keepalives of every session in the chain: sends them when due; fails when one has been silent too long.
 * Silence counts from `since` (when this wait began) at the earliest: time odp spent elsewhere, not waiting
 * on the session, is not the peer's silence. */
static int keepalive(odp_ssh *s, double now, double since, double *next, odp_err *err)
{
    for (odp_ssh *h = s; h; h = h->via) {
        if (h->alive_interval <= 0 || !h->session)
            continue;
        double limit = (double)h->alive_interval * (h->alive_count_max > 0 ? h->alive_count_max : 1);
        double quiet = h->last_rx > since ? h->last_rx : since;
        if (now - quiet > limit)
            return mark_lost(s, err, odp_fail(err, ODP_EIO, "%s: no answer for %.0f s (ServerAliveInterval %d x "
                                              "ServerAliveCountMax %d): connection lost", h->uri, now - quiet,
                                              h->alive_interval, h->alive_count_max));
        int secs = h->alive_interval;
        libssh2_keepalive_send(h->session, &secs);
        double due = now + (secs > 0 ? secs : 1);
        if (quiet + limit < due)
            due = quiet + limit + 0.01;
        if (due < *next)
            *next = due;
    }
    return 0;
}

#define CHAIN_MAX 16 /* ProxyJump hops; the resolver refuses longer chains */

/* The one place a libssh2 EAGAIN waits: on the socket, in the directions libssh2 is blocked on; for a
 * tunnelled session also on every hop below it, pumping their channels, and sending keepalives. */
static int wait_socket(odp_ssh *s, double deadline, odp_err *err)
{
    double since = odp_now();
    for (;;) {
        for (odp_ssh *h = s; h; h = h->via)
            if (h->tunnel)
                pump(h);
        double now = odp_now(), until = deadline;
        int rc = keepalive(s, now, since, &until, err);
        if (rc)
            return rc;
        struct pollfd p[1 + 2 * CHAIN_MAX];
        odp_ssh *owner[1 + 2 * CHAIN_MAX];
        nfds_t n = 0;
        short ev = 0;
        int dir = libssh2_session_block_directions(s->session);
        if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
            ev |= POLLIN;
        if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
            ev |= POLLOUT;
        owner[n] = s;
        p[n++] = (struct pollfd){.fd = s->fd, .events = ev ? ev : POLLIN};
        for (odp_ssh *h = s; h && n + 2 <= 1 + 2 * CHAIN_MAX; h = h->via) {
            if (!h->tunnel || h->tunnel_eof)
                continue;
            owner[n] = NULL;
            p[n++] = (struct pollfd){.fd = h->pump_fd, .events = (short)((h->up_len ? 0 : POLLIN) |
                                                                          (h->down_len ? POLLOUT : 0))};
            owner[n] = h->via;
            p[n++] = (struct pollfd){.fd = h->via->fd, .events = session_events(h->via)};
        }
        rc = odp_wait(p, n, until, err);
        if (rc == ODP_ETIMEDOUT && until < deadline)
            continue; /* a keepalive is due */
        if (rc)
            return rc;
        now = odp_now();
        for (nfds_t i = 0; i < n; i++)
            if (owner[i] && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                owner[i]->last_rx = now;
        if (p[0].revents)
            return 0;
    }
}

/* Runs a libssh2 call until it stops saying EAGAIN, waiting in between (NSE's DO_OR_YIELD, with
 * odp_wait in place of a coroutine yield). Leaves the final return code in rc, or returns the wait's code. */
#define DO_OR_WAIT(s, rc, call, deadline, err)                      \
    do {                                                            \
        while (((rc) = (call)) == LIBSSH2_ERROR_EAGAIN) {           \
            int w_ = wait_socket((s), (deadline), (err));           \
            if (w_)                                                 \
                return w_;                                          \
        }                                                           \
    } while (0)

/* The same for calls that return a pointer and signal EAGAIN through last_errno. */
#define PTR_OR_WAIT(s, p, call, deadline, err)                                              \
    do {                                                                                    \
        while (!((p) = (call)) && libssh2_session_last_errno((s)->session) == LIBSSH2_ERROR_EAGAIN) { \
            int w_ = wait_socket((s), (deadline), (err));                                   \
            if (w_)                                                                         \
                return w_;                                                                  \
        }                                                                                   \
    } while (0)

static char *read_small_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = 0;
    *len = n;
    return buf;
}

/* Key types the known_hosts files hold for this host, in libssh2's preference syntax. libssh2 1.10 offers ecdsa
 * first, so a host known only by its ed25519 key would otherwise come back as unknown. */
static void known_types(const odp_ssh_opts *o, const char *host, int port, char *types, size_t n)
{
    types[0] = 0;
    size_t used = 0;
    for (int i = -1; i < 0 || (o->known_hosts_also && o->known_hosts_also[i]); i++) {
        size_t len = 0;
        char *text = read_small_file(i < 0 ? o->known_hosts : o->known_hosts_also[i], MAX_KNOWN_HOSTS, &len);
        if (!text)
            continue;
        char found[256];
        found[0] = 0;
        static const unsigned char none[] = {0, 0, 0, 1, 'x'};
        odp_kh_check(text, len, host, port, none, sizeof none, found, sizeof found);
        free(text);
        for (char *t = strtok(found, ","); t; t = strtok(NULL, ",")) {
            size_t tl = strlen(t);
            int dup = 0;
            for (const char *p = types; (p = strstr(p, t)) && !dup; p += tl)
                dup = (p == types || p[-1] == ',') && (p[tl] == ',' || p[tl] == 0);
            if (!dup && used + tl + 2 < n)
                used += (size_t)snprintf(types + used, n - used, "%s%s", used ? "," : "", t);
        }
    }
}

static int verify_host_key(odp_ssh *s, const odp_ssh_opts *o, int port, odp_err *err)
{
    size_t key_len = 0;
    int type = 0;
    const char *key = libssh2_session_hostkey(s->session, &key_len, &type);
    if (!key)
        return ssh_fail_err(s, err, ODP_EPROTO, "no host key from server");
    const unsigned char *k = (const unsigned char *)key;
    char name[600], ktype[64];
    const char *kh_host = o->host_key_alias ? o->host_key_alias : o->host;
    odp_kh_hostname(kh_host, port, name, sizeof name);
    odp_kh_fingerprint(k, key_len, s->fingerprint, sizeof s->fingerprint);
    if (odp_kh_keytype(k, key_len, ktype, sizeof ktype))
        snprintf(ktype, sizeof ktype, "?");
    /* Every file counts, as with OpenSSH: a revoked key anywhere is refused, then a match anywhere is enough,
     * then a different key for the host anywhere is a changed key. */
    odp_kh_status st = ODP_KH_UNKNOWN;
    const char *where = o->known_hosts;
    static const int rank[] = {[ODP_KH_UNKNOWN] = 0, [ODP_KH_CHANGED] = 1, [ODP_KH_MATCH] = 2, [ODP_KH_REVOKED] = 3};
    for (int i = -1; i < 0 || (o->known_hosts_also && o->known_hosts_also[i]); i++) {
        const char *path = i < 0 ? o->known_hosts : o->known_hosts_also[i];
        size_t len = 0;
        char *text = read_small_file(path, MAX_KNOWN_HOSTS, &len);
        odp_kh_status f = text ? odp_kh_check(text, len, kh_host, port, k, key_len, NULL, 0) : ODP_KH_UNKNOWN;
        free(text);
        if (rank[f] > rank[st]) {
            st = f;
            where = path;
        }
    }
    switch (st) {
    case ODP_KH_MATCH:
        return 0;
    case ODP_KH_REVOKED:
        return odp_fail(err, ODP_EHOSTKEY, "host key %s %s of %s is marked @revoked in %s", ktype, s->fingerprint,
                        name, where);
    case ODP_KH_CHANGED:
        return odp_fail(err, ODP_EHOSTKEY,
                        "host key of %s has CHANGED (now %s %s); refusing to connect: if the board was reinstalled, "
                        "remove its old line from %s (ssh-keygen -R '%s' -f %s)",
                        name, ktype, s->fingerprint, where, name, where);
    case ODP_KH_UNKNOWN:
        break;
    }
    if (!o->accept_new)
        return odp_fail(err, ODP_EHOSTKEY,
                        "unknown host key for %s: %s %s (not in %s); check it and run again with "
                        "--accept-new-host-key to add it",
                        name, ktype, s->fingerprint, o->known_hosts);
    return odp_kh_append(o->known_hosts, kh_host, port, k, key_len, err);
}

/* An RSA key fails against OpenSSH >= 8.8 whatever its format: libssh2 1.10 signs only with ssh-rsa (SHA-1). */
static int is_rsa_key(const char *path)
{
    size_t len = 0;
    char *text = read_small_file(path, 16384, &len);
    if (!text)
        return 0;
    int rsa = strstr(text, "BEGIN RSA PRIVATE KEY") != NULL;
    const char *b = strstr(text, "BEGIN OPENSSH PRIVATE KEY-----");
    if (!rsa && b) {
        b += 30;
        const char *e = strstr(b, "-----END");
        if (e && e > b) {
            size_t n = (size_t)(e - b) < 4096 ? (size_t)(e - b) / 4 * 4 : 4096;
            /* decode a prefix: the public key blob (string "ssh-rsa") comes early */
            unsigned char *d = malloc(3 * (n / 4) + 3);
            char *clean = malloc(n + 1);
            size_t m = 0;
            for (const char *p = b; p < e && m < n; p++)
                if (*p != '\n' && *p != '\r')
                    clean[m++] = *p;
            m = m / 4 * 4;
            long dl = d && clean ? odp_base64_decode(clean, m, d) : -1;
            for (long i = 0; i + 11 <= dl && !rsa; i++)
                rsa = memcmp(d + i, "\0\0\0\7ssh-rsa", 11) == 0;
            free(d);
            free(clean);
        }
    }
    free(text);
    return rsa;
}

const char *odp_ssh_libssh2_version(void) { return libssh2_version(0); }
int odp_ssh_rsa_sha2(void) { return libssh2_version(0x010b00) != NULL; }

/* Why an RSA key was refused, where the linked libssh2 cannot sign it acceptably; "" where it can. */
static const char *rsa_hint(void)
{
    static char hint[300];
    if (odp_ssh_rsa_sha2())
        return "";
    snprintf(hint, sizeof hint,
             "libssh2 %s signs RSA keys only with SHA-1 (ssh-rsa), which OpenSSH >= 8.8 refuses (libssh2 >= 1.11 "
             "does not): use an ed25519 or ecdsa key (ssh-keygen -t ed25519; EC2 offers ed25519 key pairs)",
             libssh2_version(0));
    return hint;
}

static int auth_file(odp_ssh *s, const odp_ssh_opts *o, const char *key, double deadline, odp_err *err,
                     int *rc_out)
{
    int rc;
    DO_OR_WAIT(s, rc,
               libssh2_userauth_publickey_fromfile_ex(s->session, o->user, (unsigned)strlen(o->user), NULL, key,
                                                      o->passphrase),
               deadline, err);
    *rc_out = rc;
    return 0;
}

static int authenticate(odp_ssh *s, const odp_ssh_opts *o, double deadline, odp_err *err)
{
    char tried[1024] = "";
    int rc = -1, any_rsa = 0, w;
    size_t tl = 0;
    if (o->identity) {
        if (access(o->identity, R_OK))
            return odp_fail_errno(err, ODP_EAUTH, errno, "cannot read identity file %s", o->identity);
        if ((w = auth_file(s, o, o->identity, deadline, err, &rc)))
            return w;
        if (rc == 0)
            return 0;
        char *msg = NULL;
        libssh2_session_last_error(s->session, &msg, NULL, 0);
        if (is_rsa_key(o->identity) && *rsa_hint())
            return odp_fail(err, ODP_EAUTH, "%s refused RSA key %s: %s", s->uri, o->identity, rsa_hint());
        if (rc == LIBSSH2_ERROR_FILE || (msg && strstr(msg, "passphrase")))
            return odp_fail(err, ODP_EAUTH, "cannot use identity %s (%s): an encrypted key needs its passphrase "
                            "(ODP_SSH_PASSPHRASE, or type it at the prompt on a terminal)",
                            o->identity, msg ? msg : "unreadable");
        return odp_fail(err, ODP_EAUTH, "%s refused key %s (%s)", s->uri, o->identity,
                        msg ? msg : "authentication failed");
    }
    const char *agent_socket = o->agent_socket ? o->agent_socket : getenv("SSH_AUTH_SOCK");
    if (o->use_agent && agent_socket && *agent_socket) {
        LIBSSH2_AGENT *agent = libssh2_agent_init(s->session);
        if (agent)
            libssh2_agent_set_identity_path(agent, agent_socket);
        if (agent && libssh2_agent_connect(agent) == 0 && libssh2_agent_list_identities(agent) == 0) {
            struct libssh2_agent_publickey *id = NULL, *prev = NULL;
            while (libssh2_agent_get_identity(agent, &id, prev) == 0) {
                prev = id;
                while ((rc = libssh2_agent_userauth(agent, o->user, id)) == LIBSSH2_ERROR_EAGAIN)
                    if ((w = wait_socket(s, deadline, err))) {
                        libssh2_agent_disconnect(agent);
                        libssh2_agent_free(agent);
                        return w;
                    }
                if (rc == 0)
                    break;
            }
            tl += (size_t)snprintf(tried + tl, sizeof tried - tl, "ssh-agent");
        }
        if (agent) {
            libssh2_agent_disconnect(agent);
            libssh2_agent_free(agent);
        }
        if (rc == 0)
            return 0;
    }
    for (const char *const *k = o->keys; k && *k; k++) {
        if (access(*k, R_OK))
            continue;
        if ((w = auth_file(s, o, *k, deadline, err, &rc)))
            return w;
        if (rc == 0)
            return 0;
        any_rsa |= is_rsa_key(*k) && *rsa_hint();
        if (tl < sizeof tried)
            tl += (size_t)snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", *k);
    }
    /* s->uri is user@host[:port]: the user is named there, once */
    return odp_fail(err, ODP_EAUTH, "%s: no key accepted (tried: %s)%s%s", s->uri,
                    tl ? tried : "nothing: no identity, agent or ~/.ssh/id_ed25519|id_ecdsa",
                    any_rsa ? "; " : "", any_rsa ? rsa_hint() : "; pass --identity FILE");
}

/* Starts the ProxyCommand (through /bin/sh, in its own process group) on one end of a socketpair. */
static int start_proxy(odp_ssh *s, const char *command, odp_err *err)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
        return odp_fail_errno(err, ODP_EIO, errno, "ProxyCommand: socketpair");
    char tmpl[] = "/tmp/odp-proxy-err.XXXXXX";
    const char *tmpdir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir && *tmpdir ? tmpdir : "/tmp", tmpl + 5);
    s->proxy_err_fd = mkostemp(path, O_CLOEXEC);
    if (s->proxy_err_fd < 0) {
        close(sp[0]);
        close(sp[1]);
        return odp_fail_errno(err, ODP_EIO, errno, "ProxyCommand: temporary file in %s", path);
    }
    unlink(path);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, defaults;
    sigemptyset(&none);
    sigfillset(&defaults);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sp[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, s->proxy_err_fd, 2);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    char *const argv[] = {"sh", "-c", (char *)command, NULL};
    extern char **environ;
    int rc = posix_spawn(&s->proxy_pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sp[1]);
    if (rc) {
        s->proxy_pid = 0;
        close(sp[0]);
        return odp_fail_errno(err, ODP_EIO, rc, "cannot start ProxyCommand `%s`", command);
    }
    odp_child_track(s->proxy_pid); /* waited for by stop_proxy, not by odp_reap_orphans */
    fcntl(sp[0], F_SETFL, fcntl(sp[0], F_GETFL) | O_NONBLOCK);
    s->fd = sp[0];
    return 0;
}

/* Reaps pid when it exits before the deadline; 0 when it is still running (or Ctrl-C ended the wait). */
static pid_t reap_until(pid_t pid, int *status, double deadline)
{
    pid_t r;
    while ((r = waitpid(pid, status, WNOHANG)) == 0 && odp_now() < deadline) {
        double next = odp_now() + 0.01;
        if (odp_sleep_until(next < deadline ? next : deadline, NULL))
            break;
    }
    return r;
}

/* Ends the ProxyCommand: `natural` seconds to exit by itself (its stdin is closed by then), then TERM to its
 * process group and 1 s, then KILL. Returns its wait status, -1 if there is none. */
static int stop_proxy(odp_ssh *s, double natural)
{
    int status = -1;
    pid_t pid = s->proxy_pid;
    if (pid <= 0)
        return status;
    s->proxy_pid = 0;
    pid_t r = reap_until(pid, &status, odp_now() + natural);
    if (r == 0) {
        kill(-pid, SIGTERM);
        r = reap_until(pid, &status, odp_now() + 1.0);
    }
    if (r == 0) {
        kill(-pid, SIGKILL);
        r = waitpid(pid, &status, 0);
    }
    odp_child_untrack(pid);
    return r == pid ? status : -1;
}

/* The ProxyCommand ended the transport: its exit and the head of its stderr make the message. */
static int proxy_failed(odp_ssh *s, const char *command, odp_err *err)
{
    if (s->fd >= 0) {
        close(s->fd); /* its stdin ends: a proxy still running leaves */
        s->fd = -1;
    }
    int status = stop_proxy(s, 1.0);
    char msg[PROXY_ERR_MAX + 1] = "";
    ssize_t n = pread(s->proxy_err_fd, msg, PROXY_ERR_MAX, 0);
    msg[n > 0 ? n : 0] = 0;
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = *(c + 1) ? ' ' : 0;
    char how[64];
    if (status >= 0 && WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else if (status >= 0 && WIFSIGNALED(status))
        snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(how, sizeof how, "closed the connection");
    return odp_fail(err, ODP_EIO, "ProxyCommand `%s` %s before the SSH handshake%s%s", command, how,
                    *msg ? ": " : "", msg);
}

/* A direct-tcpip channel of via to host:port, and the socketpair the new session talks into. */
static int open_tunnel(odp_ssh *s, odp_ssh *via, const char *host, int port, double deadline, odp_err *err)
{
    int depth = 1;
    for (odp_ssh *h = via; h->via; h = h->via)
        depth++;
    if (depth >= CHAIN_MAX)
        return odp_fail(err, ODP_EIO, "more than %d jump hosts in a chain", CHAIN_MAX - 1);
    LIBSSH2_CHANNEL *ch;
    PTR_OR_WAIT(via, ch, libssh2_channel_direct_tcpip_ex(via->session, host, port, "127.0.0.1", 22), deadline, err);
    if (!ch) {
        char *msg = NULL;
        libssh2_session_last_error(via->session, &msg, NULL, 0);
        return odp_fail(err, ODP_ENODEV, "jump host %s cannot reach %s port %d (%s)", via->uri, host, port,
                        msg && *msg ? msg : "channel refused");
    }
    int sp[2];
    s->up = malloc(TUNNEL_BUF);
    s->down = malloc(TUNNEL_BUF);
    if (!s->up || !s->down || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp)) {
        while (libssh2_channel_free(ch) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(via, deadline, NULL))
                break;
        return odp_fail(err, ODP_EIO, "out of memory or descriptors for the tunnel to %s", host);
    }
    s->via = via;
    s->tunnel = ch;
    s->fd = sp[0];
    s->pump_fd = sp[1];
    return 0;
}

static int connect_session(odp_ssh *s, const odp_ssh_opts *o, odp_err *err)
{
    int port = o->port > 0 ? o->port : 22, rc;
    double dl = o->deadline;
    if (o->via)
        rc = open_tunnel(s, o->via, o->host, port, dl, err);
    else if (o->proxy_command)
        rc = start_proxy(s, o->proxy_command, err);
    else
        rc = (s->fd = odp_tcp_connect_to(o->host, port, dl, err)) < 0 ? err->code : 0;
    if (rc)
        return rc;
    s->alive_interval = o->alive_interval;
    s->alive_count_max = o->alive_count_max;
    s->last_rx = odp_now();
    s->session = libssh2_session_init_ex(NULL, NULL, NULL, s);
    if (!s->session)
        return odp_fail(err, ODP_EIO, "libssh2_session_init failed");
    libssh2_session_callback_set(s->session, LIBSSH2_CALLBACK_SEND, (void *)counted_send);
    libssh2_session_callback_set(s->session, LIBSSH2_CALLBACK_RECV, (void *)counted_recv);
    libssh2_session_set_blocking(s->session, 0);
    char types[256];
    known_types(o, o->host_key_alias ? o->host_key_alias : o->host, port, types, sizeof types);
    if (types[0] && libssh2_session_method_pref(s->session, LIBSSH2_METHOD_HOSTKEY, types) != 0)
        libssh2_session_method_pref(s->session, LIBSSH2_METHOD_HOSTKEY, NULL);
    while ((rc = libssh2_session_handshake(s->session, s->fd)) == LIBSSH2_ERROR_EAGAIN) {
        int w = wait_socket(s, dl, err);
        if (w == ODP_ETIMEDOUT)
            return odp_fail(err, ODP_ETIMEDOUT, "SSH handshake with %s timed out", s->uri);
        if (w)
            return w;
    }
    if (rc) {
        if (s->proxy_pid > 0 && (rc == LIBSSH2_ERROR_SOCKET_DISCONNECT || rc == LIBSSH2_ERROR_SOCKET_RECV ||
                                 rc == LIBSSH2_ERROR_SOCKET_SEND || rc == LIBSSH2_ERROR_BANNER_RECV))
            return proxy_failed(s, o->proxy_command, err);
        if (types[0] && rc == LIBSSH2_ERROR_KEX_FAILURE)
            return odp_fail(err, ODP_EHOSTKEY, "%s offers none of the host key types known for it (%s) in %s", s->uri,
                            types, o->known_hosts);
        /* the host and the port, always: a banner that never came is most often another server on that port */
        char what[300];
        snprintf(what, sizeof what, "SSH handshake with %s port %d failed%s", o->host, port,
                 rc == LIBSSH2_ERROR_BANNER_RECV || rc == LIBSSH2_ERROR_SOCKET_DISCONNECT ||
                         rc == LIBSSH2_ERROR_SOCKET_RECV
                     ? " (is an SSH server listening there?)"
                     : "");
        return ssh_fail_err(s, err, ODP_EPROTO, what);
    }
    if ((rc = verify_host_key(s, o, port, err)))
        return rc;
    rc = authenticate(s, o, dl, err);
    if (rc == ODP_ETIMEDOUT)
        return odp_fail(err, ODP_ETIMEDOUT, "authentication with %s timed out", s->uri);
    return rc;
}

int odp_ssh_connect(const odp_ssh_opts *o, odp_ssh **out, odp_err *err)
{
    *out = NULL;
    if (!lib_ready) {
        if (libssh2_init(0))
            return odp_fail(err, ODP_EIO, "libssh2_init failed");
        lib_ready = 1;
    }
    odp_ssh *s = calloc(1, sizeof *s);
    if (!s)
        return odp_fail(err, ODP_EIO, "out of memory");
    s->fd = s->pump_fd = s->proxy_err_fd = -1;
    int port = o->port > 0 ? o->port : 22;
    if (port == 22)
        snprintf(s->uri, sizeof s->uri, "%s@%s", o->user, o->host);
    else
        snprintf(s->uri, sizeof s->uri, "%s@%s:%d", o->user, o->host, port);
    double start = odp_now();
    int rc = connect_session(s, o, err);
    s->traffic.connect_ms = (odp_now() - start) * 1e3;
    if (rc) {
        odp_ssh *via = s->via;
        s->via = NULL; /* stays the caller's */
        close_session(s, via);
        return rc;
    }
    *out = s;
    return 0;
}

void odp_ssh_close(odp_ssh *s)
{
    if (s)
        close_session(s, s->via);
    /* the hops below were closed with it */
}

/* Closes s; `tunnel_via` is the session its tunnel channel belongs to (freed here; closed only when it is
 * s->via, i.e. owned). */
static void close_session(odp_ssh *s, odp_ssh *tunnel_via)
{
    double dl = odp_now() + CLOSE_GRACE_S;
    /* A session's end waits for no answer from the board: each channel's EOF and close are sent, and the socket
     * is shut, so that the frees below find it closed and wait for nothing (a channel's close would wait a round
     * trip for the board's own). No SSH disconnect message: sshd exits as it reads one, dropping channel data it
     * read with it, where the end of the connection lets it first pass that data on, so the last request odp
     * wrote to the helper is still done (odp.target.shell.close_run_dir). The helper ends as its stdin closes. */
    if (s->session)
        for (odp_ssh_channel *c = s->channels; c; c = c->next)
            while (libssh2_channel_close(c->ch) == LIBSSH2_ERROR_EAGAIN &&
                   (libssh2_session_block_directions(s->session) & LIBSSH2_SESSION_BLOCK_OUTBOUND))
                if (wait_socket(s, dl, NULL))
                    break;
    if (s->fd >= 0)
        shutdown(s->fd, SHUT_RDWR);
    while (s->channels) {
        odp_ssh_channel *c = s->channels;
        s->channels = c->next;
        while (libssh2_channel_free(c->ch) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(s, dl, NULL))
                break;
        c->s = NULL;
        c->ch = NULL;
    }
    if (s->sftp) {
        while (libssh2_sftp_shutdown(s->sftp) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(s, dl, NULL))
                break;
    }
    if (s->session) {
        /* the socket is shut: libssh2_session_free's sends fail at once, so it completes */
        for (int tries = 0; libssh2_session_free(s->session) == LIBSSH2_ERROR_EAGAIN && tries < 1000; tries++)
            if (wait_socket(s, dl, NULL))
                break;
    }
    if (s->fd >= 0)
        close(s->fd);
    if (s->tunnel && tunnel_via) {
        /* on failure the channel goes with tunnel_via's session */
        while (libssh2_channel_free(s->tunnel) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(tunnel_via, dl, NULL))
                break;
    }
    if (s->pump_fd >= 0)
        close(s->pump_fd);
    stop_proxy(s, 0);
    if (s->proxy_err_fd >= 0)
        close(s->proxy_err_fd);
    odp_ssh *owned = s->via;
    free(s->up);
    free(s->down);
    free(s);
    odp_ssh_close(owned);
}

/* ---- long-lived channels ---- */

static int channel_dead(odp_ssh_channel *c, odp_err *err)
{
    return c->s ? 0 : odp_fail(err, ODP_EIO, "the SSH session of this channel is closed");
}

static ssize_t channel_read(odp_stream *st, void *buf, size_t n, double deadline, odp_err *err)
{
    odp_ssh_channel *c = (odp_ssh_channel *)st;
    int rc = channel_dead(c, err);
    if (rc)
        return rc;
    for (;;) {
        char e[1024];
        ssize_t k;
        while ((k = libssh2_channel_read_stderr(c->ch, e, sizeof e)) > 0)
            odp_buf_append(&c->err, e, (size_t)k);
        k = libssh2_channel_read(c->ch, buf, n);
        if (k > 0)
            return k;
        if (k < 0 && k != LIBSSH2_ERROR_EAGAIN)
            return ssh_fail_err(c->s, err, ODP_EIO, "reading the channel");
        if (libssh2_channel_eof(c->ch))
            return 0;
        if (libssh2_poll_channel_read(c->ch, 0) || libssh2_poll_channel_read(c->ch, 1))
            continue;
        if ((rc = wait_socket(c->s, deadline, err)))
            return rc;
    }
}

static ssize_t channel_write(odp_stream *st, const void *p, size_t n, double deadline, odp_err *err)
{
    odp_ssh_channel *c = (odp_ssh_channel *)st;
    int rc = channel_dead(c, err);
    if (rc)
        return rc;
    const char *b = p;
    size_t left = n;
    while (left) {
        ssize_t k = libssh2_channel_write(c->ch, b, left);
        if (k > 0) {
            b += k;
            left -= (size_t)k;
        } else if (k == LIBSSH2_ERROR_EAGAIN) {
            if ((rc = wait_socket(c->s, deadline, err)))
                return rc;
        } else {
            return ssh_fail_err(c->s, err, ODP_EIO, "writing the channel");
        }
    }
    return (ssize_t)n;
}

static const odp_buf *channel_stderr(odp_stream *st) { return &((odp_ssh_channel *)st)->err; }

static void channel_close(odp_stream *st)
{
    odp_ssh_channel *c = (odp_ssh_channel *)st;
    odp_ssh *s = c->s;
    if (s) {
        double dl = odp_now() + CLOSE_GRACE_S;
        for (odp_ssh_channel **pp = &s->channels; *pp; pp = &(*pp)->next)
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        /* EOF on its stdin first: the helper sees it and ends what it runs */
        while (libssh2_channel_send_eof(c->ch) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(s, dl, NULL))
                break;
        while (libssh2_channel_close(c->ch) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(s, dl, NULL))
                break;
        while (libssh2_channel_free(c->ch) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(s, dl, NULL))
                break;
    }
    odp_buf_free(&c->err);
    free(c);
}

static const odp_stream_ops channel_ops = {
    .kind = "ssh-channel", .read = channel_read, .write = channel_write, .close = channel_close,
    .diag = channel_stderr};

int odp_ssh_channel_open(odp_ssh *s, const char *command, double deadline, odp_stream **out, odp_err *err)
{
    LIBSSH2_CHANNEL *ch;
    PTR_OR_WAIT(s, ch, libssh2_channel_open_session(s->session), deadline, err);
    if (!ch)
        return ssh_fail_err(s, err, ODP_EIO, "cannot open a channel");
    int rc, w = 0;
    while ((rc = libssh2_channel_exec(ch, command)) == LIBSSH2_ERROR_EAGAIN)
        if ((w = wait_socket(s, deadline, err)))
            break;
    odp_ssh_channel *c = rc ? NULL : calloc(1, sizeof *c);
    if (!c) {
        if (w == 0)
            w = rc ? ssh_fail_err(s, err, ODP_EIO, "remote exec failed") : odp_fail(err, ODP_EIO, "out of memory");
        double dl = odp_now() + CLOSE_GRACE_S;
        while (libssh2_channel_free(ch) == LIBSSH2_ERROR_EAGAIN)
            if (wait_socket(s, dl, NULL))
                break;
        return w;
    }
    c->base.ops = &channel_ops;
    c->s = s;
    c->ch = ch;
    c->err.limit = CHANNEL_STDERR_MAX;
    c->next = s->channels;
    s->channels = c;
    *out = &c->base;
    return 0;
}

/* ---- exec ---- */

static int signal_number(const char *name)
{
    for (int i = 1; i < 65; i++) {
        const char *a = sigabbrev_np(i);
        if (a && strcmp(a, name) == 0)
            return i;
    }
    return 0;
}

/* Sends TERM, then KILL after a short grace, to the remote process group, over a second channel. */
static int kill_remote_group(odp_ssh *s, long pgid, double deadline, odp_err *err)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "kill -TERM -%ld 2>/dev/null || exit 0; i=0; while [ $i -lt 20 ] && kill -0 -%ld 2>/dev/null; "
             "do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done; kill -KILL -%ld 2>/dev/null; exit 0",
             pgid, pgid, pgid);
    LIBSSH2_CHANNEL *ch;
    int rc;
    PTR_OR_WAIT(s, ch, libssh2_channel_open_session(s->session), deadline, err);
    if (!ch)
        return ssh_fail_err(s, err, ODP_EIO, "cannot open a channel to stop the remote command");
    while ((rc = libssh2_channel_exec(ch, cmd)) == LIBSSH2_ERROR_EAGAIN)
        if ((rc = wait_socket(s, deadline, err)))
            break;
    char sink[512];
    while (rc == 0) {
        ssize_t n = libssh2_channel_read(ch, sink, sizeof sink);
        if (n > 0)
            continue;
        if (n == LIBSSH2_ERROR_EAGAIN) {
            if ((rc = wait_socket(s, deadline, err)))
                break;
            continue;
        }
        break;
    }
    while (libssh2_channel_close(ch) == LIBSSH2_ERROR_EAGAIN)
        if (wait_socket(s, deadline, NULL))
            break;
    libssh2_channel_free(ch);
    return rc;
}

typedef struct {
    const odp_ssh_exec_opts *o;
    odp_ssh_exec_result *r;
    char head[PGID_HEAD_MAX]; /* stderr until the pgid line is seen */
    size_t head_len;
    int head_done;
} exec_state;

static void deliver(exec_state *x, int stream, const char *data, size_t n)
{
    if (!n)
        return;
    odp_buf_append(stream == 1 ? &x->r->out : &x->r->err, data, n);
    if (x->o->on_output && !x->r->aborted && x->o->on_output(x->o->ctx, stream, data, n))
        x->r->aborted = 1;
}

/* Finds "ODP-PGID <n>\n" at a line start in the stderr head, strips it and passes the rest on. */
static void scan_head(exec_state *x, int at_eof)
{
    const char *h = x->head, *end = h + x->head_len;
    for (const char *p = h; p < end; p++) {
        if ((p == h || p[-1] == '\n') && (size_t)(end - p) >= 10 && memcmp(p, "ODP-PGID ", 9) == 0) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl)
                break; /* incomplete: wait for more */
            x->r->pgid = strtol(p + 9, NULL, 10);
            x->head_done = 1;
            deliver(x, 2, h, (size_t)(p - h));
            deliver(x, 2, nl + 1, (size_t)(end - nl - 1));
            return;
        }
    }
    if (at_eof || x->head_len >= sizeof x->head) {
        x->head_done = 1;
        deliver(x, 2, h, x->head_len);
    }
}

static void on_stderr(exec_state *x, const char *data, size_t n)
{
    if (x->head_done) {
        deliver(x, 2, data, n);
        return;
    }
    size_t room = sizeof x->head - x->head_len, k = n < room ? n : room;
    memcpy(x->head + x->head_len, data, k);
    x->head_len += k;
    scan_head(x, 0);
    if (k < n)
        deliver(x, 2, data + k, n - k);
}

/* Reads what is there on one stream: 1 = data read, 0 = nothing now (EAGAIN), -2 = EOF, <0 other = error. */
static int drain(LIBSSH2_CHANNEL *ch, int stream, exec_state *x, char *buf)
{
    int got = 0;
    for (;;) {
        ssize_t n = libssh2_channel_read_ex(ch, stream, buf, IO_CHUNK);
        if (n > 0) {
            got = 1;
            if (stream == 0)
                deliver(x, 1, buf, (size_t)n);
            else
                on_stderr(x, buf, (size_t)n);
            continue;
        }
        if (n == LIBSSH2_ERROR_EAGAIN)
            return got;
        if (n == 0)
            return got ? 1 : (libssh2_channel_eof(ch) ? -2 : 0);
        return (int)n;
    }
}

static int exec_channel(odp_ssh *s, LIBSSH2_CHANNEL *ch, exec_state *x, char *buf, odp_err *err)
{
    const odp_ssh_exec_opts *o = x->o;
    odp_ssh_exec_result *r = x->r;
    size_t in_off = 0;
    int in_open = 1, stopping = 0;
    double grace_until = ODP_FOREVER;
    for (;;) {
        int a = drain(ch, 0, x, buf), b = drain(ch, SSH_EXTENDED_DATA_STDERR, x, buf);
        if ((a < 0 && a != -2) || (b < 0 && b != -2))
            return ssh_fail_err(s, err, ODP_EIO, "reading remote output");
        if (a == -2 && b == -2)
            return 0;
        /* A write may make libssh2 read the socket into its own buffers (the command's output, its EOF):
         * after one, drain again before waiting on the socket, or the wait sleeps on data already taken. */
        int wrote = 0;
        if (in_open && !stopping) {
            if (o->stdin_data && in_off < o->stdin_len) {
                ssize_t k = libssh2_channel_write(ch, o->stdin_data + in_off, o->stdin_len - in_off);
                if (k > 0) {
                    in_off += (size_t)k;
                    wrote = 1;
                } else if (k != LIBSSH2_ERROR_EAGAIN) {
                    in_open = 0; /* the command closed its stdin */
                }
            }
            if (in_open && (!o->stdin_data || in_off == o->stdin_len)) {
                int e = libssh2_channel_send_eof(ch);
                if (e != LIBSSH2_ERROR_EAGAIN) {
                    in_open = 0;
                    wrote = 1;
                }
            }
        }
        if (!stopping && (r->aborted || odp_now() >= o->deadline)) {
            stopping = 1;
            r->timed_out = !r->aborted;
            grace_until = odp_now() + STOP_GRACE_S; /* the pid line may still be on its way (slow login files) */
        }
        if (stopping == 1 && (r->pgid > 0 || x->head_done || odp_now() >= grace_until)) {
            /* Kill the whole remote group; the user's deadline has passed, so a fresh short one. */
            stopping = 2;
            if (r->pgid > 0 && kill_remote_group(s, r->pgid, odp_now() + STOP_GRACE_S, err) == 0)
                r->killed_group = 1;
            grace_until = odp_now() + STOP_GRACE_S;
            continue; /* the second channel may have queued this one's EOF: drain before waiting */
        }
        if (stopping == 2 && odp_now() >= grace_until)
            return 0;
        if (a > 0 || b > 0 || wrote)
            continue;
        /* Reading one stream can pull the other's data (or the EOF) off the socket into libssh2's queue. */
        if (libssh2_poll_channel_read(ch, 0) || libssh2_poll_channel_read(ch, 1) || libssh2_channel_eof(ch))
            continue;
        odp_err werr;
        int w = wait_socket(s, stopping ? grace_until : o->deadline, &werr);
        if (w == ODP_ETIMEDOUT)
            continue;
        if (w == ODP_ECANCELED && !stopping) {
            /* Ctrl-C (SIGHUP, SIGTERM): stop the remote group too, as on a timeout, once its pid line is in
             * (a signal right after the start may come before it). The request is lifted meanwhile, so
             * that these waits can wait; odp_ssh_exec raises it again. */
            r->canceled = 1;
            stopping = 1;
            grace_until = odp_now() + STOP_GRACE_S;
            odp_cancel_clear();
            continue;
        }
        if (w) {
            *err = werr;
            return w;
        }
    }
}

int odp_ssh_exec(odp_ssh *s, const odp_ssh_exec_opts *o, odp_ssh_exec_result *r, odp_err *err)
{
    memset(r, 0, sizeof *r);
    r->out.limit = r->err.limit = o->capture_limit;
    double t0 = odp_now();
    LIBSSH2_CHANNEL *ch = NULL;
    while (!(ch = libssh2_channel_open_session(s->session)) &&
           libssh2_session_last_errno(s->session) == LIBSSH2_ERROR_EAGAIN) {
        int w = wait_socket(s, o->deadline, err);
        if (w == ODP_ETIMEDOUT)
            return odp_fail(err, ODP_ETIMEDOUT, "opening a channel to %s timed out", s->uri);
        if (w)
            return w;
    }
    if (!ch)
        return ssh_fail_err(s, err, ODP_EIO, "cannot open a channel");
    size_t n = strlen(o->command) + 64;
    char *cmd = malloc(n);
    char *buf = malloc(IO_CHUNK);
    exec_state *x = calloc(1, sizeof *x);
    int rc = 0;
    if (!cmd || !buf || !x) {
        rc = odp_fail(err, ODP_EIO, "out of memory");
        goto done;
    }
    x->o = o;
    x->r = r;
    /* sshd made the login shell a session and group leader: $$ is the group to stop on a timeout. */
    snprintf(cmd, n, "printf 'ODP-PGID %%d\\n' $$ >&2\n%s", o->command);
    while ((rc = libssh2_channel_exec(ch, cmd)) == LIBSSH2_ERROR_EAGAIN)
        if ((rc = wait_socket(s, o->deadline, err)))
            goto done;
    if (rc) {
        rc = ssh_fail_err(s, err, ODP_EIO, "remote exec failed");
        goto done;
    }
    rc = exec_channel(s, ch, x, buf, err);
    if (!x->head_done)
        scan_head(x, 1);
    r->wall_s = odp_now() - t0;
    if (rc)
        goto done;
    double dl = odp_now() + CLOSE_GRACE_S;
    int c;
    while ((c = libssh2_channel_close(ch)) == LIBSSH2_ERROR_EAGAIN)
        if (wait_socket(s, dl, NULL))
            break;
    while ((c = libssh2_channel_wait_closed(ch)) == LIBSSH2_ERROR_EAGAIN)
        if (wait_socket(s, dl, NULL))
            break;
    char *sig = NULL;
    size_t siglen = 0;
    if (libssh2_channel_get_exit_signal(ch, &sig, &siglen, NULL, NULL, NULL, NULL) == 0 && sig && siglen) {
        snprintf(r->signal_name, sizeof r->signal_name, "%.*s", (int)siglen, sig);
        r->signal = signal_number(r->signal_name); /* 0 if unknown here; signal_name still says it */
    }
    if (sig)
        libssh2_free(s->session, sig);
    if (!r->signal_name[0])
        r->status = libssh2_channel_get_exit_status(ch);
done:
    libssh2_channel_free(ch);
    free(cmd);
    free(buf);
    free(x);
    if (r->canceled)
        odp_cancel_request(); /* lifted while the remote group was stopped: the caller sees it */
    if (rc)
        odp_ssh_exec_result_free(r);
    return rc;
}

void odp_ssh_exec_result_free(odp_ssh_exec_result *r)
{
    odp_buf_free(&r->out);
    odp_buf_free(&r->err);
}

/* ---- SFTP ---- */

static int sftp_ready(odp_ssh *s, double deadline, odp_err *err)
{
    if (s->sftp)
        return 0;
    PTR_OR_WAIT(s, s->sftp, libssh2_sftp_init(s->session), deadline, err);
    if (!s->sftp)
        return ssh_fail_err(s, err, ODP_EIO, "cannot start SFTP (is sftp-server installed on the board?)");
    return 0;
}

static int sftp_fail(odp_ssh *s, odp_err *err, const char *what, const char *path)
{
    unsigned long st = s->sftp ? libssh2_sftp_last_error(s->sftp) : 0;
    if (libssh2_session_last_errno(s->session) == LIBSSH2_ERROR_SFTP_PROTOCOL) {
        odp_code c = st == LIBSSH2_FX_NO_SUCH_FILE || st == LIBSSH2_FX_NO_SUCH_PATH ? ODP_ENOTFOUND
                   : st == LIBSSH2_FX_PERMISSION_DENIED                             ? ODP_EAUTH
                                                                                    : ODP_EIO;
        static const char *names[] = {"ok", "end of file", "no such file", "permission denied", "failure",
                                      "bad message", "no connection", "connection lost", "unsupported"};
        return odp_fail(err, c, "%s %s on %s: %s", what, path, s->uri,
                        st < sizeof names / sizeof *names ? names[st] : "SFTP error");
    }
    char m[300];
    snprintf(m, sizeof m, "%s %s", what, path);
    return ssh_fail_err(s, err, ODP_EIO, m);
}

/* These three return 0, 1 when libssh2 reports a failure (see sftp_fail), or a negative odp code from the wait. */
static int sftp_close_handle(odp_ssh *s, LIBSSH2_SFTP_HANDLE *h, double deadline, odp_err *err)
{
    int rc;
    DO_OR_WAIT(s, rc, libssh2_sftp_close_handle(h), deadline, err);
    return rc != 0;
}

static int sftp_unlink(odp_ssh *s, const char *path, double deadline, odp_err *err)
{
    int rc;
    DO_OR_WAIT(s, rc, libssh2_sftp_unlink_ex(s->sftp, path, (unsigned)strlen(path)), deadline, err);
    return rc != 0;
}

static int sftp_rename(odp_ssh *s, const char *from, const char *to, double deadline, odp_err *err)
{
    int rc;
    DO_OR_WAIT(s, rc,
               libssh2_sftp_rename_ex(s->sftp, from, (unsigned)strlen(from), to, (unsigned)strlen(to),
                                      LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC |
                                          LIBSSH2_SFTP_RENAME_NATIVE),
               deadline, err);
    return rc != 0;
}

static int put_data(odp_ssh *s, LIBSSH2_SFTP_HANDLE *h, int fd, char *buf, long long total, double deadline,
                    odp_ssh_progress progress, void *ctx, long long *done, const char *local, const char *tmp,
                    odp_err *err)
{
    for (;;) {
        ssize_t n = read(fd, buf, IO_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return odp_fail_errno(err, ODP_EIO, errno, "reading %s", local);
        if (n == 0)
            return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w;
            DO_OR_WAIT(s, w, libssh2_sftp_write(h, buf + off, (size_t)(n - off)), deadline, err);
            if (w < 0)
                return sftp_fail(s, err, "writing", tmp);
            off += w;
            *done += w;
        }
        if (progress && progress(ctx, *done, total))
            return odp_fail(err, ODP_ECANCELED, "upload of %s stopped", local);
    }
}

int odp_ssh_put(odp_ssh *s, const char *local, const char *remote, int mode, double deadline,
                odp_ssh_progress progress, void *ctx, long long *bytes, odp_err *err)
{
    *bytes = 0;
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot open %s", local);
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return odp_fail(err, ODP_EIO, "%s is not a regular file", local);
    }
    if (mode < 0)
        mode = (int)(st.st_mode & 07777);
    int rc = sftp_ready(s, deadline, err);
    if (rc) {
        close(fd);
        return rc;
    }
    size_t tl = strlen(remote) + 40;
    char *tmp = malloc(tl), *buf = malloc(IO_CHUNK);
    LIBSSH2_SFTP_HANDLE *h = NULL;
    int created = 0;
    if (!tmp || !buf) {
        rc = odp_fail(err, ODP_EIO, "out of memory");
        goto done;
    }
    snprintf(tmp, tl, "%s.odp-part-%ld", remote, (long)getpid());
    while (!(h = libssh2_sftp_open_ex(s->sftp, tmp, (unsigned)strlen(tmp),
                                      LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC, 0600,
                                      LIBSSH2_SFTP_OPENFILE)) &&
           libssh2_session_last_errno(s->session) == LIBSSH2_ERROR_EAGAIN)
        if ((rc = wait_socket(s, deadline, err)))
            goto done;
    if (!h) {
        rc = sftp_fail(s, err, "cannot create", tmp);
        goto done;
    }
    created = 1;
    if ((rc = put_data(s, h, fd, buf, (long long)st.st_size, deadline, progress, ctx, bytes, local, tmp, err)))
        goto done;
    /* fsync@openssh.com so a rename never exposes data still in the board's page cache; optional extension. */
    int f;
    while ((f = libssh2_sftp_fsync(h)) == LIBSSH2_ERROR_EAGAIN)
        if ((rc = wait_socket(s, deadline, err)))
            goto done;
    LIBSSH2_SFTP_ATTRIBUTES attrs = {.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS, .permissions = (unsigned long)mode};
    while ((f = libssh2_sftp_fsetstat(h, &attrs)) == LIBSSH2_ERROR_EAGAIN)
        if ((rc = wait_socket(s, deadline, err)))
            goto done;
    if (f) {
        rc = sftp_fail(s, err, "cannot chmod", tmp);
        goto done;
    }
    rc = sftp_close_handle(s, h, deadline, err);
    h = NULL;
    if (rc) {
        rc = rc > 0 ? sftp_fail(s, err, "closing", tmp) : rc;
        goto done;
    }
    /* SFTP v3 (OpenSSH) refuses to rename over an existing file: remove the old one, then rename. */
    if ((rc = sftp_rename(s, tmp, remote, deadline, err)) == 1) {
        if ((rc = sftp_unlink(s, remote, deadline, err)) == 1)
            rc = 0; /* absent: fine */
        if (rc == 0 && (rc = sftp_rename(s, tmp, remote, deadline, err)) == 1)
            rc = sftp_fail(s, err, "cannot rename to", remote);
    }
    if (rc == 0)
        created = 0;
done:
    close(fd);
    if (rc && s->sftp) {
        /* Best effort while the connection is up: the partial file has a name nobody mistakes for done, and
         * the next odp removes what is left (odp.target.shell.space). Ctrl-C (SIGHUP, SIGTERM) is lifted
         * meanwhile, so that these waits can wait, and raised again for the caller. The handle is freed
         * whatever the connection's state. */
        int canceled = rc == ODP_ECANCELED && !s->lost[0];
        if (canceled)
            odp_cancel_clear();
        double dl = odp_now() + (canceled ? 3.0 : 1.0);
        odp_err ignored;
        if (h)
            sftp_close_handle(s, h, dl, &ignored);
        if (created && !s->lost[0])
            sftp_unlink(s, tmp, dl, &ignored);
        if (canceled)
            odp_cancel_request();
    }
    free(tmp);
    free(buf);
    return rc;
}

int odp_ssh_get(odp_ssh *s, const char *remote, const char *local, double deadline, odp_ssh_progress progress,
                void *ctx, long long *bytes, odp_err *err)
{
    *bytes = 0;
    int rc = sftp_ready(s, deadline, err);
    if (rc)
        return rc;
    LIBSSH2_SFTP_HANDLE *h;
    PTR_OR_WAIT(s, h,
                libssh2_sftp_open_ex(s->sftp, remote, (unsigned)strlen(remote), LIBSSH2_FXF_READ, 0,
                                     LIBSSH2_SFTP_OPENFILE),
                deadline, err);
    if (!h)
        return sftp_fail(s, err, "cannot open", remote);
    LIBSSH2_SFTP_ATTRIBUTES attrs;
    long long total = -1;
    int f;
    while ((f = libssh2_sftp_fstat_ex(h, &attrs, 0)) == LIBSSH2_ERROR_EAGAIN)
        if ((rc = wait_socket(s, deadline, err)))
            break;
    if (!rc && f == 0 && (attrs.flags & LIBSSH2_SFTP_ATTR_SIZE))
        total = (long long)attrs.filesize;
    size_t tl = strlen(local) + 32;
    char *tmp = malloc(tl), *buf = malloc(IO_CHUNK);
    int fd = -1;
    if (!rc && (!tmp || !buf))
        rc = odp_fail(err, ODP_EIO, "out of memory");
    if (!rc) {
        snprintf(tmp, tl, "%s.odp-part-XXXXXX", local);
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
            rc = odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot create %s", tmp);
        else
            fchmod(fd, 0644);
    }
    while (!rc) {
        ssize_t n;
        while ((n = libssh2_sftp_read(h, buf, IO_CHUNK)) == LIBSSH2_ERROR_EAGAIN)
            if ((rc = wait_socket(s, deadline, err)))
                break;
        if (rc)
            break;
        if (n < 0) {
            rc = sftp_fail(s, err, "reading", remote);
            break;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = odp_fail_errno(err, ODP_EIO, errno, "writing %s", tmp);
                break;
            }
            off += w;
        }
        *bytes += n;
        if (!rc && progress && progress(ctx, *bytes, total))
            rc = odp_fail(err, ODP_ECANCELED, "download of %s stopped", remote);
    }
    if (!rc && total >= 0 && *bytes != total)
        rc = odp_fail(err, ODP_EIO, "%s: got %lld of %lld bytes", remote, *bytes, total);
    if (!rc && fsync(fd))
        rc = odp_fail_errno(err, ODP_EIO, errno, "fsync %s", tmp);
    if (fd >= 0 && close(fd) && !rc)
        rc = odp_fail_errno(err, ODP_EIO, errno, "close %s", tmp);
    if (!rc && rename(tmp, local))
        rc = odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot rename %s to %s", tmp, local);
    if (rc && fd >= 0)
        unlink(tmp);
    odp_err ignored;
    sftp_close_handle(s, h, rc ? odp_now() + 1.0 : deadline, &ignored);
    free(tmp);
    free(buf);
    return rc;
}
