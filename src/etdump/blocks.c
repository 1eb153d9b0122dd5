/* The Inspector's merge of runs into blocks (devtools/inspector/_inspector.py, EventBlock._gen_from_etdump),
 * in C because a 100,000-event dump must give its op table in well under 100 ms. lua/odp/parse/etdump.lua holds the
 * same algorithm in Lua for documents built by hand; the tests check that both agree. */
#include <stdlib.h>
#include <string.h>

#include "etdump.h"

/* FNV-1a over bytes, then mixed with integers. */
static uint64_t h_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}
static uint64_t h_int(uint64_t h, int64_t v) { return h_bytes(h, &v, sizeof v); }

static int str_eq(const odp_fb_str *a, const odp_fb_str *b)
{
    if (!a->s || !b->s)
        return !a->s && !b->s;
    return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
}

/* An unset string id (absent or "") is one value, like the Inspector's None. */
static int dstr_set(const odp_fb_str *s) { return s->s && s->n; }
static int dstr_eq(const odp_fb_str *a, const odp_fb_str *b)
{
    if (!dstr_set(a) || !dstr_set(b))
        return !dstr_set(a) && !dstr_set(b);
    return str_eq(a, b);
}

/* Open-addressing set of indices into an array of items, compared by a callback. */
typedef struct {
    uint32_t *slot; /* item index + 1; 0 = empty */
    uint64_t *hash;
    size_t cap;
    size_t n;
} table;

static int table_init(table *t, size_t want)
{
    size_t cap = 16;
    while (cap < want * 2)
        cap <<= 1;
    t->slot = calloc(cap, sizeof *t->slot);
    t->hash = calloc(cap, sizeof *t->hash);
    t->cap = cap;
    t->n = 0;
    return t->slot && t->hash ? 0 : -1;
}

static void table_free(table *t)
{
    free(t->slot);
    free(t->hash);
    memset(t, 0, sizeof *t);
}

static int table_grow(table *t)
{
    table bigger;
    if (table_init(&bigger, t->cap))
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i])
            continue;
        size_t j = t->hash[i] & (bigger.cap - 1);
        while (bigger.slot[j])
            j = (j + 1) & (bigger.cap - 1);
        bigger.slot[j] = t->slot[i];
        bigger.hash[j] = t->hash[i];
    }
    bigger.n = t->n;
    table_free(t);
    *t = bigger;
    return 0;
}

/* Finds the item equal to `key` (eq(ctx, item, key)); if absent and insert_as != UINT32_MAX, inserts it.
 * Returns the item index, UINT32_MAX when absent (or out of memory: *oom set). */
static uint32_t table_find(table *t, uint64_t h, int (*eq)(void *, uint32_t, const void *), void *ctx,
                           const void *key, uint32_t insert_as, int *oom)
{
    size_t j = h & (t->cap - 1);
    while (t->slot[j]) {
        if (t->hash[j] == h && eq(ctx, t->slot[j] - 1, key))
            return t->slot[j] - 1;
        j = (j + 1) & (t->cap - 1);
    }
    if (insert_as == UINT32_MAX)
        return UINT32_MAX;
    t->slot[j] = insert_as + 1;
    t->hash[j] = h;
    if (++t->n * 2 > t->cap && table_grow(t)) {
        *oom = 1;
        return UINT32_MAX;
    }
    return insert_as;
}

/* ---- signatures: (name, instruction id, delegate int id, delegate string id) ---- */
typedef struct {
    const odp_etdump_event **rep;
    uint32_t n, cap;
} sigs;

static uint64_t sig_hash(const odp_etdump_event *e)
{
    uint64_t h = 1469598103934665603ull;
    if (e->name.s)
        h = h_bytes(h, e->name.s, e->name.n);
    h = h_int(h, e->instruction_id);
    h = h_int(h, e->delegate_debug_id_int);
    if (dstr_set(&e->delegate_debug_id_str))
        h = h_bytes(h, e->delegate_debug_id_str.s, e->delegate_debug_id_str.n);
    return h;
}

