--- `--boards labgrid:FILE[:target]`: boards from a labgrid environment (docs/labgrid.md). labgrid keeps
-- "where" (resources: an address, a serial port, a probe's serial number) apart from "how" (drivers); odp
-- reads the resources of one target and maps the ones it can use:
--   NetworkService                          an SSH board: address, username, port -> host, user, port
--   RawSerialPort, USBSerialPort            a serial console: port (a tty), speed
--   NetworkSerialPort                       a serial console over the network: rfc2217://host:port (or
--                                           tcp://host:port for protocol raw), speed
--   RemoteUSBADBDevice, NetworkADBDevice    an adb board through that host's adb server (adb_server_socket
--                                           tcp:HOST:5037) or adb over TCP (serial HOST:PORT)
--   JLinkDevice, NetworkJLinkDevice         a J-Link by serial number (match ID_SERIAL_SHORT) or through
--                                           J-Link Remote Server by IP (jlink_ip)
--   NetworkPowerPort                        power = {on=, off=, reset=}: shell commands that switch the outlet
--                                           with labgrid's own power driver (python3-labgrid), from this file
--   ManualPowerPort                         power: commands that ask a person at the terminal, as labgrid does
-- The odp device file of the target's boards is the target's option `odp_device` (labgrid keeps free-form
-- options per target: targets: main: options: odp_device: rpi5). A resource odp cannot map is one line
-- naming it; the boards it can use still run.
-- FILE is either labgrid's environment YAML (`targets: <name>: resources:`; target defaults to main) or
-- the JSON `labgrid-client export --format json` writes for a reserved place (LG__<DRIVER>_<KEY> variables;
-- it names no odp device, so the part after the file names it: labgrid:export.json:alif_e8).
local json = require("odp.core.json")
local sys = require("odp.sys")

local M = {}

