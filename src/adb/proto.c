/* adb wire format; see proto.h. Facts: docs/sources.md §3. */
#include "proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t adb_checksum(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    return sum;
}

void adb_le32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

uint32_t adb_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t adb_le64(const uint8_t *p)
{
    return (uint64_t)adb_le32(p) | (uint64_t)adb_le32(p + 4) << 32;
}

void adb_hdr_pack(uint8_t out[ADB_HDR_SIZE], uint32_t cmd, uint32_t arg0, uint32_t arg1,
                  const void *data, uint32_t len, bool checksum)
{
    adb_le32_put(out, cmd);
    adb_le32_put(out + 4, arg0);
    adb_le32_put(out + 8, arg1);
    adb_le32_put(out + 12, len);
    adb_le32_put(out + 16, checksum && len ? adb_checksum(data, len) : 0);
    adb_le32_put(out + 20, cmd ^ 0xffffffffu);
}

enum adb_hdr_status adb_hdr_parse(const uint8_t in[ADB_HDR_SIZE], struct adb_hdr *h, uint32_t max_payload)
{
    h->cmd = adb_le32(in);
    h->arg0 = adb_le32(in + 4);
    h->arg1 = adb_le32(in + 8);
    h->len = adb_le32(in + 12);
    h->check = adb_le32(in + 16);
    if (adb_le32(in + 20) != (h->cmd ^ 0xffffffffu))
        return ADB_HDR_MAGIC;
    switch (h->cmd) {
    case ADB_CNXN:
    case ADB_AUTH:
    case ADB_OPEN:
    case ADB_OKAY:
    case ADB_WRTE:
    case ADB_CLSE:
    case ADB_STLS:
        break;
    default:
        return ADB_HDR_COMMAND;
    }
    uint32_t max = (h->cmd == ADB_CNXN || h->cmd == ADB_AUTH) ? ADB_CNXN_MAX : max_payload;
    if (h->len > max)
        return ADB_HDR_SIZE_BAD;
    return ADB_HDR_OK;
}

const char *adb_hdr_status_text(enum adb_hdr_status s)
{
    switch (s) {
    case ADB_HDR_OK:
        return "ok";
    case ADB_HDR_MAGIC:
        return "bad magic in adb message header";
    case ADB_HDR_COMMAND:
        return "unknown adb command";
    case ADB_HDR_SIZE_BAD:
        return "adb payload larger than the negotiated maxdata";
    }
    return "?";
}

const char *adb_cmd_name(uint32_t cmd)
{
    switch (cmd) {
    case ADB_CNXN: return "CNXN";
    case ADB_AUTH: return "AUTH";
    case ADB_OPEN: return "OPEN";
    case ADB_OKAY: return "OKAY";
    case ADB_WRTE: return "WRTE";
    case ADB_CLSE: return "CLSE";
    case ADB_STLS: return "STLS";
    }
    return "????";
}

static void copy_field(char *dst, size_t cap, const uint8_t *p, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, p, n);
    dst[n] = 0;
}

int adb_banner_parse(const uint8_t *p, size_t n, struct adb_banner *b)
{
    memset(b, 0, sizeof *b);
    while (n && p[n - 1] == 0)
        n--;
    const uint8_t *colon = memchr(p, ':', n);
    if (!colon || (size_t)(colon - p) + 1 >= n || colon[1] != ':')
        return -1;
    copy_field(b->state, sizeof b->state, p, (size_t)(colon - p));
    for (size_t i = 0; i < (size_t)(colon - p); i++)
        if (p[i] < 'a' || p[i] > 'z')
            return -1;
    const uint8_t *q = colon + 2, *end = p + n;
    while (q < end) {
        const uint8_t *semi = memchr(q, ';', (size_t)(end - q));
        const uint8_t *e = semi ? semi : end;
        const uint8_t *eq = memchr(q, '=', (size_t)(e - q));
        if (eq) {
            size_t kl = (size_t)(eq - q), vl = (size_t)(e - eq - 1);
#define KEY(k) (kl == sizeof(k) - 1 && !memcmp(q, k, kl))
            if (KEY("ro.product.name"))
                copy_field(b->product, sizeof b->product, eq + 1, vl);
            else if (KEY("ro.product.model"))
                copy_field(b->model, sizeof b->model, eq + 1, vl);
            else if (KEY("ro.product.device"))
                copy_field(b->device, sizeof b->device, eq + 1, vl);
            else if (KEY("features"))
                copy_field(b->features, sizeof b->features, eq + 1, vl);
#undef KEY
        }
        q = e + 1;
    }
    return 0;
}

