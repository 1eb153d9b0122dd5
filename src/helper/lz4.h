/* An LZ4 block decoder (the block format of lz4's doc/lz4_Block_format.md): the helper's upload chunks come
 * compressed by odp with liblz4 (docs/helper-protocol.md, 'P'), and the static helper links no library.
 * Device-side input is odp's, but a chunk is still bounded: nothing is read past src + n nor written past
 * dst + cap, and a match may reach back only into what this block wrote. */
#ifndef ODP_HELPER_LZ4_H
#define ODP_HELPER_LZ4_H
#include <stddef.h>
#include <stdint.h>

/* Decodes the block src[0..n) into dst (cap bytes). -> the decoded length, or -1 when the block is malformed
 * (cut short, a match offset of 0 or before dst, a length that would pass cap). */
long odp_lz4_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap);

#endif
