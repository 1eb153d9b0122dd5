/* adb wire format: pure functions and incremental decoders on byte buffers.
 * No I/O, no allocation, no Lua: the connection layer (conn.c) and the fuzz
 * targets drive these. Every length taken from the peer is bounded here. */
#ifndef ODP_ADB_PROTO_H
#define ODP_ADB_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ADB_CNXN 0x4e584e43u
#define ADB_AUTH 0x48545541u
#define ADB_OPEN 0x4e45504fu
#define ADB_OKAY 0x59414b4fu
#define ADB_WRTE 0x45545257u
#define ADB_CLSE 0x45534c43u
#define ADB_STLS 0x534c5453u

#define ADB_VERSION 0x01000001u          /* no checksums once both sides have it */
#define ADB_VERSION_MIN 0x01000000u
#define ADB_MAXDATA (1024u * 1024u)      /* what odp advertises */
#define ADB_MAXDATA_CAP (16u * 1024u * 1024u) /* refuse to believe a peer above this */
#define ADB_CNXN_MAX 4096u               /* CNXN and AUTH payloads never exceed this */
#define ADB_HDR_SIZE 24u

#define ADB_AUTH_TOKEN 1u
#define ADB_AUTH_SIGNATURE 2u
#define ADB_AUTH_RSAPUBLICKEY 3u

struct adb_hdr {
    uint32_t cmd, arg0, arg1, len, check;
};

enum adb_hdr_status {
    ADB_HDR_OK = 0,
    ADB_HDR_MAGIC,   /* magic != cmd ^ 0xffffffff */
    ADB_HDR_COMMAND, /* not a command odp knows */
    ADB_HDR_SIZE_BAD /* payload above the allowed maximum */
};

uint32_t adb_checksum(const void *data, size_t n);
void adb_le32_put(uint8_t *p, uint32_t v);
uint32_t adb_le32(const uint8_t *p);
uint64_t adb_le64(const uint8_t *p);

/* Header for a message; data_check is filled when `checksum` (CNXN/AUTH, or old peers). */
void adb_hdr_pack(uint8_t out[ADB_HDR_SIZE], uint32_t cmd, uint32_t arg0, uint32_t arg1,
                  const void *data, uint32_t len, bool checksum);
enum adb_hdr_status adb_hdr_parse(const uint8_t in[ADB_HDR_SIZE], struct adb_hdr *h, uint32_t max_payload);
const char *adb_hdr_status_text(enum adb_hdr_status s);
const char *adb_cmd_name(uint32_t cmd); /* "CNXN"... or "????" */

/* The device's CNXN banner: "device::k=v;k=v;features=a,b". */
struct adb_banner {
    char state[16];    /* "device", "recovery", "sideload", "bootloader", ... */
    char product[64];  /* ro.product.name */
    char model[64];    /* ro.product.model */
    char device[64];   /* ro.product.device */
    char features[1024];
};
/* Returns 0, or -1 when the payload is not a banner. Over-long values are truncated. */
int adb_banner_parse(const uint8_t *p, size_t n, struct adb_banner *b);
bool adb_banner_has(const struct adb_banner *b, const char *feature);

/* Shell protocol v2: packets `u8 id, u32 LE len, data` that straddle WRTEs. */
enum {
    ADB_SHELL_STDIN = 0,
    ADB_SHELL_STDOUT = 1,
    ADB_SHELL_STDERR = 2,
    ADB_SHELL_EXIT = 3,
    ADB_SHELL_CLOSE_STDIN = 4,
    ADB_SHELL_WINDOW = 5,
};
struct adb_shell_demux {
    uint8_t hdr[5];
    uint32_t have;   /* header bytes gathered */
    uint32_t left;   /* data bytes left in the current packet */
    uint8_t id;
    int exit_status; /* -1 until the exit packet */
};
/* Called with stdout/stderr bytes as they arrive (a packet may come in pieces). */
typedef void (*adb_shell_sink)(void *ud, int id, const uint8_t *p, size_t n);
void adb_shell_demux_init(struct adb_shell_demux *d);
/* 0, or -1 on a packet a device never sends (unknown id, exit packet not 1 byte,
 * data after the exit packet). */
int adb_shell_demux_feed(struct adb_shell_demux *d, const uint8_t *p, size_t n, adb_shell_sink sink, void *ud);
void adb_shell_pack_hdr(uint8_t out[5], int id, uint32_t len);

