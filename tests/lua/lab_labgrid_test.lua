-- --boards labgrid:FILE[:target]: odp's reading of a labgrid environment against labgrid's own (Debian's
-- python3-labgrid 0.4.1): its Environment loader and TargetFactory parse docs/labgrid/lab.yaml, and for every
-- resource class labgrid 0.4.1 has, instantiate it (defaults, conversions); odp must list the same resources
-- with the same arguments and derive its board fields from the same values. No coordinator is needed.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local lab = require("odp.target.lab_labgrid")

local root = T.root()
local env_file = root .. "/docs/labgrid/lab.yaml"
local dir = T.tmpdir()

-- labgrid's view: per target, the named list TargetFactory builds and, where 0.4.1 has the class, the
-- resource object's attributes
local function labgrid_view(file, target, env)
  local r = assert(proc.run { env = env, "/usr/bin/python3", "-c", [==[
import json, sys, attr
from labgrid import Environment
from labgrid.factory import target_factory
from labgrid.target import Target
env = Environment(sys.argv[1])
cfg = env.config.get_targets()[sys.argv[2]]
items = target_factory._convert_to_named_list(cfg.get('resources', {}))
out = []
for item in items:
    item = dict(item)
    cls, name = item.pop('cls'), item.pop('name')
    entry = {'cls': cls, 'name': name, 'args': item}
    if cls in target_factory.resources and cls not in ('USBSerialPort',):
        res = target_factory.make_resource(Target(sys.argv[2] + '-' + cls), cls, name, dict(item))
        entry['instance'] = {a.name: getattr(res, a.name) for a in attr.fields(type(res))
                             if a.name not in ('target', 'state', 'avail', 'name', 'parent')}
    out.append(entry)
print(json.dumps({'resources': out, 'odp_device': env.config.get_target_option(sys.argv[2], 'odp_device', None)}))
]==], file, target, timeout = 60 })
  if not r.ok then error("labgrid could not load " .. file .. ": " .. r.stderr, 0) end
  return assert(json.decode(r.stdout))
end

local function by_key(list)
  local out = {}
  for _, r in ipairs(list) do out[r.cls .. "/" .. tostring(r.name)] = r end
  return out
end

for _, target in ipairs({ "main", "pi", "phone", "e8" }) do
  T.test("labgrid and odp agree on docs/labgrid/lab.yaml target " .. target, function()
    local want = labgrid_view(env_file, target)
    local t = assert(lab.target(require("lyaml").load(T.read(env_file)), target))
    T.eq(t.odp_device, want.odp_device, "the target's odp_device option")
    local ours, theirs = by_key(t.resources), by_key(want.resources)
    for k, r in pairs(theirs) do
      T.ok(ours[k], "odp lists " .. k)
      T.eq(json.encode(ours[k].args), json.encode(r.args), k .. " arguments")
    end
    for k in pairs(ours) do T.ok(theirs[k], "labgrid lists " .. k) end
    -- the board fields odp derives equal the attributes of labgrid's own resource objects
    local boards = assert(lab.boards(env_file, target)).boards
    local b = boards[1]
    for k, r in pairs(theirs) do
      local inst = r.instance
      if r.cls == "NetworkService" then
        T.eq({ b.host, b.user, b.port }, { inst.address, inst.username, inst.port }, k)
      elseif r.cls == "NetworkSerialPort" then
        T.eq(b.console, ("%s://%s:%d"):format(inst.protocol, inst.host, inst.port), k)
      elseif r.cls == "RawSerialPort" then
        T.eq(b.console, inst.port, k)
      elseif r.cls == "NetworkPowerPort" then
        T.match(b.power.reset, "^python3 %-c .* cycle$", k .. ": labgrid's driver cycles the outlet")
      end
    end
  end)
end

