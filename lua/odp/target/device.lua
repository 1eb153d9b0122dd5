--- Device files (devices/*.lua): one schema, one loader. A device file is data: it is loaded with
-- load(src, name, "t", {}) (no globals, no require, no os.execute), and every key is checked against the
-- schema below; docs/devices.md describes each key. An unknown key or a wrong type is one error naming the
-- file, the key and the expected type (exit 2).
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local host_mod = require("odp.host")
local options = require("odp.core.options")
local search = require("odp.core.search")

local M = {}

-- Types (device files, lab files): "string", "number", "integer", "boolean", {enum = {...}}, {list = T}, {map = T} (string keys),
-- {fields = {...}} (a table with exactly these keys). required = true on a field spec.
local str, int, num, bool = "string", "integer", "number", "boolean"
local function list(t) return { list = t } end
local function map(t) return { map = t } end
local function fields(f) return { fields = f } end
local RANGE = list(int)            -- {start, size}
local ARGV = list(str)
local COMMAND = fields { argv = { list = str, required = true }, cwd = str, env = { enum = { "build" } } }

M.TRANSPORTS = { "host", "ssh", "adb", "probe" }
-- A probe board's transport options (the Ethos-U flow declares them; `odp repl` and lab files take these).
M.PROBE_OPTIONS = { "probe", "jlink-lib", "gdb-address", "rtt-address", "rtt-ranges", "twin-state",
  "build-dir", "runs-dir", "image", "keep" }
M.FLOWS = { "executorch", "ethos_u" }

--- The target kinds' registry: the module of a transport (odp.target.host, .ssh, .adb, .probe) by its name,
-- the one place its name is computed (tests/lua/layers_test.lua knows it). A name outside TRANSPORTS raises.
function M.kind(name)
  for _, known in ipairs(M.TRANSPORTS) do
    if known == name then return require("odp.target." .. name) end -- lazy: run-time name
  end
  error(("no target kind '%s' (kinds: %s)"):format(tostring(name), table.concat(M.TRANSPORTS, ", ")), 2)
end

M.schema = fields {
  name = { type = str, required = true },
  description = str,
  transport = { enum = M.TRANSPORTS, required = true },
  flow = { enum = M.FLOWS, required = true },
  -- executorch boards
  arch = str,
  runner = str,
  remote_dir = str,
  user = str,
  glibc_advice = str,
  log = fields { clear = str, dump = str },
  time_commands = list(str),
  -- probe boards
  probe = fields { backend = { enum = { "jlink", "gdb", "qemu" } }, jlink_device = str,
    flasher_jlink_device = str, interface = str, speed_khz = int, base = int },
  rtt = fields { address = int, ranges = list(RANGE), flasher_ranges = list(RANGE), channel = int },
  build = fields {
    source_dir = str, dir = str, toolchain_file = str, compiler = str, target = str,
    cmake = map { one_of = { str, num } },
    vars = map { one_of = { str, bool } },
    memory_modes = map(fields { drop = list(str) }),
    defaults = fields { memory_mode = str, activation_buf_sz = { one_of = { int, str } },
      tmp_mem_size = { one_of = { int, str } } },
    limits = fields { activation_buf_sz = int, tmp_mem_size = int, inferences = int },
    state = list(ARGV),
    env = map(str),
    outputs = fields { mram = str, ext_flash = str, flasher = str },
  },
  setools = fields { dir = str, flasher_cfg = str, app_cfg = str, flasher_image = str, app_image = str,
    flasher_build = str },
  commands = fields { configure = COMMAND, build = COMMAND, gen_toc = COMMAND, write_mram = COMMAND },
  lines = fields { inference = str, done = str, flasher_start = str, flasher_ok = str, flasher_crc = str,
    flasher_fail = str },
  xmodem = fields { mode = { enum = { "128", "1k" } } },
  artifact_forms = list(str),
  twin = fields { launch = str, stop = str, state_env = str },
  clocks = fields { cpu_hz = num, npu_hz = num },
}

local function type_name(spec)
  if type(spec) == "string" then return spec end
  if spec.type then return type_name(spec.type) end
  if spec.enum then return table.concat(spec.enum, "|") end
  if spec.one_of then
    local t = {}
    for i, s in ipairs(spec.one_of) do t[i] = type_name(s) end
    return table.concat(t, " or ")
  end
  if spec.list then return "list of " .. type_name(spec.list) end
  if spec.map then return "table of " .. type_name(spec.map) end
  return "table"
end

local function matches(v, spec)
  if type(spec) == "string" then
    if spec == "integer" then return math.type(v) == "integer" end
    return type(v) == spec
  end
  if spec.type then return matches(v, spec.type) end
  if spec.enum then
    for _, e in ipairs(spec.enum) do if v == e then return true end end
    return false
  end
  if spec.one_of then
    for _, s in ipairs(spec.one_of) do if matches(v, s) then return true end end
    return false
  end
  return type(v) == "table"
end

-- Checks v against spec; returns nil or (key path, expected type, what it is).
local function check(v, spec, path)
  if not matches(v, spec) then
    return path, type_name(spec), v == nil and "missing" or (type(v) == "string" and ("%q"):format(v) or type(v))
  end
  if type(spec) ~= "table" then return end
  if spec.list then
    for k, x in pairs(v) do
      if math.type(k) ~= "integer" or k < 1 or k > #v then return path .. "." .. tostring(k), "a list", "a key" end
      local p, want, got, near = check(x, spec.list, ("%s[%d]"):format(path, k))
      if p then return p, want, got, near end
    end
  elseif spec.map then
    for k, x in pairs(v) do
      if type(k) ~= "string" then return path .. "[" .. tostring(k) .. "]", "string keys", type(k) end
      local p, want, got, near = check(x, spec.map, path .. "." .. k)
      if p then return p, want, got, near end
    end
  elseif spec.fields then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if not spec.fields[k] then
        local known = {}
        for f in pairs(spec.fields) do known[#known + 1] = f end
        table.sort(known)
        return (path ~= "" and (path .. ".") or "") .. k, "one of the keys " .. table.concat(known, ", "),
          "unknown key", options.closest(k, known)
      end
    end
    local names = {}
    for k in pairs(spec.fields) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      local f = spec.fields[k]
      if v[k] ~= nil or (type(f) == "table" and f.required) then
        local p, want, got, near = check(v[k], f, (path ~= "" and (path .. ".") or "") .. k)
        if p then return p, want, got, near end
      end
    end
  end
end

--- Checks a device table; raises EUSAGE (exit 2) naming where, the key and the expected type.
function M.check(dev, where)
  if type(dev) ~= "table" then
    errors.fail("EUSAGE", ("device file %s: must return a table, got %s"):format(where, type(dev)))
  end
  return M.check_schema(dev, M.schema, "device file", where)
end

local function root() return host_mod.root end

--- Loads a data file (a device file, a lab file): a chunk run with no globals at all, which must return a
-- table. `what` names the kind in errors ("device file"). Returns the table and the path it was read from.
function M.load_data(path, what)
  local p = search.find(path)
  local f, err = io.open(p, "rb")
  if not f then errors.fail("EUSAGE", ("%s %s: %s"):format(what, path, (err:gsub("^[^:]*: ", "")))) end
  local src = f:read("a")
  f:close()
  local chunk, lerr = load(src, "=" .. path, "t", {})
  if not chunk then errors.fail("EUSAGE", ("%s %s: %s"):format(what, path, lerr)) end
  local ok, v = pcall(chunk)
  if not ok then
    errors.fail("EUSAGE", ("%s %s: data only, no code: %s"):format(what, path, tostring(v)))
  end
  if type(v) ~= "table" then
    errors.fail("EUSAGE", ("%s %s: must return a table, got %s"):format(what, path, type(v)))
  end
  return v, p
end

--- Checks v against a schema written like M.schema; raises EUSAGE (exit 2) naming what, where, the key and
-- the expected type.
function M.check_schema(v, schema, what, where)
  local path, want, got, near = check(v, schema, "")
  if near then -- a misspelt key: what was meant, not the whole list
    errors.fail("EUSAGE", ("%s %s: unknown key %s; did you mean %s?"):format(what, where, path,
      (path:gsub("[^.]*$", "") .. near)))
  elseif path then
    errors.fail("EUSAGE", ("%s %s: key %s: expected %s, got %s"):format(what, where, path, want, got))
  end
  return v
end

--- Loads and checks a device file: the table, with `path` set to the file it came from.
function M.load(path)
  local dev, p = M.load_data(path, "device file")
  M.check(dev, path)
  dev.path = p
  return dev
end

--- A device: a path (loaded) or a table (checked, `path` allowed).
function M.get(dev)
  if type(dev) == "string" then return M.load(dev) end
  local copy = {}
  for k, v in pairs(dev) do if k ~= "path" then copy[k] = v end end
  M.check(copy, "(table)")
  return dev
end

--- The device files shipped with odp: {path=, name=, description=, transport=, flow=} sorted by name.
function M.shipped()
  local out = {}
  local dir = root() .. "/devices"
  for _, name in ipairs(sys.readdir(dir) or {}) do
    if name:match("%.lua$") then
      local ok, dev = pcall(M.load, dir .. "/" .. name)
      if ok then
        out[#out + 1] = { path = "devices/" .. name, name = dev.name, description = dev.description,
          transport = dev.transport, flow = dev.flow }
      end
    end
  end
  table.sort(out, function(a, b) return a.path < b.path end)
  return out
end

return M
