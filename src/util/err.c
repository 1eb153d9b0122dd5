#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const code_names[] = {
    "OK", "ETIMEDOUT", "EAUTH", "EHOSTKEY", "ENODEV", "EBUSY",
    "EPROTO", "ECRC", "ENOTFOUND", "EIO", "ECANCELED",
};

const char *odp_code_name(odp_code code)
{
    int i = -(int)code;
    if (i < 0 || i >= (int)(sizeof code_names / sizeof code_names[0]))
        return "EIO";
    return code_names[i];
}

int odp_fail(odp_err *err, odp_code code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int odp_fail_errno(odp_err *err, odp_code code, int errnum, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof err->msg)
            snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
        err->code = code;
    }
    return code;
}

odp_code odp_code_from_errno(int errnum)
{
    switch (errnum) {
    case ENOENT: return ODP_ENOTFOUND;
    case ETIMEDOUT: return ODP_ETIMEDOUT;
    case EBUSY: return ODP_EBUSY;
    case ENODEV: case ENXIO: return ODP_ENODEV;
    case ECANCELED: case EINTR: return ODP_ECANCELED;
    case EACCES: case EPERM: return ODP_EAUTH;
    case EPROTO: case EBADMSG: return ODP_EPROTO;
    default: return ODP_EIO;
    }
}