static int sig_eq(void *ctx, uint32_t i, const void *key)
{
    const odp_etdump_event *a = ((sigs *)ctx)->rep[i], *b = key;
    return a->instruction_id == b->instruction_id && a->delegate_debug_id_int == b->delegate_debug_id_int &&
           str_eq(&a->name, &b->name) && dstr_eq(&a->delegate_debug_id_str, &b->delegate_debug_id_str);
}

/* ---- instructions within a run: (instruction id, chain, delegate ids) ---- */
typedef struct {
    const odp_etdump_event **rep;
} instrs;

static uint64_t instr_hash(const odp_etdump_event *e)
{
    uint64_t h = h_int(h_int(h_int(1469598103934665603ull, e->instruction_id), e->chain_index),
                       e->delegate_debug_id_int);
    if (dstr_set(&e->delegate_debug_id_str))
        h = h_bytes(h, e->delegate_debug_id_str.s, e->delegate_debug_id_str.n);
    return h;
}

static int instr_eq(void *ctx, uint32_t i, const void *key)
{
    const odp_etdump_event *a = ((instrs *)ctx)->rep[i], *b = key;
    return a->instruction_id == b->instruction_id && a->chain_index == b->chain_index &&
           a->delegate_debug_id_int == b->delegate_debug_id_int &&
           dstr_eq(&a->delegate_debug_id_str, &b->delegate_debug_id_str);
}

/* ---- per-run event keys: (profile signature + 1 or 0, debug signature + 1 or 0) ---- */
typedef struct {
    uint64_t *keys;
} keyset;

static int key_eq(void *ctx, uint32_t i, const void *key)
{
    return ((keyset *)ctx)->keys[i] == *(const uint64_t *)key;
}

/* ---- blocks: (run name, bundled input, key sequence) ---- */
typedef struct {
    odp_etdump_block *b;
    uint64_t **keys; /* each block's key sequence */
} blockset;

typedef struct {
    const odp_etdump_run *run;
    const uint64_t *keys;
    uint32_t nkeys;
} block_key;

static int block_eq(void *ctx, uint32_t i, const void *key)
{
    const blockset *bs = ctx;
    const block_key *k = key;
    const odp_etdump_block *b = &bs->b[i];
    return b->nevents == k->nkeys && b->bundled_input_index == k->run->bundled_input_index &&
           str_eq(&b->name, &k->run->name) && memcmp(bs->keys[i], k->keys, k->nkeys * sizeof *k->keys) == 0;
}

static int is_output(const odp_etdump_event *e)
{
    return e->kind == ODP_ETDUMP_DEBUG && e->has_debug_entry && e->debug_entry.has_output && e->debug_entry.output;
}

