/* rttcat: the twin's host-side helper for tests (no odp needed). See tests/twin/README.md.
 *   rttcat [-s STATE] up [-c CH] [-t SEC] [-u TEXT] [-n BYTES]
 *   rttcat [-s STATE] pipe [-t SEC] [-l LOG]
 *   rttcat [-s STATE] qmp CMD
 *   rttcat [-s STATE] wait-id [-t SEC] | clear-id | info
 * STATE defaults to $ODP_TWIN_STATE. */
#include "twin_host.h"

static twin_t T;

static void die(const char *msg)
{
	fprintf(stderr, "rttcat: %s\n", msg);
	exit(2);
}

static int wait_id(double deadline)
{
	while (!twin_rtt_valid(&T, T.rtt_addr)) {
		if (twin_now() > deadline)
			return -1;
		twin_sleep_ms(1);
	}
	return 0;
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = write(fd, c, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			exit(3); /* reader went away */
		}
		c += k, n -= (size_t)k;
	}
}

/* up: copy an up channel to stdout until TEXT seen, BYTES copied or timeout. Survives a firmware re-init
 * (ID vanishes, then comes back with fresh offsets). */
static int cmd_up(int ch, double timeout, const char *until, long max_bytes)
{
	double deadline = twin_now() + timeout;
	size_t ulen = until ? strlen(until) : 0;
	char *tail = calloc(1, ulen + 1);
	size_t tlen = 0;
	long total = 0;
	char buf[65536];
	for (;;) {
		if (wait_id(deadline))
			goto timeout;
		uint32_t d = twin_rtt_desc_addr(&T, T.rtt_addr, 0, (uint32_t)ch);
		if (!d)
			die("no such up channel");
		size_t want = sizeof buf;
		if (max_bytes >= 0 && (long)want > max_bytes - total)
			want = (size_t)(max_bytes - total);
		/* Peek, then consume exactly up to the end of TEXT so what follows stays for the next reader. */
		long n = want ? twin_rtt_up_read_ex(&T, d, buf, want, 0) : 0;
		if (n < 0) { /* mid re-init or corrupt: wait and retry */
			twin_sleep_ms(1);
			continue;
		}
		if (n > 0) {
			int matched = 0;
			long i;
			for (i = 0; i < n && ulen && !matched; i++) {
				if (tlen == ulen)
					memmove(tail, tail + 1, --tlen);
				tail[tlen++] = buf[i];
				matched = tlen == ulen && memcmp(tail, until, ulen) == 0;
			}
			if (matched)
				n = i;
			n = twin_rtt_up_read(&T, d, buf, (size_t)n);
			if (n <= 0)
				continue;
			write_all(1, buf, (size_t)n);
			total += n;
			if (matched) {
				free(tail);
				return 0;
			}
			if (max_bytes >= 0 && total >= max_bytes)
				return 0;
			continue;
		}
		if (twin_now() > deadline)
			goto timeout;
		twin_sleep_ms(1);
	}
timeout:
	free(tail);
	fprintf(stderr, "rttcat: timeout after %.1f s (%ld bytes)\n", timeout, total);
	return 1;
}

/* pipe: stdin -> down 0, up 0 -> stdout (and LOG), until stdin is closed and `idle` s pass without data. */
static int cmd_pipe(double idle, const char *log)
{
	FILE *lf = log ? fopen(log, "ab") : NULL;
	if (log && !lf)
		die("cannot open log");
	if (wait_id(twin_now() + 10))
		die("no RTT block within 10 s");
	uint32_t up = twin_rtt_desc_addr(&T, T.rtt_addr, 0, 0), down = twin_rtt_desc_addr(&T, T.rtt_addr, 1, 0);
	char in[4096], out[65536];
	size_t inlen = 0, inoff = 0;
	int eof = 0;
	double last = twin_now();
	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	for (;;) {
		int busy = 0;
		if (!eof && inoff == inlen) {
			ssize_t k = read(0, in, sizeof in);
			if (k == 0)
				eof = 1, last = twin_now();
			else if (k > 0)
				inlen = (size_t)k, inoff = 0;
		}
		if (inoff < inlen) {
			long k = twin_rtt_down_write(&T, down, in + inoff, inlen - inoff);
			if (k > 0)
				inoff += (size_t)k, busy = 1;
		}
		long n = twin_rtt_up_read(&T, up, out, sizeof out);
		if (n > 0) {
			if (lf)
				fwrite(out, 1, (size_t)n, lf), fflush(lf);
			write_all(1, out, (size_t)n);
			busy = 1, last = twin_now();
		}
		if (eof && inoff == inlen && twin_now() - last > idle)
			break;
		if (!busy) {
			struct pollfd pfd = {0, POLLIN, 0};
			poll(&pfd, eof || inoff < inlen ? 0 : 1, 1);
			if (eof || inoff < inlen)
				twin_sleep_ms(0.2);
		}
	}
	if (lf)
		fclose(lf);
	return 0;
}

int main(int argc, char **argv)
{
	const char *state = getenv("ODP_TWIN_STATE");
	int a = 1;
	if (a + 1 < argc && strcmp(argv[a], "-s") == 0)
		state = argv[a + 1], a += 2;
	if (!state || a >= argc)
		die("usage: rttcat [-s STATE] up|pipe|qmp|wait-id|clear-id|info ...");
	char err[600];
	if (twin_open(&T, state, err, sizeof err))
		die(err);
	const char *cmd = argv[a++];
	int ch = 0;
	double timeout = 10;
	const char *until = NULL, *log = NULL;
	long max_bytes = -1;
	if (strcmp(cmd, "qmp") == 0) {
		if (a >= argc)
			die("qmp needs a command");
		char reply[4096];
		int rc = twin_qmp(&T, argv[a], reply, sizeof reply, 10);
		printf("%s\n", reply);
		return rc ? 1 : 0;
	}
	for (; a < argc; a++) {
		if (a + 1 >= argc)
			die("option needs a value");
		if (!strcmp(argv[a], "-c"))
			ch = atoi(argv[++a]);
		else if (!strcmp(argv[a], "-t"))
			timeout = atof(argv[++a]);
		else if (!strcmp(argv[a], "-u"))
			until = argv[++a];
		else if (!strcmp(argv[a], "-n"))
			max_bytes = atol(argv[++a]);
		else if (!strcmp(argv[a], "-l"))
			log = argv[++a];
		else
			die("unknown option");
	}
	if (!strcmp(cmd, "up"))
		return cmd_up(ch, timeout, until, max_bytes);
	if (!strcmp(cmd, "pipe"))
		return cmd_pipe(timeout, log);
	if (!strcmp(cmd, "wait-id"))
		return wait_id(twin_now() + timeout) ? 1 : 0;
	if (!strcmp(cmd, "clear-id")) {
		uint8_t *p = twin_ptr(&T, T.rtt_addr, 16);
		__atomic_store_n(p, 0, __ATOMIC_RELEASE);
		return 0;
	}
	if (!strcmp(cmd, "info")) {
		const uint8_t *p = twin_ptr(&T, 0x60000100, 16);
		printf("id_valid %d boot_count %u mode %u state %u\n", twin_rtt_valid(&T, T.rtt_addr), twin_ld32(p + 4),
		       twin_ld32(p + 8), twin_ld32(p + 12));
		return 0;
	}
	die("unknown command");
	return 2;
}
