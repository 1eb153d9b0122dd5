-- The Ethos-U flow's parts one by one (docs/architecture.md, "The Ethos-U flow"): each of plan, validate,
-- build, flash and capture loads alone (in an odp process of its own: which other parts it pulled in), and
-- each runs on a plan: validate makes it from the MNIST fixture and the twin's device file; build builds the
-- twin's real cmake project with embedded --inputs (the stale-build guard: an unchanged build is "unchanged");
-- flash sends a file to the twin's flasher over XMODEM through RTT (zlib's CRC-32 of what it received);
-- capture reads Inference: lines from a stream.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")
local options = require("odp.core.options")
local run = require("odp.run")
local twin = require("odp.target.twin")
local ui = require("odp.core.ui").new { quiet = true }

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local device = root .. "/devices/twin_m55.lua"
local mnist = root .. "/tests/fixtures/pte/mnist_ethos_u55.pte"
local dir = T.tmpdir()
local PARTS = { "plan", "validate", "build", "flash", "capture" }

T.test("each part loads alone, pulling in no other part than what it uses (validate: plan)", function()
  local probe = dir .. "/loaded.lua"
  T.write(probe, 'require("odp.flows.ethos_u." .. arg[1])\nlocal out = {}\n' ..
    'for _, n in ipairs({ "plan", "validate", "build", "flash", "capture" }) do\n' ..
    '  if n ~= arg[1] and package.loaded["odp.flows.ethos_u." .. n] then out[#out + 1] = n end\nend\n' ..
    'if package.loaded["odp.flows.ethos_u"] then out[#out + 1] = "ethos_u" end\n' ..
    'print(table.concat(out, ","))\n')
  local got = {}
  for _, part in ipairs(PARTS) do
    local r = assert(proc.run { argv = { odp, "run", probe, part }, timeout = 60 })
    T.eq(r.status, 0, part .. ": " .. r.stderr)
    got[part] = r.stdout:match("^(.-)%s*$")
  end
  T.eq(got, { plan = "", validate = "plan", build = "", flash = "", capture = "" })
end)

local build_dir = dir .. "/build"
local function opts(extra)
  local o = options.defaults(require("odp.flows.ethos_u.plan").options, options.global_options)
  options.merge(o, { device = device, model = mnist, build_dir = build_dir, runs_dir = dir .. "/runs", inferences = 2 })
  return options.merge(o, extra)
end

local validate = require("odp.flows.ethos_u.validate")
local p -- the plan every later test runs on

T.test("validate: the plan from the fixture and the twin's device file, --inputs checked against the .pte", function()
  p = validate.plan(run.context { opts = opts { inputs = "random:3" }, ui = ui })
  T.eq({ p.scratch_size, p.ethos_delegate, p.io.inputs.seed, p.inputs_blob, p.inputs_var },
    { 104160, true, 3, build_dir .. "/odp-inputs.bin", "TWIN_INPUTS_PATH" })
  local defs = table.concat(p.cmake_defs, " ")
  T.match(defs, "%-DTWIN_INPUTS_PATH=" .. build_dir:gsub("%p", "%%%0") .. "/odp%-inputs%.bin")
  T.eq({ p.steps.build, p.steps.flash, p.steps.run, p.max_line }, { true, true, true, 128 * 1024 * 1024 })
  -- without --inputs the variable is defined empty: a cached value of an earlier build never stays
  local p2 = validate.plan(run.context { opts = opts {}, ui = ui })
  T.match(table.concat(p2.cmake_defs, " "), "%-DTWIN_INPUTS_PATH= ")
  T.write(dir .. "/short.bin", "abc")
  local e = T.failure(function() validate.plan(run.context { opts = opts { inputs = dir .. "/short.bin" }, ui = ui }) end)
  T.eq({ e.code, e.exit }, { "EUSAGE", 2 })
  T.match(e.message, "3 bytes; input 0 is float32 %[1, 1, 28, 28%] = 3136 bytes")
end)

local build = require("odp.flows.ethos_u.build")
local run_dir = dir .. "/run"
sys.mkdir_p(run_dir)

T.test("build: the twin's cmake project with the inputs embedded; the same inputs again: unchanged", function()
  T.ok(p, "validate made the plan")
  local ctx = run.context { opts = opts { inputs = "random:3" }, ui = ui }
  local rec = { artifacts = {}, warnings = {} }
  local status = build.step(ctx, p, rec, run_dir)
  T.eq({ status, rec.build.rebuilt, rec.build.reason }, { nil, true, "new build directory" })
  local bytes = T.read(run_dir .. "/inputs/input-0.bin")
  T.eq(#bytes, 3136)
  T.eq({ rec.inputs[1].file, rec.inputs[1].sha256 }, { "inputs/input-0.bin", sys.sha256(bytes) })
  T.eq(T.read(p.inputs_blob) == bytes, true, "the embedded inputs are the input file's bytes")
  T.ok(sys.stat(p.mram) and sys.stat(p.ext_flash) and sys.stat(p.flasher), "images built")
  rec = { artifacts = {}, warnings = {} }
  T.eq(build.step(ctx, p, rec, run_dir), "unchanged")
  T.eq(rec.build.rebuilt, false)
end)

local flash = require("odp.flows.ethos_u.flash")

T.test("flash: a file to the twin's flasher over XMODEM through RTT; zlib's CRC-32 of the padded bytes", function()
  T.ok(p and sys.stat(p.flasher or ""), "the build made the flasher image")
  p.twin_state = dir .. "/twin"
  T.at_done(function() twin.stop(p.twin, p.twin_state) end)
  local payload = dir .. "/payload.bin"
  T.write(payload, ("parts-flash "):rep(1000))
  local rec = { artifacts = {}, warnings = {} }
  local ctx = run.context { opts = opts {}, ui = ui }
  flash.file(ctx, p, rec, run_dir, payload)
  local got, data = rec.flash.received, T.read(payload)
  T.eq(got.crc32, got.expected_crc32)
  T.eq(got.crc32, ("%08x"):format(sys.crc32(data .. ("\26"):rep(got.bytes - #data))))
  T.ok(got.bytes >= #data and got.bytes < #data + 1024, "padded to whole blocks")
  twin.stop(p.twin, p.twin_state)
  T.eq(sys.stat(p.twin_state .. "/pid"), nil, "stopped")
end)

local capture = require("odp.flows.ethos_u.capture")

T.test("capture: Inference: lines from a stream, into the record's latency (modelled on the twin)", function()
  local plan = require("odp.flows.ethos_u.plan").make(opts { dry_run = true })
  local text, pos = "boot\nInference: 1.500 ms\nInference: 2.500 ms\nodp-twin done\n", 1
  local stream = {
    read = function(_, n)
      if pos > #text then return nil, "ETIMEDOUT: idle", "ETIMEDOUT" end
      local c = text:sub(pos, pos + math.min(n, 7) - 1)
      pos = pos + #c
      return c
    end,
    unread = function(_, b) pos = pos - #b end,
  }
  local o = { timeout = 10, settle = 0.1 }
  local cap = capture.capture(stream, plan, o, run_dir .. "/rtt.log")
  T.eq({ cap.samples, cap.bytes }, { { 1.5, 2.5 }, #text })
  local rec = { artifacts = { rtt_log = run_dir .. "/rtt.log" }, warnings = {} }
  capture.measure(rec, plan, cap, run_dir, o)
  T.eq({ rec.latency_ms.n, rec.latency_ms.mean, rec.latency_ms.modelled }, { 2, 2.0, true })
end)

T.done()
