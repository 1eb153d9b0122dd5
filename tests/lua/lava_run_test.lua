-- The real engine: Debian 12's lava-run (lava-dispatcher 2023.01, unpacked by tests/lib/lava.lua) runs the
-- job docs/lava/ssh-host-flow.yaml on an `ssh` device whose dictionary is rendered from lava-server's own
-- ssh.jinja2 / base.jinja2, pointing at a loopback OpenSSH sshd (tests/lib/sshd.lua). The job's test shell
-- runs odp's host flow, installed by `make install` as docs/lava/Dockerfile does, with the real ExecuTorch
-- runner and --report lava. Checked: LAVA's own results log
-- lists odp's cases with the measurements and units of the record odp wrote, and --boards lava's provider
-- reads the environment file LAVA's overlay exported to the board.
--
-- One stand-in, named here: python3-guestfs. lava_dispatcher imports `guestfs` at module load
-- (actions/deploy/apply_overlay.py, utils/filesystem.py); the ssh device type never calls it, and Debian's
-- package pulls in about 120 packages (systemd, a kernel, an appliance) for that import. The stand-in is an
-- empty module on PYTHONPATH.
local T = require("t")
local json = require("odp.core.json")
local lava = require("lava")
local proc = require("odp.proc")
local sshd = require("sshd")
local sys = require("odp.sys")

local root = T.root()
local dir = T.tmpdir()

T.with_real_runner("lava-run: the job in docs/lava/ runs odp on an ssh device; LAVA's results hold its measurements",
  function(runner)
    local lyaml = require("lyaml")
    local stand_in = dir .. "/stand-in"
    sys.mkdir_p(stand_in)
    T.write(stand_in .. "/guestfs.py", "# stand-in for python3-guestfs (tests/lua/lava_run_test.lua says why)\n")
    -- LAVA logs in as root: its overlay goes to /lava-<job id> on the board
    local srv = sshd.start { user = "root" }
    local job_id = tostring(900000 + (sys.getpid() * 7 + math.floor(sys.now())) % 99999)
    local overlay = "/lava-" .. job_id
    local ok, err = pcall(function()
      local device = lava.device_dictionary { ssh_host = "127.0.0.1", ssh_port = srv.port, ssh_user = "root",
        ssh_identity_file = srv.identity, schroot = "",
        static_info = { literal = "[{'odp_device': 'host', 'odp_name': 'dut', 'odp_tags': 'ssh-dut'}]" } }
      T.write(dir .. "/device.yaml", device)
      T.match(device, "\n%s+host: \"127%.0%.0%.1\"\n%s+port: " .. srv.port .. "\n", "rendered by lava-server's ssh.jinja2")

      -- the documented job, with only its parameters pointed at this machine (JSON is YAML)
      local job = lyaml.load(T.read(root .. "/docs/lava/ssh-host-flow.yaml"))
      local def = job.actions[3].test.definitions[1]
      local runs = dir .. "/runs"
      -- odp as docs/lava/Dockerfile and a Pi have it: `make install` (into a staging dir here)
      local inst = dir .. "/inst"
      local mk = assert(proc.run { "make", "-s", "-C", root, "install", "DESTDIR=" .. inst,
        "BUILD=" .. (os.getenv("ODP_BUILD_DIR") or (root .. "/build")), timeout = 300 })
      T.eq(mk.status, 0, "make install: " .. mk.stderr)
      def.parameters = { ODP = inst .. "/usr/local/bin/odp", SCRIPT = inst .. "/usr/local/share/odp/scripts/host.lua",
        RUNNER = runner,
        MODEL = root .. "/tests/fixtures/pte/add_arduino.pte", N = "10", RUNS = runs }
      T.write(dir .. "/job.yaml", json.encode(job))

      local out = dir .. "/lava-out"
      sys.mkdir_p(out)
      local r = assert(proc.run { argv = { "/usr/bin/python3", lava.unpacked() .. "/usr/bin/lava-run", "--job-id", job_id,
        "--output-dir", out, "--device", dir .. "/device.yaml", dir .. "/job.yaml" },
        env = lava.env(stand_in), timeout = 600 })
      T.write(dir .. "/lava-run.log", r.stdout .. r.stderr)
      local results = lava.results(r.stdout .. "\n" .. r.stderr) -- lava-run logs on stderr when not a tty
      local cases = {}
      for _, e in ipairs(results) do cases[e.case] = e end
      T.eq(cases.job and cases.job.result, "pass", "LAVA's job result (log in " .. dir .. "/lava-run.log)")

      -- the record odp wrote in the board's runs dir is what LAVA must hold
      local run_dirs = {}
      for _, name in ipairs(sys.readdir(runs) or {}) do
        if sys.stat(runs .. "/" .. name .. "/result.json") then run_dirs[#run_dirs + 1] = name end
      end
      T.eq(#run_dirs, 1, "one run")
      local rec = assert(json.decode(T.read(runs .. "/" .. run_dirs[1] .. "/result.json")))
      T.eq(rec.ok, true)
      T.eq(rec.lava_job_id, job_id, "the record names the LAVA job (LAVA_JOB_ID in the test shell)")
      local prefix = "dut.add_arduino" -- the board LAVA named (--boards lava: static_info odp_name)
      local point = prefix .. ".num_executions-10.repeat-1.warmup-0."
      local checked = 0
      for _, m in ipairs(require("odp.results.schema").metrics(rec)) do
        local c = cases[point .. m.key]
        T.ok(c, "LAVA's results list " .. point .. m.key)
        T.eq(c.result, "pass")
        T.eq(c.units, m.units, m.key .. " units")
        T.near(tonumber(c.measurement), m.value, 1e-9, m.key .. " measurement")
        T.match(c.definition, "odp%-host%-flow$", "under the job's test definition")
        checked = checked + 1
      end
      T.ok(checked >= 8, "latency p50/mean/p90/p99/min/max, model load and peak RSS: " .. checked)
      T.eq(cases[point .. "latency_p50"].set, prefix, "in the test set of its board and model")

      -- the environment LAVA's overlay exported to the board, as --boards lava reads it
      local env_r = assert(proc.run { "sh", "-c", ". " .. lava.quote(overlay .. "/environment") .. " && env",
        timeout = 30 })
      T.eq(env_r.status, 0, "LAVA's environment file sources")
      local env = {}
      for k, v in env_r.stdout:gmatch("([%w_]+)=([^\n]*)") do env[k] = v end
      local boards = assert(require("odp.target.lab_lava").boards(env))
      T.eq(#boards.boards, 1)
      local b = boards.boards[1]
      T.eq({ b.name, b.device, b.lava_job_id }, { "dut", "devices/host.lua", job_id })
      T.eq(b.tags, { "lava", "ssh-dut" })
    end)
    srv:stop()
    proc.run { "sh", "-c", "rm -rf " .. lava.quote(overlay) .. " " .. lava.quote(overlay) .. "-overlay-*.tar.gz",
      timeout = 60 }
    if not ok then error(err, 0) end
  end)

T.done()
