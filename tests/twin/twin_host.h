/* Host-side access to a running twin (tests only): the shared DDR file, the RTT block in it, and QMP.
 * Used by rttcat.c and jlinkarm_twin.c; see tests/twin/README.md. Header-only so each tool is one cc call. */
#ifndef TWIN_HOST_H
#define TWIN_HOST_H
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	char dir[512];
	uint8_t *ddr;       /* mapping of the shared file */
	uint64_t ddr_size;  /* bytes mapped */
	uint32_t ddr_base;  /* target address of file offset 0 */
	uint32_t rtt_addr;  /* documented control block address */
	int qmp_port;
} twin_t;

/* RTT descriptor and block as laid out in target memory (32-bit target, little-endian host assumed). */
typedef struct {
	uint32_t name, buf, size, wr, rd, flags;
} twin_rtt_desc;

static inline double twin_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void twin_sleep_ms(double ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
	nanosleep(&ts, NULL);
}

static inline int twin_read_state_file(const char *dir, const char *name, char *out, size_t n)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(out, (int)n, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\r\n")] = 0;
	return 0;
}

/* 0 on success; on failure a message in err. */
static inline int twin_open(twin_t *t, const char *dir, char *err, size_t errn)
{
	char shm[512], v[64];
	memset(t, 0, sizeof *t);
	snprintf(t->dir, sizeof t->dir, "%s", dir);
	if (twin_read_state_file(dir, "shm", shm, sizeof shm) || twin_read_state_file(dir, "qmp_port", v, sizeof v)) {
		snprintf(err, errn, "%s: no twin state (shm, qmp_port); was launch.sh run?", dir);
		return -1;
	}
	t->qmp_port = atoi(v);
	t->ddr_base = twin_read_state_file(dir, "ddr_base", v, sizeof v) ? 0x60000000u : (uint32_t)strtoul(v, 0, 0);
	t->rtt_addr = twin_read_state_file(dir, "rtt_addr", v, sizeof v) ? 0x60000000u : (uint32_t)strtoul(v, 0, 0);
	int fd = open(shm, O_RDWR);
	if (fd < 0) {
		snprintf(err, errn, "%s: %s", shm, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) || st.st_size <= 0) {
		snprintf(err, errn, "%s: cannot size it", shm);
		close(fd);
		return -1;
	}
	t->ddr_size = (uint64_t)st.st_size;
	t->ddr = mmap(NULL, t->ddr_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (t->ddr == MAP_FAILED) {
		snprintf(err, errn, "mmap %s: %s", shm, strerror(errno));
		t->ddr = NULL;
		return -1;
	}
	return 0;
}

static inline void twin_close(twin_t *t)
{
	if (t->ddr)
		munmap(t->ddr, t->ddr_size);
	t->ddr = NULL;
}

/* Host pointer for [addr, addr+n) in DDR, or NULL when outside the mapped file. */
static inline uint8_t *twin_ptr(const twin_t *t, uint32_t addr, uint32_t n)
{
	if (addr < t->ddr_base)
		return NULL;
	uint64_t off = (uint64_t)addr - t->ddr_base;
	if (off > t->ddr_size || n > t->ddr_size - off)
		return NULL;
	return t->ddr + off;
}

static inline uint32_t twin_ld32(const uint8_t *p)
{
	return __atomic_load_n((const uint32_t *)(const void *)p, __ATOMIC_ACQUIRE);
}

static inline void twin_st32(uint8_t *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)(void *)p, v, __ATOMIC_RELEASE);
}

/* 1 when a valid RTT block is at addr (ID, sane counts). */
static inline int twin_rtt_valid(const twin_t *t, uint32_t addr)
{
	const uint8_t *p = twin_ptr(t, addr, 24);
	if (!p || memcmp(p, "SEGGER RTT\0\0\0\0\0\0", 16) != 0)
		return 0;
	uint32_t up = twin_ld32(p + 16), down = twin_ld32(p + 20);
	return up <= 16 && down <= 16 && twin_ptr(t, addr, 24 + 24 * (up + down)) != NULL;
}

/* Descriptor address of up (dir 0) or down (dir 1) channel ch, 0 if absent. */
static inline uint32_t twin_rtt_desc_addr(const twin_t *t, uint32_t cb, int dir, uint32_t ch)
{
	const uint8_t *p = twin_ptr(t, cb, 24);
	if (!p)
		return 0;
	uint32_t up = twin_ld32(p + 16), down = twin_ld32(p + 20);
	if (up > 16 || down > 16 || ch >= (dir ? down : up))
		return 0;
	return cb + 24 + 24 * ((dir ? up : 0) + ch);
}

/* Read up to n bytes from up channel at descriptor d; commit=0 peeks (RdOff unchanged). Returns bytes, or -1
 * if the ring is corrupt. */
