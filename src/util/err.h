/* One error convention for every C core: functions return 0 or a negative odp_code and fill an odp_err.
 * Bindings turn an odp_err into Lua's `nil, "ECODE: message", "ECODE"` (l_util.h). */
#ifndef ODP_ERR_H
#define ODP_ERR_H

#include <stddef.h>

typedef enum {
    ODP_OK = 0,
    ODP_ETIMEDOUT = -1,
    ODP_EAUTH = -2,
    ODP_EHOSTKEY = -3,
    ODP_ENODEV = -4,
    ODP_EBUSY = -5,
    ODP_EPROTO = -6,
    ODP_ECRC = -7,
    ODP_ENOTFOUND = -8,
    ODP_EIO = -9,
    ODP_ECANCELED = -10,
} odp_code;

typedef struct {
    odp_code code;
    char msg[512];
} odp_err;

/* Sets err (if not NULL) and returns code, so `return odp_fail(err, ODP_EIO, "...")` reads naturally. */
int odp_fail(odp_err *err, odp_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Like odp_fail, appending ": strerror(errnum)". */
int odp_fail_errno(odp_err *err, odp_code code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps an errno value to the nearest odp_code (ENOENT -> ENOTFOUND, EACCES -> EAUTH, others -> EIO). */
odp_code odp_code_from_errno(int errnum);
const char *odp_code_name(odp_code code);

#endif
