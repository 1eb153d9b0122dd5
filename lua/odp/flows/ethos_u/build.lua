--- The Ethos-U flow, part 3: the firmware build (cmake + make) with its stale-build guard.
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local proc = require("odp.proc")
local shell = require("odp.target.shell")
local M = require("odp.flows.ethos_u.plan")
local fill_argv, read_file = M.fill_argv, M.read_file

------------------------------------------------------------------------------------------------ build

-- The inputs the build depends on, as sorted "key=value" lines (hashed by the stale-build guard).
function M.build_inputs(ctx, p)
  local lines = {}
  local function add(k, v) lines[#lines + 1] = k .. "=" .. tostring(v) end
  add("device", p.device.name)
  add("source_dir", p.source_dir)
  add("model.sha256", (sys.sha256_file(p.model)))
  for _, d in ipairs(p.cmake_defs) do
    local k, v = d:match("^%-D([^=]+)=(.*)$")
    add("cmake." .. (k or d), v or "")
  end
  add("configure", table.concat(p.configure.argv, " "))
  if p.vars.toolchain_file and sys.stat(p.vars.toolchain_file) then
    add("toolchain.sha256", (sys.sha256_file(p.vars.toolchain_file)))
  end
  for i, argv in ipairs(p.device.build.state or {}) do
    local filled = fill_argv(argv, p.vars, "device build.state", {})
    local r = proc.run { argv = filled, timeout = 60, capture_limit = 64 * 1024 * 1024 }
    local text = r and (("%s\nstatus %s\n"):format(r.stdout, tostring(r.status))) or "not run"
    add(("state.%d"):format(i), table.concat(filled, " ") .. " -> sha256:" .. sys.sha256(text))
  end
  return table.concat(lines, "\n") .. "\n"
end

local STAMP = "odp-build-inputs.txt"


local function rm_rf(dir)
  local r = proc.run { argv = { "rm", "-rf", "--", dir }, timeout = 120 }
  if not r or not r.ok then errors.fail("EIO", ("could not remove %s"):format(dir), 3) end
end

-- What changed between two input texts, for the log line.
local function diff_keys(old, new)
  local a, b, changed = {}, {}, {}
  for k, v in old:gmatch("([^=\n]+)=([^\n]*)") do a[k] = v end
  for k, v in new:gmatch("([^=\n]+)=([^\n]*)") do b[k] = v end
  for k, v in pairs(b) do if a[k] ~= v then changed[#changed + 1] = k end end
  for k in pairs(a) do if b[k] == nil then changed[#changed + 1] = k end end
  table.sort(changed)
  return changed
end

-- Runs one command, its output appended to the build log and fed to on_line; returns the proc result.
function M.run_logged(c, log_path, timeout, on_line)
  local logf = assert(io.open(log_path, "a"))
  logf:write("$ ", shell.command_line(c), "\n")
  logf:flush()
  local pending = ""
  local function feed(chunk)
    logf:write(chunk)
    pending = pending .. chunk
    while true do
      local line, rest = pending:match("^([^\n]*)\n(.*)$")
      if not line then break end
      pending = rest
      if on_line then on_line(line) end
    end
    if #pending > 65536 then pending = pending:sub(-4096) end
  end
  local r, err = proc.run { argv = c.argv, cwd = c.cwd, env = c.env, timeout = timeout, lifeline = c.lifeline,
    on_stdout = feed, on_stderr = feed, capture_limit = 1 }
  logf:write(("\n# exit %s%s\n"):format(r and tostring(r.status) or "?", r and r.timed_out and " (timed out)" or ""))
  logf:close()
  if not r then errors.fail("EIO", ("%s: %s"):format(c.name, err), 3) end
  return r
end

function M.tail_lines(path, n)
  local f = io.open(path, "rb")
  if not f then return "" end
  local all = {}
  for line in f:lines() do
    all[#all + 1] = line
    if #all > n * 4 then table.move(all, #all - n + 1, #all, 1) for i = n + 1, #all do all[i] = nil end end
  end
  f:close()
  return table.concat(all, "\n", math.max(1, #all - n + 1), #all)
end

function M.build_step(ctx, p, rec, run_dir)
  local ui, o = ctx.ui, ctx.opts
  local log = run_dir .. "/build.log"
  rec.artifacts.build_log = log
  local inputs = M.build_inputs(ctx, p)
  local hash = sys.sha256(inputs)
  local stamp_path = p.build_dir .. "/" .. STAMP
  local old = read_file(stamp_path)
  local st = sys.stat(p.build_dir)
  local reconfigure, reason = false, nil
  if not st then
    reconfigure, reason = true, "new build directory"
  elseif not old then
    local has_cache = sys.stat(p.build_dir .. "/CMakeCache.txt")
    local entries = sys.readdir(p.build_dir) or {}
    if not has_cache and #entries > 0 then
      errors.fail("EUSAGE", ("build directory %s exists but is neither empty nor a cmake build: refusing to wipe it " ..
        "(pass --build-dir)"):format(p.build_dir), 2)
    end
    reconfigure, reason = true, has_cache and "a build odp did not configure (no input record): wiped" or "empty build directory"
  elseif old:match("^sha256 (%x+)") ~= hash then
    local changed = diff_keys(old:gsub("^[^\n]*\n", ""), inputs)
    reconfigure, reason = true, "inputs changed: " .. table.concat(changed, ", ")
  end
  rec.build = { dir = p.build_dir, inputs_sha256 = hash, rebuilt = reconfigure, reason = reason or "up to date" }
  local t0 = sys.now()
  local before = not reconfigure and M.images_sha256(p)
  if reconfigure then
    ui:info("build: %s -> wiping %s and reconfiguring", reason, p.build_dir)
    if st then rm_rf(p.build_dir) end
    assert(sys.mkdir_p(p.build_dir))
    local r = M.run_logged(p.configure, log, o.build_timeout)
    if not r.ok then
      local tail = M.tail_lines(log, 30)
      ui:info("last 30 lines of %s:\n%s", log, tail)
      rec.build.log_tail = tail
      errors.fail("EIO", ("build failed at configure (%s); the last 30 lines are above, all of it in %s"):format(r.timed_out and "timed out" or
        ("exit " .. tostring(r.status)), log), 1)
    end
    assert(sys.write_file(stamp_path, "sha256 " .. hash .. "\n" .. inputs))
  else
    ui:info("build: inputs unchanged (%s): incremental", hash:sub(1, 12))
  end
  local bar = ui:progress("build", 100)
  local r = M.run_logged(p.build, log, o.build_timeout, function(line)
    local pct = line:match("^%[%s*(%d+)%%%]")
    if pct then bar:update(tonumber(pct), line:match("%]%s*(.-)%s*$"):sub(1, 40)) end
  end)
  bar:finish()
  rec.build.wall_s = sys.now() - t0
  if not r.ok then
    local tail = M.tail_lines(log, 30)
    ui:info("last 30 lines of %s:\n%s", log, tail)
    rec.build.log_tail = tail
    errors.fail("EIO", ("build failed (%s); the last 30 lines are above, all of it in %s"):format(r.timed_out and
      "timed out" or ("exit " .. tostring(r.status)), log), 1)
  end
  for _, out in ipairs({ p.mram, p.ext_flash }) do
    if not sys.stat(out) then errors.fail("ENOTFOUND", ("the build succeeded but %s is missing"):format(out), 1) end
  end
  rec.images = { mram = result.file_info(p.mram), ext_flash = result.file_info(p.ext_flash) }
  ui:info("build: done in %.1f s", rec.build.wall_s)
  -- the step runner records an incremental build that changed no image as skipped
  if before and before == M.images_sha256(p) then return "unchanged" end
end

--- The build's images, hashed together (nil when one is missing).
function M.images_sha256(p)
  local a, b = sys.stat(p.mram) and sys.sha256_file(p.mram), sys.stat(p.ext_flash) and sys.sha256_file(p.ext_flash)
  return a and b and (a .. b) or nil
end

return M
