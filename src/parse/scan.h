/* Line scanner for the dominant line kind of an ExecuTorch runner log: `Iteration i of N: f ms` (one per
 * execution; a 100 MB log is ~95% of them). The LPeg grammar of lua/odp/parse/executorch.lua parses every
 * other line; this scanner is the one place iteration lines are recognised, and it turns their numbers into
 * C numbers without making a Lua string per value (what made the pure-LPeg parser slow).
 *
 * A line is an iteration line when it is, up to its '\n' (or the end of the text):
 *   PREFIX? "Iteration " digit+ " of " digit+ ":" [ \t]* NUM [ \t]* "ms" <anything>
 * where PREFIX is one of the log prefixes of the LPeg grammar, matched the same way (PEG, first alternative
 * that matches wins):
 *   POSIX       [DIEFW][ \t]([0-9]+:[0-9]+:[0-9]+.[0-9]+[ \t])?executorch:FILE:[0-9]+] ?
 *   Arm         [DIEFW][ \t]\[executorch:FILE:[0-9]+[ \t]FUNC()] ?
 *   logcat      [0-9]{2,}-[0-9]{2,}[ \t]+TS[ \t]+[0-9]+[ \t]+[0-9]+[ \t]+[VDIWEFA][ \t]+TAG[ \t]*: ?
 *   logcat brief [VDIWEFA]/TAG[ \t]*(\([ \t]*[0-9]+\))?: ?
 * (FILE = [^:\]\n]+, FUNC = anything up to the first "()]" on the line, TAG = [^: (\n]+) and NUM is
 *   [+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?
 * Everything is bounded by the text length n; the text need not be NUL-terminated. Nothing allocates but the
 * conversion of a number longer than 255 characters (a copy for strtod). */
#ifndef ODP_PARSE_SCAN_H
#define ODP_PARSE_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t next;      /* offset of the following line (after the '\n'), or n */
    size_t body;      /* offset of "Iteration" (== the line start when the line has no prefix) */
    double ms;        /* the time, converted exactly like Lua's tonumber (correctly rounded) */
    int total_is_int; /* N fits a Lua integer (else it is in total_f, like Lua's tonumber on overflow) */
    int64_t total;    /* N of `Iteration i of N` */
    double total_f;
} odp_scan_iter;

/* The line starting at offset pos (pos <= n) is an iteration line: returns 1 and fills *it; else returns 0
 * and leaves *it alone. */
int odp_scan_iter_line(const char *s, size_t n, size_t pos, odp_scan_iter *it);

/* Offset of the first line start >= pos (pos must be a line start) whose line is an iteration line, or n
 * when there is none. */
size_t odp_scan_find_iter(const char *s, size_t n, size_t pos);

/* How many times "Iteration " occurs in s[0..n): a bound on the iteration lines, to size their list once. */
size_t odp_scan_count_heads(const char *s, size_t n);

/* NUM (above) at s[pos..n): returns its length and sets *v (correctly rounded, what Lua's tonumber gives),
 * or 0 when there is none (or the copy of a > 255-character number could not be allocated). */
size_t odp_scan_number(const char *s, size_t n, size_t pos, double *v);

#endif