-- An environment file is read whole; bound it (a lab's file is a few kB).
local MAX_FILE = 1024 * 1024

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, ("ENOTFOUND: labgrid file %s: %s"):format(path, (err:gsub("^[^:]*: ", ""))), "ENOTFOUND" end
  local s = f:read(MAX_FILE + 1)
  f:close()
  if s and #s > MAX_FILE then
    return nil, ("EUSAGE: labgrid file %s is larger than %d bytes"):format(path, MAX_FILE), "EUSAGE"
  end
  return s or ""
end

--- The resources of a target's `resources:` value as labgrid's TargetFactory lists them: a list of
-- {cls=, name=, args={...}}. Both of labgrid's spellings: a mapping {Class: {args}} or a list of
-- one-key mappings [{Class: {args}}] (or of {cls: Class, ...}). -> list | nil, "message"
function M.resources(value)
  local null = require("lyaml").null -- lazy: optional
  local out = {}
  local function add(cls, args)
    if type(args) ~= "table" then return ("resource %s: its arguments must be a mapping"):format(tostring(cls)) end
    local copy = {}
    for k, v in pairs(args) do copy[k] = v end
    local name = copy.name
    copy.name, copy.cls = nil, nil
    out[#out + 1] = { cls = tostring(cls), name = name, args = copy }
  end
  if type(value) ~= "table" then return nil, "resources must be a mapping or a list" end
  if value[1] ~= nil or next(value) == nil then
    for i, item in ipairs(value) do
      if type(item) ~= "table" or next(item) == nil then return nil, ("resources[%d] must be a mapping"):format(i) end
      local err
      if item.cls then
        err = add(item.cls, item)
      else
        local k, v = next(item)
        if next(item, k) ~= nil then return nil, ("resources[%d]: missing 'cls' key"):format(i) end
        if v == nil or v == null then return nil, ("resources[%d] %s: give {} for no arguments"):format(i, k) end
        err = add(k, v)
      end
      if err then return nil, err end
    end
  else
    local keys = {}
    for k in pairs(value) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if value[k] == null then return nil, ("resource %s: give {} for no arguments"):format(k) end
      local err = add(k, value[k])
      if err then return nil, err end
    end
  end
  return out
end

local function int(v)
  if math.type(v) == "integer" then return v end
  return type(v) == "string" and v:match("^%d+$") and math.tointeger(tonumber(v)) or nil
end

local function str(v) return (type(v) == "string" or type(v) == "number") and tostring(v) or nil end

-- Each mapper: args -> {kind = "transport"|"console"|"power", fields} | nil, why.
local MAP = {
  NetworkService = function(a)
    if not str(a.address) then return nil, "no address" end
    if a.port ~= nil and not int(a.port) then return nil, "port is not a number" end
    return { kind = "transport", transport = "ssh", host = str(a.address), user = str(a.username),
      port = int(a.port) or 22, password = a.password ~= nil and a.password ~= "" }
  end,
  RawSerialPort = function(a)
    if not str(a.port) then return nil, "no port" end
    return { kind = "console", console = str(a.port), speed = int(a.speed) or 115200 }
  end,
  USBSerialPort = function(a)
    local match = type(a.match) == "table" and a.match or {}
    local port = str(a.port) or (str(match.ID_SERIAL_SHORT) and ("/dev/serial/by-id/*" .. str(match.ID_SERIAL_SHORT) .. "*"))
    if not port then return nil, "neither port nor match ID_SERIAL_SHORT" end
    return { kind = "console", console = port, speed = int(a.speed) or 115200 }
  end,
  NetworkSerialPort = function(a)
    if not str(a.host) or not int(a.port) then return nil, "needs host and port" end
    local protocol = a.protocol or "rfc2217"
    if protocol ~= "rfc2217" and protocol ~= "raw" then return nil, ("protocol '%s'"):format(tostring(protocol)) end
    return { kind = "console", console = ("%s://%s:%d"):format(protocol == "raw" and "tcp" or "rfc2217", a.host, int(a.port)),
      speed = int(a.speed) or 115200 }
  end,
  RemoteUSBADBDevice = function(a)
    if not str(a.host) or not str(a.serial) then return nil, "needs host and serial" end
    return { kind = "transport", transport = "adb", serial = str(a.serial), adb_server_socket = "tcp:" .. str(a.host) .. ":5037" }
  end,
  NetworkADBDevice = function(a)
    if not str(a.host) then return nil, "no host" end
    return { kind = "transport", transport = "adb", serial = ("%s:%d"):format(a.host, int(a.port) or 5555) }
  end,
  JLinkDevice = function(a)
    local match = type(a.match) == "table" and a.match or {}
    local serial = int(match.ID_SERIAL_SHORT) or int(a.serial)
    if not serial then return nil, "no serial number (match ID_SERIAL_SHORT)" end
    return { kind = "transport", transport = "probe", jlink_serial = serial }
  end,
  NetworkJLinkDevice = function(a)
    local ip = str(a.host) or str(a.address)
    if not ip then return nil, "no host" end
    return { kind = "transport", transport = "probe", jlink_ip = ip }
  end,
  NetworkPowerPort = function(a)
    if not (str(a.model) and str(a.host) and a.index ~= nil) then return nil, "needs model, host and index" end
    return { kind = "power", power = "network" }
  end,
  ManualPowerPort = function() return { kind = "power", power = "manual" } end,
}
M.MAPPED = {}
for k in pairs(MAP) do M.MAPPED[#M.MAPPED + 1] = k end
table.sort(M.MAPPED)

local q = require("odp.target.shell").quote

-- The board's power verbs as shell commands (what a lab file's `power` holds): labgrid switches a network
-- outlet with its own driver for the PDU's model, from the environment file and target odp read, so odp
-- needs no PDU protocol of its own; a manual port asks the person at the terminal, as labgrid's does.
local POWER_PY = "import sys; from labgrid import Environment; t = Environment(sys.argv[1]).get_target(sys.argv[2]); "
  .. "from labgrid.driver.powerdriver import NetworkPowerDriver\n"
  .. "try: d = t.get_driver('PowerProtocol', activate=False)\nexcept Exception: d = NetworkPowerDriver(t, None)\n"
  .. "t.activate(d); getattr(d, sys.argv[3])()"
local function power_commands(kind, path, target, name)
  if kind == "manual" then
    local function ask(what)
      return ("printf %s >/dev/tty && read _ </dev/tty"):format(q(("Power %s board %s by hand, then press Enter: ")
        :format(what, name)))
    end
    return { on = ask("on"), off = ask("off"), reset = ask("cycle") }
  end
  local function run(action)
    return ("python3 -c %s %s %s %s"):format(q(POWER_PY), q(path), q(target), action)
  end
  return { on = run("on"), off = run("off"), reset = run("cycle") }
end

local function device_path(name)
  if name:find("/") or name:match("%.lua$") then return name end
  return "devices/" .. name .. ".lua"
end

--- Boards of one target's resource list. where: the YAML path of the list, for messages.
local function assemble(resources, target, odp_device, where, path)
  local transports, consoles, power, warnings = {}, {}, nil, {}
  for _, r in ipairs(resources) do
    -- names come from the file: control characters would break the one-line message
    local label = ((r.name and ("%s '%s'"):format(r.cls, tostring(r.name)) or r.cls):gsub("%c", "?"))
    local map = MAP[r.cls]
    if not map then
      warnings[#warnings + 1] = ("%s: %s is not a resource odp maps (it maps %s); ignored")
        :format(where, label, table.concat(M.MAPPED, ", "))
    else
      local m, why = map(r.args)
      if not m then
        warnings[#warnings + 1] = ("%s: %s: %s; ignored"):format(where, label, why)
      elseif m.kind == "transport" then
        m.label = label
        transports[#transports + 1] = m
      elseif m.kind == "console" then
        consoles[#consoles + 1] = m
      else
        power = m.power
      end
    end
  end
  local boards = {}
  if #transports > 0 and not odp_device then
    warnings[#warnings + 1] = ("%s: the target names no odp device (its option odp_device, e.g. rpi5): %d resource(s) "
      .. "unused"):format(where, #transports)
    return boards, warnings
  end
  for i, t in ipairs(transports) do
    local b = { name = #transports == 1 and target or (target .. "-" .. i), device = device_path(odp_device),
      tags = { "labgrid" }, host = t.host, user = t.user, port = t.transport == "ssh" and t.port or nil,
      serial = t.serial, adb_server_socket = t.adb_server_socket, jlink_serial = t.jlink_serial, jlink_ip = t.jlink_ip,
      power = power and power_commands(power, path, target, #transports == 1 and target or (target .. "-" .. i)) }
    if t.password then
      warnings[#warnings + 1] = ("%s: %s has a password; odp logs in with keys only (identity, ssh-agent)")
        :format(where, t.label)
    end
    if consoles[1] then b.console = consoles[1].console end
    boards[#boards + 1] = b
  end
  if #transports == 0 and #consoles > 0 and odp_device then
    -- a board reached only by its console (XMODEM/UART)
    boards[1] = { name = target, device = device_path(odp_device), tags = { "labgrid" }, console = consoles[1].console,
      power = power and power_commands(power, path, target, target) }
  end
  return boards, warnings
end

--- The parsed environment YAML's target: {resources = list (M.resources), odp_device = string|nil}.
function M.target(doc, target)
  if type(doc) ~= "table" or type(doc.targets) ~= "table" then return nil, "no 'targets:' mapping" end
  local t = doc.targets[target]
  if type(t) ~= "table" then
    local names = {}
    for k in pairs(doc.targets) do names[#names + 1] = tostring(k) end
    table.sort(names)
    return nil, (("no target '%s' (targets: %s)"):format(target, table.concat(names, ", ")):gsub("%c", "?"))
  end
  local res, err = M.resources(t.resources or {})
  if not res then return nil, (("targets: %s: %s"):format(target, err):gsub("%c", "?")) end
  local opts = type(t.options) == "table" and t.options or {}
  -- the target's other options are labgrid's and its drivers'; the odp_ ones are odp's, and a misspelt one
  -- would silently leave the target without a device
  for k in pairs(opts) do
    if type(k) == "string" and k:match("^odp_") and k ~= "odp_device" then
      return nil, (("targets: %s: options: %s is not an option odp reads (it reads odp_device)")
        :format(target, k):gsub("%c", "?"))
    end
  end
  return { resources = res, odp_device = str(opts.odp_device) }
end

--- The resources of a `labgrid-client export --format json` object: LG__<NAME>_<KEY> variables grouped by
-- NAME; a group with HOST, PORT and PROTOCOL is a NetworkSerialPort (what SerialDriver exports).
function M.export_resources(vars)
  local groups, order = {}, {}
  for k, v in pairs(vars) do
    local name, key = tostring(k):match("^LG__(.-)_([%u%d]+)$")
    if name and name ~= "" and name ~= "CLIENT" then
      if not groups[name] then groups[name] = {} order[#order + 1] = name end
      groups[name][key:lower()] = v
    end
  end
  table.sort(order)
  local out = {}
  for _, name in ipairs(order) do
    local g = groups[name]
    if g.protocol and g.host and g.port then
      out[#out + 1] = { cls = "NetworkSerialPort", name = name, args = { host = g.host, port = int(g.port),
        protocol = g.protocol, speed = int(g.speed) } }
    else
      out[#out + 1] = { cls = "LG__" .. name .. "_*", name = nil, args = g }
    end
  end
  return out
end

-- labgrid's `!template` values (labgrid/util/yaml.py, config.py): Python's string.Template over a mapping of
-- BASE (the file's directory) and the LG_* variables of the environment; `$$` is a `$`, `$name` and `${name}`
-- are looked up, a name not in the mapping and a `$` before anything else are errors, as in labgrid.
local function substitute(text, lookup)
  local out, i = {}, 1
  while true do
    local d = text:find("$", i, true)
    if not d then out[#out + 1] = text:sub(i) break end
    out[#out + 1] = text:sub(i, d - 1)
    local name, after = text:match("^([%a_][%w_]*)()", d + 1)
    if not name then name, after = text:match("^{([%a_][%w_]*)}()", d + 1) end
    if text:sub(d + 1, d + 1) == "$" then
      out[#out + 1], i = "$", d + 2
    elseif name then
      local v = lookup(name)
      if v == nil then error({ template = ("refers to unknown variable '%s'"):format(name) }, 0) end
      out[#out + 1], i = v, after
    else
      error({ template = ("is invalid: Invalid template string '%s'"):format(text) }, 0)
    end
  end
  return table.concat(out)
end

--- A labgrid environment's text as labgrid's loader gives it: YAML, `!template` values substituted. path: the
-- file (BASE is its directory); lookup(name): a variable's value or nil (default: LG_* names from the
-- environment, as labgrid takes them). -> document | nil, "message"
function M.load(text, path, lookup)
  local base = (sys.realpath(path) or path):match("^(.*)/[^/]*$") or "."
  lookup = lookup or function(name) return name:match("^LG_") and os.getenv(name) or nil end
  local explicit = require("lyaml.explicit") -- lazy: optional
  local y = "tag:yaml.org,2002:"
  local ok, doc = pcall(require("lyaml").load, text, { explicit_scalar = { -- lazy: optional
    [y .. "bool"] = explicit.bool, [y .. "float"] = explicit.float, [y .. "int"] = explicit.int,
    [y .. "null"] = explicit.null, [y .. "str"] = explicit.str,
    ["!template"] = function(v) return substitute(v, function(n) if n == "BASE" then return base end return lookup(n) end) end,
  } })
  if ok then return doc end
  if type(doc) == "table" and doc.template then return nil, doc.template end
  return nil, "not YAML: " .. (tostring(doc):gsub("[\r\n]+", " "))
end

--- The boards of a labgrid environment file (lookup: as M.load's; default_device: the device file of a target
--- that names none, the device of the script being run). -> {boards = {...}, warnings = {...}} | nil,
--- "ECODE: msg", "ECODE"
function M.boards(path, target, lookup, default_device)
  assert(type(path) == "string", "lab_labgrid.boards(path, target): path must be a string")
  local text, err, code = read(path)
  if not text then return nil, err, code end
  local boards, warnings
  if path:match("%.json$") then
    local vars, jerr = json.decode(text)
    if type(vars) ~= "table" then
      return nil, ("EUSAGE: labgrid export %s: not JSON (%s)"):format(path, tostring(jerr or "not an object")), "EUSAGE"
    end
    if not target and not default_device then
      return nil, ("EUSAGE: labgrid export %s names no odp device: give it after the file (labgrid:%s:alif_e8)")
        :format(path, path), "EUSAGE"
    end
    boards, warnings = assemble(M.export_resources(vars), "labgrid", target or default_device, path, path)
  else
    local doc, yerr = M.load(text, path, lookup)
    if not doc then return nil, ("EUSAGE: labgrid file %s: %s"):format(path, yerr), "EUSAGE" end
    target = target or "main"
    local t, terr = M.target(doc, target)
    if not t then return nil, ("EUSAGE: labgrid file %s: %s"):format(path, terr), "EUSAGE" end
    boards, warnings = assemble(t.resources, target, t.odp_device or default_device, ("%s: targets: %s: resources"):format(path, target),
      path)
  end
  if #boards == 0 then
    return nil, ("ENOTFOUND: labgrid file %s: no usable board%s"):format(path,
      #warnings > 0 and (": " .. table.concat(warnings, "; ")) or ""), "ENOTFOUND"
  end
  return { boards = boards, warnings = warnings }
end

return M
