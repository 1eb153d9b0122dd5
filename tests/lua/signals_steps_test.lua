-- Signals in every step (docs/signals.md): SIGINT, SIGTERM or SIGHUP sent to odp alone while a step runs a
-- child (the twin firmware's cmake and make with the real arm-none-eabi-gcc, the SETOOLS stand-ins) or talks to
-- the QEMU twin (XMODEM, capture) ends odp with the signal's own status and one line naming the step; the record
-- says ECANCELED with that status; the child's process group is gone and so are its temporary files (a killed
-- compiler's cc*.s). Each signal is sent at an event of the run (a
-- compiler's temporary file appearing, a command line in the flash log, the flasher's prompt, the first
-- Inference: line), not after a sleep. (The host flow and SIGKILL: tests/lua/signals_test.lua.)
local T = require("t")
local bg = require("bgjob")
local json = require("odp.core.json")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local q, sh, wait_until = bg.quote, bg.sh, bg.wait_until
local script = root .. "/scripts/alif_e8.lua"
local twin = root .. "/devices/twin_m55.lua"
local mnist = root .. "/tests/fixtures/pte/mnist_ethos_u55.pte"
local dir = T.tmpdir()
local EXIT = { INT = 130, HUP = 129, TERM = 143 }

-- The run directory under runs (a run odp made), or nil while there is none.
local function run_dir(runs)
  local names = sys.readdir(runs) or {}
  return names[1] and (runs .. "/" .. names[1]) or nil
end

