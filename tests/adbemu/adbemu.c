/* adbemu: the device side of the adb protocol over TCP, for tests.
 *
 * Serves a sandbox directory as the device filesystem (the emulator enters a
 * private mount namespace and chroots into it, with the host's /usr, /etc,
 * /dev and /proc bound in, so device paths like /data/local/tmp/x are real
 * paths for sync and shell alike). Modes selected by flags let tests provoke
 * every behaviour a real device or a hostile peer shows; see README.md.
 *
 * Test code, not part of odp: it prints its port and a log of violations. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include "adbemu.h"

/* ---------- options ---------- */

enum auth_mode { AUTH_NONE, AUTH_VERIFY, AUTH_ACCEPT, AUTH_NEVER };

static struct {
    const char *root;
    int port;
    const char *port_file;
    enum auth_mode auth;
    const char *auth_key;
    int accept_delay_ms;
    const char *accept_file; /* accept-on:FILE: the user taps Allow when FILE exists */
    int accept_dir;          /* FILE's directory, opened before the chroot */
    const char *features;
    const char *model, *name, *device;
    uint32_t version;
    uint32_t maxdata;
    size_t split;
    int coalesce;
    int fail_send;
    const char *refuse[16];
    int nrefuse;
    long long drop_push;
    int drop_push_times;
    int verbose;
    int once;
    int chroot;
} opt = {
    .port = 0,
    .auth = AUTH_NONE,
    .features = "shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir",
    .model = "X300_Pro_Emu",
    .name = "adbemu",
    .device = "adbemu",
    .version = ADB_VERSION_SKIP_CHECKSUM,
    .maxdata = 1024 * 1024,
    .drop_push = -1,
    .drop_push_times = 1,
    .chroot = 1,
};

static void logv(const char *fmt, ...)
{
    if (!opt.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "adbemu: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Protocol violations by the host are always logged: tests grep for them. */
static void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "adbemu: violation: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "adbemu: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------- byte buffers ---------- */

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void buf_add(struct buf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            die("out of memory");
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void buf_drop(struct buf *b, size_t n)
{
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = v;
    p[1] = v >> 8;
    p[2] = v >> 16;
    p[3] = v >> 24;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
    return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---------- keys ---------- */

static EVP_PKEY *trusted[32];
static int ntrusted;

/* Android's public key struct, base64 in adbkey.pub / AUTH RSAPUBLICKEY. */
static EVP_PKEY *parse_android_pubkey(const char *text, size_t len)
{
    size_t b64len = 0;
    while (b64len < len && text[b64len] && text[b64len] != ' ' && text[b64len] != '\n')
        b64len++;
    if (b64len == 0 || b64len > 2048 || b64len % 4)
        return NULL;
    uint8_t raw[2048];
    int n = EVP_DecodeBlock(raw, (const unsigned char *)text, (int)b64len);
    if (n < 0)
        return NULL;
    if (text[b64len - 1] == '=')
        n--;
    if (text[b64len - 2] == '=')
        n--;
    if (n != 524 || get32(raw) != 64)
        return NULL;
    BIGNUM *bn_n = BN_lebin2bn(raw + 8, 256, NULL);
    BIGNUM *bn_e = BN_new();
    BN_set_word(bn_e, get32(raw + 520));
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n);
    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    EVP_PKEY *pkey = NULL;
    if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn_n);
    BN_free(bn_e);
    return pkey;
}

static int verify_token(EVP_PKEY *key, const uint8_t *token, const uint8_t *sig, size_t siglen)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(key, NULL);
    int ok = ctx && EVP_PKEY_verify_init(ctx) > 0 &&
             EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) > 0 &&
             EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha1()) > 0 &&
             EVP_PKEY_verify(ctx, sig, siglen, token, ADB_TOKEN_SIZE) == 1;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

static void load_trusted_key(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot open %s: %s", path, strerror(errno));
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    EVP_PKEY *k = parse_android_pubkey(text, n);
    if (!k)
        die("%s: not an adb public key", path);
    trusted[ntrusted++] = k;
}

/* ---------- streams and connection ---------- */

enum kind { K_SHELL_V2, K_SHELL_RAW, K_EXEC, K_SYNC };
enum sync_state { SY_IDLE, SY_SEND, SY_SEND_FAILED, SY_RECV };

struct stream {
    int used;
    uint32_t id, peer;
    enum kind kind;
    int awaiting_okay;
    struct buf out;   /* bytes for the host, sent as WRTEs */
    int closing;      /* send CLSE once out is drained */
    /* shell */
    pid_t pid;
    int in_fd, out_fd, err_fd;
    struct buf in;    /* stdin bytes for the child */
    struct buf v2in;  /* partial shell v2 packets from the host */
    int close_in;     /* close stdin once `in` drains */
    int okay_owed;    /* OKAY withheld until `in` drains */
    int exit_done;
    /* sync */
    struct buf sin;
    enum sync_state sy;
    int sfd;
    char spath[1100];
    uint32_t smode;
};

#define MAX_STREAMS 64

