#include "rtt.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
	const char *name;
	char *buf;
	uint32_t size;
	uint32_t wr;
	uint32_t rd;
	uint32_t flags;
} rtt_desc;

typedef struct {
	char id[16];
	int32_t max_up;
	int32_t max_down;
	rtt_desc up[2];
	rtt_desc down[1];
} rtt_cb;

#define UP0_SIZE 16384u
#define UP1_SIZE 1024u
#define DOWN0_SIZE 4096u

/* Placed by twin.ld at fixed DDR addresses (README.md). */
extern volatile rtt_cb _SEGGER_RTT;
extern char rtt_up0_buf[UP0_SIZE], rtt_up1_buf[UP1_SIZE], rtt_down0_buf[DOWN0_SIZE];

#define DMB() __asm volatile("dmb" ::: "memory")

void rtt_init(uint32_t up0_flags)
{
	/* RAM survives reset: kill the old ID before anything else so a host never matches a half-built block. */
	for (int i = 0; i < 16; i++)
		_SEGGER_RTT.id[i] = 0;
	DMB();
	_SEGGER_RTT.max_up = 2;
	_SEGGER_RTT.max_down = 1;
	volatile rtt_desc *d = &_SEGGER_RTT.up[0];
	d->name = "Terminal", d->buf = rtt_up0_buf, d->size = UP0_SIZE, d->wr = 0, d->rd = 0, d->flags = up0_flags;
	d = &_SEGGER_RTT.up[1];
	d->name = "Aux", d->buf = rtt_up1_buf, d->size = UP1_SIZE, d->wr = 0, d->rd = 0, d->flags = RTT_FLAG_SKIP;
	d = &_SEGGER_RTT.down[0];
	d->name = "Terminal", d->buf = rtt_down0_buf, d->size = DOWN0_SIZE, d->wr = 0, d->rd = 0, d->flags = 0;
	DMB();
	/* The ID comes from a reversed literal so the image itself never holds "SEGGER RTT"; byte 0 last. */
	static const char rev[] = "TTR REGGES";
	for (int i = 15; i >= 1; i--)
		_SEGGER_RTT.id[i] = i < 10 ? rev[9 - i] : 0;
	DMB();
	_SEGGER_RTT.id[0] = rev[9];
	DMB();
}

void rtt_write(unsigned ch, const void *data, size_t len)
{
	volatile rtt_desc *d = &_SEGGER_RTT.up[ch];
	const char *p = data;
	while (len > 0) {
		uint32_t size = d->size, wr = d->wr, rd = d->rd;
		if (rd >= size) /* host wrote garbage: treat the ring as empty */
			rd = wr;
		uint32_t space = rd > wr ? rd - wr - 1 : size - 1 - wr + rd;
		if (space == 0) {
			if (d->flags != RTT_FLAG_BLOCK)
				return;
			idle();
			continue;
		}
		uint32_t n = len < space ? (uint32_t)len : space;
		uint32_t first = size - wr < n ? size - wr : n;
		memcpy(d->buf + wr, p, first);
		memcpy(d->buf, p + first, n - first);
		DMB();
		wr += n;
		if (wr >= size)
			wr -= size;
		d->wr = wr;
		p += n;
		len -= n;
	}
}

size_t rtt_read(void *buf, size_t len)
{
	volatile rtt_desc *d = &_SEGGER_RTT.down[0];
	uint32_t size = d->size, wr = d->wr, rd = d->rd;
	if (wr >= size) /* host wrote garbage */
		return 0;
	DMB();
	size_t got = 0;
	char *p = buf;
	while (got < len && rd != wr) {
		p[got++] = d->buf[rd];
		if (++rd == size)
			rd = 0;
	}
	DMB();
	d->rd = rd;
	return got;
}

void rtt_puts(const char *s)
{
	rtt_write(0, s, strlen(s));
}

void rtt_printf(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	rtt_write(0, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* SysTick */
#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)
static volatile uint32_t ticks;

void SysTick_Handler(void)
{
	ticks++;
}

void clock_init(void)
{
	SYST_RVR = TWIN_TICK_CYCLES - 1;
	SYST_CVR = 0;
	SYST_CSR = 7; /* processor clock, interrupt, enable */
}

uint32_t clock_ms(void)
{
	return ticks;
}

void idle(void)
{
	__asm volatile("wfi");
}
