/* libFuzzer target for src/adb/proto.c: message headers, the CNXN banner, the shell v2 demuxer, the
 * sync decoder and the adb server's devices-l reply, fed in chunks whose sizes come from the input (packets straddle WRTEs on the wire).
 * Input: byte 0 picks the decoder, byte 1 the chunk size, the rest is what a device sent.
 * sources: src/adb/proto.c
 * seeds: tests/fuzz/corpus/adb
 * max_len: 8192 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "adb/proto.h"

static size_t shell_bytes;

static void sink(void *ud, int id, const uint8_t *p, size_t n)
{
    (void)ud;
    if (id != ADB_SHELL_STDOUT && id != ADB_SHELL_STDERR)
        __builtin_trap();
    volatile uint8_t x = n ? p[n - 1] : 0; /* touch the bytes: ASan checks the range */
    (void)x;
    shell_bytes += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t which = data[0] % 4;
    size_t chunk = (size_t)data[1] + 1;
    data += 2;
    size -= 2;
    if (which == 0) {
        struct adb_hdr h;
        for (size_t off = 0; off + ADB_HDR_SIZE <= size; off += ADB_HDR_SIZE) {
            enum adb_hdr_status st = adb_hdr_parse(data + off, &h, 4096);
            if (st == ADB_HDR_OK && (h.len > 4096 || (h.cmd ^ 0xffffffffu) != adb_le32(data + off + 20)))
                __builtin_trap();
            (void)adb_hdr_status_text(st);
        }
        struct adb_banner b;
        if (adb_banner_parse(data, size, &b) == 0) {
            if (strlen(b.state) >= sizeof b.state || strlen(b.features) >= sizeof b.features ||
                strlen(b.model) >= sizeof b.model)
                __builtin_trap();
            (void)adb_banner_has(&b, "shell_v2");
        }
    } else if (which == 1) {
        struct adb_shell_demux d;
        adb_shell_demux_init(&d);
        shell_bytes = 0;
        for (size_t off = 0; off < size; off += chunk) {
            size_t n = size - off < chunk ? size - off : chunk;
            if (adb_shell_demux_feed(&d, data + off, n, sink, NULL) != 0)
                break;
        }
        if (shell_bytes > size || d.exit_status < -1 || d.exit_status > 255)
            __builtin_trap();
    } else if (which == 3) {
        struct adb_host_device d[4];
        int n = adb_host_devices_parse((const char *)data, size, d, 4);
        if (n < 0 || n > 4)
            __builtin_trap();
        for (int i = 0; i < n; i++)
            if (strlen(d[i].serial) >= sizeof d[i].serial || strlen(d[i].state) >= sizeof d[i].state ||
                strlen(d[i].model) >= sizeof d[i].model || !d[i].state[0])
                __builtin_trap();
        if (size >= 4)
            (void)adb_hex4(data);
    } else {
        static const uint32_t expect[] = {0, ADB_SYNC_STAT, ADB_SYNC_STA2, ADB_SYNC_LST2};
        struct adb_sync_dec d;
        adb_sync_dec_init(&d, expect[chunk % 4]);
        size_t data_bytes = 0;
        for (size_t off = 0; off < size;) {
            size_t n = size - off < chunk ? size - off : chunk;
            size_t used = 0;
            struct adb_sync_ev ev;
            int r = adb_sync_dec_feed(&d, data + off, n, &used, &ev);
            if (used > n)
                __builtin_trap();
            if (r < 0)
                break;
            if (r == 1 && ev.type == ADB_SYNC_EV_DATA) {
                if (ev.len > ADB_SYNC_DATA_MAX || ev.data < data + off || ev.data + ev.len > data + off + n)
                    __builtin_trap();
                data_bytes += ev.len;
            }
            if (r == 1 && ev.type == ADB_SYNC_EV_FAIL && strlen(ev.msg) > ADB_SYNC_FAIL_MAX)
                __builtin_trap();
            if (r == 0 && used != n)
                __builtin_trap();
            off += used;
            if (r == 1 && used == 0 && ev.type == ADB_SYNC_EV_DATA)
                __builtin_trap(); /* no progress */
        }
        if (data_bytes > size)
            __builtin_trap();
    }
    return 0;
}
