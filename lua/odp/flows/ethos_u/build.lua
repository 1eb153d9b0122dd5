--- The Ethos-U flow, part 3: the firmware build (cmake + make) with its stale-build guard, and the inputs
-- (--inputs) it embeds. Takes the plan (odp.flows.ethos_u.plan).
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local result = require("odp.results.result")
local tensors = require("odp.results.tensors")
local sys = require("odp.sys")
local proc = require("odp.proc")
local host = require("odp.target.host")

local M = {}

local STAMP = "odp-build-inputs.txt"

--- The inputs' files for this run (--inputs: the given ones, or random ones written into run_dir/inputs) and
-- their bytes concatenated in the method's input order (what the firmware embeds) -> files, bytes; nil
-- without --inputs. validate checked them against the .pte's signature.
function M.input_files(p, run_dir)
  local io = p.io
  if not (io and io.inputs) then return nil end
  local files = tensors.write_inputs(io.sig, io.inputs, run_dir .. "/inputs")
  local parts = {}
  for i, f in ipairs(files) do
    parts[i] = sys.read_file(f)
    if not parts[i] then errors.fail("ENOTFOUND", ("--inputs: cannot read %s"):format(f)) end
  end
  return files, table.concat(parts)
end

--- The inputs the build depends on, as sorted "key=value" lines (hashed by the stale-build guard).
-- inputs_bytes: the --inputs the firmware embeds (their sha256 is an input: other bytes rebuild it).
function M.build_inputs(p, inputs_bytes)
  local lines = {}
  local function add(k, v) lines[#lines + 1] = k .. "=" .. tostring(v) end
  add("device", p.device.name)
  add("source_dir", p.source_dir)
  add("model.sha256", (sys.sha256_file(p.model)))
  if inputs_bytes then add("inputs.sha256", sys.sha256(inputs_bytes)) end
  for _, d in ipairs(p.cmake_defs) do
    local k, v = d:match("^%-D([^=]+)=(.*)$")
    add("cmake." .. (k or d), v or "")
  end
  add("configure", table.concat(p.configure.argv, " "))
  if p.vars.toolchain_file and sys.stat(p.vars.toolchain_file) then
    add("toolchain.sha256", (sys.sha256_file(p.vars.toolchain_file)))
  end
  for i, c in ipairs(p.state) do
    local r = proc.run { argv = c.argv, timeout = 60, capture_limit = 64 * 1024 * 1024 }
    local text = r and (("%s\nstatus %s\n"):format(r.stdout, tostring(r.status))) or "not run"
    add(("state.%d"):format(i), table.concat(c.argv, " ") .. " -> sha256:" .. sys.sha256(text))
  end
  return table.concat(lines, "\n") .. "\n"
end

local function rm_rf(dir)
  local r = proc.run { argv = { "rm", "-rf", "--", dir }, timeout = 120 }
  if not r or not r.ok then errors.fail("EIO", ("could not remove %s"):format(dir)) end
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

-- A failed configure or make: the log's last 30 lines shown and kept in the record, then the failure.
local function failed(ui, rec, log, r, what)
  local tail = host.tail_lines(log, 30)
  ui:info("last 30 lines of %s:\n%s", log, tail)
  rec.build.log_tail = tail
  errors.fail("EBUILD", ("build failed%s (%s); the last 30 lines are above, all of it in %s"):format(what,
    r.timed_out and "timed out" or ("exit " .. tostring(r.status)), log))
end

--- The build step: the inputs embedded (--inputs), the stale-build guard (inputs hashed into the build
-- directory: changed -> wiped and reconfigured), make; rec.build, rec.images, rec.inputs. Returns "unchanged"
-- when an incremental build changed no image (the step is then recorded as skipped).
function M.step(ctx, p, rec, run_dir)
  local ui, o = ctx.ui, ctx.opts
  local log = run_dir .. "/build.log"
  rec.artifacts.build_log = log
  local files, inputs_bytes = M.input_files(p, run_dir)
  if files then
    rec.inputs = json.array({})
    for i, f in ipairs(files) do rec.inputs[i] = tensors.file_entry(f, p.io.sig.inputs[i], run_dir) end
  end
  local inputs = M.build_inputs(p, inputs_bytes)
  local hash = sys.sha256(inputs)
  local stamp_path = p.build_dir .. "/" .. STAMP
  local old = sys.read_file(stamp_path)
  local st = sys.stat(p.build_dir)
  local reconfigure, reason = false, nil
  if not st then
    reconfigure, reason = true, "new build directory"
  elseif not old then
    local has_cache = sys.stat(p.build_dir .. "/CMakeCache.txt")
    local entries = sys.readdir(p.build_dir) or {}
    if not has_cache and #entries > 0 then
      errors.fail("EUSAGE", ("build directory %s exists but is neither empty nor a cmake build: refusing to wipe it " ..
        "(pass --build-dir)"):format(p.build_dir))
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
    errors.check(sys.mkdir_p(p.build_dir))
  else
    ui:info("build: inputs unchanged (%s): incremental", hash:sub(1, 12))
  end
  -- the embedded inputs: written only when their bytes differ (an unchanged file relinks nothing)
  if inputs_bytes and sys.read_file(p.inputs_blob) ~= inputs_bytes then
    errors.check(sys.write_file(p.inputs_blob, inputs_bytes))
  end
  if reconfigure then
    local r = host.run_logged(p.configure, log, o.build_timeout)
    if not r.ok then failed(ui, rec, log, r, " at configure") end
    errors.check(sys.write_file(stamp_path, "sha256 " .. hash .. "\n" .. inputs))
  end
  local bar = ui:progress("build", 100)
  local r = host.run_logged(p.build, log, o.build_timeout, function(line)
    local pct = line:match("^%[%s*(%d+)%%%]")
    if pct then bar:update(tonumber(pct), line:match("%]%s*(.-)%s*$"):sub(1, 40)) end
  end)
  bar:finish()
  rec.build.wall_s = sys.now() - t0
  if not r.ok then failed(ui, rec, log, r, "") end
  for _, out in ipairs({ p.mram, p.ext_flash }) do
    if not sys.stat(out) then
      errors.fail("EUSAGE", ("the build succeeded but %s is missing: %s's build.outputs name a file its build does " ..
        "not make"):format(out, p.device.name))
    end
  end
  rec.images = { mram = result.file_info(p.mram), ext_flash = result.file_info(p.ext_flash) }
  ui:info("build: done in %.1f s", rec.build.wall_s)
  if before and before == M.images_sha256(p) then return "unchanged" end
end

--- The build's images, hashed together (nil when one is missing).
function M.images_sha256(p)
  local a, b = sys.stat(p.mram) and sys.sha256_file(p.mram), sys.stat(p.ext_flash) and sys.sha256_file(p.ext_flash)
  return a and b and (a .. b) or nil
end

return M
