/* The C modules built into odp, registered in package.preload as `odp.<name>` (lpeg as `lpeg`).
 * Add one line per module: ODP_MODULE(name) expects int luaopen_odp_<name>(lua_State *). Modules that need
 * a library beyond libc (libssh2, libusb, libserialport, libedit, libcrypto) are not listed here: they are
 * shared objects loaded on first require (Makefile, LAZY), found through package.cpath (main.c). */
ODP_MODULE(sys)
ODP_MODULE(proc)
ODP_MODULE(streamcore)
ODP_MODULE(etdumpcore)
ODP_MODULE(ptecore)
ODP_MODULE(numcmp)
ODP_MODULE(elf)
ODP_MODULE(sample)
ODP_MODULE(xmodem)
ODP_MODULE(probe)
ODP_MODULE(rtt)
ODP_MODULE(scan)
ODP_MODULE(wait)
ODP_MODULE(helper)
