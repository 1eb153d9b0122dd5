--- Lab files and `--boards SPEC`: many boards, each a device file plus its transport options
-- (docs/devices.md, "Lab files"; docs/many-boards.md). A lab file is data, loaded like a device file:
--   return { boards = {
--     { name = "pi-1", device = "devices/rpi5.lua", host = "pi@10.0.0.11", tags = { "pi5" } },
--     { name = "x300", device = "devices/vivo_x300_pro.lua", serial = "10AD5F1E", tags = { "phone" } },
--   } }
-- SPEC is `LAB.lua[:SELECTOR]` (SELECTOR: a tag, or a comma-separated list of names), `lava` (the boards of
-- the LAVA job odp runs in: odp.target.lab_lava) or `labgrid:ENV.yaml[:TARGET]` (odp.target.lab_labgrid).
-- Every source gives the same shape, checked by the same rules here.
local device = require("odp.target.device")
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local options = require("odp.core.options")

local M = {}

-- Keys every board may have, whatever its transport. Facts about the board that are not transport options
-- (user, console, power, lava_job_id, ...) come from the lab engines' providers and are kept on the board.
local str, int = "string", "integer"
M.COMMON = {
  name = { type = str, required = true },
  device = { type = str, required = true },
  tags = { list = str },
  description = str,
  user = str,                     -- ssh: the login name when host has no user@
  jlink_serial = { one_of = { int, str } }, -- probe: the J-Link's USB serial number
  jlink_device = str, jlink_ip = str,
  adb_server_socket = str,
  console = str,                  -- a shell command that attaches to the board's console (LAVA)
  power = { fields = { reset = str, on = str, off = str } },
  lava_job_id = { one_of = { int, str } },
}
local OPTION_VALUE = { one_of = { "string", "number", "boolean", { list = "string" } } }

--- The transport options a device's boards take, keyed as the CLI parser keys them (dashes -> underscores):
-- a set {name = true}.
function M.transport_options(dev)
  local names = {}
  if dev.transport == "probe" then
    for _, n in ipairs(device.PROBE_OPTIONS) do names[(n:gsub("-", "_"))] = true end
  elseif dev.transport ~= "host" then
    for _, o in ipairs(device.kind(dev.transport).options or {}) do
      names[(o[1]:gsub("-", "_"))] = true
    end
  end
  return names
end

-- A device path in a lab file: beside the lab file first, else as device files are found.
local function device_path(path, lab_dir)
  if lab_dir and path:sub(1, 1) ~= "/" and sys.stat(lab_dir .. "/" .. path) then return lab_dir .. "/" .. path end
  return path
end

