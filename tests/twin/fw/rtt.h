/* SEGGER-layout RTT control block for the twin (see tests/twin/README.md). */
#ifndef TWIN_RTT_H
#define TWIN_RTT_H
#include <stddef.h>
#include <stdint.h>

#define RTT_FLAG_SKIP 0u
#define RTT_FLAG_BLOCK 2u

void rtt_init(uint32_t up0_flags);
/* Write all of data to up channel ch; waits (WFI) while a block-mode channel is full; a skip-mode channel
 * drops what does not fit. */
void rtt_write(unsigned ch, const void *data, size_t len);
/* Bytes read from down channel 0, without waiting. */
size_t rtt_read(void *buf, size_t len);
void rtt_puts(const char *s);
void rtt_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Time: SysTick at 1 kHz from the 32 MHz CPU clock. */
#define TWIN_CPU_HZ 32000000u
#define TWIN_TICK_CYCLES (TWIN_CPU_HZ / 1000u)
void clock_init(void);
uint32_t clock_ms(void);
void idle(void); /* WFI until the next interrupt (at most 1 ms) */
#endif
