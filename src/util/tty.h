/* Reading a secret (a key's passphrase) from the controlling terminal with echo off. */
#ifndef ODP_TTY_H
#define ODP_TTY_H

#include <stddef.h>

#include "err.h"

/* Reads one line from /dev/tty with echo off (restored afterwards, also on Ctrl-C), waiting in odp_wait.
 * buf gets the line without its newline, NUL-terminated; a longer line is EIO. ENODEV: no terminal;
 * ECANCELED: Ctrl-C. The caller shows the prompt and wipes buf when done. */
int odp_tty_read_secret(char *buf, size_t cap, double deadline, odp_err *err);

#endif
