/* RFC 2217 (Telnet Com Port Control Option): a serial port served over TCP (ser2net, pyserial's
 * rfc2217 server, a labgrid exporter's NetworkSerialPort) as an odp_stream, so XMODEM and the line readers
 * work through it unchanged. The Telnet layer is a pure parser (odp_telnet_rx) fuzzed on its own
 * (tests/fuzz/telnet_fuzz.c): the server is a peer on the network, its bytes are untrusted. */
#ifndef ODP_NET_RFC2217_H
#define ODP_NET_RFC2217_H

#include <stddef.h>

#include "../stream/stream.h"

#define ODP_TELNET_SB_MAX 64    /* a COM-PORT-OPTION answer is at most 6 bytes; longer ones are cut */
#define ODP_TELNET_REPLY_MAX 256

/* The Telnet state of one connection: where the parser is, which options are on, and the negotiation
 * answers waiting to be sent. */
typedef struct {
    int state;
    unsigned char verb;                  /* WILL/WONT/DO/DONT awaiting its option byte */
    unsigned char sb[ODP_TELNET_SB_MAX]; /* the current subnegotiation's bytes (cut at SB_MAX) */
    size_t sb_len;
    unsigned char us[256 / 8], them[256 / 8]; /* options enabled on our side / the server's side */
    unsigned char reply[ODP_TELNET_REPLY_MAX];
    size_t reply_len;
    unsigned long baud;  /* the server's answer to SET-BAUDRATE; 0 until it came */
    int baud_answered;
} odp_telnet;

void odp_telnet_init(odp_telnet *t);
/* Feeds n bytes received from the server: the data bytes among them (IAC IAC unescaped) are copied to
 * out, which must hold n bytes; returns their count. Negotiation answers are appended to t->reply (at
 * most ODP_TELNET_REPLY_MAX bytes pending; beyond that they are dropped, the server repeats itself). */
size_t odp_telnet_rx(odp_telnet *t, const unsigned char *in, size_t n, unsigned char *out);

/* Connects to address ("host:port" or "[v6]:port"), negotiates binary mode and COM-PORT-OPTION, and sets
 * baud, 8 data bits, no parity, 1 stop bit, no flow control. Waits for the server's answer to the baud
 * rate: a server that never gives one is not an RFC 2217 server (ODP_EPROTO at the deadline). Returns
 * the stream or NULL with err (ENOTFOUND, ENODEV refused, ETIMEDOUT, EPROTO, ECANCELED, EIO). */
odp_stream *odp_rfc2217_open(const char *address, unsigned long baud, double deadline, odp_err *err);

#endif