-- What still runs of a run: every process (zombies aside: no working directory) whose working directory or
-- command line names path, one "pid cwd args" line each; "" when none.
local function left_under(path)
  local out = {}
  for _, pid in ipairs(sys.readdir("/proc") or {}) do
    local cwd = pid:match("^%d+$") and sys.realpath("/proc/" .. pid .. "/cwd")
    local args = cwd and (sys.read_file("/proc/" .. pid .. "/cmdline") or ""):gsub("%z", " ")
    if cwd and (cwd:find(path, 1, true) or args:find(path, 1, true)) then
      out[#out + 1] = ("%s %s %s\n"):format(pid, cwd, args)
    end
  end
  return table.concat(out)
end

-- A twin run in the background: its own directory (out, err, rc, runs/, tmp/ as TMPDIR), -q so that stderr
-- holds only what odp says about how the run ended.
local function twin_job(name, build_dir, extra, device)
  local jd = dir .. "/" .. name
  assert(sys.mkdir_p(jd .. "/tmp"))
  local argv = { odp, "run", script, "--device", device or twin, "--model", mnist, "--build-dir", build_dir,
    "--runs-dir", jd .. "/runs", "-q", "--format", "json" }
  table.move(extra or {}, 1, #(extra or {}), #argv + 1, argv)
  local job = bg.start(argv, jd, { TMPDIR = jd .. "/tmp" })
  job.runs, job.tmp, job.build_dir = jd .. "/runs", jd .. "/tmp", build_dir
  return job
end

-- How an interrupted twin run ended: the signal's status, one line naming the step, the record, no debris.
local function check_interrupted(job, sig, step, what)
  local status = job:status(60)
  local err = job:stderr()
  T.eq(status, EXIT[sig], what .. ": exit status; stderr:\n" .. err)
  T.eq(select(2, err:gsub("\n", "")), 1, what .. ": one line on stderr:\n" .. err)
  T.match(err, "^odp: ECANCELED: " .. step .. ": ", what .. ": the line names the step")
  local rd = run_dir(job.runs)
  local rec = assert(json.decode(T.read(rd .. "/result.json")), what .. ": the record")
  T.eq({ rec.ok, rec.error.code, rec.error.exit }, { false, "ECANCELED", EXIT[sig] }, what .. ": the record's error")
  T.eq(rec.steps[#rec.steps].name .. ":" .. rec.steps[#rec.steps].status, step .. ":failed", what .. ": its last step")
  T.eq(sys.readdir(job.tmp), {}, what .. ": nothing left in TMPDIR")
  for _, f in ipairs(sys.readdir(rd)) do T.ok(not f:find("%.tmp%-"), what .. ": a command's temporary dir left: " .. f) end
  -- the twin's watcher stops QEMU as odp's lifeline closes: within a second (docs/signals.md)
  local left
  pcall(wait_until, "the run's processes to end", 10, function()
    left = left_under(rd) .. left_under(job.build_dir)
    return left == ""
  end)
  T.eq(left, "", what .. ": nothing of the run still running")
  T.ok(not sys.stat(rd .. "/twin/pid"), what .. ": the twin was stopped")
  return rec, err
end

-- The n-th distinct temporary file a compiler of the build made (in the build's own TMPDIR, the run dir's
-- build.log.tmp-PID): true once it has appeared.
local function nth_temp_file(job, n)
  local seen, count = {}, 0
  return function()
    local rd = run_dir(job.runs)
    for _, d in ipairs(rd and sys.readdir(rd) or {}) do
      if d:find("^build%.log%.tmp%-") then
        for _, f in ipairs(sys.readdir(rd .. "/" .. d) or {}) do
          if not seen[f] then seen[f], count = true, count + 1 end
        end
      end
    end
    return count >= n
  end
end

-- Through configure and make: a signal as the 1st, 4th, 8th and 14th temporary file of a real compiler
-- appears (cmake's compiler checks, then make's compiles and links), a fresh build directory each.
for i, point in ipairs({ { 1, "INT" }, { 4, "TERM" }, { 8, "HUP" }, { 14, "INT" } }) do
  local n, sig = point[1], point[2]
  T.test(("SIG%s while the twin firmware builds (compiler temp file %d): exit %d, build named, no cc* left")
    :format(sig, n, EXIT[sig]), function()
    local job = twin_job("build" .. i, dir .. "/b-build" .. i, { "--inferences", "3" })
    wait_until("compiler temporary file " .. n, 120, nth_temp_file(job, n))
    job:kill(sig)
    local rec, err = check_interrupted(job, sig, "build", "build " .. n)
    T.match(err, "^odp: ECANCELED: build: c?make interrupted; it and its process group were stopped\n$")
    T.match(T.read(run_dir(job.runs) .. "/build.log"), "\n# exit [^\n]*%(interrupted%)\n$", "the build log says so")
    T.eq(rec.build.log_tail, nil, "no build failure's log tail: nothing failed")
  end)
end

-- One firmware for the steps after the build (they run --steps flash,run on it), printing 20000 Inference: lines.
local built = dir .. "/b-flash"
T.test("the firmware for the flash and capture cases builds", function()
  local job = twin_job("prebuild", built, { "--steps", "build", "--inferences", "20000" })
  T.eq(job:status(300), 0, job:stderr())
end)

-- The flash log's text, or "".
local function flash_log(job)
  local rd = run_dir(job.runs)
  return rd and sys.read_file(rd .. "/flash.log") or ""
end

-- SETOOLS' app-gen-toc is a moment's work on the twin (the real one takes seconds): a stand-in that waits 3 s
-- first, so that the signal comes while it runs.
local slow_setools = T.derived_device(twin, dir .. "/twin_slow_toc.lua", "twin_slow_toc", ([[
d.commands = { gen_toc = { argv = { %q, "-f", "<cfg>" }, cwd = "<setools_dir>" } }]]):format(dir .. "/slow/app-gen-toc"))
assert(sys.mkdir_p(dir .. "/slow"))
T.write(dir .. "/slow/app-gen-toc", ("#!/bin/sh\nsleep 3\nexec %s \"$@\"\n"):format(q(root .. "/tests/twin/setools/app-gen-toc")))
sh("chmod 755 " .. q(dir .. "/slow/app-gen-toc"))

for i, point in ipairs({ { "app-gen-toc", 1, "TERM", slow_setools }, { "app-write-mram", 1, "INT", twin },
  { "app-write-mram", 2, "HUP", twin } }) do
  local tool, nth, sig, device = point[1], point[2], point[3], point[4]
  T.test(("SIG%s while SETOOLS' %s (%d) runs: ECANCELED naming it and the flash step, exit %d, not 'EIO ... failed (exit 0)'")
    :format(sig, tool, nth, EXIT[sig]), function()
    local job = twin_job("flash" .. i, built, { "--inferences", "20000", "--steps", "flash,run" }, device)
    wait_until(tool .. " in the flash log", 120, function()
      local _, count = flash_log(job):gsub("/" .. tool:gsub("%-", "%%-") .. " ", "")
      return count >= nth
    end)
    job:kill(sig)
    local _, err = check_interrupted(job, sig, "flash", tool)
    T.match(err, "^odp: ECANCELED: flash: " .. tool:gsub("%-", "%%-") .. " interrupted; it and its process group were stopped\n$")
  end)
end

T.test("SIGINT while odp waits for the flasher's XMODEM prompt: ECANCELED naming the flash step, exit 130", function()
  local job = twin_job("xmodem", built, { "--inferences", "20000", "--steps", "flash,run" })
  -- odp opens the flasher's RTT log as it starts waiting for its prompt; the twin's QEMU is stopped then (the
  -- whole transfer takes some 0.3 s on the twin), so that the signal comes while odp waits on the flasher
  local rd = wait_until("the flasher's RTT log", 120, function()
    local d = run_dir(job.runs)
    return d and sys.stat(d .. "/flasher_rtt.log") and d
  end)
  local qemu = (sys.read_file(rd .. "/twin/pid") or ""):match("%d+")
  if qemu then sh("kill -STOP " .. qemu) end
  job:kill("INT")
  sys.sleep(0.2)
  if qemu then sh("kill -CONT " .. qemu) end
  local rec, err = check_interrupted(job, "INT", "flash", "xmodem")
  T.match(err, "^odp: ECANCELED: flash: ")
  T.eq(rec.flash.received, nil, "the flasher confirmed nothing")
end)

T.test("SIGTERM while the Inference: lines come: ECANCELED naming the run step, exit 143", function()
  local job = twin_job("capture", built, { "--inferences", "20000", "--steps", "flash,run" })
  wait_until("the first Inference: line", 180, function()
    local rd = run_dir(job.runs)
    return (rd and sys.read_file(rd .. "/rtt.log") or ""):find("Inference:", 1, true)
  end)
  job:kill("TERM")
  check_interrupted(job, "TERM", "run", "capture")
end)

T.done()