T.test("!template values: substituted as labgrid's loader does (BASE, LG_* of the environment, $$, ${NAME})", function()
  local file = dir .. "/templated.yaml"
  T.write(file, table.concat({
    "targets:",
    "  main:",
    "    options: {odp_device: rpi5}",
    "    resources:",
    "      NetworkService:",
    "        address: !template $LG_PI_ADDR",
    "        username: !template '${LG_PI_USER}x$$y'",
    "      RawSerialPort:",
    "        port: !template $BASE/tty-$LG_PI_USER",
    "        speed: 115200",
    "" }, "\n"))
  local env = { LG_PI_ADDR = "10.9.8.7", LG_PI_USER = "pi" }
  local want = labgrid_view(file, "main", env)
  local t = assert(lab.target(assert(lab.load(T.read(file), file, function(n) return env[n] end)), "main"))
  local ours, theirs = by_key(t.resources), by_key(want.resources)
  local n = 0
  for k, r in pairs(theirs) do
    n = n + 1
    T.eq(json.encode(ours[k] and ours[k].args), json.encode(r.args), k .. " as labgrid reads it")
    if r.cls == "NetworkService" then T.eq(r.args.username, "pix$y", "labgrid's own reading, checked by hand too") end
    if r.cls == "RawSerialPort" then T.eq(r.args.port, dir .. "/tty-pi", "BASE: the file's directory") end
  end
  T.eq(n, 2, "both resources")
  local b = assert(lab.boards(file, "main", function(n) return env[n] end)).boards[1]
  T.eq({ b.host, b.user }, { "10.9.8.7", "pix$y" }, "the board odp makes of it")
  -- what labgrid refuses, odp refuses in one line: an unknown variable, a `$` before nothing it knows
  T.write(file, "targets: {main: {options: {odp_device: rpi5}, resources: {NetworkService: {address: !template $LG_NOPE}}}}\n")
  local lg = proc.run { "/usr/bin/python3", "-c", "import sys; from labgrid import Environment; Environment(sys.argv[1])", file }
  T.ok(not lg.ok and lg.stderr:find("unknown variable 'LG_NOPE'", 1, true), "labgrid: unknown variable")
  local _, err = lab.boards(file, "main", function(n) return env[n] end)
  T.match(err, "^EUSAGE: labgrid file [^\n]*: refers to unknown variable 'LG_NOPE'$")
  T.write(file, "targets: {main: {options: {odp_device: rpi5}, resources: {NetworkService: {address: !template 'a $ b'}}}}\n")
  lg = proc.run { "/usr/bin/python3", "-c", "import sys; from labgrid import Environment; Environment(sys.argv[1])", file }
  T.ok(not lg.ok and lg.stderr:find("Invalid template string", 1, true), "labgrid: invalid template")
  _, err = lab.boards(file, "main", function(n) return env[n] end)
  T.match(err, "^EUSAGE: labgrid file [^\n]*: is invalid: Invalid template string 'a %$ b'$")
  -- only LG_* names come from the environment, as in labgrid: PATH is not a variable of the file
  T.write(file, "targets: {main: {options: {odp_device: rpi5}, resources: {NetworkService: {address: !template $PATH}}}}\n")
  _, err = lab.boards(file, "main")
  T.match(err, "refers to unknown variable 'PATH'")
end)

