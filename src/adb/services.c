/* adb services over a link's byte streams; see services.h. The same code serves a direct connection and
 * the adb server: only how a service's stream is opened differs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "services.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/wait.h"

static void stream_end(struct adb_shell_stream *s);

void adb_link_close(struct adb_link *l)
{
    while (l->streams)
        stream_end(l->streams); /* their Lua objects still hold them: dead, freed when closed */
    if (l->close)
        l->close(l->ctx);
    l->close = NULL;
}

/* ---------- streams ---------- */

static int svc_open(struct adb_link *l, struct adb_svc *s, const char *service, double deadline, odp_err *e)
{
    memset(s, 0, sizeof *s);
    if (l->open(l->ctx, service, s, deadline, e) != 0)
        return -1;
    s->wbuf = malloc(s->chunk);
    if (!s->wbuf) {
        s->close(s->ctx);
        return odp_fail(e, ODP_EIO, "out of memory");
    }
    return 0;
}

static void svc_close(struct adb_svc *s)
{
    s->close(s->ctx);
    free(s->wbuf);
    s->wbuf = NULL;
}

/* Sends the gathered bytes; what arrives meanwhile goes to on_data. */
static int svc_flush(struct adb_svc *s, adb_data_fn on_data, void *ud, double deadline, odp_err *e)
{
    if (!s->wlen)
        return 0;
    size_t n = s->wlen;
    s->wlen = 0;
    return s->write(s->ctx, s->wbuf, n, on_data, ud, deadline, e);
}

static int svc_put(struct adb_svc *s, const void *data, size_t n, adb_data_fn on_data, void *ud, double deadline,
                   odp_err *e)
{
    const uint8_t *p = data;
    while (n) {
        size_t take = s->chunk - s->wlen < n ? s->chunk - s->wlen : n;
        memcpy(s->wbuf + s->wlen, p, take);
        s->wlen += take;
        p += take;
        n -= take;
        if (s->wlen == s->chunk && svc_flush(s, on_data, ud, deadline, e) != 0)
            return -1;
    }
    return 0;
}

/* ---------- shell ---------- */

struct shell_ctx {
    struct adb_shell_result *r;
    struct adb_shell_demux *dm; /* NULL: plain shell, bytes are stdout */
    adb_output_fn on_output;
    void *ctx;
};

static void shell_sink(void *ud, int id, const uint8_t *p, size_t n)
{
    struct shell_ctx *sc = ud;
    odp_buf *b = id == ADB_SHELL_STDERR ? &sc->r->err : &sc->r->out;
    odp_buf_append(b, p, n);
    if (sc->on_output && !sc->r->aborted &&
        sc->on_output(sc->ctx, id == ADB_SHELL_STDERR ? 2 : 1, (const char *)p, n))
        sc->r->aborted = 1;
}

static int shell_data(void *ud, const uint8_t *p, size_t n, odp_err *e)
{
    struct shell_ctx *sc = ud;
    if (!sc->dm) {
        odp_buf_append(&sc->r->out, p, n);
        return 0;
    }
    if (adb_shell_demux_feed(sc->dm, p, n, shell_sink, sc) != 0)
        return odp_fail(e, ODP_EPROTO, "malformed shell protocol v2 packet from the device");
    return 0;
}

/* Output until the device ends the stream or on_output stops the command. */
static int shell_collect(struct adb_svc *s, struct shell_ctx *sc, double deadline, odp_err *e)
{
    while (!sc->r->aborted) {
        int rc = s->read(s->ctx, shell_data, sc, deadline, e);
        if (rc < 0)
            return -1;
        if (rc == 1)
            break;
    }
    return 0;
}

