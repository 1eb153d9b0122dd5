/* libFuzzer target: memwatch's reading of a runner's output (tools/memwatch.c), which is the board's, untrusted:
 * arbitrary bytes as stdout and stderr in pieces whose sizes come from the input, against executor_runner's
 * marks (the globs of lua/odp/parse/memory.lua). Checks: every boundary line is counted once (reported or
 * dropped) whatever the pieces, counted again here by splitting the same bytes into lines; the report is lines
 * of bounded length; the timeline (a sample after every piece, into a bound from the input) holds whole lines
 * within its bound, and the report says it was cut exactly when samples were left out. The watched process is
 * the fuzzer itself (its /proc is real; its mark is reset).
 * sources: tools/memwatch.c
 * seeds: tests/fuzz/corpus/memwatch
 * max_len: 8192 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../tools/memwatch.h"

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *const MARKS[] = {"program=*] Model file * is loaded.", "method=*] Model loaded in * ms.",
                                    "method=*] Method loaded.", "first=*] Iteration 1 of *",
                                    "executed=*] Model executed successfully*"};

static int matches(const char *line)
{
    for (size_t k = 0; k < sizeof MARKS / sizeof MARKS[0]; k++)
        if (fnmatch(strchr(MARKS[k], '=') + 1, line, 0) == 0)
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct memwatch m;
    memset(&m, 0, sizeof m);
    for (size_t k = 0; k < sizeof MARKS / sizeof MARKS[0]; k++)
        if (memwatch_add_mark(&m, MARKS[k]))
            abort();
    char *tl = NULL;
    size_t tl_len = 0, bound = size > 1 ? (size_t)data[1] * 8 : 0;
    FILE *timeline = open_memstream(&tl, &tl_len);
    if (!timeline)
        abort();
    memwatch_start(&m, getpid(), now(), timeline, bound, NULL);
    /* stream 1 (stderr) gets all of it in pieces; the expected count splits the same bytes into lines, each
     * cut at MEMWATCH_LINE - 1 bytes as memwatch keeps them */
    int expected = 0;
    char line[MEMWATCH_LINE];
    size_t len = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n') {
            line[len] = 0;
            expected += matches(line); /* a NUL inside: both sides match up to it */
            len = 0;
        } else if (len < MEMWATCH_LINE - 1) {
            line[len++] = (char)data[i];
        }
    }
    size_t pos = 0;
    uint8_t split = size ? data[0] : 1;
    while (pos < size) {
        size_t n = 1 + (split = (uint8_t)(split * 31 + 7)) % 300;
        if (n > size - pos)
            n = size - pos;
        memwatch_output(&m, 1, (const char *)data + pos, n);
        pos += n;
        m.next_sample = 0; /* a sample now, whatever the clock says */
        memwatch_tick(&m);
    }
    if (m.nb + m.dropped != expected)
        abort();
    char *rep = NULL;
    size_t rlen = 0;
    FILE *f = open_memstream(&rep, &rlen);
    long samples = m.samples;
    memwatch_report(&m, f); /* closes the timeline: tl and tl_len are final */
    fclose(f);
    size_t lines = 0;
    for (size_t i = 0; i < tl_len; i++)
        lines += tl[i] == '\n';
    if (tl_len > bound || (tl_len && tl[tl_len - 1] != '\n'))
        abort(); /* within its bound, whole lines */
    int cut = lines < (size_t)samples + 1; /* the header and one line a sample, unless some were left out */
    if (!!strstr(rep, "timeline=cut") != cut || (!cut && !strstr(rep, "timeline=ok")))
        abort();
    free(tl);
    for (char *p = rep, *nl; p && *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl || nl - p > 400)
            abort(); /* every report line ends, and is short */
    }
    free(rep);
    return 0;
}