bool adb_banner_has(const struct adb_banner *b, const char *feature)
{
    size_t fl = strlen(feature);
    const char *p = b->features;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == fl && !memcmp(p, feature, fl))
            return true;
        if (!c)
            break;
        p = c + 1;
    }
    return false;
}

void adb_shell_demux_init(struct adb_shell_demux *d)
{
    memset(d, 0, sizeof *d);
    d->exit_status = -1;
}

void adb_shell_pack_hdr(uint8_t out[5], int id, uint32_t len)
{
    out[0] = (uint8_t)id;
    adb_le32_put(out + 1, len);
}

int adb_shell_demux_feed(struct adb_shell_demux *d, const uint8_t *p, size_t n, adb_shell_sink sink, void *ud)
{
    while (n) {
        if (d->have < 5) {
            size_t take = 5 - d->have < n ? 5 - d->have : n;
            memcpy(d->hdr + d->have, p, take);
            d->have += (uint32_t)take;
            p += take;
            n -= take;
            if (d->have < 5)
                return 0;
            if (d->exit_status >= 0)
                return -1; /* nothing may follow the exit packet */
            d->id = d->hdr[0];
            d->left = adb_le32(d->hdr + 1);
            if (d->id == ADB_SHELL_EXIT) {
                if (d->left != 1)
                    return -1;
            } else if (d->id != ADB_SHELL_STDOUT && d->id != ADB_SHELL_STDERR) {
                return -1;
            }
            if (d->left == 0) {
                d->have = 0;
                continue;
            }
        }
        size_t take = d->left < n ? d->left : n;
        if (take == 0)
            return 0; /* the header ended the input: the data comes with the next WRTE */
        if (d->id == ADB_SHELL_EXIT)
            d->exit_status = p[0];
        else if (sink)
            sink(ud, d->id, p, take);
        d->left -= (uint32_t)take;
        p += take;
        n -= take;
        if (d->left == 0)
            d->have = 0;
    }
    return 0;
}

void adb_sync_pack(uint8_t out[8], uint32_t id, uint32_t len)
{
    adb_le32_put(out, id);
    adb_le32_put(out + 4, len);
}

void adb_sync_dec_init(struct adb_sync_dec *d, uint32_t expect_stat)
{
    memset(d, 0, sizeof *d);
    d->expect_stat = expect_stat;
}

static int sync_error(struct adb_sync_ev *ev, const char *why, uint32_t id)
{
    snprintf(ev->msg, sizeof ev->msg, "%s (id 0x%08x)", why, (unsigned)id);
    return -1;
}

static void decode_stat(struct adb_sync_dec *d, struct adb_sync_ev *ev)
{
    const uint8_t *r = d->rec;
    memset(&ev->st, 0, sizeof ev->st);
    if (d->expect_stat == ADB_SYNC_STAT) {
        ev->st.mode = adb_le32(r + 4);
        ev->st.size = adb_le32(r + 8);
        ev->st.mtime = adb_le32(r + 12);
        ev->st.error = ev->st.mode == 0 ? 2 /* ENOENT: v1 has no error field */ : 0;
    } else {
        ev->st.error = adb_le32(r + 4);
        ev->st.dev = adb_le64(r + 8);
        ev->st.ino = adb_le64(r + 16);
        ev->st.mode = adb_le32(r + 24);
        ev->st.nlink = adb_le32(r + 28);
        ev->st.uid = adb_le32(r + 32);
        ev->st.gid = adb_le32(r + 36);
        ev->st.size = adb_le64(r + 40);
        ev->st.atime = (int64_t)adb_le64(r + 48);
        ev->st.mtime = (int64_t)adb_le64(r + 56);
        ev->st.ctime = (int64_t)adb_le64(r + 64);
    }
}