T.test("boards: each target's board, its device, console and power; an unmappable resource is one line", function()
  local got = assert(lab.boards(env_file))
  T.eq(#got.boards, 1)
  local pi = got.boards[1]
  T.eq({ pi.name, pi.device, pi.host, pi.user, pi.port }, { "main", "devices/rpi5.lua", "10.0.0.11", "pi", 22 })
  T.eq(pi.console, "rfc2217://serial-server.lab:7001")
  T.eq({ pi.power.on ~= nil, pi.power.off ~= nil, pi.power.reset ~= nil }, { true, true, true })
  T.eq(got.warnings, {})
  local e8 = assert(lab.boards(env_file, "e8"))
  T.eq({ e8.boards[1].device, e8.boards[1].jlink_serial }, { "devices/alif_e8.lua", 600112233 })
  T.match(e8.boards[1].console, "A10KJ3X1")
  T.eq(#e8.warnings, 1)
  T.match(e8.warnings[1], "^[^\n]*lab%.yaml: targets: e8: resources: SigrokDevice is not a resource odp maps %(it maps ")
  local phone = assert(lab.boards(env_file, "phone")).boards[1]
  T.eq({ phone.serial, phone.adb_server_socket }, { "10AD5F1E", "tcp:exporter-3.lab:5037" })
  local pi2 = assert(lab.boards(env_file, "pi")).boards[1]
  T.eq({ pi2.port, pi2.console }, { 2222, "/dev/ttyUSB0" })
  T.match(pi2.power.reset, "Power cycle board pi by hand, then press Enter")
end)

T.test("power verbs: the commands switch a NetworkPowerPort through labgrid's own driver (simplerest, loopback HTTP)", function()
  local sshd = require("sshd") -- its shell helpers
  local port = 20000 + (require("odp.sys").getpid() * 17) % 30000
  local log = dir .. "/http.log"
  sshd.with_background(("python3 -m http.server %d --bind 127.0.0.1 --directory %s"):format(port, sshd.quote(dir)),
    function()
      T.ok(sshd.wait_for(function() return T.read(log):find("Serving HTTP") ~= nil end, 10), "http.server up")
      local env = dir .. "/power.yaml"
      T.write(env, ("targets:\n  main:\n    options: {odp_device: rpi5}\n    resources:\n"
        .. "      NetworkService: {address: 10.0.0.11, username: pi}\n"
        .. "      NetworkPowerPort: {model: simplerest, host: 'http://127.0.0.1:%d/relay/{index}/{value}', index: 3}\n")
        :format(port))
      local b = assert(lab.boards(env)).boards[1]
      for _, verb in ipairs({ "off", "on" }) do
        -- the python3 on PATH must import labgrid: Debian's (not a pyenv shim in front of it)
        local r = assert(proc.run { "sh", "-c", b.power[verb], env = { PATH = "/usr/bin:/bin" }, timeout = 60 })
        T.eq(r.status, 0, verb .. ": " .. r.stderr)
      end
      local l = T.read(log)
      T.match(l, '"GET /relay/3/0 HTTP/1%.1".*"GET /relay/3/1 HTTP/1%.1"', "off then on reached the PDU")
    end, log)
end)

T.test("bad files: one line naming the file and key; no board is ENOTFOUND", function()
  local function boards(text, target, name)
    local p = dir .. "/" .. (name or "env.yaml")
    T.write(p, text)
    return lab.boards(p, target)
  end
  local _, err, code = boards("targets:\n  main:\n    resources:\n      SigrokDevice: {driver: x}\n")
  T.eq(code, "ENOTFOUND")
  T.match(err, "^ENOTFOUND: labgrid file [^\n]*: no usable board: [^\n]*SigrokDevice is not a resource odp maps")
  _, err, code = boards("targets: [1, 2]\n")
  T.eq(code, "EUSAGE")
  T.match(err, "no target 'main'")
  _, err = boards("targets:\n  main:\n    resources:\n      NetworkService:\n")
  T.match(err, "NetworkService: give {} for no arguments")
  _, err = boards("targets: {main: {resources: {NetworkService: {address: a}}}}\n")
  T.match(err, "the target names no odp device %(its option odp_device")
  _, err, code = boards("targets: {main: {options: {odp_devcie: rpi5}, resources: {NetworkService: {address: a}}}}\n")
  T.eq(code, "EUSAGE")
  T.match(err, "targets: main: options: odp_devcie is not an option odp reads %(it reads odp_device%)$")
  -- a target that names no device takes the one given (the device of the script being run)
  local ok = assert(lab.boards((function()
    T.write(dir .. "/nodev.yaml", "targets: {main: {resources: {NetworkService: {address: a}}}}\n")
    return dir .. "/nodev.yaml"
  end)(), nil, nil, "devices/rpi5.lua"))
  T.eq({ #ok.boards, ok.boards[1].device, ok.boards[1].host }, { 1, "devices/rpi5.lua", "a" })
  _, err = boards("targets: {main: [\n")
  T.match(err, "^EUSAGE: labgrid file [^\n]*: not YAML: ")
  _, err = boards("{}", nil, "x.json")
  T.match(err, "names no odp device: give it after the file")
  _, err, code = lab.boards(dir .. "/absent.yaml")
  T.eq(code, "ENOTFOUND")
  for _, e in ipairs({ err }) do T.ok(not e:find("\n"), "one line") end
end)

T.test("labgrid-client export JSON: SerialDriver's LG__ variables are an RFC 2217 console", function()
  -- the variables labgrid's SerialDriver exports for a NetworkSerialPort (labgrid's tests/test_export.py)
  local p = dir .. "/export.json"
  T.write(p, json.encode { LG__SERIALDRIVER_HOST = "testhost", LG__SERIALDRIVER_PORT = "12345",
    LG__SERIALDRIVER_PROTOCOL = "rfc2217", LG__SERIALDRIVER_SPEED = "115200", LG__CLIENT_PID = "4242",
    LG__TFTP_HOST = "testhost", LG__TFTP_INTERNAL = "/srv/tftp/b/" })
  local got = assert(lab.boards(p, "alif_e8"))
  T.eq(#got.boards, 1)
  T.eq({ got.boards[1].device, got.boards[1].console }, { "devices/alif_e8.lua", "rfc2217://testhost:12345" })
  T.eq(#got.warnings, 1)
  T.match(got.warnings[1], "LG__TFTP_%* is not a resource odp maps")
end)

T.test("fuzz: mutated environment files never raise; each gives boards or one line", function()
  local base = T.read(env_file)
  local rnd = T.lcg(19)
  local alphabet = "{}[]:,-# \n\t'\"!&*|>0123456789abcNetworkServicePortJLinkDevice"
  for i = 1, 400 do
    local s = T.mutate(base, rnd, alphabet)
    local p = dir .. "/fuzz.yaml"
    T.write(p, s)
    for _, target in ipairs({ "main", "e8" }) do
      local ok, got, err = pcall(lab.boards, p, target)
      T.ok(ok, ("case %d raised: %s"):format(i, tostring(got)))
      if got == nil then T.ok(type(err) == "string" and not err:find("\n"), ("case %d: one line: %s"):format(i, tostring(err))) end
    end
  end
end)

T.done()
