/* odp-rusage's sampler (tools/sample.c): a CPU sampling profile of the measured program, written as a sample
 * stream (docs/cpu-profile.md, "The sample stream") that odp parses (src/sample/). One perf_event_open event per online CPU on the
 * program (inherit: every thread and child it makes), cycles where the PMU has them, else cpu-clock; a
 * bounded ring buffer per CPU drained by a thread of the helper; the program's stderr passes through the
 * helper so that the ExecuTorch log lines' own timestamps can be placed on CLOCK_MONOTONIC (the clock of the
 * samples). Kept out of the spawn and the modes (spawn.c, exec.c, serve.c): those only call these functions. */
#ifndef ODP_TOOLS_SAMPLE_H
#define ODP_TOOLS_SAMPLE_H

#include <sys/types.h>

struct sampler;

/* A sampler writing to path at hz samples per second (ring_pages data pages per CPU, a power of 2; 0: the
 * default). NULL with errno on a bad argument or an unwritable path. */
struct sampler *sampler_new(const char *path, unsigned hz, unsigned ring_pages);
/* The same from the resident helper's "HZ,FILE" (docs/helper-protocol.md), NULL when it is not one. */
struct sampler *sampler_request(const char *spec);
/* Before the fork: the pipe the program's stderr will go to (the helper forwards it to out_fd, the stderr the
 * program would have had). Returns the write end for the child, or -1 with errno. */
int sampler_stderr_pipe(struct sampler *s, int out_fd);
/* After the fork, before the program execs: the events opened on pid (enabled by its exec) and the drain
 * thread started. 0, or -1 with a one-line reason in why (the setting that refused it, when it was refused). */
int sampler_attach(struct sampler *s, pid_t pid, char *why, size_t whylen);
/* After the program was reaped (or when it never ran): the last records drained, the stream's trailer written,
 * everything closed and freed. Returns 0, or -1 when the stream is not whole (it then has no trailer). */
int sampler_finish(struct sampler *s);

#endif