int adb_sync_dec_feed(struct adb_sync_dec *d, const uint8_t *p, size_t n, size_t *used, struct adb_sync_ev *ev)
{
    size_t i = 0;
    ev->msg[0] = 0;
    for (;;) {
        if (d->in_payload) {
            if (d->id == ADB_SYNC_DATA) {
                if (d->left == 0) {
                    d->in_payload = 0;
                    continue;
                }
                if (i == n)
                    break;
                size_t take = d->left < n - i ? d->left : n - i;
                d->left -= (uint32_t)take;
                if (d->left == 0)
                    d->in_payload = 0;
                ev->type = ADB_SYNC_EV_DATA;
                ev->data = p + i;
                ev->len = take;
                *used = i + take;
                return 1;
            }
            /* FAIL message */
            size_t take = d->left < n - i ? d->left : n - i;
            memcpy(d->msg + d->msglen, p + i, take);
            d->msglen += (uint32_t)take;
            d->left -= (uint32_t)take;
            i += take;
            if (d->left)
                break;
            d->in_payload = 0;
            ev->type = ADB_SYNC_EV_FAIL;
            memcpy(ev->msg, d->msg, d->msglen);
            ev->msg[d->msglen] = 0;
            *used = i;
            return 1;
        }
        if (d->need == 0)
            d->need = 8;
        size_t take = d->need - d->have < n - i ? d->need - d->have : n - i;
        memcpy(d->rec + d->have, p + i, take);
        d->have += (uint32_t)take;
        i += take;
        if (d->have < d->need)
            break;
        uint32_t id = adb_le32(d->rec), len = adb_le32(d->rec + 4);
        if (d->expect_stat && (id == d->expect_stat) && d->need == 8) {
            d->need = d->expect_stat == ADB_SYNC_STAT ? 16 : 72;
            continue;
        }
        d->have = 0;
        d->need = 0;
        if (d->expect_stat && id == d->expect_stat) {
            decode_stat(d, ev);
            d->expect_stat = 0;
            ev->type = ADB_SYNC_EV_STAT;
            *used = i;
            return 1;
        }
        switch (id) {
        case ADB_SYNC_DATA:
            if (len > ADB_SYNC_DATA_MAX) {
                *used = i;
                return sync_error(ev, "sync DATA record above 64 KiB", id);
            }
            d->id = id;
            d->left = len;
            d->in_payload = 1;
            continue;
        case ADB_SYNC_FAIL:
            if (len > ADB_SYNC_FAIL_MAX) {
                *used = i;
                return sync_error(ev, "sync FAIL message above 1 KiB", id);
            }
            d->id = id;
            d->left = len;
            d->msglen = 0;
            d->in_payload = 1;
            continue;
        case ADB_SYNC_DONE:
            ev->type = ADB_SYNC_EV_DONE;
            *used = i;
            return 1;
        case ADB_SYNC_OKAY:
            ev->type = ADB_SYNC_EV_OKAY;
            *used = i;
            return 1;
        default:
            *used = i;
            return sync_error(ev, "unexpected sync record", id);
        }
    }
    *used = n;
    return 0;
}

/* ---------- adb server host protocol ---------- */

int adb_hex4(const uint8_t p[4])
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The field a "key:value" word of a devices-l line fills (*v, *vl: its value), or NULL for other words. */
static char *device_field(struct adb_host_device *d, const char *w, size_t wl, const char **v, size_t *vl)
{
    static const char *const keys[] = {"usb:", "product:", "model:", "device:", "transport_id:"};
    char *fields[] = {d->usb, d->product, d->model, d->device, NULL};
    static char transport_id_mark[1];
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        size_t kl = strlen(keys[k]);
        if (wl > kl && !memcmp(w, keys[k], kl)) {
            *v = w + kl;
            *vl = wl - kl;
            return fields[k] ? fields[k] : transport_id_mark;
        }
    }
    return NULL;
}

int adb_host_devices_parse(const char *text, size_t n, struct adb_host_device *out, int max)
{
    int count = 0;
    const char *p = text, *end = text + strnlen(text, n); /* text, never past a NUL */
    while (p < end && count < max) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        struct adb_host_device *d = &out[count];
        memset(d, 0, sizeof *d);
        d->transport_id = -1;
        const char *q = p;
        while (q < le && *q != ' ' && *q != '\t')
            q++;
        const char *state = NULL, *state_end = NULL;
        int in_state = 1;
        if (q > p)
            copy_field(d->serial, sizeof d->serial, (const uint8_t *)p, (size_t)(q - p));
        while (q > p && q < le) {
            while (q < le && (*q == ' ' || *q == '\t'))
                q++;
            const char *w = q;
            while (q < le && *q != ' ' && *q != '\t')
                q++;
            if (q == w)
                break;
            const char *v;
            size_t vl;
            char *field = device_field(d, w, (size_t)(q - w), &v, &vl);
            if (!field) {
                if (in_state) { /* the state runs up to the first key:value word */
                    state = state ? state : w;
                    state_end = q;
                }
                continue;
            }
            in_state = 0;
            if (field == d->usb || field == d->product || field == d->model || field == d->device) {
                copy_field(field, sizeof d->usb, (const uint8_t *)v, vl);
            } else {
                char num[24];
                copy_field(num, sizeof num, (const uint8_t *)v, vl);
                d->transport_id = strtol(num, NULL, 10);
            }
        }
        if (state) {
            copy_field(d->state, sizeof d->state, (const uint8_t *)state, (size_t)(state_end - state));
            count++;
        }
        p = nl ? nl + 1 : end;
    }
    return count;
}
