/* odp-rusage's two modes, each a file of its own that shares only the spawn (tools/spawn.h) with the other;
 * main (tools/odp-rusage.c) picks one. */
#ifndef ODP_TOOLS_ODP_RUSAGE_H
#define ODP_TOOLS_ODP_RUSAGE_H

/* odp-rusage [options] [--] PROGRAM [ARGS...]: one program measured, its report printed (tools/exec.c) */
int rusage_exec(int argc, char **argv);
/* odp-rusage --serve [FIRST]: the resident helper (tools/serve.c, docs/helper-protocol.md); first_hex: the
 * session's first requests, in hex, served before those on stdin (NULL: none) */
int rusage_serve(const char *first_hex);

#endif
