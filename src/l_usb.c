/* odp.usb: the USB devices on this machine (libusb, src/usb/), a module of its own so that libusb is loaded
 * only by the runs that list devices (odp devices, J-Link search, adb over USB). */
#include "l_util.h"
#include "usb/usb.h"

static int push_usb(void *ctx, odp_usb_dev *d)
{
    lua_State *L = ctx;
    lua_createtable(L, 0, 9);
    lua_pushinteger(L, d->vid);
    lua_setfield(L, -2, "vid");
    lua_pushinteger(L, d->pid);
    lua_setfield(L, -2, "pid");
    lua_pushinteger(L, d->bus);
    lua_setfield(L, -2, "bus");
    lua_pushinteger(L, d->address);
    lua_setfield(L, -2, "address");
    lua_pushboolean(L, d->access);
    lua_setfield(L, -2, "access");
    if (d->serial[0]) {
        lua_pushstring(L, d->serial);
        lua_setfield(L, -2, "serial");
    }
    if (d->product[0]) {
        lua_pushstring(L, d->product);
        lua_setfield(L, -2, "product");
    }
    if (d->open_error[0]) {
        lua_pushstring(L, d->open_error);
        lua_setfield(L, -2, "open_error");
    }
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    return 0;
}

/* usb.list([vid]) -> {{vid, pid, bus, address, access, serial?, product?, open_error?}...} | nil, err, code
 * (J-Link probes: usb.list(0x1366)) */
static int l_usb_list(lua_State *L)
{
    lua_Integer vid = luaL_optinteger(L, 1, -1);
    luaL_argcheck(L, vid >= -1 && vid <= 0xffff, 1, "vid must be 0..0xffff");
    lua_newtable(L);
    odp_err err;
    if (odp_usb_each(NULL, (int)vid, push_usb, L, &err))
        return odp_pushfail(L, &err);
    return 1;
}

int luaopen_odp_usb(lua_State *L)
{
    static const luaL_Reg fns[] = {{"list", l_usb_list}, {NULL, NULL}};
    luaL_newlib(L, fns);
    return 1;
}