struct conn {
    int fd;
    int connected;
    int checksum;
    uint32_t send_max;
    uint8_t token[ADB_TOKEN_SIZE];
    int64_t accept_at; /* pending "user taps Allow" */
    EVP_PKEY *pending_key;
    struct stream st[MAX_STREAMS];
    uint32_t next_id;
    int dropped;
};

static int drop_push_done;

static int write_full(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_full(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static const char *cmd_name(uint32_t c)
{
    static char s[5];
    memcpy(s, &c, 4);
    s[4] = 0;
    return s;
}

static void send_msg(struct conn *c, uint32_t cmd, uint32_t a0, uint32_t a1, const void *data, size_t len)
{
    if (c->dropped)
        return;
    uint8_t h[ADB_HEADER_SIZE];
    int sum = c->checksum || cmd == ADB_CNXN || cmd == ADB_AUTH;
    adb_pack_header(h, cmd, a0, a1, data, (uint32_t)len, sum);
    logv("-> %s %u %u len=%zu", cmd_name(cmd), a0, a1, len);
    if (write_full(c->fd, h, sizeof h) || write_full(c->fd, data, len))
        c->dropped = 1;
}

static struct stream *find_stream(struct conn *c, uint32_t id)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (c->st[i].used && c->st[i].id == id)
            return &c->st[i];
    return NULL;
}

static void stream_free(struct stream *s)
{
    if (s->pid > 0) {
        kill(-s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    if (s->in_fd >= 0)
        close(s->in_fd);
    if (s->out_fd >= 0)
        close(s->out_fd);
    if (s->err_fd >= 0)
        close(s->err_fd);
    if (s->sfd >= 0)
        close(s->sfd);
    buf_free(&s->out);
    buf_free(&s->in);
    buf_free(&s->v2in);
    buf_free(&s->sin);
    memset(s, 0, sizeof *s);
    s->in_fd = s->out_fd = s->err_fd = s->sfd = -1;
}

static void send_banner(struct conn *c, uint32_t host_version, uint32_t host_maxdata)
{
    char banner[1024];
    snprintf(banner, sizeof banner,
             "device::ro.product.name=%s;ro.product.model=%s;ro.product.device=%s;features=%s",
             opt.name, opt.model, opt.device, opt.features);
    uint32_t v = host_version < opt.version ? host_version : opt.version;
    uint32_t m = host_maxdata < opt.maxdata ? host_maxdata : opt.maxdata;
    send_msg(c, ADB_CNXN, v, m, banner, strlen(banner));
    c->connected = 1;
}

static uint32_t host_version_seen, host_maxdata_seen;

static void send_token(struct conn *c)
{
    if (getrandom(c->token, sizeof c->token, 0) != sizeof c->token)
        die("getrandom failed");
    send_msg(c, ADB_AUTH, ADB_AUTH_TOKEN, 0, c->token, sizeof c->token);
}

static int has_feature(const char *f)
{
    size_t n = strlen(f);
    const char *p = opt.features;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, f, n))
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* ---------- shell ---------- */

static int start_shell(struct stream *s, const char *cmd)
{
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (s->kind == K_EXEC) {
            int dn = open("/dev/null", O_WRONLY);
            dup2(dn, 2);
        } else {
            dup2(s->kind == K_SHELL_V2 ? err[1] : out[1], 2);
        }
        if (opt.chroot) {
            if (chdir("/") != 0)
                _exit(127);
        } else if (chdir(opt.root) != 0) {
            _exit(127);
        }
        setenv("PATH", "/system/bin:/system/xbin:/vendor/bin:/usr/bin:/bin:/usr/sbin:/sbin", 1);
        setenv("HOME", "/", 1);
        setenv("TMPDIR", "/data/local/tmp", 1);
        setenv("ANDROID_DATA", "/data", 1);
        if (*cmd)
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        else
            execl("/bin/sh", "sh", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (s->kind != K_SHELL_V2) {
        close(err[0]);
        err[0] = -1;
    }
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    s->in_fd = in[1];
    s->out_fd = out[0];
    s->err_fd = err[0];
    return 0;
}

static void v2_packet(struct buf *b, uint8_t id, const void *d, uint32_t len)
{
    uint8_t h[5];
    h[0] = id;
    put32(h + 1, len);
    buf_add(b, h, 5);
    buf_add(b, d, len);
}

/* Host -> shell data: raw stdin, or shell v2 packets. */
static void shell_input(struct stream *s, const uint8_t *d, size_t n)
{
    if (s->kind != K_SHELL_V2) {
        if (s->in_fd >= 0)
            buf_add(&s->in, d, n);
        return;
    }
    buf_add(&s->v2in, d, n);
    while (s->v2in.len >= 5) {
        uint32_t len = get32(s->v2in.p + 1);
        if (len > 16 * 1024 * 1024) {
            violation("shell v2 packet of %u bytes", len);
            s->close_in = 1;
            s->v2in.len = 0;
            return;
        }
        if (s->v2in.len < 5 + (size_t)len)
            return;
        uint8_t id = s->v2in.p[0];
        if (id == ADB_SHELL_STDIN && s->in_fd >= 0)
            buf_add(&s->in, s->v2in.p + 5, len);
        else if (id == ADB_SHELL_CLOSE_STDIN)
            s->close_in = 1;
        else if (id != ADB_SHELL_WINDOW_SIZE)
            violation("shell v2 packet id %u from host", id);
        buf_drop(&s->v2in, 5 + len);
    }
}

/* ---------- sync ---------- */

static const char *dev_path(const char *p, char *tmp, size_t n)
{
    if (opt.chroot)
        return p;
    snprintf(tmp, n, "%s/%s", opt.root, p);
    return tmp;
}

static void sync_reply(struct stream *s, uint32_t id, const void *d, uint32_t len)
{
    uint8_t h[8];
    put32(h, id);
    put32(h + 4, len);
    buf_add(&s->out, h, 8);
    buf_add(&s->out, d, len);
}

static void sync_fail(struct stream *s, const char *msg)
{
    sync_reply(s, ADB_SYNC_FAIL, msg, (uint32_t)strlen(msg));
}

static void fill_stat2(uint8_t *r, uint32_t id, const struct stat *st, int err)
{
    memset(r, 0, 72);
    put32(r, id);
    put32(r + 4, (uint32_t)err);
    if (err)
        return;
    put64(r + 8, st->st_dev);
    put64(r + 16, st->st_ino);
    put32(r + 24, st->st_mode);
    put32(r + 28, (uint32_t)st->st_nlink);
    put32(r + 32, st->st_uid);
    put32(r + 36, st->st_gid);
    put64(r + 40, (uint64_t)st->st_size);
    put64(r + 48, (uint64_t)st->st_atime);
    put64(r + 56, (uint64_t)st->st_mtime);
    put64(r + 64, (uint64_t)st->st_ctime);
}

static void mkdirs_for(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        mkdir(tmp, 0775);
        *p = '/';
    }
}

static void sync_list(struct stream *s, const char *path, int v2)
{
    char tmp[PATH_MAX];
    const char *hp = dev_path(path, tmp, sizeof tmp);
    DIR *d = opendir(hp);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char full[PATH_MAX + 512];
        struct stat st;
        snprintf(full, sizeof full, "%s/%s", hp, de->d_name);
        int err = lstat(full, &st) ? errno : 0;
        uint32_t nl = (uint32_t)strlen(de->d_name);
        if (v2) {
            uint8_t r[76];
            fill_stat2(r, ADB_SYNC_DNT2, &st, err);
            put32(r + 72, nl);
            buf_add(&s->out, r, 76);
        } else {
            uint8_t r[20];
            put32(r, ADB_SYNC_DENT);
            put32(r + 4, err ? 0 : st.st_mode);
            put32(r + 8, err ? 0 : (uint32_t)st.st_size);
            put32(r + 12, err ? 0 : (uint32_t)st.st_mtime);
            put32(r + 16, nl);
            buf_add(&s->out, r, 20);
        }
        buf_add(&s->out, de->d_name, nl);
    }
    if (d)
        closedir(d);
    uint8_t done[76] = {0};
    put32(done, ADB_SYNC_DONE);
    buf_add(&s->out, done, v2 ? 76 : 20);
}

/* Returns -1 when the connection must be dropped (disconnect-mid-push mode). */
static int sync_input(struct conn *c, struct stream *s, const uint8_t *d, size_t n)
{
    buf_add(&s->sin, d, n);
    for (;;) {
        if (s->sin.len < 8)
            return 0;
        uint32_t id = get32(s->sin.p), len = get32(s->sin.p + 4);
        int is_path = id == ADB_SYNC_SEND || id == ADB_SYNC_RECV || id == ADB_SYNC_STAT ||
                      id == ADB_SYNC_STA2 || id == ADB_SYNC_LST2 || id == ADB_SYNC_LIST ||
                      id == ADB_SYNC_LIS2;
        if (id == ADB_SYNC_DATA && len > ADB_SYNC_DATA_MAX) {
            violation("sync DATA of %u bytes (max %u)", len, ADB_SYNC_DATA_MAX);
            return -1;
        }
        if (is_path && len > 1024) {
            violation("sync path of %u bytes", len);
            return -1;
        }
        if (id == ADB_SYNC_DONE || id == ADB_SYNC_QUIT)
            len = 0; /* DONE carries an mtime in `len` */
        if (s->sin.len < 8 + (size_t)len)
            return 0;
        const uint8_t *p = s->sin.p + 8;
        char path[1100];
        char tmp[PATH_MAX];
        if (is_path) {
            memcpy(path, p, len);
            path[len] = 0;
        }
        if (s->sy == SY_SEND || s->sy == SY_SEND_FAILED) {
            if (id == ADB_SYNC_DATA) {
                if (s->sy == SY_SEND && write_full(s->sfd, p, len) != 0) {
                    sync_fail(s, strerror(errno));
                    s->sy = SY_SEND_FAILED;
                }
                if (opt.drop_push >= 0 && drop_push_done < opt.drop_push_times) {
                    struct stat st;
                    if (s->sfd >= 0 && !fstat(s->sfd, &st) && st.st_size >= opt.drop_push) {
                        drop_push_done++;
                        logv("dropping the connection mid-push at %lld bytes", (long long)st.st_size);
                        return -1;
                    }
                }
            } else if (id == ADB_SYNC_DONE) {
                uint32_t mtime = get32(s->sin.p + 4);
                if (s->sy == SY_SEND) {
                    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
                    futimens(s->sfd, ts);
                    fchmod(s->sfd, s->smode & 07777);
                    close(s->sfd);
                    s->sfd = -1;
                    sync_reply(s, ADB_SYNC_OKAY, NULL, 0);
                    s->sy = SY_IDLE;
                } else {
                    /* adbd ends the sync service after a failed SEND */
                    if (s->sfd >= 0) {
                        close(s->sfd);
                        s->sfd = -1;
                        unlink(dev_path(s->spath, tmp, sizeof tmp));
                    }
                    s->closing = 1;
                    buf_drop(&s->sin, 8);
                    return 0;
                }
            } else {
                violation("sync id %s during SEND", cmd_name(id));
                return -1;
            }
            buf_drop(&s->sin, 8 + len);
            continue;
        }
        switch (id) {
        case ADB_SYNC_STAT: {
            struct stat st;
            uint8_t r[12] = {0};
            if (!lstat(dev_path(path, tmp, sizeof tmp), &st)) {
                put32(r, st.st_mode);
                put32(r + 4, (uint32_t)st.st_size);
                put32(r + 8, (uint32_t)st.st_mtime);
            }
            uint8_t h[4];
            put32(h, ADB_SYNC_STAT);
            buf_add(&s->out, h, 4);
            buf_add(&s->out, r, 12);
            break;
        }
        case ADB_SYNC_STA2:
        case ADB_SYNC_LST2: {
            struct stat st;
            const char *hp = dev_path(path, tmp, sizeof tmp);
            int rc = id == ADB_SYNC_STA2 ? stat(hp, &st) : lstat(hp, &st);
            uint8_t r[72];
            fill_stat2(r, id, &st, rc ? errno : 0);
            buf_add(&s->out, r, 72);
            break;
        }
        case ADB_SYNC_LIST:
        case ADB_SYNC_LIS2:
            sync_list(s, path, id == ADB_SYNC_LIS2);
            break;
        case ADB_SYNC_SEND: {
            char *comma = strrchr(path, ',');
            if (!comma) {
                violation("SEND without a mode: %s", path);
                return -1;
            }
            *comma = 0;
            s->smode = (uint32_t)strtoul(comma + 1, NULL, 10);
            snprintf(s->spath, sizeof s->spath, "%s", path);
            if (opt.fail_send) {
                sync_fail(s, "adbemu: SEND refused (--fail-send)");
                s->sy = SY_SEND_FAILED;
                break;
            }
            const char *hp = dev_path(path, tmp, sizeof tmp);
            if (has_feature("fixed_push_mkdir"))
                mkdirs_for(hp);
            s->sfd = open(hp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, s->smode & 0777);
            if (s->sfd < 0) {
                char msg[1200];
                snprintf(msg, sizeof msg, "couldn't create file: %s", strerror(errno));
                sync_fail(s, msg);
                s->sy = SY_SEND_FAILED;
            } else {
                s->sy = SY_SEND;
            }
            break;
        }
        case ADB_SYNC_RECV: {
            s->sfd = open(dev_path(path, tmp, sizeof tmp), O_RDONLY | O_CLOEXEC);
            if (s->sfd < 0) {
                sync_fail(s, strerror(errno));
            } else {
                s->sy = SY_RECV;
            }
            break;
        }
        case ADB_SYNC_QUIT:
            s->closing = 1;
            buf_drop(&s->sin, 8);
            return 0;
        default:
            violation("unknown sync id 0x%08x", id);
            return -1;
        }
        buf_drop(&s->sin, 8 + len);
        (void)c;
    }
}

/* Pull: keep some DATA records ahead of the WRTEs. */
static void sync_pump(struct conn *c, struct stream *s)
{
    while (s->sy == SY_RECV && s->out.len < 2 * c->send_max + ADB_SYNC_DATA_MAX) {
        uint8_t chunk[ADB_SYNC_DATA_MAX];
        ssize_t r = read(s->sfd, chunk, sizeof chunk);
        if (r < 0) {
            sync_fail(s, strerror(errno));
        } else if (r > 0) {
            sync_reply(s, ADB_SYNC_DATA, chunk, (uint32_t)r);
            continue;
        } else {
            uint8_t h[8];
            put32(h, ADB_SYNC_DONE);
            put32(h + 4, 0);
            buf_add(&s->out, h, 8);
        }
        close(s->sfd);
        s->sfd = -1;
        s->sy = SY_IDLE;
    }
}

/* ---------- OPEN ---------- */

static void handle_open(struct conn *c, uint32_t host_id, const char *svc)
{
    for (int i = 0; i < opt.nrefuse; i++) {
        if (!strncmp(svc, opt.refuse[i], strlen(opt.refuse[i]))) {
            logv("refusing %s", svc);
            send_msg(c, ADB_CLSE, 0, host_id, NULL, 0);
            return;
        }
    }
    struct stream *s = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!c->st[i].used) {
            s = &c->st[i];
            break;
        }
    if (!s) {
        send_msg(c, ADB_CLSE, 0, host_id, NULL, 0);
        return;
    }
    memset(s, 0, sizeof *s);
    s->in_fd = s->out_fd = s->err_fd = s->sfd = -1;
    const char *cmd = NULL;
    if (!strncmp(svc, "shell", 5) && (svc[5] == ':' || svc[5] == ',')) {
        /* shell[,arg...]:cmd with args v2, raw, pty, TERM=... */
        const char *colon = strchr(svc, ':');
        if (!colon)
            goto refuse;
        int v2 = 0;
        for (const char *a = svc + 5; a < colon;) {
            a++;
            const char *e = memchr(a, ',', (size_t)(colon - a));
            size_t l = e ? (size_t)(e - a) : (size_t)(colon - a);
            if (l == 2 && !memcmp(a, "v2", 2))
                v2 = 1;
            a += l;
        }
        if (v2 && !has_feature("shell_v2"))
            goto refuse;
        if (svc[5] == ',' && !has_feature("shell_v2"))
            goto refuse; /* an old adbd knows only "shell:" */
        s->kind = v2 ? K_SHELL_V2 : K_SHELL_RAW;
        cmd = colon + 1;
    } else if (!strncmp(svc, "exec:", 5)) {
        s->kind = K_EXEC;
        cmd = svc + 5;
    } else if (!strcmp(svc, "sync:")) {
        s->kind = K_SYNC;
    } else {
        goto refuse;
    }
    if (cmd && start_shell(s, cmd) != 0)
        goto refuse;
    s->used = 1;
    s->id = ++c->next_id;
    s->peer = host_id;
    send_msg(c, ADB_OKAY, s->id, host_id, NULL, 0);
    return;
refuse:
    logv("no service %s", svc);
    send_msg(c, ADB_CLSE, 0, host_id, NULL, 0);
}

