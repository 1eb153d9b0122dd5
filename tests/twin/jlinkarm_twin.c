/* Test-only stand-in for SEGGER's libjlinkarm.so over the twin board (tests/twin/README.md): memory access
 * through the shared DDR file, halt/go/reset through QMP, RTTERMINAL through the RTT block in shared memory.
 * Built by the tests as libjlinkarm.so; never installed. Signatures follow SEGGER's DLL as used by pylink,
 * BlueZ's monitor/jlink.c and others (docs/sources.md §4). ODP_TWIN_STATE names the twin's state directory. */
#include "twin_host.h"
#include <netdb.h>
#include <stdarg.h>

#define EXPORT __attribute__((visibility("default")))

typedef void log_fn(const char *);

typedef struct {
	uint32_t ConfigBlockAddress;
	uint32_t Reserved[3];
} rtt_start_t;

typedef struct {
	int BufferIndex;
	uint32_t Direction; /* 0 up, 1 down */
	char acName[32];
	uint32_t SizeOfBuffer;
	uint32_t Flags;
} rtt_bufdesc_t;

typedef struct {
	uint32_t NumBytesTransferred;
	uint32_t NumBytesRead;
	int HostOverflowCount;
	int IsRunning;
	int NumUpBuffers;
	int NumDownBuffers;
	uint32_t OverflowMask;
	uint32_t Dummy;
} rtt_stat_t;

enum { RTT_START, RTT_STOP, RTT_GETDESC, RTT_GETNUMBUF, RTT_GETSTAT };

static struct {
	int open, connected, rtt_running;
	twin_t twin;
	log_fn *log, *err;
	uint32_t rtt_addr; /* SetRTTAddr or START's ConfigBlockAddress; 0 = search */
	uint32_t ranges[8][2];
	int nranges;
	uint32_t found;    /* block address in use, 0 = not found yet */
	uint32_t bytes_read, bytes_written;
} J;

static void logf_(log_fn *f, const char *fmt, ...)
{
	if (!f)
		return;
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	f(msg);
}

/* J-Link Remote Server by IP: like SEGGER's DLL, reach the server (a TCP connect to host:port, 19020 when
 * port is 0) and answer 1 when it cannot; the probe behind it is the twin, as for USB. */
EXPORT char JLINKARM_SelectIP(const char *sHost, int Port)
{
	char port[16];
	snprintf(port, sizeof port, "%d", Port ? Port : 19020);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	if (getaddrinfo(sHost, port, &hints, &ai) || !ai)
		return 1;
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return ok ? 0 : 1;
}

EXPORT const char *JLINKARM_OpenEx(log_fn *pfLog, log_fn *pfErrorOut)
{
	static char err[700];
	const char *state = getenv("ODP_TWIN_STATE");
	if (J.open)
		return NULL;
	if (!state) {
		snprintf(err, sizeof err, "ODP_TWIN_STATE is not set (the twin's state directory)");
		return err;
	}
	char e[600];
	if (twin_open(&J.twin, state, e, sizeof e)) {
		snprintf(err, sizeof err, "twin: %s", e);
		return err;
	}
	J.open = 1, J.log = pfLog, J.err = pfErrorOut;
	logf_(J.log, "twin J-Link DLL: %s", state);
	return NULL;
}

EXPORT void JLINKARM_Close(void)
{
	if (J.open)
		twin_close(&J.twin);
	memset(&J, 0, sizeof J);
}

static int word_eq(const char *s, const char *w, const char **rest)
{
	size_t n = strlen(w);
	if (strncasecmp(s, w, n) != 0)
		return 0;
	*rest = s + n;
	return 1;
}

EXPORT int JLINKARM_ExecCommand(const char *sIn, char *sError, int BufferSize)
{
	const char *r;
	if (sError && BufferSize > 0)
		sError[0] = 0;
	if (!sIn)
		return -1;
	while (*sIn == ' ')
		sIn++;
	if (word_eq(sIn, "SetRTTAddr", &r)) {
		J.rtt_addr = (uint32_t)strtoul(r, NULL, 0);
		J.found = 0;
	} else if (word_eq(sIn, "SetRTTSearchRanges", &r)) {
		char *end;
		J.nranges = 0;
		while (J.nranges < 8) {
			unsigned long a = strtoul(r, &end, 0);
			if (end == r)
				break;
			r = end;
			while (*r == ' ' || *r == ',')
				r++;
			unsigned long n = strtoul(r, &end, 0);
			if (end == r)
				break;
			r = end;
			while (*r == ' ' || *r == ',')
				r++;
			J.ranges[J.nranges][0] = (uint32_t)a, J.ranges[J.nranges][1] = (uint32_t)n;
			J.nranges++;
		}
		J.found = 0;
	} else if (word_eq(sIn, "Device", &r)) {
		logf_(J.log, "twin J-Link DLL: device%s (any name is accepted)", r);
	}
	return 0;
}

