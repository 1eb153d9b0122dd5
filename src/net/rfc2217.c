/* RFC 2217 client over Telnet (RFC 854/855, binary mode RFC 856, SGA RFC 858). See rfc2217.h. */
#include "rfc2217.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/wait.h"
#include "tcp.h"

enum { SE = 240, SB = 250, WILL = 251, WONT = 252, DO = 253, DONT = 254, IAC = 255 };
enum { OPT_BINARY = 0, OPT_SGA = 3, OPT_COM_PORT = 44 };
/* COM-PORT-OPTION commands (client to server); the server answers with the same number + 100. */
enum { CPO_SET_BAUDRATE = 1, CPO_SET_DATASIZE = 2, CPO_SET_PARITY = 3, CPO_SET_STOPSIZE = 4, CPO_SET_CONTROL = 5 };
enum { ST_DATA, ST_IAC, ST_VERB, ST_SB, ST_SB_IAC };

static int bit(const unsigned char *set, unsigned char o) { return set[o / 8] >> (o % 8) & 1; }
static void set_bit(unsigned char *set, unsigned char o, int on)
{
    if (on)
        set[o / 8] |= (unsigned char)(1u << (o % 8));
    else
        set[o / 8] &= (unsigned char)~(1u << (o % 8));
}

static int supported(unsigned char o) { return o == OPT_BINARY || o == OPT_SGA || o == OPT_COM_PORT; }

static void reply(odp_telnet *t, unsigned char verb, unsigned char o)
{
    if (t->reply_len + 3 > sizeof t->reply)
        return;
    t->reply[t->reply_len++] = IAC;
    t->reply[t->reply_len++] = verb;
    t->reply[t->reply_len++] = o;
}

void odp_telnet_init(odp_telnet *t)
{
    memset(t, 0, sizeof *t);
    t->state = ST_DATA;
}

/* RFC 1143's rule without its queue: answer only a change of state, so two sides never loop. */
static void negotiate(odp_telnet *t, unsigned char verb, unsigned char o)
{
    switch (verb) {
    case WILL: /* the server offers to do o */
        if (!bit(t->them, o)) {
            set_bit(t->them, o, supported(o));
            reply(t, supported(o) ? DO : DONT, o);
        }
        break;
    case WONT:
        if (bit(t->them, o)) {
            set_bit(t->them, o, 0);
            reply(t, DONT, o);
        }
        break;
    case DO: /* the server asks us to do o */
        if (!bit(t->us, o)) {
            set_bit(t->us, o, supported(o));
            reply(t, supported(o) ? WILL : WONT, o);
        }
        break;
    default: /* DONT */
        if (bit(t->us, o)) {
            set_bit(t->us, o, 0);
            reply(t, WONT, o);
        }
    }
}

static void subnegotiation(odp_telnet *t)
{
    if (t->sb_len >= 6 && t->sb[0] == OPT_COM_PORT && t->sb[1] == 100 + CPO_SET_BAUDRATE) {
        t->baud = (unsigned long)t->sb[2] << 24 | (unsigned long)t->sb[3] << 16 | (unsigned long)t->sb[4] << 8 | t->sb[5];
        t->baud_answered = 1;
    }
    /* everything else (line and modem state notifications, flow control answers) carries nothing odp uses */
}

size_t odp_telnet_rx(odp_telnet *t, const unsigned char *in, size_t n, unsigned char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = in[i];
        switch (t->state) {
        case ST_DATA:
            if (c == IAC)
                t->state = ST_IAC;
            else
                out[o++] = c;
            break;
        case ST_IAC:
            if (c == IAC) {
                out[o++] = IAC;
                t->state = ST_DATA;
            } else if (c >= WILL) {
                t->verb = c;
                t->state = ST_VERB;
            } else if (c == SB) {
                t->sb_len = 0;
                t->state = ST_SB;
            } else {
                t->state = ST_DATA; /* NOP, GA, BRK, ...: nothing to do */
            }
            break;
        case ST_VERB:
            negotiate(t, t->verb, c);
            t->state = ST_DATA;
            break;
        case ST_SB:
            if (c == IAC)
                t->state = ST_SB_IAC;
            else if (t->sb_len < sizeof t->sb)
                t->sb[t->sb_len++] = c;
            break;
        default: /* ST_SB_IAC */
            if (c == IAC) {
                if (t->sb_len < sizeof t->sb)
                    t->sb[t->sb_len++] = IAC;
                t->state = ST_SB;
            } else {
                if (c == SE)
                    subnegotiation(t);
                t->state = ST_DATA; /* SE, or a broken subnegotiation: it ends here either way */
            }
        }
    }
    return o;
}

typedef struct {
    odp_stream base;
    int fd;
    odp_telnet t;
} rfc2217_stream;

static int flush_replies(rfc2217_stream *r, double deadline, odp_err *err)
{
    if (!r->t.reply_len)
        return 0;
    ssize_t w = odp_fd_write(r->fd, r->t.reply, r->t.reply_len, deadline, err);
    r->t.reply_len = 0;
    return w < 0 ? (int)w : 0;
}