/* ---------- message dispatch ---------- */

static void handle_msg(struct conn *c, const struct adb_header *h, const uint8_t *d)
{
    switch (h->command) {
    case ADB_CNXN: {
        host_version_seen = h->arg0;
        host_maxdata_seen = h->arg1;
        if (h->data_length > ADB_CNXN_PAYLOAD_MAX)
            violation("CNXN payload of %u bytes", h->data_length);
        uint32_t v = h->arg0 < opt.version ? h->arg0 : opt.version;
        c->checksum = v < ADB_VERSION_SKIP_CHECKSUM;
        uint32_t m = h->arg1 < opt.maxdata ? h->arg1 : opt.maxdata;
        c->send_max = m;
        if (opt.auth == AUTH_NONE)
            send_banner(c, h->arg0, h->arg1);
        else
            send_token(c);
        break;
    }
    case ADB_AUTH:
        if (opt.auth == AUTH_NONE || c->connected) {
            violation("AUTH type %u while not asked", h->arg0);
            break;
        }
        if (h->arg0 == ADB_AUTH_SIGNATURE) {
            for (int i = 0; i < ntrusted; i++) {
                if (verify_token(trusted[i], c->token, d, h->data_length)) {
                    logv("signature verified with key %d", i);
                    send_banner(c, host_version_seen, host_maxdata_seen);
                    return;
                }
            }
            logv("signature refused");
            send_token(c);
        } else if (h->arg0 == ADB_AUTH_RSAPUBLICKEY) {
            if (h->data_length == 0 || d[h->data_length - 1] != 0)
                violation("RSAPUBLICKEY not NUL-terminated");
            EVP_PKEY *k = parse_android_pubkey((const char *)d, h->data_length);
            if (!k) {
                violation("RSAPUBLICKEY does not parse");
                break;
            }
            if (opt.auth == AUTH_ACCEPT && ntrusted < 32) {
                EVP_PKEY_free(c->pending_key);
                c->pending_key = k;
                c->accept_at = now_ms() + opt.accept_delay_ms;
                if (opt.accept_file)
                    logv("public key offered; accepting when %s exists", opt.accept_file);
                else
                    logv("public key offered; accepting in %d ms", opt.accept_delay_ms);
            } else {
                logv("public key offered; never accepted");
                EVP_PKEY_free(k);
            }
        } else {
            violation("AUTH type %u from host", h->arg0);
        }
        break;
    case ADB_OPEN: {
        if (!c->connected) {
            violation("OPEN before CNXN");
            break;
        }
        char svc[4097];
        uint32_t n = h->data_length;
        if (n == 0 || d[n - 1] != 0)
            violation("OPEN service not NUL-terminated");
        memcpy(svc, d, n);
        svc[n] = 0;
        logv("OPEN %s", svc);
        handle_open(c, h->arg0, svc);
        break;
    }
    case ADB_OKAY: {
        struct stream *s = find_stream(c, h->arg1);
        if (!s)
            break;
        if (!s->awaiting_okay)
            violation("OKAY for stream %u with nothing in flight", s->id);
        s->awaiting_okay = 0;
        break;
    }
    case ADB_WRTE: {
        struct stream *s = find_stream(c, h->arg1);
        if (!s)
            break;
        if (s->okay_owed)
            violation("WRTE on stream %u before our OKAY", s->id);
        if (s->kind == K_SYNC) {
            if (sync_input(c, s, d, h->data_length) < 0) {
                c->dropped = 1;
                return;
            }
        } else {
            shell_input(s, d, h->data_length);
        }
        if (s->in.len)
            s->okay_owed = 1;
        else
            send_msg(c, ADB_OKAY, s->id, s->peer, NULL, 0);
        break;
    }
    case ADB_CLSE: {
        struct stream *s = find_stream(c, h->arg1);
        if (!s)
            break;
        send_msg(c, ADB_CLSE, s->id, s->peer, NULL, 0);
        stream_free(s);
        break;
    }
    default:
        violation("unknown command 0x%08x", h->command);
        c->dropped = 1;
    }
}