EXPORT int JLINKARM_TIF_Select(int IntType)
{
	return IntType == 0 || IntType == 1 ? 0 : -1;
}

EXPORT void JLINKARM_SetSpeed(uint32_t Speed)
{
	(void)Speed;
}

static int qmp(const char *cmd)
{
	char reply[1024];
	if (twin_qmp(&J.twin, cmd, reply, sizeof reply, 5)) {
		logf_(J.err, "twin QMP %s: %s", cmd, reply);
		return -1;
	}
	return 0;
}

EXPORT int JLINKARM_Connect(void)
{
	if (!J.open)
		return -1;
	/* "Flashing" the twin relaunches QEMU with a new shared file and new ports; a real probe stays attached
	 * to the same board, so each connect re-reads the twin's state directory. */
	char e[600];
	twin_close(&J.twin);
	if (twin_open(&J.twin, getenv("ODP_TWIN_STATE"), e, sizeof e)) {
		logf_(J.err, "twin: %s", e);
		return -1;
	}
	J.found = 0;
	char reply[1024];
	if (twin_qmp(&J.twin, "query-status", reply, sizeof reply, 5)) {
		logf_(J.err, "twin: cannot reach QEMU: %s", reply);
		return -1;
	}
	J.connected = 1;
	return 0;
}

EXPORT char JLINKARM_IsConnected(void)
{
	return (char)J.connected;
}

/* Like the real DLL, reset leaves the core halted: stop first so no instruction runs after the reset. */
EXPORT int JLINKARM_Reset(void)
{
	if (!J.connected)
		return -1;
	J.found = 0;
	return qmp("stop") || qmp("system_reset") ? -1 : 0;
}

EXPORT void JLINKARM_Go(void)
{
	if (J.connected)
		qmp("cont");
}

/* Returns 0 on success (pylink treats non-zero as failure). */
EXPORT char JLINKARM_Halt(void)
{
	return (char)(J.connected && qmp("stop") == 0 ? 0 : 1);
}

EXPORT char JLINKARM_IsHalted(void)
{
	char reply[1024];
	if (!J.connected || twin_qmp(&J.twin, "query-status", reply, sizeof reply, 5))
		return (char)-1;
	return strstr(reply, "\"running\": true") ? 0 : 1;
}

/* ODP_TWIN_JLINK_FAULT, for odp's tests of a DLL call that never returns or crashes its process:
 * hang_read (ReadMemEx blocks forever) or crash_read (ReadMemEx aborts). */
static void read_fault(void)
{
	const char *f = getenv("ODP_TWIN_JLINK_FAULT");
	if (f && !strcmp(f, "hang_read"))
		for (;;)
			pause();
	if (f && !strcmp(f, "crash_read"))
		abort();
}

EXPORT int JLINKARM_ReadMemEx(uint32_t Addr, uint32_t NumBytes, void *pData, uint32_t Flags)
{
	(void)Flags;
	read_fault();
	uint8_t *p = J.connected ? twin_ptr(&J.twin, Addr, NumBytes) : NULL;
	if (!p)
		return -1;
	memcpy(pData, p, NumBytes);
	return (int)NumBytes;
}

EXPORT int JLINKARM_WriteMemEx(uint32_t Addr, uint32_t NumBytes, const void *p, uint32_t Flags)
{
	(void)Flags;
	uint8_t *d = J.connected ? twin_ptr(&J.twin, Addr, NumBytes) : NULL;
	if (!d)
		return -1;
	memcpy(d, p, NumBytes);
	return (int)NumBytes;
}