static inline long twin_rtt_up_read_ex(twin_t *t, uint32_t d, void *out, size_t n, int commit)
{
	uint8_t *p = twin_ptr(t, d, 24);
	if (!p)
		return -1;
	uint32_t buf = twin_ld32(p + 4), size = twin_ld32(p + 8), wr = twin_ld32(p + 12), rd = twin_ld32(p + 16);
	uint8_t *b = twin_ptr(t, buf, size);
	if (!b || size < 2 || wr >= size || rd >= size)
		return -1;
	size_t got = 0;
	while (got < n && rd != wr) {
		uint32_t end = wr > rd ? wr : size;
		size_t k = end - rd < n - got ? end - rd : n - got;
		memcpy((uint8_t *)out + got, b + rd, k);
		got += k;
		rd += (uint32_t)k;
		if (rd == size)
			rd = 0;
	}
	if (got && commit)
		twin_st32(p + 16, rd);
	return (long)got;
}

static inline long twin_rtt_up_read(twin_t *t, uint32_t d, void *out, size_t n)
{
	return twin_rtt_up_read_ex(t, d, out, n, 1);
}

/* Write up to n bytes into down channel at descriptor d. Returns bytes written, or -1 if corrupt. */
static inline long twin_rtt_down_write(twin_t *t, uint32_t d, const void *in, size_t n)
{
	uint8_t *p = twin_ptr(t, d, 24);
	if (!p)
		return -1;
	uint32_t buf = twin_ld32(p + 4), size = twin_ld32(p + 8), wr = twin_ld32(p + 12), rd = twin_ld32(p + 16);
	uint8_t *b = twin_ptr(t, buf, size);
	if (!b || size < 2 || wr >= size || rd >= size)
		return -1;
	size_t put = 0;
	for (;;) {
		uint32_t space = rd > wr ? rd - wr - 1 : size - 1 - wr + rd;
		if (space == 0 || put == n)
			break;
		uint32_t end = rd > wr ? rd - 1 : (rd == 0 ? size - 1 : size);
		size_t k = end - wr < n - put ? end - wr : n - put;
		memcpy(b + wr, (const uint8_t *)in + put, k);
		put += k;
		wr += (uint32_t)k;
		if (wr == size)
			wr = 0;
	}
	if (put)
		twin_st32(p + 12, wr);
	return (long)put;
}

/* ---- QMP: one connection per command (QEMU accepts one client at a time; commands are rare). */
static inline int qmp_readline(int fd, char *line, size_t n, double deadline)
{
	size_t len = 0;
	while (len + 1 < n) {
		double left = deadline - twin_now();
		if (left <= 0)
			return -1;
		struct pollfd pfd = {fd, POLLIN, 0};
		if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		char c;
		if (read(fd, &c, 1) != 1)
			return -1;
		if (c == '\n')
			break;
		line[len++] = c;
	}
	line[len] = 0;
	return 0;
}

/* Runs one command ("system_reset", "stop", "cont", "query-status"); reply line (not events) in reply.
 * Returns 0 when the reply has "return", -1 otherwise. For system_reset it also waits for the RESET event. */
static inline int twin_qmp(const twin_t *t, const char *cmd, char *reply, size_t n, double timeout)
{
	double deadline = twin_now() + timeout;
	if (n)
		reply[0] = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->qmp_port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		snprintf(reply, n, "connect 127.0.0.1:%d: %s", t->qmp_port, strerror(errno));
		close(fd);
		return -1;
	}
	char line[4096];
	int rc = -1;
	if (qmp_readline(fd, line, sizeof line, deadline) || !strstr(line, "\"QMP\""))
		goto out;
	const char *caps = "{\"execute\":\"qmp_capabilities\"}\n";
	if (write(fd, caps, strlen(caps)) < 0)
		goto out;
	do
		if (qmp_readline(fd, line, sizeof line, deadline))
			goto out;
	while (!strstr(line, "\"return\"") && !strstr(line, "\"error\""));
	char req[256];
	int k = snprintf(req, sizeof req, "{\"execute\":\"%s\"}\n", cmd);
	if (write(fd, req, (size_t)k) != k)
		goto out;
	int want_reset = strcmp(cmd, "system_reset") == 0, got_reply = 0, got_reset = 0;
	while (!got_reply || (want_reset && !got_reset)) {
		if (qmp_readline(fd, line, sizeof line, deadline))
			goto out;
		if (strstr(line, "\"event\"")) {
			if (strstr(line, "\"RESET\""))
				got_reset = 1;
			continue;
		}
		got_reply = 1;
		if (n) {
			size_t k = strnlen(line, n - 1);
			memcpy(reply, line, k);
			reply[k] = 0;
		}
		if (!strstr(line, "\"return\""))
			goto out;
	}
	rc = 0;
out:
	if (rc && reply[0] == 0)
		snprintf(reply, n, "QMP %s: no reply", cmd);
	close(fd);
	return rc;
}
#endif