int odp_etdump_blocks(const odp_etdump *d, odp_etdump_blocks_t *out, odp_err *err)
{
    memset(out, 0, sizeof *out);
    uint32_t maxev = 1;
    for (uint32_t r = 0; r < d->nruns; r++)
        if (d->runs[r].nevents > maxev)
            maxev = d->runs[r].nevents;
    sigs sg = {0};
    table sigt = {0}, instt = {0}, keyt = {0}, blockt = {0};
    blockset bs = {0};
    uint32_t bcap = 0;
    /* per-run scratch, sized for the largest run */
    const odp_etdump_event **irep = malloc(maxev * sizeof *irep);
    uint32_t *ev_instr = malloc(maxev * sizeof *ev_instr);
    uint32_t *ins_count = malloc((maxev + 1) * sizeof *ins_count);
    uint32_t *ins_debug = malloc(maxev * sizeof *ins_debug);
    uint32_t *order = malloc(maxev * sizeof *order);
    uint64_t *keys = malloc(maxev * sizeof *keys);
    uint32_t *key_ev = malloc(maxev * sizeof *key_ev); /* event index + 1 of each key, 0 = debug only */
    int oom = !irep || !ev_instr || !ins_count || !ins_debug || !order || !keys || !key_ev ||
              table_init(&sigt, 64) || table_init(&blockt, 16);
    for (uint32_t r = 0; r < d->nruns && !oom; r++) {
        const odp_etdump_run *run = &d->runs[r];
        instrs is = {irep};
        keyset ks = {keys};
        uint32_t ninstr = 0, nkeys = 0;
        table_free(&instt);
        table_free(&keyt);
        if (table_init(&instt, run->nevents) || table_init(&keyt, run->nevents)) {
            oom = 1;
            break;
        }
        /* collate events per instruction */
        for (uint32_t j = 0; j < run->nevents; j++) {
            const odp_etdump_event *e = &run->events[j];
            ev_instr[j] = UINT32_MAX;
            /* a run-output debug event still places its instruction (as in the Inspector), but is no sample */
            if (e->kind != ODP_ETDUMP_PROFILE && e->kind != ODP_ETDUMP_DEBUG)
                continue;
            irep[ninstr] = e;
            uint32_t ins = table_find(&instt, instr_hash(e), instr_eq, &is, e, ninstr, &oom);
            if (oom)
                break;
            if (ins == ninstr) {
                ins_count[ninstr] = 0;
                ins_debug[ninstr] = UINT32_MAX;
                ninstr++;
            }
            ev_instr[j] = ins;
            if (e->kind == ODP_ETDUMP_PROFILE)
                ins_count[ins]++;
            else if (ins_debug[ins] == UINT32_MAX && !is_output(e))
                ins_debug[ins] = j;
        }
        if (oom)
            break;
        /* profile events in instruction order (counting sort keeps file order within an instruction) */
        uint32_t total = 0;
        for (uint32_t i = 0; i < ninstr; i++) {
            uint32_t c = ins_count[i];
            ins_count[i] = total;
            total += c;
        }
        for (uint32_t j = 0; j < run->nevents; j++)
            if (run->events[j].kind == ODP_ETDUMP_PROFILE)
                order[ins_count[ev_instr[j]]++] = j;
        /* event keys: after the loop above ins_count[i] is the end of instruction i's profile events */
        uint32_t pos = 0;
        for (uint32_t i = 0; i < ninstr; i++) {
            uint64_t dsig = 0;
            if (ins_debug[i] != UINT32_MAX) {
                const odp_etdump_event *de = &run->events[ins_debug[i]];
                if (sg.n == sg.cap) {
                    sg.cap = sg.cap ? 2 * sg.cap : 256;
                    const odp_etdump_event **p = realloc(sg.rep, sg.cap * sizeof *p);
                    if (!p) { oom = 1; break; }
                    sg.rep = p;
                }
                sg.rep[sg.n] = de;
                uint32_t id = table_find(&sigt, sig_hash(de), sig_eq, &sg, de, sg.n, &oom);
                if (oom)
                    break;
                if (id == sg.n)
                    sg.n++;
                dsig = (uint64_t)id + 1;
            }
            uint32_t end = ins_count[i];
            if (pos == end && dsig) { /* debug events only (an instruction with neither is skipped) */
                uint64_t k = dsig;
                keys[nkeys] = k;
                uint32_t at = table_find(&keyt, h_int(7, (int64_t)k), key_eq, &ks, &k, nkeys, &oom);
                if (at == nkeys)
                    nkeys++;
                if (!oom)
                    key_ev[at] = 0;
            }
            for (; pos < end && !oom; pos++) {
                const odp_etdump_event *pe = &run->events[order[pos]];
                if (sg.n == sg.cap) {
                    sg.cap = sg.cap ? 2 * sg.cap : 256;
                    const odp_etdump_event **p = realloc(sg.rep, sg.cap * sizeof *p);
                    if (!p) { oom = 1; break; }
                    sg.rep = p;
                }
                sg.rep[sg.n] = pe;
                uint32_t id = table_find(&sigt, sig_hash(pe), sig_eq, &sg, pe, sg.n, &oom);
                if (oom)
                    break;
                if (id == sg.n)
                    sg.n++;
                uint64_t k = ((uint64_t)id + 1) << 32 | dsig;
                keys[nkeys] = k;
                uint32_t at = table_find(&keyt, h_int(7, (int64_t)k), key_eq, &ks, &k, nkeys, &oom);
                if (oom)
                    break;
                if (at == nkeys)
                    nkeys++;
                key_ev[at] = order[pos] + 1; /* a repeated signature keeps its place, takes the last event */
            }
            if (oom)
                break;
        }
        if (oom || nkeys == 0)
            continue;
        /* the block this run belongs to */
        uint64_t h = h_int(h_bytes(1469598103934665603ull, run->name.s ? run->name.s : "", run->name.n),
                           run->bundled_input_index);
        h = h_bytes(h, keys, nkeys * sizeof *keys);
        block_key bk = {run, keys, nkeys};
        if (out->n == bcap) {
            bcap = bcap ? 2 * bcap : 8;
            odp_etdump_block *nb = realloc(out->blocks, bcap * sizeof *nb);
            uint64_t **nk = realloc(bs.keys, bcap * sizeof *nk);
            if (nb)
                out->blocks = nb;
            if (nk)
                bs.keys = nk;
            if (!nb || !nk) { oom = 1; break; }
        }
        bs.b = out->blocks;
        /* a provisional entry, so block_eq can compare against it only once it is complete */
        uint32_t bi = table_find(&blockt, h, block_eq, &bs, &bk, UINT32_MAX, &oom);
        if (bi == UINT32_MAX) {
            bi = out->n;
            odp_etdump_block *b = &out->blocks[bi];
            memset(b, 0, sizeof *b);
            b->name = run->name;
            b->bundled_input_index = run->bundled_input_index;
            b->nevents = nkeys;
            b->events = calloc(nkeys, sizeof *b->events);
            bs.keys[bi] = malloc(nkeys * sizeof **bs.keys);
            if (!b->events || !bs.keys[bi]) {
                free(b->events);
                free(bs.keys[bi]);
                oom = 1;
                break;
            }
            memcpy(bs.keys[bi], keys, nkeys * sizeof *keys);
            for (uint32_t i = 0; i < nkeys; i++) {
                uint64_t ps = keys[i] >> 32, ds = keys[i] & 0xffffffffu;
                b->events[i].profile = ps != 0;
                b->events[i].rep = sg.rep[(ps ? ps : ds) - 1];
            }
            out->n++;
            table_find(&blockt, h, block_eq, &bs, &bk, bi, &oom);
            if (oom)
                break;
        }
        odp_etdump_block *b = &out->blocks[bi];
        b->runs++;
        for (uint32_t i = 0; i < nkeys; i++) {
            uint64_t dur;
            odp_etdump_block_event *be = &b->events[i];
            if (!key_ev[i])
                continue;
            const odp_etdump_event *pe = &run->events[key_ev[i] - 1];
            if (odp_etdump_duration(pe->start_time, pe->end_time, &dur))
                continue;
            if (be->nsamples == be->cap) {
                be->cap = be->cap ? 2 * be->cap : 8;
                uint64_t *p = realloc(be->samples, be->cap * sizeof *p);
                if (!p) { oom = 1; break; }
                be->samples = p;
            }
            be->samples[be->nsamples++] = dur;
        }
    }
    if (bs.keys)
        for (uint32_t i = 0; i < out->n; i++)
            free(bs.keys[i]);
    free(bs.keys);
    free(sg.rep);
    table_free(&sigt);
    table_free(&instt);
    table_free(&keyt);
    table_free(&blockt);
    free(irep);
    free(ev_instr);
    free(ins_count);
    free(ins_debug);
    free(order);
    free(keys);
    free(key_ev);
    if (oom) {
        odp_etdump_blocks_free(out);
        return odp_fail(err, ODP_EIO, "out of memory merging ETDump runs into blocks");
    }
    return 0;
}

void odp_etdump_blocks_free(odp_etdump_blocks_t *bl)
{
    for (uint32_t i = 0; i < bl->n; i++) {
        for (uint32_t j = 0; j < bl->blocks[i].nevents; j++)
            free(bl->blocks[i].events[j].samples);
        free(bl->blocks[i].events);
    }
    free(bl->blocks);
    memset(bl, 0, sizeof *bl);
}
