/* A growable byte buffer with an optional cap (untrusted input never grows memory without bound). */
#ifndef ODP_BUF_H
#define ODP_BUF_H

#include <stddef.h>

typedef struct {
    char *data;
    size_t len, cap;
    size_t limit;    /* 0 = no limit */
    size_t dropped;  /* bytes refused because of limit */
} odp_buf;

/* Appends n bytes; past the limit the excess is counted in dropped. Returns -1 only when out of memory. */
int odp_buf_append(odp_buf *b, const void *p, size_t n);
void odp_buf_free(odp_buf *b);

#endif
