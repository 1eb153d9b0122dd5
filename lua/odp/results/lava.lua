--- `--report lava`: result records as LAVA test results (docs/lava/README.md). One test set per board and
-- model (`lava-test-set start|stop`), one test case per metric (`lava-test-case ID --result pass
-- --measurement V --units U`); a failed run is one case `--result fail`, its reason logged on the line before.
-- Inside a LAVA test shell the genuine lava-test-case and lava-test-set scripts are on PATH and are called;
-- elsewhere (a docker test action) odp prints the <LAVA_SIGNAL_...> lines LAVA parses from the job log, the
-- lines those scripts print.
local proc = require("odp.proc")
local report = require("odp.results.report")
local schema = require("odp.results.schema")
local which = require("odp.target.host").which

local M = {}

--- A case or set ID LAVA accepts: [A-Za-z0-9._-] only (anything else becomes '_'), never empty.
function M.id(s)
  s = tostring(s):gsub("[^A-Za-z0-9._-]", "_")
  return s ~= "" and s or "_"
end

--- A measurement as lava-test-case takes it: a plain decimal, no exponent (LAVA stores a Decimal).
function M.measurement(v)
  if math.type(v) == "integer" then return tostring(v) end
  local s = ("%.9f"):format(v):gsub("0+$", ""):gsub("%.$", "")
  return s
end

--- The LAVA calls for records, in order: a list of {"lava-test-set", "start", NAME} | {"lava-test-set",
-- "stop"} | {"lava-test-case", ID, "--result", R, ["--measurement", V, "--units", U]}, each call with
-- `log` = a line to print before it (the reason of a failure). IDs are unique within the list: a repeated
-- one gets "-2", "-3", ... Records of one board and model, wherever they sit in the list, share one set.
function M.calls(records)
  local sets, order = {}, {}
  for _, r in ipairs(records) do
    r = schema.read(r) or {}
    local l = report.labels(r)
    local name = M.id(l.board .. "." .. l.model)
    if not sets[name] then sets[name] = {} order[#order + 1] = name end
    table.insert(sets[name], { r = r, l = l })
  end
  local calls, used = {}, {}
  local function unique(id)
    local n, try = 1, id
    while used[try] do n = n + 1 try = id .. "-" .. n end
    used[try] = true
    return try
  end
  for _, name in ipairs(order) do
    calls[#calls + 1] = { "lava-test-set", "start", name }
    for _, e in ipairs(sets[name]) do
      local prefix = name .. (e.l.point ~= "" and ("." .. M.id(e.l.point)) or "")
      if e.r.ok then
        for _, m in ipairs(schema.metrics(e.r)) do
          calls[#calls + 1] = { "lava-test-case", unique(prefix .. "." .. m.key), "--result", "pass",
            "--measurement", M.measurement(m.value), "--units", m.units }
        end
      else
        local id = unique(prefix .. ".run")
        local err = e.r.error or {}
        calls[#calls + 1] = { "lava-test-case", id, "--result", "fail",
          log = ("odp: %s failed: %s: %s"):format(id, err.code or "EFAIL",
            ((err.message or "the run failed"):gsub("[\r\n]+", " "))) }
      end
    end
    calls[#calls + 1] = { "lava-test-set", "stop" }
  end
  return calls
end

--- The line the lava-test-case or lava-test-set script prints for a call (lava_test_shell's `signal`), its
-- fields in the script's order.
function M.signal(call)
  if call[1] == "lava-test-set" then
    return call[2] == "start" and ("<LAVA_SIGNAL_TESTSET START %s>"):format(call[3]) or "<LAVA_SIGNAL_TESTSET STOP>"
  end
  local args = {}
  for i = 3, #call, 2 do args[call[i]] = call[i + 1] end
  local parts = { "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=" .. call[2], "RESULT=" .. args["--result"] }
  if args["--units"] then parts[#parts + 1] = "UNITS=" .. args["--units"] end
  if args["--measurement"] then parts[#parts + 1] = "MEASUREMENT=" .. args["--measurement"] end
  return table.concat(parts, " ") .. ">"
end

--- Reports records to LAVA (on stdout, the job's log). Every call is made even when one fails; returns
-- true or nil, "EIO: lava-test-case ID failed: ...", "EIO" naming the first that failed.
function M.deliver(records)
  local scripts = { ["lava-test-case"] = which("lava-test-case"), ["lava-test-set"] = which("lava-test-set") }
  if not (scripts["lava-test-case"] and scripts["lava-test-set"]) then scripts = nil end
  local failed
  for _, call in ipairs(M.calls(records)) do
    if call.log then io.stdout:write(call.log, "\n") end
    if scripts then
      io.stdout:flush()
      local r = proc.run { argv = { scripts[call[1]], table.unpack(call, 2) }, timeout = 30, capture_limit = 64 * 1024 }
      io.stdout:write(r.stdout or "")
      if not r.ok and not failed then
        local why = ((r.stderr or "") .. (r.stdout or "")):gsub("%s+$", ""):match("[^\n]*$")
        failed = ("EIO: %s %s failed (%s)%s"):format(call[1], call[2],
          r.timed_out and "timed out" or ("exit status " .. tostring(r.status)), why ~= "" and (": " .. why) or "")
      end
    else
      io.stdout:write(M.signal(call), "\n")
    end
  end
  io.stdout:flush()
  if failed then return nil, failed, "EIO" end
  return true
end

return M
