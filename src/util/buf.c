#include "buf.h"

#include <stdlib.h>
#include <string.h>

int odp_buf_append(odp_buf *b, const void *p, size_t n)
{
    if (b->limit && b->len + n > b->limit) {
        size_t room = b->limit > b->len ? b->limit - b->len : 0;
        b->dropped += n - room;
        n = room;
    }
    if (n == 0)
        return 0;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void odp_buf_free(odp_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = b->dropped = 0;
}
