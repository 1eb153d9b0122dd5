/* Every C module, registered in package.preload as `odp.<name>` (lpeg as `lpeg`).
 * Add one line per module: ODP_MODULE(name) expects int luaopen_odp_<name>(lua_State *). */
ODP_MODULE(sys)
ODP_MODULE(proc)
ODP_MODULE(streamcore)
ODP_MODULE(readline)
ODP_MODULE(etdumpcore)
ODP_MODULE(ptecore)
ODP_MODULE(ssh)
ODP_MODULE(elf)
ODP_MODULE(xmodem)
ODP_MODULE(serial)
ODP_MODULE(probe)
ODP_MODULE(rtt)