static int shell_v2(struct adb_link *l, const char *cmd, const uint8_t *in, size_t in_len, struct shell_ctx *sc,
                    double deadline, odp_err *e)
{
    size_t svl = strlen(cmd) + 32;
    char *svc = malloc(svl);
    if (!svc)
        return odp_fail(e, ODP_EIO, "out of memory");
    snprintf(svc, svl, "shell,v2,raw:%s", cmd);
    struct adb_svc s;
    int rc = svc_open(l, &s, svc, deadline, e);
    free(svc);
    if (rc != 0)
        return -1;
    uint8_t ph[5];
    /* stdin in packets that fit one write each, then close-stdin; output may arrive meanwhile */
    size_t room = s.chunk - 5;
    rc = -1;
    while (in_len) {
        size_t n = in_len < room ? in_len : room;
        adb_shell_pack_hdr(ph, ADB_SHELL_STDIN, (uint32_t)n);
        if (svc_put(&s, ph, 5, shell_data, sc, deadline, e) || svc_put(&s, in, n, shell_data, sc, deadline, e))
            goto out;
        in += n;
        in_len -= n;
    }
    adb_shell_pack_hdr(ph, ADB_SHELL_CLOSE_STDIN, 0);
    if (svc_put(&s, ph, 5, shell_data, sc, deadline, e) || svc_flush(&s, shell_data, sc, deadline, e) ||
        shell_collect(&s, sc, deadline, e))
        goto out;
    sc->r->v2 = 1;
    sc->r->status = sc->dm->exit_status;
    if (sc->r->status < 0 && !sc->r->aborted)
        odp_fail(e, ODP_EIO, "the command's stream ended without its exit status (the device or the adb server "
                             "went away)");
    else
        rc = 0;
out:
    svc_close(&s); /* a command still running is killed by adbd */
    return rc;
}

static int shell_plain(struct adb_link *l, const char *cmd, size_t in_len, struct shell_ctx *sc, double deadline,
                       odp_err *e)
{
    struct adb_shell_result *r = sc->r;
    if (in_len)
        return odp_fail(e, ODP_EPROTO, "this device has no shell_v2: stdin for a command is not supported");
    /* the status travels as the last line: "<sentinel><status>" */
    uint8_t rnd[8];
    char sentinel[40];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd)
        memset(rnd, 0x5a, sizeof rnd);
    if (fd >= 0)
        close(fd);
    snprintf(sentinel, sizeof sentinel, "ODPRC%02x%02x%02x%02x%02x%02x%02x%02x=", rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    size_t svl = strlen(cmd) + 128;
    char *svc = malloc(svl);
    if (!svc)
        return odp_fail(e, ODP_EIO, "out of memory");
    /* no shell_v2, no way to close stdin: the command reads /dev/null */
    snprintf(svc, svl, "shell:(%s\n) </dev/null; printf '\\n%s%%d\\n' $?", cmd, sentinel);
    struct adb_svc s;
    int rc = svc_open(l, &s, svc, deadline, e);
    free(svc);
    if (rc != 0)
        return -1;
    /* the sentinel must not leak: collect everything, strip it, then report */
    size_t limit = r->out.limit;
    r->out.limit = 0;
    struct shell_ctx plain = {r, NULL, NULL, NULL};
    rc = shell_collect(&s, &plain, deadline, e);
    r->out.limit = limit;
    svc_close(&s);
    if (rc != 0)
        return -1;
    r->status = -1;
    /* find "\n<sentinel>N" at the end; the echo before it added the "\n" */
    size_t sl = strlen(sentinel);
    for (size_t i = r->out.len; i-- > 0;) {
        if (r->out.data[i] == '\n' && r->out.len - i - 1 >= sl && !memcmp(r->out.data + i + 1, sentinel, sl)) {
            r->status = atoi(r->out.data + i + 1 + sl);
            r->out.len = i;
            break;
        }
    }
    if (r->status < 0)
        return odp_fail(e, ODP_EPROTO, "the shell exit status was lost (no sentinel in the output)");
    if (limit && r->out.len > limit) {
        r->out.dropped += r->out.len - limit;
        r->out.len = limit;
    }
    if (sc->on_output && r->out.len && sc->on_output(sc->ctx, 1, r->out.data, r->out.len))
        r->aborted = 1;
    return 0;
}