static int read_msg(struct conn *c, struct adb_header *h, uint8_t **data)
{
    uint8_t raw[ADB_HEADER_SIZE];
    if (read_full(c->fd, raw, sizeof raw))
        return -1;
    const char *why = adb_parse_header(raw, h, c->connected ? opt.maxdata : ADB_CNXN_PAYLOAD_MAX * 64);
    if (why) {
        violation("%s", why);
        return -1;
    }
    if (c->connected && h->data_length > c->send_max) {
        violation("%s payload of %u bytes > negotiated maxdata %u", cmd_name(h->command),
                  h->data_length, c->send_max);
        return -1;
    }
    *data = malloc(h->data_length + 1);
    if (read_full(c->fd, *data, h->data_length)) {
        free(*data);
        return -1;
    }
    logv("<- %s %u %u len=%u", cmd_name(h->command), h->arg0, h->arg1, h->data_length);
    int verify = c->checksum || (h->command == ADB_CNXN && opt.version < ADB_VERSION_SKIP_CHECKSUM);
    if (verify && adb_checksum(*data, h->data_length) != h->data_check) {
        violation("%s checksum 0x%08x, expected 0x%08x", cmd_name(h->command), h->data_check,
                  adb_checksum(*data, h->data_length));
        free(*data);
        return -1;
    }
    return 0;
}

