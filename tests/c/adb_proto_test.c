/* Unit tests of the adb protocol core (src/adb/proto.c) and keys (src/adb/auth.c): header codec, banner,
 * the shell v2 demuxer and the sync decoder fed at every split point (packets straddle WRTEs), the ZLP rule,
 * and Google adb's key formats (tests/fixtures/adb, written by `adb keygen`). Prints TAP lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rsa.h>

#include "adb/auth.h"
#include "adb/proto.h"
#include "adb/usb.h"

static int n, failed;
static void check(int ok, const char *what)
{
    n++;
    if (!ok)
        failed++;
    printf("%sok %d - %s\n", ok ? "" : "not ", n, what);
}

static char out_text[256], err_text[256];
static size_t out_len, err_len;
static void sink(void *ud, int id, const uint8_t *p, size_t len)
{
    (void)ud;
    char *dst = id == ADB_SHELL_STDOUT ? out_text : err_text;
    size_t *l = id == ADB_SHELL_STDOUT ? &out_len : &err_len;
    memcpy(dst + *l, p, len);
    *l += len;
    dst[*l] = 0;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[4096];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    return buf;
}

int main(int argc, char **argv)
{
    const char *top = argc > 1 ? argv[1] : getenv("ODP_TOP");
    uint8_t h[24];
    struct adb_hdr hd;
    adb_hdr_pack(h, ADB_WRTE, 7, 9, "abc", 3, true);
    check(adb_hdr_parse(h, &hd, 4096) == ADB_HDR_OK && hd.cmd == ADB_WRTE && hd.arg0 == 7 && hd.arg1 == 9 &&
              hd.len == 3 && hd.check == 'a' + 'b' + 'c',
          "header round trip with the byte-sum checksum");
    adb_hdr_pack(h, ADB_WRTE, 1, 2, "abc", 3, false);
    check(adb_hdr_parse(h, &hd, 4096) == ADB_HDR_OK && hd.check == 0, "no checksum for version 0x01000001 peers");
    h[20] ^= 1;
    check(adb_hdr_parse(h, &hd, 4096) == ADB_HDR_MAGIC, "bad magic refused");
    adb_hdr_pack(h, ADB_WRTE, 1, 2, NULL, 5000, false);
    check(adb_hdr_parse(h, &hd, 4096) == ADB_HDR_SIZE_BAD, "payload above maxdata refused");
    adb_hdr_pack(h, ADB_CNXN, 1, 2, NULL, 5000, false);
    check(adb_hdr_parse(h, &hd, 1 << 20) == ADB_HDR_SIZE_BAD, "CNXN payload above 4096 refused whatever maxdata");
    adb_hdr_pack(h, 0x12345678, 1, 2, NULL, 0, false);
    check(adb_hdr_parse(h, &hd, 4096) == ADB_HDR_COMMAND, "unknown command refused");

    struct adb_banner b;
    const char *ban = "device::ro.product.name=x300;ro.product.model=V2410;ro.product.device=PD2410;features=shell_v2,cmd,stat_v2";
    check(adb_banner_parse((const uint8_t *)ban, strlen(ban), &b) == 0 && !strcmp(b.state, "device") &&
              !strcmp(b.model, "V2410") && !strcmp(b.product, "x300") && !strcmp(b.device, "PD2410") &&
              adb_banner_has(&b, "shell_v2") && adb_banner_has(&b, "stat_v2") && !adb_banner_has(&b, "shell") &&
              !adb_banner_has(&b, "ls_v2"),
          "banner fields and features");
    check(adb_banner_parse((const uint8_t *)"garbage", 7, &b) != 0, "not a banner");

    /* stdout "hello", stderr "oops", exit 3, split at every point */
    uint8_t v2[64];
    size_t k = 0;
    adb_shell_pack_hdr(v2 + k, ADB_SHELL_STDOUT, 5), k += 5;
    memcpy(v2 + k, "hello", 5), k += 5;
    adb_shell_pack_hdr(v2 + k, ADB_SHELL_STDERR, 4), k += 5;
    memcpy(v2 + k, "oops", 4), k += 4;
    adb_shell_pack_hdr(v2 + k, ADB_SHELL_EXIT, 1), k += 5;
    v2[k++] = 3;
    int all = 1;
    for (size_t a = 0; a <= k; a++) {
        for (size_t c = a; c <= k; c++) {
            struct adb_shell_demux d;
            adb_shell_demux_init(&d);
            out_len = err_len = 0;
            out_text[0] = err_text[0] = 0;
            int rc = adb_shell_demux_feed(&d, v2, a, sink, NULL) | adb_shell_demux_feed(&d, v2 + a, c - a, sink, NULL) |
                     adb_shell_demux_feed(&d, v2 + c, k - c, sink, NULL);
            if (rc || strcmp(out_text, "hello") || strcmp(err_text, "oops") || d.exit_status != 3)
                all = 0;
        }
    }
    check(all, "shell v2 demux: same result for every 3-way split (exit packet included)");
    struct adb_shell_demux d;
    adb_shell_demux_init(&d);
    uint8_t bad[6] = {ADB_SHELL_EXIT, 2, 0, 0, 0, 0};
    check(adb_shell_demux_feed(&d, bad, 6, sink, NULL) != 0, "exit packet of 2 bytes refused");
    adb_shell_demux_init(&d);
    uint8_t bad2[5] = {9, 0, 0, 0, 0};
    check(adb_shell_demux_feed(&d, bad2, 5, sink, NULL) != 0, "unknown packet id refused");

    /* sync: STA2 reply, DATA, DONE, FAIL, split at every point */
    uint8_t sy[200];
    k = 0;
    uint8_t st2[72] = {0};
    adb_le32_put(st2, ADB_SYNC_STA2);
    adb_le32_put(st2 + 24, 0100755);
    adb_le32_put(st2 + 40, 1234);
    memcpy(sy, st2, 72), k = 72;
    adb_sync_pack(sy + k, ADB_SYNC_DATA, 3), k += 8;
    memcpy(sy + k, "xyz", 3), k += 3;
    adb_sync_pack(sy + k, ADB_SYNC_DONE, 0), k += 8;
    adb_sync_pack(sy + k, ADB_SYNC_FAIL, 4), k += 8;
    memcpy(sy + k, "nope", 4), k += 4;
    all = 1;
    for (size_t a = 0; a <= k; a++) {
        struct adb_sync_dec sd;
        adb_sync_dec_init(&sd, ADB_SYNC_STA2);
        char data[8] = "";
        size_t dl = 0;
        int stat_ok = 0, done = 0, fail = 0;
        const uint8_t *parts[2] = {sy, sy + a};
        size_t lens[2] = {a, k - a};
        for (int pi = 0; pi < 2; pi++) {
            const uint8_t *p = parts[pi];
            size_t left = lens[pi];
            while (left) {
                size_t used;
                struct adb_sync_ev ev;
                int r = adb_sync_dec_feed(&sd, p, left, &used, &ev);
                if (r < 0) {
                    all = 0;
                    break;
                }
                p += used;
                left -= used;
                if (r == 0)
                    break;
                if (ev.type == ADB_SYNC_EV_STAT)
                    stat_ok = ev.st.mode == 0100755 && ev.st.size == 1234 && ev.st.error == 0;
                else if (ev.type == ADB_SYNC_EV_DATA)
                    memcpy(data + dl, ev.data, ev.len), dl += ev.len;
                else if (ev.type == ADB_SYNC_EV_DONE)
                    done = 1;
                else if (ev.type == ADB_SYNC_EV_FAIL)
                    fail = !strcmp(ev.msg, "nope");
            }
        }
        if (!stat_ok || dl != 3 || memcmp(data, "xyz", 3) || !done || !fail)
            all = 0;
    }
    check(all, "sync decoder: STA2, DATA, DONE, FAIL identical for every split");
    struct adb_sync_dec sd;
    adb_sync_dec_init(&sd, 0);
    uint8_t big[8];
    adb_sync_pack(big, ADB_SYNC_DATA, 65537);
    size_t used;
    struct adb_sync_ev ev;
    check(adb_sync_dec_feed(&sd, big, 8, &used, &ev) < 0, "sync DATA above 64 KiB refused");

    check(!adb_usb_needs_zlp(0, 512) && !adb_usb_needs_zlp(504, 512) && adb_usb_needs_zlp(512, 512) &&
              adb_usb_needs_zlp(1024, 512) && !adb_usb_needs_zlp(513, 512) && adb_usb_needs_zlp(64, 64),
          "ZLP rule: non-zero multiples of wMaxPacketSize only");

    /* Google adb's key files */
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/tests/fixtures/adb/adbkey", top ? top : ".");
    EVP_PKEY *key = adb_key_load(path, 0, err, sizeof err);
    check(key != NULL, "reads the PKCS#8 private key adb keygen wrote");
    snprintf(path, sizeof path, "%s/tests/fixtures/adb/adbkey.pub", top ? top : ".");
    char *google = read_text(path);
    char mine[1024];
    int ml = key ? adb_pubkey_encode(key, "x@y", mine, sizeof mine) : -1;
    check(ml > 700 && google && !strncmp(mine, google, 700) && google[700] == ' ',
          "public key encoding identical to Google's adbkey.pub (524-byte struct, base64)");
    EVP_PKEY *pub = google ? adb_pubkey_decode(google, strlen(google)) : NULL;
    check(pub && EVP_PKEY_eq(pub, key) == 1, "adbkey.pub decodes to the same RSA public key");
    uint8_t token[20], sig[512];
    memset(token, 0x42, sizeof token);
    int sl = key ? adb_sign_token(key, token, sizeof token, sig, sizeof sig) : -1;
    EVP_PKEY_CTX *vc = pub ? EVP_PKEY_CTX_new(pub, NULL) : NULL;
    int verified = vc && EVP_PKEY_verify_init(vc) > 0 && EVP_PKEY_CTX_set_rsa_padding(vc, RSA_PKCS1_PADDING) > 0 &&
                   EVP_PKEY_CTX_set_signature_md(vc, EVP_sha1()) > 0 &&
                   EVP_PKEY_verify(vc, sig, (size_t)sl, token, sizeof token) == 1;
    check(sl == 256 && verified, "token signature: RSA PKCS#1 v1.5 over DigestInfo(SHA-1) || token");
    check(key && adb_sign_token(key, token, 19, sig, sizeof sig) < 0, "a token that is not 20 bytes is refused");
    EVP_PKEY_CTX_free(vc);
    EVP_PKEY_free(pub);
    EVP_PKEY_free(key);

    /* host:devices-l replies: the first line as Debian's adb 29 printed it for the emulator (tests/adb), the others
     * in the formats of its USB, offline and no-permissions states */
    static const char devices_l[] =
        "127.0.0.1:38609        device product:adbemu model:X300_Pro_Emu device:adbemu transport_id:1\n"
        "R5CT1234567            unauthorized usb:3-2 transport_id:4\n"
        "emulator-5554          offline transport_id:2\n"
        "0123456789ABCDEF       no permissions (missing udev rules? user is in the plugdev group); see "
        "[http://developer.android.com/tools/device.html] usb:1-1 transport_id:3\n"
        "\n";
    struct adb_host_device hd4[8];
    int nd = adb_host_devices_parse(devices_l, sizeof devices_l - 1, hd4, 8);
    check(nd == 4, "devices-l: four devices, the empty line skipped");
    check(!strcmp(hd4[0].serial, "127.0.0.1:38609") && !strcmp(hd4[0].state, "device") &&
              !strcmp(hd4[0].model, "X300_Pro_Emu") && !strcmp(hd4[0].product, "adbemu") &&
              !strcmp(hd4[0].device, "adbemu") && hd4[0].transport_id == 1,
          "devices-l: serial, state, product, model, device, transport_id");
    check(!strcmp(hd4[1].state, "unauthorized") && !strcmp(hd4[1].usb, "3-2") && !hd4[1].model[0] &&
              !strcmp(hd4[2].state, "offline") && hd4[2].transport_id == 2,
          "devices-l: unauthorized with its usb path, offline");
    check(!strncmp(hd4[3].state, "no permissions (missing udev rules?", 35) && strstr(hd4[3].state, "device.html]") &&
              !strcmp(hd4[3].usb, "1-1"),
          "devices-l: a state with spaces runs up to the first key:value word");
    check(adb_host_devices_parse(devices_l, sizeof devices_l - 1, hd4, 2) == 2, "devices-l: at most max");
    check(adb_hex4((const uint8_t *)"0029") == 41 && adb_hex4((const uint8_t *)"FFff") == 0xffff &&
              adb_hex4((const uint8_t *)"00 1") == -1 && adb_hex4((const uint8_t *)"OKAY") == -1,
          "hex4 lengths: upper and lower case, anything else refused");
    printf("1..%d\n", n);
    return failed ? 1 : 0;
}
