/* Drives the test-only libjlinkarm.so through dlopen like odp's jlink backend would:
 *   test_jlink LIB INFERENCES     (ODP_TWIN_STATE names a twin running the runner image)
 * Prints "ok - ..." / "not ok - ..." lines; exit 1 on any failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fails;
#define CHECK(cond, ...)                                                                                           \
	do {                                                                                                       \
		printf("%s - jlink: ", (cond) ? "ok" : "not ok");                                                  \
		printf(__VA_ARGS__);                                                                               \
		printf("\n");                                                                                      \
		if (!(cond))                                                                                       \
			fails++;                                                                                   \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap(void)
{
	struct timespec ts = {0, 1000000};
	nanosleep(&ts, NULL);
}

typedef struct {
	int BufferIndex;
	uint32_t Direction;
	char acName[32];
	uint32_t SizeOfBuffer;
	uint32_t Flags;
} bufdesc;

typedef struct {
	uint32_t NumBytesTransferred, NumBytesRead;
	int HostOverflowCount, IsRunning, NumUpBuffers, NumDownBuffers;
	uint32_t OverflowMask, Dummy;
} rttstat;

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_jlink LIB INFERENCES\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("not ok - jlink: dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
#define SYM(ret, name, args) ret(*name) args = (ret(*) args)dlsym(h, #name)
	SYM(const char *, JLINKARM_OpenEx, (void (*)(const char *), void (*)(const char *)));
	SYM(void, JLINKARM_Close, (void));
	SYM(int, JLINKARM_ExecCommand, (const char *, char *, int));
	SYM(int, JLINKARM_TIF_Select, (int));
	SYM(void, JLINKARM_SetSpeed, (uint32_t));
	SYM(int, JLINKARM_Connect, (void));
	SYM(char, JLINKARM_IsConnected, (void));
	SYM(int, JLINKARM_Reset, (void));
	SYM(void, JLINKARM_Go, (void));
	SYM(char, JLINKARM_Halt, (void));
	SYM(char, JLINKARM_IsHalted, (void));
	SYM(int, JLINKARM_ReadMemEx, (uint32_t, uint32_t, void *, uint32_t));
	SYM(int, JLINKARM_WriteMemEx, (uint32_t, uint32_t, const void *, uint32_t));
	SYM(int, JLINK_RTTERMINAL_Control, (uint32_t, void *));
	SYM(int, JLINK_RTTERMINAL_Read, (uint32_t, char *, uint32_t));
	SYM(int, JLINK_RTTERMINAL_Write, (uint32_t, const char *, uint32_t));
	CHECK(JLINKARM_OpenEx && JLINKARM_Close && JLINKARM_ExecCommand && JLINKARM_TIF_Select && JLINKARM_SetSpeed &&
		      JLINKARM_Connect && JLINKARM_IsConnected && JLINKARM_Reset && JLINKARM_Go && JLINKARM_Halt &&
		      JLINKARM_IsHalted && JLINKARM_ReadMemEx && JLINKARM_WriteMemEx && JLINK_RTTERMINAL_Control &&
		      JLINK_RTTERMINAL_Read && JLINK_RTTERMINAL_Write,
	      "all 16 symbols resolve");
	if (fails)
		return 1;
	int inferences = atoi(argv[2]);
	char err[256];
	const char *e = JLINKARM_OpenEx(NULL, NULL);
	CHECK(e == NULL, "OpenEx (%s)", e ? e : "NULL");
	if (e)
		return 1;
	CHECK(JLINKARM_ExecCommand("Device = AE822FA0E5597LS0_M55_HP", err, sizeof err) == 0, "ExecCommand Device");
	CHECK(JLINKARM_TIF_Select(1) == 0, "TIF_Select(SWD)");
	JLINKARM_SetSpeed(4000);
	CHECK(JLINKARM_Connect() == 0 && JLINKARM_IsConnected() == 1, "Connect");

	uint32_t info[4] = {0}, boot0;
	CHECK(JLINKARM_ReadMemEx(0x60000100, 16, info, 0) == 16 && info[0] == 0x4E495754u, "ReadMemEx twin info");
	boot0 = info[1];
	CHECK(JLINKARM_Reset() == 0, "Reset");
	CHECK(JLINKARM_IsHalted() == 1, "core halted after Reset");
	char id[16];
	JLINKARM_ReadMemEx(0x60000000, 16, id, 0);
	JLINKARM_ReadMemEx(0x60000100, 16, info, 0);
	CHECK(memcmp(id, "SEGGER RTT", 10) == 0 && info[1] == boot0, "stale RTT ID survives the reset while halted");
	JLINKARM_Go();
	CHECK(JLINKARM_IsHalted() == 0, "running after Go");

	CHECK(JLINKARM_ExecCommand("SetRTTSearchRanges 0x60000000 0x10000", err, sizeof err) == 0, "SetRTTSearchRanges");
	uint32_t start[4] = {0, 0, 0, 0};
	CHECK(JLINK_RTTERMINAL_Control(0, start) == 0, "RTTERMINAL START");
	int up = -2, dir = 0;
	double t0 = now();
	/* The stale block is gone only once the firmware re-initialised it; wait for our boot's banner below. */
	while ((up = JLINK_RTTERMINAL_Control(3, &dir)) < 0 && now() - t0 < 5)
		nap();
	dir = 1;
	int down = JLINK_RTTERMINAL_Control(3, &dir);
	CHECK(up == 2 && down == 1, "GETNUMBUF up=%d down=%d", up, down);
	bufdesc d = {0, 0, {0}, 0, 0};
	CHECK(JLINK_RTTERMINAL_Control(2, &d) == 0 && d.SizeOfBuffer == 16384 && d.Flags == 2, "GETDESC up 0 size %u",
	      d.SizeOfBuffer);
	bufdesc dd = {0, 1, {0}, 0, 0};
	CHECK(JLINK_RTTERMINAL_Control(2, &dd) == 0 && dd.SizeOfBuffer == 4096, "GETDESC down 0 size %u",
	      dd.SizeOfBuffer);

	static char log[1 << 16];
	size_t len = 0;
	t0 = now();
	while (len < sizeof log - 1 && now() - t0 < 10) {
		int n = JLINK_RTTERMINAL_Read(0, log + len, (uint32_t)(sizeof log - 1 - len));
		if (n > 0) {
			len += (size_t)n;
			log[len] = 0;
			if (strstr(log, "odp-twin done\n"))
				break;
		} else
			nap();
	}
	char banner[64];
	snprintf(banner, sizeof banner, "odp-twin runner v1 boot %u\n", boot0 + 1);
	CHECK(strstr(log, banner) != NULL, "RTTERMINAL_Read gets the new boot's banner (%s)", "boot n+1");
	int lines = 0;
	for (const char *p = log; (p = strstr(p, "\nInference: ")) != NULL; p++)
		lines++;
	CHECK(lines == inferences && strstr(log, "odp-twin done\n"), "%d Inference lines and done over RTTERMINAL",
	      lines);

	rttstat st;
	CHECK(JLINK_RTTERMINAL_Control(4, &st) == 0 && st.NumUpBuffers == 2 && st.NumBytesRead == len, "GETSTAT");
	uint8_t pat[16], back[16];
	for (int i = 0; i < 16; i++)
		pat[i] = (uint8_t)(0xA0 + i);
	CHECK(JLINKARM_WriteMemEx(0x60F00000, 16, pat, 0) == 16 && JLINKARM_ReadMemEx(0x60F00000, 16, back, 0) == 16 &&
		      memcmp(pat, back, 16) == 0,
	      "WriteMemEx/ReadMemEx round trip in DDR");
	CHECK(JLINKARM_ReadMemEx(0x10000000, 4, back, 0) < 0, "ReadMemEx outside the shared DDR fails");
	uint32_t wr0, wr1;
	JLINKARM_ReadMemEx(0x60000000 + 24 + 48 + 12, 4, &wr0, 0);
	int w = JLINK_RTTERMINAL_Write(0, "hello", 5);
	JLINKARM_ReadMemEx(0x60000000 + 24 + 48 + 12, 4, &wr1, 0);
	CHECK(w == 5 && wr1 == (wr0 + 5) % 4096, "RTTERMINAL_Write moves the down WrOff");
	CHECK(JLINKARM_Halt() == 0 && JLINKARM_IsHalted() == 1, "Halt");
	JLINKARM_Go();
	CHECK(JLINKARM_IsHalted() == 0, "Go after Halt");
	JLINKARM_Close();
	dlclose(h);
	return fails ? 1 : 0;
}
