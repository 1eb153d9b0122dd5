/* adbemu's wire constants and message header codec (test code; odp's own
 * protocol core lives in src/adb/ and shares nothing with this file, so the
 * emulator is an independent peer). */
#ifndef ADBEMU_H
#define ADBEMU_H

#include <stddef.h>
#include <stdint.h>

#define ADB_CNXN 0x4e584e43u
#define ADB_AUTH 0x48545541u
#define ADB_OPEN 0x4e45504fu
#define ADB_OKAY 0x59414b4fu
#define ADB_WRTE 0x45545257u
#define ADB_CLSE 0x45534c43u

#define ADB_VERSION_MIN 0x01000000u
#define ADB_VERSION_SKIP_CHECKSUM 0x01000001u
#define ADB_HEADER_SIZE 24
#define ADB_CNXN_PAYLOAD_MAX 4096u
#define ADB_TOKEN_SIZE 20

#define ADB_AUTH_TOKEN 1
#define ADB_AUTH_SIGNATURE 2
#define ADB_AUTH_RSAPUBLICKEY 3

#define ADB_SHELL_STDIN 0
#define ADB_SHELL_STDOUT 1
#define ADB_SHELL_STDERR 2
#define ADB_SHELL_EXIT 3
#define ADB_SHELL_CLOSE_STDIN 4
#define ADB_SHELL_WINDOW_SIZE 5

#define ADB_FOURCC(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define ADB_SYNC_STAT ADB_FOURCC('S', 'T', 'A', 'T')
#define ADB_SYNC_STA2 ADB_FOURCC('S', 'T', 'A', '2')
#define ADB_SYNC_LST2 ADB_FOURCC('L', 'S', 'T', '2')
#define ADB_SYNC_LIST ADB_FOURCC('L', 'I', 'S', 'T')
#define ADB_SYNC_LIS2 ADB_FOURCC('L', 'I', 'S', '2')
#define ADB_SYNC_DENT ADB_FOURCC('D', 'E', 'N', 'T')
#define ADB_SYNC_DNT2 ADB_FOURCC('D', 'N', 'T', '2')
#define ADB_SYNC_SEND ADB_FOURCC('S', 'E', 'N', 'D')
#define ADB_SYNC_RECV ADB_FOURCC('R', 'E', 'C', 'V')
#define ADB_SYNC_DATA ADB_FOURCC('D', 'A', 'T', 'A')
#define ADB_SYNC_DONE ADB_FOURCC('D', 'O', 'N', 'E')
#define ADB_SYNC_OKAY ADB_FOURCC('O', 'K', 'A', 'Y')
#define ADB_SYNC_FAIL ADB_FOURCC('F', 'A', 'I', 'L')
#define ADB_SYNC_QUIT ADB_FOURCC('Q', 'U', 'I', 'T')
#define ADB_SYNC_DATA_MAX (64u * 1024u)

struct adb_header {
    uint32_t command, arg0, arg1, data_length, data_check, magic;
};

static inline uint32_t adb_checksum(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    return sum;
}

static inline uint32_t adb_le32(const uint8_t *p)
{
    return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void adb_pack_header(uint8_t *h, uint32_t cmd, uint32_t a0, uint32_t a1, const void *data,
                                   uint32_t len, int with_checksum)
{
    uint32_t v[6] = {cmd, a0, a1, len, with_checksum ? adb_checksum(data, len) : 0, cmd ^ 0xffffffffu};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++)
            h[4 * i + j] = (uint8_t)(v[i] >> (8 * j));
}

/* Returns NULL when the header is acceptable, else why not. */
static inline const char *adb_parse_header(const uint8_t *raw, struct adb_header *h, uint32_t max_payload)
{
    h->command = adb_le32(raw);
    h->arg0 = adb_le32(raw + 4);
    h->arg1 = adb_le32(raw + 8);
    h->data_length = adb_le32(raw + 12);
    h->data_check = adb_le32(raw + 16);
    h->magic = adb_le32(raw + 20);
    if (h->magic != (h->command ^ 0xffffffffu))
        return "bad magic";
    switch (h->command) {
    case ADB_CNXN: case ADB_AUTH: case ADB_OPEN: case ADB_OKAY: case ADB_WRTE: case ADB_CLSE:
        break;
    default:
        return "unknown command";
    }
    if (h->data_length > max_payload)
        return "payload larger than maxdata";
    return NULL;
}

#endif