static ssize_t rfc2217_read(odp_stream *s, void *buf, size_t n, double deadline, odp_err *err)
{
    rfc2217_stream *r = (rfc2217_stream *)s;
    for (;;) {
        unsigned char raw[4096];
        ssize_t got = odp_fd_read(r->fd, raw, n < sizeof raw ? n : sizeof raw, deadline, err);
        if (got <= 0) {
            if (got == 0)
                return 0; /* the server closed the connection: end of stream */
            return got;
        }
        size_t data = odp_telnet_rx(&r->t, raw, (size_t)got, buf);
        int rc = flush_replies(r, deadline, err);
        if (rc)
            return rc;
        if (data)
            return (ssize_t)data;
    }
}

static ssize_t rfc2217_write(odp_stream *s, const void *buf, size_t n, double deadline, odp_err *err)
{
    rfc2217_stream *r = (rfc2217_stream *)s;
    const unsigned char *p = buf;
    unsigned char out[2048];
    size_t i = 0;
    while (i < n) {
        size_t o = 0;
        while (i < n && o + 2 <= sizeof out) { /* data 0xFF goes as IAC IAC */
            if (p[i] == IAC)
                out[o++] = IAC;
            out[o++] = p[i++];
        }
        ssize_t w = odp_fd_write(r->fd, out, o, deadline, err);
        if (w < 0)
            return w;
    }
    return (ssize_t)n;
}

static void rfc2217_close(odp_stream *s)
{
    rfc2217_stream *r = (rfc2217_stream *)s;
    close(r->fd);
    free(r);
}

odp_stream *odp_rfc2217_open(const char *address, unsigned long baud, double deadline, odp_err *err)
{
    static const odp_stream_ops ops[1] = {{"rfc2217", rfc2217_read, rfc2217_write, rfc2217_close, NULL}};
    int fd = odp_tcp_connect(address, deadline, err);
    if (fd < 0)
        return NULL;
    rfc2217_stream *r = calloc(1, sizeof *r);
    if (!r) {
        close(fd);
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    r->base.ops = ops;
    r->fd = fd;
    odp_telnet_init(&r->t);
    set_bit(r->t.us, OPT_BINARY, 1), set_bit(r->t.us, OPT_SGA, 1), set_bit(r->t.us, OPT_COM_PORT, 1);
    set_bit(r->t.them, OPT_BINARY, 1), set_bit(r->t.them, OPT_SGA, 1);
    const unsigned char hello[] = {
        IAC, WILL, OPT_BINARY, IAC, DO, OPT_BINARY, IAC, WILL, OPT_SGA, IAC, DO, OPT_SGA, IAC, WILL, OPT_COM_PORT,
        IAC, SB, OPT_COM_PORT, CPO_SET_BAUDRATE, (unsigned char)(baud >> 24), (unsigned char)(baud >> 16),
        (unsigned char)(baud >> 8), (unsigned char)baud, IAC, SE,
        IAC, SB, OPT_COM_PORT, CPO_SET_DATASIZE, 8, IAC, SE,
        IAC, SB, OPT_COM_PORT, CPO_SET_PARITY, 1 /* none */, IAC, SE,
        IAC, SB, OPT_COM_PORT, CPO_SET_STOPSIZE, 1 /* one */, IAC, SE,
        IAC, SB, OPT_COM_PORT, CPO_SET_CONTROL, 1 /* no flow control */, IAC, SE,
    };
    /* a baud rate with an IAC byte in it would need escaping; none of the real ones has one */
    if ((baud >> 24 & 0xff) == IAC || (baud >> 16 & 0xff) == IAC || (baud >> 8 & 0xff) == IAC || (baud & 0xff) == IAC) {
        odp_fail(err, ODP_EPROTO, "baud rate %lu cannot be sent", baud);
        goto fail;
    }
    if (odp_fd_write(fd, hello, sizeof hello, deadline, err) < 0)
        goto fail;
    /* Data that arrives before the answer (a console printing) is kept for the first reads. */
    while (!r->t.baud_answered) {
        unsigned char raw[512], data[512];
        ssize_t got = odp_fd_read(fd, raw, sizeof raw, deadline, err);
        if (got == 0) {
            odp_fail(err, ODP_EIO, "%s closed the connection during RFC 2217 negotiation", address);
            goto fail;
        }
        if (got < 0) {
            if (got == ODP_ETIMEDOUT)
                odp_fail(err, ODP_EPROTO, "%s did not answer the RFC 2217 baud rate: not an RFC 2217 server "
                                          "(ser2net needs telnet(rfc2217) in its accepter)", address);
            goto fail;
        }
        size_t n = odp_telnet_rx(&r->t, raw, (size_t)got, data);
        if (flush_replies(r, deadline, err))
            goto fail;
        if (n && odp_stream_unread(&r->base, data, n) < 0) {
            odp_fail(err, ODP_EIO, "out of memory");
            goto fail;
        }
    }
    return &r->base;
fail:
    odp_stream_close(&r->base);
    return NULL;
}
