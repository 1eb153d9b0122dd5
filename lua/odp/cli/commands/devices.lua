--- odp devices: what is attached to this machine and how to reach it. Each kind of device comes from a
--- "source": {name=, list=function(opts) -> rows, notes? | nil, err, empty=message}. Rows: {kind=, id=, state=,
--- transport=, description=, usb=, hint=}; notes: lines printed under the table. Other modules add sources with
--- `table.insert(require("odp.cli.commands.devices").sources, src)`.
local report = require("odp.results.report")
local json = require("odp.core.json")
local errors = require("odp.core.errors")
local ui_mod = require("odp.core.ui")

local M = { summary = "List serial ports, J-Link probes and adb devices, with what to do for each" }

local DOCS = "docs/devices.md"

local USAGE = [[usage: odp devices [--adb tcp:HOST:PORT]... [--timeout S] [--json]
       odp devices --boards LAB.lua[:TAG|NAMES] | lava | labgrid:FILE [--timeout S] [--json]
With --boards: checks every board of the lab at once (connects, reads OS, arch, libc and CPU) and prints one
line each; a board that does not answer within --timeout (default 10 s) is "timeout". Exit 3 when a board
fails (docs/many-boards.md).
Lists serial ports (USB VID:PID), J-Link probes (USB VID 1366) and Android devices over adb: those Google's
adb server lists (transport "server"; ANDROID_ADB_SERVER_PORT, ADB_SERVER_SOCKET), those on USB (transport
"usb"), and the adb TCP addresses given, each with its state and one hint: how to open it, or what to fix
first. A line under the table says which way `odp run` reaches an adb device (--adb auto): through the
server when one runs, else directly.
adb states: device (usable), unauthorized (accept the "Allow USB debugging?" prompt), busy (another program
holds the USB interface: when it is the adb server, runs go through it), no permissions (udev rule,
docs/devices.md), offline (no answer).]]

M.help_text = USAGE -- --help and the man page

local function hex4(v) return v and string.format("%04x", v) or nil end