int adb_shell(struct adb_link *l, const char *cmd, const uint8_t *in, size_t in_len, adb_output_fn on_output,
              void *ctx, struct adb_shell_result *r, double deadline, odp_err *e)
{
    r->status = -1;
    r->v2 = 0;
    r->aborted = 0;
    if (!r->out.limit)
        r->out.limit = ADB_OUTPUT_LIMIT;
    if (!r->err.limit)
        r->err.limit = ADB_OUTPUT_LIMIT;
    struct adb_shell_demux dm;
    adb_shell_demux_init(&dm);
    struct shell_ctx sc = {r, &dm, on_output, ctx};
    if (adb_banner_has(&l->banner, "shell_v2"))
        return shell_v2(l, cmd, in, in_len, &sc, deadline, e);
    return shell_plain(l, cmd, in_len, &sc, deadline, e);
}

/* ---------- a long-lived shell v2 stream ---------- */

#define STREAM_STDERR_MAX 4096

struct adb_shell_stream {
    odp_stream base;
    struct adb_link *l; /* NULL once the link closed: the stream is dead */
    struct adb_shell_stream *next;
    struct adb_svc svc;
    struct adb_shell_demux dm;
    odp_buf out, err; /* stdout demuxed and not yet read; the first bytes of stderr */
    size_t out_off;
    int ended;
};

static void stream_sink(void *ud, int id, const uint8_t *p, size_t n)
{
    struct adb_shell_stream *s = ud;
    odp_buf_append(id == ADB_SHELL_STDERR ? &s->err : &s->out, p, n);
}

static int stream_data(void *ud, const uint8_t *p, size_t n, odp_err *e)
{
    struct adb_shell_stream *s = ud;
    if (adb_shell_demux_feed(&s->dm, p, n, stream_sink, s) != 0)
        return odp_fail(e, ODP_EPROTO, "malformed shell protocol v2 packet from the device");
    return 0;
}

static int stream_dead(struct adb_shell_stream *s, odp_err *e)
{
    return s->l ? 0 : odp_fail(e, ODP_EIO, "the adb connection of this stream is closed");
}

static ssize_t stream_read(odp_stream *st, void *buf, size_t n, double deadline, odp_err *e)
{
    struct adb_shell_stream *s = (struct adb_shell_stream *)st;
    while (s->out_off == s->out.len) {
        s->out.len = s->out_off = 0;
        if (s->ended)
            return 0;
        if (stream_dead(s, e))
            return e->code;
        int rc = s->svc.read(s->svc.ctx, stream_data, s, deadline, e);
        if (rc < 0)
            return e->code;
        if (rc == 1 || s->dm.exit_status >= 0)
            s->ended = 1;
    }
    size_t k = s->out.len - s->out_off < n ? s->out.len - s->out_off : n;
    memcpy(buf, s->out.data + s->out_off, k);
    s->out_off += k;
    return (ssize_t)k;
}

static ssize_t stream_write(odp_stream *st, const void *p, size_t n, double deadline, odp_err *e)
{
    struct adb_shell_stream *s = (struct adb_shell_stream *)st;
    if (stream_dead(s, e))
        return e->code;
    const uint8_t *b = p;
    size_t left = n, room = s->svc.chunk - 5;
    while (left) {
        size_t k = left < room ? left : room;
        uint8_t ph[5];
        adb_shell_pack_hdr(ph, ADB_SHELL_STDIN, (uint32_t)k);
        /* output arriving meanwhile is demuxed and kept for the next read */
        if (svc_put(&s->svc, ph, 5, stream_data, s, deadline, e) || svc_put(&s->svc, b, k, stream_data, s, deadline, e))
            return e->code;
        b += k;
        left -= k;
    }
    return svc_flush(&s->svc, stream_data, s, deadline, e) ? e->code : (ssize_t)n;
}

