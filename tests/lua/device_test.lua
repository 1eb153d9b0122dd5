-- Device files: one schema, one loader (lua/odp/target/device.lua, docs/devices.md).
local T = require("t")
local device = require("odp.target.device")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local dir = T.tmpdir()
local odp = os.getenv("ODP") or (root .. "/build/odp")

local function failure(fn)
  local ok, e = pcall(fn)
  T.eq(ok, false, "raises")
  T.eq(type(e), "table", "a structured failure: " .. tostring(e))
  return e
end

T.test("every shipped device file loads, with a transport and a flow", function()
  local list = device.shipped()
  T.ok(#list >= 6, "six device files")
  local names = {}
  for _, d in ipairs(list) do
    local dev = device.load(d.path)
    names[dev.name] = dev
    T.ok(dev.transport and dev.flow, d.path)
  end
  T.eq({ names.rpi5.transport, names.rpi5.flow }, { "ssh", "executorch" })
  T.eq({ names.alif_e8.transport, names.alif_e8.flow }, { "probe", "ethos_u" })
  T.eq({ names.vivo_x300_pro.transport, names.twin_m55.transport, names.host.transport }, { "adb", "probe", "host" })
end)

T.test("an unknown key, a wrong type, a bad enum: one error naming file, key and expected type", function()
  local function bad(body)
    local p = dir .. "/bad.lua"
    T.write(p, "return {" .. body .. "}")
    local e = failure(function() device.load(p) end)
    T.eq(e.code, "EUSAGE"); T.eq(e.exit, 2)
    T.match(e.message, "bad%.lua")
    T.eq(e.message:find("\n"), nil, "one line")
    return e.message
  end
  local base = 'name = "x", transport = "ssh", flow = "executorch", '
  T.match(bad(base .. "binary = 'r'"), "key binary: expected one of the keys .*runner")
  T.match(bad(base .. "remote_dir = 7"), "key remote_dir: expected string, got number")
  T.match(bad('name = "x", transport = "usb", flow = "executorch"'), "key transport: expected host|ssh|adb|probe")
  T.match(bad('name = "x", transport = "ssh"'), "key flow: expected executorch|ethos_u, got missing")
  T.match(bad(base .. "rtt = { ranges = { { 0x20000000, '1M' } } }"), "key rtt%.ranges%[1%]%[2%]: expected integer")
  T.match(bad(base .. "probe = { backend = 'jlink', sped_khz = 4000 }"), "unknown key probe%.sped_khz; did you mean probe%.speed_khz%?")
end)

T.test("code in a device file does not run; a missing file is named", function()
  local p = dir .. "/evil.lua"
  local marker = dir .. "/pwned"
  T.write(p, ("os.execute('touch %s') return { name = 'x', transport = 'host', flow = 'executorch' }"):format(marker))
  local e = failure(function() device.load(p) end)
  T.match(e.message, "evil%.lua: data only, no code"); T.eq(e.exit, 2)
  T.eq(sys.stat(marker), nil, "os.execute did not run")
  T.write(p, "return { name = require('os') }")
  T.match(failure(function() device.load(p) end).message, "no code")
  e = failure(function() device.load(dir .. "/nope.lua") end)
  T.match(e.message, "nope%.lua: No such file"); T.eq(e.exit, 2)
  T.write(p, "return {")
  T.match(failure(function() device.load(p) end).message, "evil%.lua")
end)

T.test("a bad device file on the command line: exit 2, one line", function()
  local p = dir .. "/typo.lua"
  T.write(p, 'return { name = "t", transport = "probe", flow = "ethos_u", build = {}, lines = { inferenc = "x" } }')
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/alif_e8.lua", "--device", p, "--model",
    root .. "/tests/fixtures/pte/mnist_ethos_u55.pte", "--dry-run" }, timeout = 60 })
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "typo%.lua: unknown key lines%.inferenc; did you mean lines%.inference%?")
  T.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line: " .. r.stderr)
end)

T.test("docs/devices.md documents every key of the schema", function()
  local doc = T.read(root .. "/docs/devices.md")
  local function walk(spec, path)
    if type(spec) ~= "table" then return end
    if spec.fields then
      for k, f in pairs(spec.fields) do
        local key = path and (path .. "." .. k) or k
        T.ok(doc:find("`" .. key .. "`", 1, true), "docs/devices.md has `" .. key .. "`")
        if path ~= "commands" then walk(f, key) end -- commands.NAME share one documented shape
      end
    elseif spec.map then walk(spec.map, path .. ".NAME")
    end
  end
  walk(device.schema, nil)
end)

T.test("the device's remote_dir is the --remote-dir default, its user the SSH user", function()
  local p = dir .. "/srv.lua"
  T.write(p, 'return { name = "srv", transport = "ssh", flow = "executorch", remote_dir = "/srv/odp" }')
  local script = require("odp.flows.executorch").script { name = "t", description = "", device = p }
  local default
  for _, o in ipairs(script.options) do if o[1] == "remote-dir" then default = o[3] end end
  T.eq(default, "/srv/odp")
  for _, o in ipairs(require("odp.target.ssh").options) do
    if o[1] == "remote-dir" then T.eq(o[3], "/tmp/odp", "the target's own option is unchanged") end
  end
  T.eq(device.load("devices/graviton4.lua").user, "ubuntu")
end)

T.done()
