-- LAVA without a job: the board provider (--boards lava) on the environment LAVA sets, and the reporter
-- (--report lava) against the genuine lava-test-case / lava-test-set scripts of Debian's lava-dispatcher
-- (unpacked by tests/lib/lava.lua, installed the way LAVA's overlay installs them). The real job is
-- tests/lua/lava_run_test.lua.
local T = require("t")
local lava = require("lava")
local proc = require("odp.proc")
local sys = require("odp.sys")
local provider = require("odp.target.lab_lava")
local reporter = require("odp.results.lava")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local dir = T.tmpdir()

T.test("boards: an ssh Pi, an adb phone and a J-Link E8 from LAVA's info entries; LAVA_JOB_ID on each", function()
  local got = assert(provider.boards {
    LAVA_JOB_ID = "4711",
    ANDROID_SERIAL = "10AD5F1E", LAVA_BOARD_ID = "10AD5F1E",
    LAVA_DEVICE_INFO_0_board_id = "10AD5F1E", LAVA_DEVICE_INFO_0_odp_device = "vivo_x300_pro",
    LAVA_DEVICE_INFO_0_usb_vendor_id = "2d95",
    LAVA_STATIC_INFO_0_odp_device = "rpi5", LAVA_STATIC_INFO_0_ssh_host = "10.0.0.11",
    LAVA_STATIC_INFO_0_ssh_port = "2222", LAVA_STATIC_INFO_0_ssh_user = "pi", LAVA_STATIC_INFO_0_odp_name = "pi-1",
    LAVA_STATIC_INFO_0_odp_tags = "pi5,lab2",
    LAVA_STATIC_INFO_1_odp_device = "alif_e8", LAVA_STATIC_INFO_1_jlink_serial = "600112233",
    LAVA_STATIC_INFO_1_jlink_device = "AE822FA0E5597LS0_M55_HP", LAVA_STATIC_INFO_1_connection = "uart0",
    LAVA_CONNECTION_COMMAND = "telnet ser2net 7001", LAVA_CONNECTION_COMMAND_UART0 = "telnet ser2net 7002",
    LAVA_HARD_RESET_COMMAND = "pduclient --port 3 --command reboot",
    LAVA_POWER_OFF_COMMAND = "pduclient --port 3 --command off",
  })
  T.eq(#got.boards, 3)
  local phone, pi, e8 = got.boards[1], got.boards[2], got.boards[3]
  T.eq(phone.device, "devices/vivo_x300_pro.lua")
  T.eq(phone.serial, "10AD5F1E")
  T.eq(phone.name, "10AD5F1E", "named by its board_id")
  T.eq(phone.console, "telnet ser2net 7001", "the DUT gets the primary connection")
  T.eq(phone.power, { reset = "pduclient --port 3 --command reboot", off = "pduclient --port 3 --command off" })
  T.eq({ pi.name, pi.device, pi.host, pi.port, pi.user }, { "pi-1", "devices/rpi5.lua", "10.0.0.11", 2222, "pi" })
  T.eq(pi.tags, { "lava", "pi5", "lab2" })
  T.eq(pi.power, nil, "power commands are the DUT's only")
  T.eq({ e8.jlink_serial, e8.jlink_device, e8.console }, { 600112233, "AE822FA0E5597LS0_M55_HP", "telnet ser2net 7002" })
  for _, b in ipairs(got.boards) do T.eq(b.lava_job_id, "4711") end
  T.eq(got.warnings, {})
end)

T.test("boards: an ssh board without ssh_host and an unknown device are one line each; the usable board stays", function()
  local got = assert(provider.boards {
    LAVA_STATIC_INFO_0_odp_device = "rpi5",
    LAVA_STATIC_INFO_1_odp_device = "no_such_board",
    LAVA_STATIC_INFO_2_odp_device = "host",
    LAVA_STATIC_INFO_3_board_id = "energy-probe-1",
  })
  T.eq(#got.boards, 1)
  T.eq(got.boards[1].device, "devices/host.lua")
  T.eq(#got.warnings, 3)
  T.match(got.warnings[1], "^LAVA_STATIC_INFO_0: ssh_host %(the board's address%) is not set; board skipped$")
  T.match(got.warnings[2], "^LAVA_STATIC_INFO_1_odp_device=no_such_board: device file devices/no_such_board.lua")
  T.match(got.warnings[3], "^LAVA_STATIC_INFO_3: no odp_device key")
  for _, w in ipairs(got.warnings) do T.ok(not w:find("\n"), "one line: " .. w) end
end)

T.test("boards: a misspelt odp_ key is refused with what was meant, not a board silently dropped", function()
  local got, err, code = provider.boards {
    LAVA_STATIC_INFO_0_odp_devcie = "rpi5",
    LAVA_STATIC_INFO_0_ssh_host = "10.0.0.9",
  }
  T.eq({ got, code }, { nil, "EUSAGE" })
  T.eq(err, "EUSAGE: LAVA_STATIC_INFO_0_odp_devcie is not a key odp reads (did you mean odp_device?)")
  got, err = provider.boards { LAVA_STATIC_INFO_0_odp_device = "rpi5", LAVA_STATIC_INFO_0_odp_colour = "x" }
  T.eq(got, nil)
  T.match(err, "odp_colour is not a key odp reads %(odp_device, odp_name, odp_tags%)$")
end)

T.test("boards: no usable board is one ENOTFOUND line naming the variable to set", function()
  local got, err, code = provider.boards { ANDROID_SERIAL = "ABC123", LAVA_BOARD_ID = "ABC123", LAVA_JOB_ID = "9" }
  T.eq(got, nil)
  T.eq(code, "ENOTFOUND")
  T.match(err, "^ENOTFOUND: no usable board in LAVA's environment: no LAVA_STATIC_INFO_<i>_odp_device")
  T.match(err, "ANDROID_SERIAL=ABC123 is set")
  T.ok(not err:find("\n"), "one line")
  T.raises(function() provider.boards(nil) end, "env must be a table")
end)

T.test("boards: random LAVA environments never raise; each gives boards or one line", function()
  local rnd = T.lcg(23)
  local keys = { "odp_device", "ssh_host", "ssh_port", "ssh_user", "board_id", "jlink_serial", "jlink_ip",
    "connection", "odp_name", "odp_tags", "x y", "" }
  local values = { "rpi5", "host", "alif_e8", "vivo_x300_pro", "../../etc/passwd", "", "22", "-1", "99999999999999999999",
    "a\nb", ("x"):rep(5000), "uart0", "10.0.0.1" }
  for i = 1, 300 do
    local env = {}
    for _ = 1, rnd(12) do
      local kind = ({ "STATIC", "DEVICE", "OTHER" })[1 + rnd(3)]
      env[("LAVA_%s_INFO_%d_%s"):format(kind, rnd(4), keys[1 + rnd(#keys)])] = values[1 + rnd(#values)]
    end
    if rnd(2) == 0 then env.ANDROID_SERIAL = values[1 + rnd(#values)] end
    local ok, got, err = pcall(provider.boards, env)
    T.ok(ok, ("case %d raised: %s"):format(i, tostring(got)))
    if got == nil then T.ok(type(err) == "string" and not err:find("\n"), ("case %d: one line: %s"):format(i, tostring(err)))
    else for _, w in ipairs(got.warnings) do T.ok(not w:find("\n"), ("case %d: one line: %s"):format(i, w)) end end
  end
end)

local function record(board, model, params, lat, extra)
  local r = { schema = "odp.result/1", ok = true, device = board, model = { path = "/m/" .. model .. ".pte" },
    params = params, latency_ms = lat, peak_rss_kb = 4592 }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

local records = {
  record("host", "add", { num_executions = 10 }, { n = 10, p50 = 0.0201, mean = 0.0213, min = 0.019, max = 0.03,
    p90 = 0.025, p99 = 0.029 }, { load_ms = 0.178 }),
  record("host", "add", { num_executions = 10 }, { n = 10, p50 = 0.0202 }), -- the same point again
  record("pi 1", "mnist+u55", { num_executions = 1 }, nil,
    { ok = false, error = { code = "ETIMEDOUT", message = "no answer from pi@10.0.0.11\nafter 30 s" } }),
  record("host", "add", { num_executions = 100 }, { n = 100, p50 = 1e-7 }),
}

T.test("calls: one set per board and model, a case per metric, IDs of [A-Za-z0-9._-] and unique", function()
  local calls = reporter.calls(records)
  local sets, ids = {}, {}
  for _, c in ipairs(calls) do
    if c[1] == "lava-test-set" and c[2] == "start" then sets[#sets + 1] = c[3] end
    if c[1] == "lava-test-case" then
      T.match(c[2], "^[A-Za-z0-9._-]+$")
      T.eq(ids[c[2]], nil, "unique: " .. c[2])
      ids[c[2]] = c
    end
  end
  T.eq(sets, { "host.add", "pi_1.mnist_u55" }, "records of one board and model share a set wherever they sit")
  local p50 = ids["host.add.num_executions-10.latency_p50"]
  T.eq({ p50[4], p50[6], p50[8] }, { "pass", "0.0201", "ms" })
  T.eq(ids["host.add.num_executions-10.latency_p50-2"][6], "0.0202", "a repeated point gets -2")
  T.eq(ids["host.add.num_executions-100.latency_p50"][6], "0.0000001", "no exponent: LAVA stores a Decimal")
  T.eq(ids["host.add.num_executions-10.peak_rss_kb"][8], "kB")
  local fail = ids["pi_1.mnist_u55.num_executions-1.run"]
  T.eq(fail[4], "fail")
  T.eq(fail.log, "odp: pi_1.mnist_u55.num_executions-1.run failed: ETIMEDOUT: no answer from pi@10.0.0.11 after 30 s")
end)

-- The genuine scripts, installed as LAVA's overlay installs them, with LAVA_RESULT_DIR as lava-test-shell sets it.
local bin = lava.test_shell_bin(dir .. "/bin")
local results = dir .. "/results"
sys.mkdir_p(results)
local env = { PATH = bin .. ":/usr/bin:/bin", LAVA_RESULT_DIR = results }

T.test("signal(): the lines odp prints without the scripts are the lines the genuine scripts print", function()
  for _, c in ipairs(reporter.calls(records)) do
    local r = assert(proc.run { argv = { bin .. "/" .. c[1], table.unpack(c, 2) }, env = env, timeout = 30 })
    T.eq(r.status, 0, table.concat(c, " "))
    T.eq(r.stdout, reporter.signal(c) .. "\n", table.concat(c, " "))
  end
  -- and lava-test-case left its result files where lava-test-shell collects them
  T.eq(T.read(results .. "/results/host.add.num_executions-10.latency_p50/measurement"), "0.0201\n")
  T.eq(T.read(results .. "/results/host.add.num_executions-10.latency_p50/units"), "ms\n")
  T.eq(T.read(results .. "/results/pi_1.mnist_u55.num_executions-1.run/result"), "fail\n")
end)

-- odp run of a script that returns these records, so --report lava runs as a user types it.
local script = dir .. "/records.lua"
T.write(script, ([[
local json = require("odp.core.json")
return { name = "records", description = "returns canned records", options = {},
  run = function() return json.decode(%q) end }
]]):format(require("odp.core.json").encode(records)))

local function odp_run(args, path)
  local argv = { odp, "run", script }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, env = { PATH = path, LAVA_RESULT_DIR = results }, timeout = 60 })
end

T.test("--report lava with lava-test-case on PATH calls the scripts; their signals reach stdout in order", function()
  local r = odp_run({ "--report", "lava", "--format", "json" }, bin .. ":/usr/bin:/bin")
  -- three measured, one board that did not answer (ETIMEDOUT): some measured, so 1 (docs/ci.md's one rule)
  T.eq(r.status, 1, "measured records and a failed one: exit 1")
  local signals = {}
  for line in r.stdout:gmatch("[^\n]+") do if line:find("^<LAVA_SIGNAL") then signals[#signals + 1] = line end end
  local want = {}
  for _, c in ipairs(reporter.calls(records)) do want[#want + 1] = reporter.signal(c) end
  T.eq(signals, want)
  T.match(r.stdout, "\nodp: pi_1%.mnist_u55%.num_executions%-1%.run failed: ETIMEDOUT: no answer[^\n]*\n<LAVA_SIGNAL_TESTCASE "
    .. "TEST_CASE_ID=pi_1%.mnist_u55%.num_executions%-1%.run RESULT=fail>", "the reason on the line before the case")
end)

T.test("--report lava without lava-test-case (a docker test action) prints the same signal lines", function()
  local r = odp_run({ "--report", "lava", "-q", "--format", "json" }, "/usr/bin:/bin")
  local n = 0
  for _ in r.stdout:gmatch("<LAVA_SIGNAL_TESTCASE ") do n = n + 1 end
  T.eq(n, 13, "8 + 2 + 2 metrics of the three measured records and the failed run")
  T.eq(r.status, 1, "measured records and an ETIMEDOUT one: exit 1")
end)

T.test("a lava-test-case that fails: one line naming the case, every other call still made, exit 3", function()
  -- a broken overlay: the scripts without lava-common-functions, so `. lava-common-functions` fails
  local broken = lava.test_shell_bin(dir .. "/broken", { "lava-test-case", "lava-test-set" })
  local r = odp_run({ "--report", "lava", "--format", "json" }, broken .. ":/usr/bin:/bin")
  T.eq(r.status, 3)
  T.match(r.stderr, "lava%-test%-set start failed %(exit status %d+%)")
  local lines = 0
  for _ in r.stderr:gmatch("[^\n]+") do lines = lines + 1 end
  T.eq(lines, 1, "one line: " .. r.stderr)
end)

T.test("--report junit needs a FILE; an unknown reporter is a usage error", function()
  local r = odp_run({ "--report", "junit" }, "/usr/bin:/bin")
  T.eq(r.status, 2)
  T.match(r.stderr, "%-%-report junit needs a FILE")
  r = odp_run({ "--report", "perfherder" }, "/usr/bin:/bin")
  T.eq(r.status, 2)
  T.match(r.stderr, "%-%-report must be one of lava|junit")
end)

T.done()