static const odp_buf *stream_stderr(odp_stream *st) { return &((struct adb_shell_stream *)st)->err; }

/* Ends the service: close-stdin, then the stream (adbd kills a command still running); the link stays. */
static void stream_end(struct adb_shell_stream *s)
{
    if (!s->l)
        return;
    for (struct adb_shell_stream **pp = &s->l->streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    if (!s->ended && !(s->l->broken && s->l->broken(s->l->ctx))) {
        uint8_t ph[5];
        odp_err e;
        adb_shell_pack_hdr(ph, ADB_SHELL_CLOSE_STDIN, 0);
        double dl = odp_now() + 2.0;
        if (!svc_put(&s->svc, ph, 5, NULL, NULL, dl, &e))
            svc_flush(&s->svc, NULL, NULL, dl, &e);
    }
    svc_close(&s->svc);
    s->l = NULL;
}

static void stream_close(odp_stream *st)
{
    struct adb_shell_stream *s = (struct adb_shell_stream *)st;
    stream_end(s);
    odp_buf_free(&s->out);
    odp_buf_free(&s->err);
    free(s);
}

static const odp_stream_ops shell_stream_ops = {
    .kind = "adb-shell", .read = stream_read, .write = stream_write, .close = stream_close, .diag = stream_stderr};

int adb_shell_stream_open(struct adb_link *l, const char *cmd, double deadline, odp_stream **out, odp_err *e)
{
    if (!adb_banner_has(&l->banner, "shell_v2"))
        return odp_fail(e, ODP_EPROTO, "this device has no shell_v2: a command's stdin cannot be streamed");
    struct adb_shell_stream *s = calloc(1, sizeof *s);
    size_t svl = strlen(cmd) + 32;
    char *svc = malloc(svl);
    if (!s || !svc) {
        free(s);
        free(svc);
        return odp_fail(e, ODP_EIO, "out of memory");
    }
    snprintf(svc, svl, "shell,v2,raw:%s", cmd);
    int rc = svc_open(l, &s->svc, svc, deadline, e);
    free(svc);
    if (rc != 0) {
        free(s);
        return -1;
    }
    s->base.ops = &shell_stream_ops;
    adb_shell_demux_init(&s->dm);
    s->err.limit = STREAM_STDERR_MAX;
    s->l = l;
    s->next = l->streams;
    l->streams = s;
    *out = &s->base;
    return 0;
}

/* ---------- sync ---------- */

struct sync_ctx {
    struct adb_sync_dec dec;
    int fail;   /* the device sent FAIL */
    int okay;   /* the device sent OKAY */
    char msg[ADB_SYNC_FAIL_MAX + 1];
    int fd;     /* pull: the local file */
    uint64_t done, total;
    int done_seen;
    int have_stat;
    struct adb_sync_stat st;
    adb_event_fn progress;
    void *ud;
};

static int sync_data(void *ud, const uint8_t *p, size_t n, odp_err *e)
{
    struct sync_ctx *sx = ud;
    while (n) {
        size_t used = 0;
        struct adb_sync_ev ev;
        int r = adb_sync_dec_feed(&sx->dec, p, n, &used, &ev);
        if (r < 0)
            return odp_fail(e, ODP_EPROTO, "%s", ev.msg);
        p += used;
        n -= used;
        if (r == 0)
            break;
        switch (ev.type) {
        case ADB_SYNC_EV_DATA:
            if (sx->fd < 0)
                return odp_fail(e, ODP_EPROTO, "sync DATA where none was asked for");
            for (size_t off = 0; off < ev.len;) {
                ssize_t w = write(sx->fd, ev.data + off, ev.len - off);
                if (w < 0)
                    return odp_fail(e, ODP_EIO, "writing the pulled file: %s", strerror(errno));
                off += (size_t)w;
            }
            sx->done += ev.len;
            if (sx->progress)
                sx->progress(sx->ud, ADB_EV_PROGRESS, sx->done, sx->total);
            break;
        case ADB_SYNC_EV_DONE:
            sx->done_seen = 1;
            break;
        case ADB_SYNC_EV_OKAY:
            sx->okay = 1;
            break;
        case ADB_SYNC_EV_FAIL:
            sx->fail = 1;
            snprintf(sx->msg, sizeof sx->msg, "%s", ev.msg);
            break;
        case ADB_SYNC_EV_STAT:
            sx->have_stat = 1;
            sx->st = ev.st;
            break;
        }
    }
    return 0;
}

static int sync_request(struct adb_svc *s, struct sync_ctx *sx, uint32_t id, const char *path, double deadline,
                        odp_err *e)
{
    size_t n = strlen(path);
    if (n > ADB_SYNC_PATH_MAX)
        return odp_fail(e, ODP_EIO, "device path longer than %u bytes", ADB_SYNC_PATH_MAX);
    uint8_t h[8];
    adb_sync_pack(h, id, (uint32_t)n);
    if (svc_put(s, h, 8, sync_data, sx, deadline, e) != 0 || svc_put(s, path, n, sync_data, sx, deadline, e) != 0)
        return -1;
    return 0;
}

/* Wait for sync replies until `cond` holds or the device fails. */
static int sync_wait(struct adb_svc *s, struct sync_ctx *sx, int *cond, double deadline, odp_err *e)
{
    while (!*cond && !sx->fail) {
        int rc = s->read(s->ctx, sync_data, sx, deadline, e);
        if (rc < 0)
            return -1;
        if (rc == 1)
            return odp_fail(e, ODP_EIO, "the device closed the sync stream");
    }
    return 0;
}

static int sync_open(struct adb_link *l, struct adb_svc *s, struct sync_ctx *sx, uint32_t expect_stat,
                     double deadline, odp_err *e)
{
    memset(sx, 0, sizeof *sx);
    sx->fd = -1;
    adb_sync_dec_init(&sx->dec, expect_stat);
    return svc_open(l, s, "sync:", deadline, e);
}

/* QUIT when the service is still in step (adbd ends it after a FAIL), then close. */
static void sync_end(struct adb_svc *s, int quit, double deadline)
{
    odp_err e;
    s->wlen = 0;
    if (quit) {
        uint8_t q[8];
        adb_sync_pack(q, ADB_SYNC_QUIT, 0);
        if (svc_put(s, q, 8, NULL, NULL, deadline, &e) == 0)
            svc_flush(s, NULL, NULL, deadline, &e);
    }
    svc_close(s);
}

int adb_stat(struct adb_link *l, const char *remote, struct adb_sync_stat *st, double deadline, odp_err *e)
{
    struct adb_svc s;
    struct sync_ctx sx;
    uint32_t id = adb_banner_has(&l->banner, "stat_v2") ? ADB_SYNC_STA2 : ADB_SYNC_STAT;
    if (sync_open(l, &s, &sx, id, deadline, e) != 0)
        return -1;
    int rc = -1;
    if (sync_request(&s, &sx, id, remote, deadline, e) == 0 && svc_flush(&s, sync_data, &sx, deadline, e) == 0 &&
        sync_wait(&s, &sx, &sx.have_stat, deadline, e) == 0) {
        if (sx.fail)
            odp_fail(e, ODP_EIO, "stat %s: %s", remote, sx.msg);
        else {
            *st = sx.st;
            rc = 0;
        }
    }
    sync_end(&s, rc == 0, deadline);
    return rc;
}

int adb_push(struct adb_link *l, const char *local, const char *remote, uint32_t mode, double deadline,
             adb_event_fn progress, void *ud, odp_err *e)
{
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail(e, ODP_ENOTFOUND, "%s: %s", local, strerror(errno));
    struct stat lst;
    fstat(fd, &lst);
    struct adb_svc s;
    struct sync_ctx sx;
    if (sync_open(l, &s, &sx, 0, deadline, e) != 0) {
        close(fd);
        return -1;
    }
    sx.total = (uint64_t)lst.st_size;
    int rc = -1;
    size_t pl = strlen(remote) + 16;
    char *spec = malloc(pl);
    uint8_t *chunk = malloc(ADB_SYNC_DATA_MAX);
    if (!spec || !chunk) {
        odp_fail(e, ODP_EIO, "out of memory");
        goto out;
    }
    snprintf(spec, pl, "%s,%u", remote, (unsigned)(mode ? mode : (lst.st_mode & 0777) | 0100000));
    if (sync_request(&s, &sx, ADB_SYNC_SEND, spec, deadline, e) != 0)
        goto out;
    for (;;) {
        ssize_t n = read(fd, chunk, ADB_SYNC_DATA_MAX);
        if (n < 0) {
            odp_fail(e, ODP_EIO, "reading %s: %s", local, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        uint8_t h[8];
        adb_sync_pack(h, ADB_SYNC_DATA, (uint32_t)n);
        if (svc_put(&s, h, 8, sync_data, &sx, deadline, e) != 0 ||
            svc_put(&s, chunk, (size_t)n, sync_data, &sx, deadline, e) != 0)
            goto out;
        if (sx.fail)
            break;
        sx.done += (uint64_t)n;
        if (progress)
            progress(ud, ADB_EV_PROGRESS, sx.done, sx.total);
    }
    if (!sx.fail) {
        uint8_t h[8];
        adb_sync_pack(h, ADB_SYNC_DONE, (uint32_t)lst.st_mtime);
        if (svc_put(&s, h, 8, sync_data, &sx, deadline, e) != 0 || svc_flush(&s, sync_data, &sx, deadline, e) != 0 ||
            sync_wait(&s, &sx, &sx.okay, deadline, e) != 0)
            goto out;
    }
    if (sx.fail)
        odp_fail(e, ODP_EIO, "the device refused %s: %s", remote, sx.msg);
    else
        rc = 0;
out:
    free(spec);
    free(chunk);
    close(fd);
    sync_end(&s, rc == 0, deadline);
    return rc;
}

int adb_pull(struct adb_link *l, const char *remote, const char *local, double deadline, adb_event_fn progress,
             void *ud, odp_err *e)
{
    struct adb_sync_stat st;
    if (adb_stat(l, remote, &st, deadline, e) != 0)
        return -1;
    if (st.error)
        return odp_fail(e, ODP_ENOTFOUND, "%s: %s on the device", remote, strerror((int)st.error));
    size_t ll = strlen(local) + 16;
    char *tmp = malloc(ll);
    if (!tmp)
        return odp_fail(e, ODP_EIO, "out of memory");
    snprintf(tmp, ll, "%s.part", local);
    struct adb_svc s;
    struct sync_ctx sx;
    if (sync_open(l, &s, &sx, 0, deadline, e) != 0) {
        free(tmp);
        return -1;
    }
    sx.total = st.size;
    sx.progress = progress;
    sx.ud = ud;
    sx.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = -1;
    if (sx.fd < 0) {
        odp_fail(e, ODP_EIO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (sync_request(&s, &sx, ADB_SYNC_RECV, remote, deadline, e) != 0 ||
        svc_flush(&s, sync_data, &sx, deadline, e) != 0 || sync_wait(&s, &sx, &sx.done_seen, deadline, e) != 0)
        goto out;
    if (sx.fail) {
        odp_fail(e, ODP_EIO, "pull %s: %s", remote, sx.msg);
        goto out;
    }
    if (close(sx.fd) != 0 || rename(tmp, local) != 0) {
        sx.fd = -1;
        odp_fail(e, ODP_EIO, "%s: %s", local, strerror(errno));
        goto out;
    }
    sx.fd = -1;
    if (st.mode & 0111)
        chmod(local, st.mode & 0777);
    rc = 0;
out:
    if (sx.fd >= 0)
        close(sx.fd);
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    sync_end(&s, rc == 0 || !sx.fail, deadline);
    return rc;
}
