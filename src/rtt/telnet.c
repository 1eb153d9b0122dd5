/* J-Link's RTT telnet server (JLinkGDBServer / J-Link Commander / the DLL, port 19021) as a stream. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../util/wait.h"
#include "rtt.h"

odp_stream *odp_rtt_telnet_open(const char *address, int channel, double deadline, odp_err *err)
{
    int fd = odp_tcp_connect(address, deadline, err);
    if (fd < 0)
        return NULL;
    odp_stream *s = odp_fd_stream_new(fd, 1);
    if (!s) {
        close(fd);
        odp_fail(err, ODP_EIO, "out of memory");
        return NULL;
    }
    /* The banner line: "SEGGER J-Link V7.94 - Real time terminal output". */
    char banner[512];
    size_t have = 0;
    char *nl = NULL;
    while (!nl && have < sizeof banner - 1) {
        ssize_t r = odp_stream_read(s, banner + have, sizeof banner - 1 - have, deadline, err);
        if (r <= 0) {
            if (r == 0)
                odp_fail(err, ODP_EPROTO, "%s closed before its banner", address);
            odp_stream_close(s);
            return NULL;
        }
        have += (size_t)r;
        banner[have] = 0;
        nl = strchr(banner, '\n');
    }
    if (strstr(banner, "GUI server")) {
        odp_fail(err, ODP_EBUSY, "%s belongs to another J-Link process (%.80s)", address, banner);
        odp_stream_close(s);
        return NULL;
    }
    if (!nl || !strstr(banner, "SEGGER")) {
        odp_fail(err, ODP_EPROTO, "%s is not a J-Link RTT telnet server (banner: %.80s)", address, banner);
        odp_stream_close(s);
        return NULL;
    }
    size_t rest = have - (size_t)(nl + 1 - banner);
    if (rest && odp_stream_unread(s, nl + 1, rest) < 0) {
        odp_fail(err, ODP_EIO, "out of memory");
        odp_stream_close(s);
        return NULL;
    }
    if (channel >= 0) { /* must come within 100 ms of connecting */
        char cfg[64];
        int n = snprintf(cfg, sizeof cfg, "$$SEGGER_TELNET_ConfigStr=RTTCh;%d$$", channel);
        if (odp_stream_write(s, cfg, (size_t)n, deadline, err) < 0) {
            odp_stream_close(s);
            return NULL;
        }
    }
    return s;
}