/* ---------- per-connection loop ---------- */

static void stream_step(struct conn *c, struct stream *s)
{
    if (s->kind != K_SYNC && !s->in.len) {
        if (s->okay_owed) {
            s->okay_owed = 0;
            send_msg(c, ADB_OKAY, s->id, s->peer, NULL, 0);
        }
        if (s->close_in && s->in_fd >= 0) {
            close(s->in_fd);
            s->in_fd = -1;
        }
    }
    if (s->kind == K_SYNC)
        sync_pump(c, s);
    if (s->kind != K_SYNC && s->out_fd < 0 && s->err_fd < 0 && !s->exit_done) {
        int status = 0;
        waitpid(s->pid, &status, 0);
        s->pid = 0;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (s->kind == K_SHELL_V2) {
            uint8_t b = (uint8_t)code;
            v2_packet(&s->out, ADB_SHELL_EXIT, &b, 1);
        }
        s->exit_done = 1;
        s->closing = 1;
    }
    int hold = opt.coalesce && s->kind != K_SYNC && !s->exit_done;
    if (!s->awaiting_okay && s->out.len && !hold) {
        size_t n = s->out.len < c->send_max ? s->out.len : c->send_max;
        if (opt.split && n > opt.split)
            n = opt.split;
        send_msg(c, ADB_WRTE, s->id, s->peer, s->out.p, n);
        buf_drop(&s->out, n);
        s->awaiting_okay = 1;
    }
    if (s->closing && !s->out.len && !s->awaiting_okay) {
        send_msg(c, ADB_CLSE, s->id, s->peer, NULL, 0);
        stream_free(s);
    }
}