local serial_source = {
  name = "serial",
  list = function()
    local serial = require("odp.serial") -- lazy: start-up
    local ports, err = serial.list()
    if not ports then return nil, err end
    local rows = {}
    for _, p in ipairs(ports) do
      local usb = p.vid and (hex4(p.vid) .. ":" .. hex4(p.pid)) or nil
      local desc = p.description ~= "" and p.description or p.product
      local hint
      if not p.access then
        hint = ("no permission: add yourself to group dialout (sudo usermod -aG dialout $USER), see %s"):format(DOCS)
      else
        hint = ('odp.serial.open{port="%s", baud=115200}'):format(p.port)
      end
      rows[#rows + 1] = { kind = "serial", id = p.port, usb = usb, description = desc, hint = hint }
    end
    return rows
  end,
}

local jlink_source = {
  name = "jlink",
  list = function()
    local probe = require("odp.probe") -- lazy: start-up
    local devs, err = probe.usb_list(0x1366)
    if not devs then return nil, err end
    local lib = probe.jlink_lib()
    local rows = {}
    for _, d in ipairs(devs) do
      local hint
      if not d.access then
        hint = ("no permission (%s): install SEGGER's udev rules (99-jlink.rules), see %s"):format(
          d.open_error or "access denied", DOCS)
      elseif not lib then
        hint = "install the J-Link Software (libjlinkarm.so) or set ODP_JLINK_LIB, see " .. DOCS
      else
        -- the core's J-Link name is a device fact: it comes from the device file, not from here
        hint = ('odp repl devices/alif_e8.lua; odp.probe.open{backend="jlink", device=device.probe.jlink_device%s}'):format(
          d.serial and (', serial="' .. d.serial .. '"') or "")
      end
      rows[#rows + 1] = { kind = "jlink", id = d.serial or string.format("usb %d:%d", d.bus, d.address),
        usb = hex4(d.vid) .. ":" .. hex4(d.pid), description = d.product or "SEGGER J-Link", hint = hint }
    end
    return rows
  end,
}

-- Connects briefly to learn the model and whether this computer is authorized.
local function adb_probe(row, transport, serial, timeout)
  local adb = require("odp.adb") -- lazy: start-up
  local dev, err, code = adb.connect { transport = transport, serial = serial, timeout = timeout, auth_timeout = 0.5 }
  if dev then
    local info = dev:info()
    dev:close()
    row.state, row.description, row.product = "device", info.model, info.product
    row.hint = ("odp run scripts/x300pro.lua --adb %s ..."):format(transport == "usb" and ("usb --serial " .. serial) or transport)
  elseif code == "EAUTH" and err:find("authorize", 1, true) then
    row.state = "unauthorized"
    row.hint = "unlock the phone and accept the USB debugging prompt (Allow), then run again"
  elseif code == "EBUSY" then
    row.state, row.hint = "busy", (err:gsub("^EBUSY: ", ""))
  else
    row.state, row.hint = "offline", err
  end
  return row
end

local SERVER_HINTS = {
  unauthorized = "unlock the phone and accept the USB debugging prompt (Allow), then run again",
  offline = "the adb server gets no answer from it: reconnect the cable, or `adb reconnect`",
}

-- Google's adb server: its devices, and the line saying which way runs go.
local function server_rows(rows)
  local adb = require("odp.adb") -- lazy: start-up
  local srv, err, code = adb.server {}
  if not srv then
    if code == "ENODEV" then
      return false, (err:gsub("^ENODEV: ", "")) .. ": runs talk to adb devices directly (USB, or --adb tcp:HOST:PORT)"
    end
    return false, "adb server: " .. errors.text(err) .. " (runs with --adb auto stop here; --adb usb goes direct)"
  end
  for _, d in ipairs(srv.devices) do
    local hint = SERVER_HINTS[d.state] or (d.state:match("^no permissions") and
      ("no permission to open the USB device: udev rule, see %s"):format(DOCS))
    if d.state == "device" then hint = ("odp run scripts/x300pro.lua --serial %s ..."):format(d.serial) end
    rows[#rows + 1] = { kind = "adb", id = d.serial, transport = "server", state = d.state:match("^no permissions")
      and "no permissions" or d.state, description = d.model, usb = d.usb, hint = hint or ("state " .. d.state) }
  end
  return true, ("adb server at %s (host protocol %d), %d device(s): runs use the adb server (--adb auto)"):format(
    srv.address:gsub("^tcp:", ""), srv.version, #srv.devices)
end

local adb_source = {
  name = "adb",
  empty = "no adb devices (USB debugging on? cable? see " .. DOCS .. ", Android)",
  list = function(opts)
    local adb = require("odp.adb") -- lazy: start-up
    local rows = {}
    local via_server, note = server_rows(rows)
    local usb, err = adb.devices()
    if not usb then return nil, err end
    for _, d in ipairs(usb) do
      local row = { kind = "adb", id = d.serial, transport = "usb", state = d.state, description = d.model, hint = d.hint }
      if d.state == "available" and not via_server then adb_probe(row, "usb", d.serial, opts.timeout) end
      if d.state == "busy" and via_server then row.hint = "held by the adb server: runs go through it (listed above)" end
      rows[#rows + 1] = row
    end
    for _, t in ipairs(opts.adb) do
      rows[#rows + 1] = adb_probe({ kind = "adb", id = t:sub(5), transport = t }, t, nil, opts.timeout)
    end
    return rows, { note }
  end,
}

M.sources = { serial_source, jlink_source, adb_source }

--- Runs every source; a failing source becomes a warning, the others still list. Returns rows, warnings
-- and the notes of sources that found nothing.
function M.collect(opts)
  opts = opts or { adb = {}, timeout = 3 }
  local rows, warnings, notes = {}, {}, {}
  for _, src in ipairs(M.sources) do
    local ok, list, err = pcall(src.list, opts)
    if not ok then warnings[#warnings + 1] = src.name .. ": " .. tostring(list)
    elseif not list then warnings[#warnings + 1] = src.name .. ": " .. tostring(err)
    else
      for _, r in ipairs(list) do rows[#rows + 1] = r end
      if #list == 0 and src.empty then notes[#notes + 1] = src.empty end
      for _, n in ipairs(type(err) == "table" and err or {}) do notes[#notes + 1] = n end
    end
  end
  return rows, warnings, notes
end

--- Checks every board of a lab at once (one task each, odp.core.sched), each within timeout seconds.
-- Returns rows {board, device, transport, state = ok|timeout|error, uri, os, arch, libc, cpus, hint} in the
-- lab's order.
function M.check_boards(spec, timeout)
  local lab_mod = require("odp.target.lab") -- lazy: start-up
  local lab = lab_mod.load(spec)
  local sched = require("odp.core.sched") -- lazy: start-up
  local board_mod = require("odp.run.board") -- lazy: start-up
  local ui = ui_mod.new { quiet = true }
  local s, rows = sched.new(), {}
  for i, b in ipairs(lab.boards) do
    rows[i] = { board = b.name, device = b.dev.name, transport = b.dev.transport }
    s:spawn(function()
      local bo = lab_mod.board_options(b)
      bo.ui = ui
      local board <close> = board_mod.open(b.dev, bo)
      local info = board:info()
      local r = rows[i]
      r.state, r.uri, r.os, r.arch, r.libc, r.cpus = "ok", info.uri, info.os, info.arch, info.libc, info.cpus
      if b.dev.transport == "probe" then r.os = info.backend end
    end, { name = b.name, timeout = timeout })
  end
  s:run()
  for i, t in ipairs(s.tasks) do
    local r = rows[i]
    if t.timed_out then
      r.state, r.hint = "timeout", ("no answer within %g s"):format(timeout)
    elseif not t.ok then
      local e = t.error
      r.state = "error"
      r.hint = type(e) == "table" and e.message and ((e.code and (e.code .. ": ") or "") .. e.message) or tostring(e)
    end
  end
  if s.interrupted then errors.fail("ECANCELED", "interrupted") end
  return rows
end

local function main_boards(spec, timeout, as_json)
  local rows = M.check_boards(spec, timeout)
  local bad = 0
  for _, r in ipairs(rows) do if r.state ~= "ok" then bad = bad + 1 end end
  if as_json then
    print(json.encode({ boards = json.array(rows) }))
  else
    print(report.table(rows, { { key = "board" }, { key = "device" }, { key = "state" }, { key = "uri" },
      { key = "os" }, { key = "arch" }, { key = "libc" }, { key = "cpus" }, { key = "hint" } }))
    if bad > 0 then io.stderr:write(("%d of %d boards failed the check\n"):format(bad, #rows)) end
  end
  return bad > 0 and 3 or 0
end

function M.main(args)
  local opts, as_json = { adb = {}, timeout = 3 }, false
  local boards, timeout_given
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--adb" and args[i + 1] then
      if not args[i + 1]:match("^tcp:.+:%d+$") then io.stderr:write("odp devices: --adb wants tcp:HOST:PORT\n") return 2 end
      opts.adb[#opts.adb + 1] = args[i + 1]
      i = i + 1
    elseif a == "--timeout" and tonumber(args[i + 1] or "") then
      opts.timeout, timeout_given = tonumber(args[i + 1]), true
      i = i + 1
    elseif a == "--boards" and args[i + 1] then
      boards = args[i + 1]
      i = i + 1
    elseif a == "--json" or a == "--format=json" then
      as_json = true
    elseif a == "-h" or a == "--help" then
      print(USAGE)
      return 0
    else
      io.stderr:write(("odp devices: unknown argument '%s'\n%s\n"):format(a, USAGE))
      return 2
    end
    i = i + 1
  end
  if boards then return main_boards(boards, timeout_given and opts.timeout or 10, as_json) end
  local rows, warnings, notes = M.collect(opts)
  if as_json then
    print(json.encode({ devices = json.array(rows), warnings = json.array(warnings), notes = json.array(notes) }))
  else
    if #rows > 0 then
      print(report.table(rows, { { key = "kind" }, { key = "id" }, { key = "transport" }, { key = "state" },
        { key = "description" }, { key = "usb" }, { key = "hint" } }))
    end
    for _, n in ipairs(notes) do print(n) end
  end
  for _, w in ipairs(warnings) do io.stderr:write("warning: " .. w .. "\n") end
  return 0
end

return M