/* sync: 8-byte records `u32 id, u32 len`. */
#define ADB_SYNC_ID(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define ADB_SYNC_STAT ADB_SYNC_ID('S', 'T', 'A', 'T')
#define ADB_SYNC_STA2 ADB_SYNC_ID('S', 'T', 'A', '2')
#define ADB_SYNC_LST2 ADB_SYNC_ID('L', 'S', 'T', '2')
#define ADB_SYNC_SEND ADB_SYNC_ID('S', 'E', 'N', 'D')
#define ADB_SYNC_RECV ADB_SYNC_ID('R', 'E', 'C', 'V')
#define ADB_SYNC_DATA ADB_SYNC_ID('D', 'A', 'T', 'A')
#define ADB_SYNC_DONE ADB_SYNC_ID('D', 'O', 'N', 'E')
#define ADB_SYNC_OKAY ADB_SYNC_ID('O', 'K', 'A', 'Y')
#define ADB_SYNC_FAIL ADB_SYNC_ID('F', 'A', 'I', 'L')
#define ADB_SYNC_QUIT ADB_SYNC_ID('Q', 'U', 'I', 'T')
#define ADB_SYNC_DATA_MAX (64u * 1024u)
#define ADB_SYNC_PATH_MAX 1024u
#define ADB_SYNC_FAIL_MAX 1024u

void adb_sync_pack(uint8_t out[8], uint32_t id, uint32_t len);

/* Decoder for what the device sends on a sync stream. */
enum adb_sync_ev_type {
    ADB_SYNC_EV_DATA,  /* data/len point into the fed buffer */
    ADB_SYNC_EV_DONE,
    ADB_SYNC_EV_OKAY,
    ADB_SYNC_EV_FAIL,  /* msg */
    ADB_SYNC_EV_STAT,  /* st (STAT: mode, size, mtime; STA2: all, error set on failure) */
};
struct adb_sync_stat {
    uint32_t error; /* Linux errno from STA2, 0 = ok; STAT reports a missing file as mode 0 */
    uint32_t mode, nlink, uid, gid;
    uint64_t dev, ino, size;
    int64_t atime, mtime, ctime;
};
struct adb_sync_ev {
    enum adb_sync_ev_type type;
    const uint8_t *data;
    size_t len;
    char msg[ADB_SYNC_FAIL_MAX + 1];
    struct adb_sync_stat st;
};
struct adb_sync_dec {
    uint32_t expect_stat; /* 0, ADB_SYNC_STAT or ADB_SYNC_STA2/LST2: the reply size to expect */
    uint8_t rec[72];
    uint32_t have, need;
    uint32_t id, left;    /* DATA or FAIL payload left */
    int in_payload;
    char msg[ADB_SYNC_FAIL_MAX + 1];
    uint32_t msglen;
};
void adb_sync_dec_init(struct adb_sync_dec *d, uint32_t expect_stat);
/* Consumes up to n bytes (*used says how many). Returns 1 with *ev filled, 0 when more input
 * is needed (all n consumed), -1 on a malformed record (ev->msg says why). */
int adb_sync_dec_feed(struct adb_sync_dec *d, const uint8_t *p, size_t n, size_t *used, struct adb_sync_ev *ev);

/* Google's adb server, host side: requests are "%04x" + text; replies "OKAY" or "FAIL" + "%04x" + text. */
#define ADB_HOST_MIN_VERSION 32 /* host:version; odp needs host-serial:SERIAL:features (since 32) */
/* "%04x" -> 0..0xffff, or -1 when the 4 bytes are not lowercase or uppercase hex digits. */
int adb_hex4(const uint8_t p[4]);

/* One line of host:devices-l: "SERIAL  STATE [usb:P] [product:P model:M device:D] [transport_id:N]".
 * STATE may hold spaces ("no permissions (...); see [...]"): it runs up to the first key:value word. */
struct adb_host_device {
    char serial[128];
    char state[160];
    char usb[64], product[64], model[64], device[64];
    long transport_id; /* -1 when absent */
};
/* Parses up to max lines of a devices-l reply; returns the count (lines that do not parse are skipped). */
int adb_host_devices_parse(const char *text, size_t n, struct adb_host_device *out, int max);

#endif