static void serve(int fd)
{
    static struct conn c;
    memset(&c, 0, sizeof c);
    c.fd = fd;
    c.send_max = ADB_CNXN_PAYLOAD_MAX;
    c.accept_at = -1;
    for (int i = 0; i < MAX_STREAMS; i++) {
        c.st[i].in_fd = c.st[i].out_fd = c.st[i].err_fd = c.st[i].sfd = -1;
    }
    while (!c.dropped) {
        for (int i = 0; i < MAX_STREAMS; i++)
            if (c.st[i].used)
                stream_step(&c, &c.st[i]);
        if (c.dropped)
            break;
        struct pollfd pf[1 + 3 * MAX_STREAMS];
        struct {
            struct stream *s;
            int which;
        } who[1 + 3 * MAX_STREAMS];
        int n = 0;
        pf[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
        for (int i = 0; i < MAX_STREAMS; i++) {
            struct stream *s = &c.st[i];
            if (!s->used || s->kind == K_SYNC)
                continue;
            int room = opt.coalesce || (!s->awaiting_okay && s->out.len < c.send_max);
            if (room && s->out_fd >= 0) {
                who[n].s = s, who[n].which = 1;
                pf[n++] = (struct pollfd){.fd = s->out_fd, .events = POLLIN};
            }
            if (room && s->err_fd >= 0) {
                who[n].s = s, who[n].which = 2;
                pf[n++] = (struct pollfd){.fd = s->err_fd, .events = POLLIN};
            }
            if (s->in_fd >= 0 && s->in.len) {
                who[n].s = s, who[n].which = 0;
                pf[n++] = (struct pollfd){.fd = s->in_fd, .events = POLLOUT};
            }
        }
        int timeout = -1;
        if (c.accept_at >= 0) {
            int64_t left = c.accept_at - now_ms();
            timeout = left < 0 ? 0 : (int)left;
            if (opt.accept_file)
                timeout = 20; /* look for the tap file again */
        }
        int r = poll(pf, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            die("poll: %s", strerror(errno));
        int tapped = opt.accept_file ? faccessat(opt.accept_dir, opt.accept_file, F_OK, 0) == 0
                                     : now_ms() >= c.accept_at;
        if (c.accept_at >= 0 && tapped) {
            c.accept_at = -1;
            trusted[ntrusted++] = c.pending_key;
            c.pending_key = NULL;
            logv("public key accepted");
            send_banner(&c, host_version_seen, host_maxdata_seen);
        }
        if (r <= 0)
            continue;
        for (int i = 1; i < n; i++) {
            struct stream *s = who[i].s;
            if (!pf[i].revents || !s->used)
                continue;
            if (who[i].which == 0) {
                ssize_t w = write(s->in_fd, s->in.p, s->in.len);
                if (w > 0)
                    buf_drop(&s->in, (size_t)w);
                else if (w < 0 && errno != EAGAIN) {
                    s->in.len = 0;
                    s->close_in = 1;
                }
                continue;
            }
            int *fdp = who[i].which == 1 ? &s->out_fd : &s->err_fd;
            if (*fdp < 0)
                continue;
            uint8_t tmp[65536];
            size_t want = sizeof tmp;
            if (!opt.coalesce && s->kind == K_SHELL_V2 && c.send_max > 5 && c.send_max - 5 < want)
                want = c.send_max - 5;
            else if (!opt.coalesce && c.send_max < want)
                want = c.send_max;
            ssize_t got = read(*fdp, tmp, want);
            if (got <= 0) {
                close(*fdp);
                *fdp = -1;
                continue;
            }
            if (s->kind == K_SHELL_V2)
                v2_packet(&s->out, who[i].which == 1 ? ADB_SHELL_STDOUT : ADB_SHELL_STDERR, tmp,
                          (uint32_t)got);
            else
                buf_add(&s->out, tmp, (size_t)got);
        }
        if (pf[0].revents) {
            struct adb_header h;
            uint8_t *d = NULL;
            if (read_msg(&c, &h, &d)) {
                c.dropped = 1;
                break;
            }
            handle_msg(&c, &h, d);
            free(d);
        }
    }
    for (int i = 0; i < MAX_STREAMS; i++)
        if (c.st[i].used)
            stream_free(&c.st[i]);
    EVP_PKEY_free(c.pending_key);
    close(fd);
    logv("connection closed");
}

/* ---------- sandbox ---------- */

static void enter_sandbox(void)
{
    char root[PATH_MAX];
    if (!realpath(opt.root, root))
        die("--root %s: %s", opt.root, strerror(errno));
    char p[PATH_MAX + 64];
    const char *mk[] = {"data", "data/local", "data/local/tmp", "sdcard", "system", "system/bin", "tmp"};
    for (size_t i = 0; i < sizeof mk / sizeof *mk; i++) {
        snprintf(p, sizeof p, "%s/%s", root, mk[i]);
        mkdir(p, 0777);
    }
    snprintf(p, sizeof p, "%s/tmp", root);
    chmod(p, 01777);
    if (!opt.chroot)
        return;
    if (unshare(CLONE_NEWNS) != 0) {
        /* unprivileged: a user namespace owns a mount namespace */
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
            die("cannot enter a mount namespace (%s); use --no-chroot", strerror(errno));
        char m[64];
        int f = open("/proc/self/setgroups", O_WRONLY);
        if (f >= 0) {
            if (write(f, "deny", 4) < 0) { /* best effort */
            }
            close(f);
        }
        snprintf(m, sizeof m, "0 %u 1", uid);
        f = open("/proc/self/uid_map", O_WRONLY);
        if (f < 0 || write(f, m, strlen(m)) < 0)
            die("uid_map: %s", strerror(errno));
        close(f);
        snprintf(m, sizeof m, "0 %u 1", gid);
        f = open("/proc/self/gid_map", O_WRONLY);
        if (f < 0 || write(f, m, strlen(m)) < 0)
            die("gid_map: %s", strerror(errno));
        close(f);
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        die("make / private: %s", strerror(errno));
    const char *bind[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc"};
    for (size_t i = 0; i < sizeof bind / sizeof *bind; i++) {
        char host[64];
        snprintf(host, sizeof host, "/%s", bind[i]);
        snprintf(p, sizeof p, "%s/%s", root, bind[i]);
        struct stat st;
        if (lstat(host, &st) != 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlink(host, target, sizeof target - 1);
            if (n > 0) {
                target[n] = 0;
                unlink(p);
                if (symlink(target, p) != 0)
                    die("symlink %s: %s", p, strerror(errno));
            }
            continue;
        }
        mkdir(p, 0755);
        if (mount(host, p, NULL, MS_BIND | MS_REC, NULL) != 0)
            die("bind %s: %s", host, strerror(errno));
        if (!strcmp(bind[i], "usr") || !strcmp(bind[i], "etc"))
            mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
    }
    if (chroot(root) != 0 || chdir("/") != 0)
        die("chroot %s: %s", root, strerror(errno));
}

/* ---------- main ---------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: adbemu --root DIR [--port N] [--port-file F] [--auth none|verify:PUB|accept[:MS]|accept-on:FILE|never]\n"
            "              [--features LIST] [--maxdata N] [--version HEX] [--split N] [--coalesce]\n"
            "              [--fail-send] [--refuse PREFIX] [--clse-open] [--drop-push BYTES[:TIMES]]\n"
            "              [--model M] [--name N] [--device D] [--no-chroot] [--once] [-v]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define ARG() (i + 1 < argc ? argv[++i] : (usage(), ""))
        if (!strcmp(a, "--root"))
            opt.root = ARG();
        else if (!strcmp(a, "--port"))
            opt.port = atoi(ARG());
        else if (!strcmp(a, "--port-file"))
            opt.port_file = ARG();
        else if (!strcmp(a, "--auth")) {
            const char *m = ARG();
            if (!strcmp(m, "none"))
                opt.auth = AUTH_NONE;
            else if (!strcmp(m, "never"))
                opt.auth = AUTH_NEVER;
            else if (!strncmp(m, "verify:", 7))
                opt.auth = AUTH_VERIFY, opt.auth_key = m + 7;
            else if (!strcmp(m, "accept"))
                opt.auth = AUTH_ACCEPT;
            else if (!strncmp(m, "accept-on:", 10)) {
                /* the directory is opened now: the device's chroot would hide it */
                static char dir[PATH_MAX];
                snprintf(dir, sizeof dir, "%s", m + 10);
                char *slash = strrchr(dir, '/');
                opt.auth = AUTH_ACCEPT, opt.accept_file = slash ? m + 10 + (slash - dir) + 1 : m + 10;
                if (slash)
                    *slash = 0;
                opt.accept_dir = open(slash ? (*dir ? dir : "/") : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (opt.accept_dir < 0)
                    die("--auth accept-on: %s: %s", m + 10, strerror(errno));
            }
            else if (!strncmp(m, "accept:", 7))
                opt.auth = AUTH_ACCEPT, opt.accept_delay_ms = atoi(m + 7);
            else
                usage();
        } else if (!strcmp(a, "--features"))
            opt.features = ARG();
        else if (!strcmp(a, "--no-shell-v2"))
            opt.features = "cmd,stat_v2,ls_v2,fixed_push_mkdir";
        else if (!strcmp(a, "--maxdata"))
            opt.maxdata = (uint32_t)strtoul(ARG(), NULL, 0);
        else if (!strcmp(a, "--version"))
            opt.version = (uint32_t)strtoul(ARG(), NULL, 0);
        else if (!strcmp(a, "--split"))
            opt.split = strtoul(ARG(), NULL, 0);
        else if (!strcmp(a, "--coalesce"))
            opt.coalesce = 1;
        else if (!strcmp(a, "--fail-send"))
            opt.fail_send = 1;
        else if (!strcmp(a, "--refuse") && opt.nrefuse < 16)
            opt.refuse[opt.nrefuse++] = ARG();
        else if (!strcmp(a, "--clse-open") && opt.nrefuse < 16)
            opt.refuse[opt.nrefuse++] = "";
        else if (!strcmp(a, "--drop-push")) {
            char *e;
            opt.drop_push = strtoll(ARG(), &e, 0);
            if (*e == ':')
                opt.drop_push_times = atoi(e + 1);
        } else if (!strcmp(a, "--model"))
            opt.model = ARG();
        else if (!strcmp(a, "--name"))
            opt.name = ARG();
        else if (!strcmp(a, "--device"))
            opt.device = ARG();
        else if (!strcmp(a, "--no-chroot"))
            opt.chroot = 0;
        else if (!strcmp(a, "--once"))
            opt.once = 1;
        else if (!strcmp(a, "-v"))
            opt.verbose = 1;
        else
            usage();
    }
    if (!opt.root)
        usage();
    if (opt.maxdata < 256 || opt.maxdata > 16 * 1024 * 1024)
        die("--maxdata out of range");
    if (opt.auth == AUTH_VERIFY)
        load_trusted_key(opt.auth_key);
    signal(SIGPIPE, SIG_IGN);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 4))
        die("listen on 127.0.0.1:%d: %s", opt.port, strerror(errno));
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    int port = ntohs(sa.sin_port);
    if (opt.port_file) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp", opt.port_file);
        FILE *f = fopen(tmp, "w");
        if (!f)
            die("%s: %s", tmp, strerror(errno));
        fprintf(f, "%d\n", port);
        fclose(f);
        rename(tmp, opt.port_file);
    }
    enter_sandbox();
    printf("%d\n", port);
    fflush(stdout);

    for (;;) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            die("accept: %s", strerror(errno));
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        logv("connection accepted");
        serve(fd);
        if (opt.once)
            break;
    }
    return 0;
}