/* The block in use: re-validated on every call (a reset may have killed it). */
static uint32_t rtt_block(void)
{
	if (!J.rtt_running)
		return 0;
	if (J.found && twin_rtt_valid(&J.twin, J.found))
		return J.found;
	J.found = 0;
	if (J.rtt_addr) {
		if (twin_rtt_valid(&J.twin, J.rtt_addr))
			J.found = J.rtt_addr;
		return J.found;
	}
	uint32_t def[1][2] = {{J.twin.ddr_base, 0x10000}};
	uint32_t(*ranges)[2] = J.nranges ? J.ranges : def;
	int n = J.nranges ? J.nranges : 1;
	for (int i = 0; i < n; i++)
		for (uint32_t a = ranges[i][0]; a + 24 <= ranges[i][0] + ranges[i][1]; a += 4)
			if (twin_rtt_valid(&J.twin, a)) {
				J.found = a;
				return a;
			}
	return 0;
}

EXPORT int JLINK_RTTERMINAL_Control(uint32_t Cmd, void *p)
{
	if (!J.connected)
		return -1;
	switch (Cmd) {
	case RTT_START: {
		const rtt_start_t *s = p;
		if (s && s->ConfigBlockAddress)
			J.rtt_addr = s->ConfigBlockAddress;
		J.rtt_running = 1, J.found = 0;
		return 0;
	}
	case RTT_STOP:
		J.rtt_running = 0, J.found = 0;
		return 0;
	case RTT_GETNUMBUF: {
		uint32_t cb = rtt_block();
		if (!cb)
			return -2;
		const uint8_t *b = twin_ptr(&J.twin, cb, 24);
		return (int)twin_ld32(b + (p && *(const int *)p == 1 ? 20 : 16));
	}
	case RTT_GETDESC: {
		rtt_bufdesc_t *d = p;
		uint32_t cb = rtt_block();
		if (!cb || !d)
			return -2;
		uint32_t da = twin_rtt_desc_addr(&J.twin, cb, d->Direction ? 1 : 0, (uint32_t)d->BufferIndex);
		const uint8_t *dp = da ? twin_ptr(&J.twin, da, 24) : NULL;
		if (!dp)
			return -1;
		/* The name string may live outside the shared DDR (ITCM on the twin): empty then. */
		uint32_t name = twin_ld32(dp);
		const uint8_t *np = twin_ptr(&J.twin, name, 1);
		memset(d->acName, 0, sizeof d->acName);
		for (size_t i = 0; np && i + 1 < sizeof d->acName && twin_ptr(&J.twin, name + (uint32_t)i, 1) && np[i]; i++)
			d->acName[i] = (char)np[i];
		d->SizeOfBuffer = twin_ld32(dp + 8);
		d->Flags = twin_ld32(dp + 20);
		return 0;
	}
	case RTT_GETSTAT: {
		rtt_stat_t *s = p;
		if (!s)
			return -1;
		uint32_t cb = rtt_block();
		memset(s, 0, sizeof *s);
		s->NumBytesTransferred = J.bytes_written;
		s->NumBytesRead = J.bytes_read;
		s->IsRunning = J.rtt_running;
		if (cb) {
			const uint8_t *b = twin_ptr(&J.twin, cb, 24);
			s->NumUpBuffers = (int)twin_ld32(b + 16);
			s->NumDownBuffers = (int)twin_ld32(b + 20);
		}
		return cb ? 0 : -2;
	}
	default:
		return -1;
	}
}

EXPORT int JLINK_RTTERMINAL_Read(uint32_t BufferIndex, char *sBuffer, uint32_t BufferSize)
{
	uint32_t cb = J.connected ? rtt_block() : 0;
	if (!cb)
		return -1;
	uint32_t d = twin_rtt_desc_addr(&J.twin, cb, 0, BufferIndex);
	long n = d ? twin_rtt_up_read(&J.twin, d, sBuffer, BufferSize) : -1;
	if (n > 0)
		J.bytes_read += (uint32_t)n;
	return (int)n;
}

EXPORT int JLINK_RTTERMINAL_Write(uint32_t BufferIndex, const char *sBuffer, uint32_t BufferSize)
{
	uint32_t cb = J.connected ? rtt_block() : 0;
	if (!cb)
		return -1;
	uint32_t d = twin_rtt_desc_addr(&J.twin, cb, 1, BufferIndex);
	long n = d ? twin_rtt_down_write(&J.twin, d, sBuffer, BufferSize) : -1;
	if (n > 0)
		J.bytes_written += (uint32_t)n;
	return (int)n;
}
