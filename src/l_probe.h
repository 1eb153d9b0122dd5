/* Shared between odp.probe and odp.rtt: the Probe userdata. */
#ifndef ODP_L_PROBE_H
#define ODP_L_PROBE_H

#include <lua.h>

#include "probe/probe.h"

/* Returns the probe at idx or raises (wrong type, closed). Requires odp.probe to be loaded. */
odp_probe *odp_checkprobe(lua_State *L, int idx);

#endif
