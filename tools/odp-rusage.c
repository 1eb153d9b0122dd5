/* odp-rusage: the static helper odp pushes to boards (Makefile: odp-rusage-x86_64, odp-rusage-aarch64; never
 * linked into odp). Two modes over one spawn core (tools/spawn.c):
 *   odp-rusage [options] [--] PROGRAM [ARGS...]   one program measured, its report printed (tools/exec.c)
 *   odp-rusage --serve [FIRST]                     the resident helper: started once per board session, framed
 *                                                  requests on stdin, answers on stdout (tools/serve.c,
 *                                                  docs/helper-protocol.md); it exits when stdin closes,
 *                                                  killing a run still going. FIRST: requests in hex, served
 *                                                  before stdin's (the session's first flight, in its exec) */
#include <string.h>

#include "odp-rusage.h"

int main(int argc, char **argv)
{
    if ((argc == 2 || argc == 3) && strcmp(argv[1], "--serve") == 0)
        return rusage_serve(argc == 3 ? argv[2] : NULL);
    return rusage_exec(argc, argv);
}
