/* The spawn core of odp-rusage (tools/spawn.c), a plain C API used by both its modes (tools/exec.c: measure
 * one program; tools/serve.c: the resident helper), which share nothing else: starting a measured program
 * (placement, counters, sampler attached before its exec) and writing its report lines. The caller waits
 * (wait4) in its own loop: exec mode relays, the helper also reads its channel. */
#ifndef ODP_TOOLS_SPAWN_H
#define ODP_TOOLS_SPAWN_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>

struct rusage_spawn {
    char *const *argv;          /* argv[0] looked up in PATH */
    cpu_set_t *cpus;            /* NULL: not pinned */
    const char *cpus_text;      /* the list as given, for messages */
    int level;                  /* counters: 0 none, 1 basic, 2 all */
    int same_group;             /* stay in the caller's process group (else a new one, led by the program) */
    const char *cwd;            /* NULL: the caller's */
    char **envp;                /* NULL: the caller's environment */
    int fd_in, fd_out, fd_err;  /* -1: the caller's */
    struct sampler *sampler;    /* NULL: not sampled (tools/sample.h) */
};

enum { RUSAGE_STAGE_EXEC = 1, RUSAGE_STAGE_CPUS, RUSAGE_STAGE_CWD, RUSAGE_STAGE_SAMPLE };

struct rusage_child {
    pid_t pid;
    double t0;
    int stage, err; /* it never ran: the step that failed (RUSAGE_STAGE_*) and its errno; it was reaped */
    char why[320];  /* RUSAGE_STAGE_SAMPLE: why the sampler could not start */
};

/* CLOCK_MONOTONIC, seconds */
double now(void);
/* "0-3,6" -> set; 0, or -1 for anything else (a CPU id above CPU_SETSIZE - 1 included) */
int rusage_parse_cpus(const char *s, cpu_set_t *set);
/* "none" 0, "basic" 1, "all" 2, else -1 */
int rusage_level(const char *l);
/* Forks and execs sp->argv with its counters open (enable_on_exec). 0 (ch->stage says whether it runs), or
 * -1 with errno when no process could be made. */
int rusage_spawn(const struct rusage_spawn *sp, struct rusage_child *ch);
/* The one line that says why a spawn's program never ran. */
void rusage_spawn_failure(FILE *f, const struct rusage_spawn *sp, const struct rusage_child *ch);
/* The ODP-COUNTERS (level > 0) and ODP-RUSAGE lines of an ended program (st, ru from wait4). */
void rusage_report(FILE *f, int level, int st, const struct rusage *ru, double wall);

#endif