--- Checks a lab table (from a file or a provider) and loads each board's device file. Raises EUSAGE (exit 2)
-- naming where and the board. Returns {boards = {...}} with board.dev set to the loaded device table.
function M.check(lab, where, lab_dir)
  device.check_schema(lab, { fields = { boards = { list = { map = { one_of = { "string", "number", "boolean",
    "table" } } }, required = true }, warnings = { list = str } } }, "lab file", where)
  if #lab.boards == 0 then errors.fail("EUSAGE", ("lab file %s: no boards"):format(where)) end
  local seen = {}
  for i, b in ipairs(lab.boards) do
    local at = ("%s: boards[%d]%s"):format(where, i, type(b.name) == "string" and (" (" .. b.name .. ")") or "")
    local common = {}
    for k, v in pairs(b) do if M.COMMON[k] then common[k] = v end end
    device.check_schema(common, { fields = M.COMMON }, "lab file", at)
    if seen[b.name] then errors.fail("EUSAGE", ("lab file %s: board name '%s' used twice"):format(at, b.name)) end
    seen[b.name] = true
    if not b.name:match("^[%w][%w_.%-]*$") then
      errors.fail("EUSAGE", ("lab file %s: name '%s': letters, digits, '.', '_' and '-' only"):format(at, b.name))
    end
    b.device = device_path(b.device, lab_dir)
    local ok, dev = pcall(device.load, b.device)
    if not ok then
      errors.fail("EUSAGE", ("lab file %s: %s"):format(at, errors.is_failure(dev) and dev.message or tostring(dev)))
    end
    local allowed = M.transport_options(dev)
    local keys = {}
    for k in pairs(b) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if not M.COMMON[k] then
        if not allowed[k] then
          local known = {}
          for n in pairs(allowed) do known[n] = true end
          for n in pairs(M.COMMON) do known[n] = true end
          local near = options.closest(k, known)
          local list = {}
          for n in pairs(allowed) do list[#list + 1] = n end
          table.sort(list)
          errors.fail("EUSAGE", ("lab file %s: key %s is not an option of %s boards (%s)"):format(at, k,
            dev.transport, near and ("did you mean " .. near .. "?") or #list > 0 and table.concat(list, ", ")
            or "they take none"))
        end
        device.check_schema({ [k] = b[k] }, { fields = { [k] = OPTION_VALUE } }, "lab file", at)
      end
    end
    b.dev = dev
    if dev.transport == "ssh" and b.host then
      -- two boards staging files into one directory of one host would overwrite each other's uploads
      local place = ("%s:%s:%s"):format(b.host, tostring(b.port or ""), b.remote_dir or dev.remote_dir or "")
      if seen[place] then
        errors.fail("EUSAGE", ("lab file %s: boards %s and %s share host and remote_dir: give each its own remote_dir")
          :format(where, seen[place], b.name))
      end
      seen[place] = b.name
    end
  end
  return lab
end

--- The boards a selector picks: a tag, or a comma-separated list of names (each must exist). nil: all.
function M.select(boards, selector, where)
  if not selector or selector == "" then return boards end
  local by_name, names = {}, {}
  for _, b in ipairs(boards) do by_name[b.name] = b end
  for n in selector:gmatch("[^,]+") do names[#names + 1] = n:match("^%s*(.-)%s*$") end
  local out = {}
  if #names == 1 and not by_name[names[1]] then
    for _, b in ipairs(boards) do
      for _, t in ipairs(b.tags or {}) do
        if t == names[1] then out[#out + 1] = b break end
      end
    end
    if #out == 0 then
      errors.fail("EUSAGE", ("%s: no board is named or tagged '%s'"):format(where, names[1]))
    end
    return out
  end
  for _, n in ipairs(names) do
    if not by_name[n] then errors.fail("EUSAGE", ("%s: no board named '%s'"):format(where, n)) end
    out[#out + 1] = by_name[n]
  end
  return out
end

-- A provider of a lab engine (written beside this module); nil and one line when it is not there.
local function provider(name)
  local ok, mod = pcall(require, "odp.target." .. name) -- lazy: run-time name
  if not ok then
    if tostring(mod):find("module 'odp.target." .. name .. "' not found", 1, true) then
      errors.fail("EUSAGE", ("--boards: this odp has no %s provider (lua/odp/target/%s.lua)"):format(name, name))
    end
    error(mod, 0)
  end
  return mod
end

local function from_provider(where, lab, err, code)
  if not lab then errors.fail(code or "ENOTFOUND", ("--boards %s: %s"):format(where, errors.text(err))) end
  return lab
end

--- The boards of SPEC (see the top of this file): {boards = {...}, source = SPEC, warnings = {...}}.
-- env: the environment for `lava` (default: the process's, read through os.getenv of LAVA_* names);
-- default_device: the device file of a labgrid target that names none (the script being run names one).
function M.load(spec, env, default_device)
  if type(spec) ~= "string" or spec == "" then errors.fail("EUSAGE", "--boards needs a lab file, lava or labgrid:FILE") end
  local lab, where, selector, dir
  if spec == "lava" or spec:match("^lava:") then
    selector = spec:match("^lava:(.*)$")
    where = "lava"
    lab = from_provider(where, provider("lab_lava").boards(env or M.environment()))
  elseif spec:match("^labgrid:") then
    local rest = spec:sub(#"labgrid:" + 1)
    local file, target = rest:match("^(.-):([^:/]+)$")
    if not file or not sys.stat(file) then file, target = rest, nil end
    where = "labgrid:" .. file
    lab = from_provider(where, provider("lab_labgrid").boards(file, target, nil, default_device))
  else
    local file = spec
    if not sys.stat(file) then
      local f, sel = spec:match("^(.*):([^:/]*)$")
      if f and sys.stat(f) then file, selector = f, sel end
    end
    where = file
    local p
    lab, p = device.load_data(file, "lab file")
    dir = p:match("^(.*)/[^/]*$")
  end
  M.check(lab, where, dir)
  return { boards = M.select(lab.boards, selector, spec), source = spec, warnings = lab.warnings or {} }
end

--- The process's environment as a table (LAVA_*, ANDROID_SERIAL): what the lava provider reads.
function M.environment()
  local env = {}
  local f = io.open("/proc/self/environ", "rb")
  if f then
    for kv in f:read("a"):gmatch("[^%z]+") do
      local k, v = kv:match("^([^=]+)=(.*)$")
      if k then env[k] = v end
    end
    f:close()
  end
  return env
end

--- A board's transport options as `odp.run.board.open` takes them (user folded into host, provider facts
-- left out), and its name.
function M.board_options(b)
  local o = {}
  for k, v in pairs(b) do
    if not M.COMMON[k] and k ~= "dev" then o[k] = v end
  end
  o.jlink_serial, o.jlink_ip = b.jlink_serial, b.jlink_ip -- probe boards: which J-Link (odp.target.probe)
  if b.user and o.host and not o.host:find("@", 1, true) then o.host = b.user .. "@" .. o.host end
  o.board = b.name
  return o
end

return M
