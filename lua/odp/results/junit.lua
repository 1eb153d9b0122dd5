--- `--report junit FILE`: JUnit XML, the test report Jenkins (junit step) and GitLab (artifacts:reports:junit)
-- read (docs/ci.md). One testsuite per board and model, one testcase per board x point x metric: a
-- measured metric passes (its value and unit in system-out), a failed run is one testcase with a <failure>.
-- `odp compare --fail-if-slower PCT --report junit FILE` writes one testcase per compared metric, the latency's
-- failing when the gate does. The file is written whole or not at all (sys.write_file).
local report = require("odp.results.report")
local schema = require("odp.results.schema")
local sys = require("odp.sys")
local compare = require("odp.results.compare")

local M = {}

local ESCAPES = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;" }

--- Text as XML character data or an attribute value: markup escaped, and every character XML 1.0 cannot
-- hold (C0 controls but tab, newline, carriage return; invalid UTF-8) replaced by '?'. Device output is
-- untrusted and lands in messages.
function M.escape(s)
  s = tostring(s)
  local out, i = {}, 1
  while i <= #s do
    local ok, cp = pcall(utf8.codepoint, s, i)
    local len = ok and #utf8.char(cp) or 1
    local ch = s:sub(i, i + len - 1)
    if not ok or (cp < 32 and cp ~= 9 and cp ~= 10 and cp ~= 13) or cp == 0xFFFE or cp == 0xFFFF then
      ch = "?"
    end
    out[#out + 1] = ESCAPES[ch] or ch
    i = i + len
  end
  return table.concat(out)
end

local function attrs(t, keys)
  local parts = {}
  for _, k in ipairs(keys) do
    if t[k] ~= nil then parts[#parts + 1] = ('%s="%s"'):format(k, M.escape(t[k])) end
  end
  return table.concat(parts, " ")
end

--- XML text of suites: a list of {name=, timestamp=, properties={{name, value}...}, cases={{classname=,
-- name=, time=, out=, failure={message=, type=, text=}}...}, time=}. Counts are made here; a suite's time,
-- when not given, is the sum of its cases'.
function M.xml(suites)
  local out, tests, failures = {}, 0, 0
  for _, s in ipairs(suites) do
    s.tests, s.failures, s.errors, s.skipped = #s.cases, 0, 0, 0
    local sum = 0
    for _, c in ipairs(s.cases) do
      if c.failure then s.failures = s.failures + 1 end
      sum = sum + (c.time or 0)
    end
    s.time = s.time or sum
    tests, failures = tests + s.tests, failures + s.failures
  end
  out[1] = '<?xml version="1.0" encoding="UTF-8"?>'
  out[2] = ('<testsuites name="odp" tests="%d" failures="%d" errors="0">'):format(tests, failures)
  for _, s in ipairs(suites) do
    out[#out + 1] = "  <testsuite " .. attrs({ name = s.name, tests = s.tests, failures = s.failures, errors = 0,
      skipped = 0, time = ("%.3f"):format(s.time), timestamp = s.timestamp },
      { "name", "tests", "failures", "errors", "skipped", "time", "timestamp" }) .. ">"
    if s.properties and #s.properties > 0 then
      out[#out + 1] = "    <properties>"
      for _, p in ipairs(s.properties) do
        out[#out + 1] = "      <property " .. attrs({ name = p[1], value = p[2] }, { "name", "value" }) .. "/>"
      end
      out[#out + 1] = "    </properties>"
    end
    for _, c in ipairs(s.cases) do
      out[#out + 1] = "    <testcase " .. attrs({ classname = c.classname, name = c.name,
        time = ("%.3f"):format(c.time or 0) }, { "classname", "name", "time" }) .. ">"
      if c.failure then
        out[#out + 1] = "      <failure " .. attrs(c.failure, { "message", "type" }) .. ">" ..
          M.escape(c.failure.text or c.failure.message) .. "</failure>"
      end
      if c.out then out[#out + 1] = "      <system-out>" .. M.escape(c.out) .. "</system-out>" end
      out[#out + 1] = "    </testcase>"
    end
    out[#out + 1] = "  </testsuite>"
  end
  out[#out + 1] = "</testsuites>"
  return table.concat(out, "\n") .. "\n"
end

--- The suites of result records: one per board and model, in the order they first appear.
function M.suites(records)
  local by, order = {}, {}
  for _, r in ipairs(records) do
    r = schema.read(r) or {}
    local l = report.labels(r)
    local key = l.board .. "." .. l.model
    local s = by[key]
    if not s then
      s = { name = key, timestamp = r.started_at and r.started_at:gsub("Z$", ""), cases = {}, properties = {},
        time = 0 }
      for _, k in ipairs({ "device", "target", "lava_job_id" }) do
        if r[k] ~= nil then s.properties[#s.properties + 1] = { k, tostring(r[k]) } end
      end
      by[key] = s
      order[#order + 1] = s
    end
    local classname = "odp." .. key
    local point = l.point ~= "" and l.point or "run"
    -- the run's time (its steps) is the suite's; a metric gate takes no time of its own
    for _, st in ipairs(r.steps or {}) do s.time = s.time + (st.ms or 0) / 1000 end
    if r.ok then
      for _, m in ipairs(schema.metrics(r)) do
        s.cases[#s.cases + 1] = { classname = classname, name = point .. "." .. m.key,
          out = ("%s = %s %s"):format(m.key, report.number(m.value), m.units) }
      end
    else
      local err = r.error or {}
      s.cases[#s.cases + 1] = { classname = classname, name = point .. ".run",
        failure = { type = err.code or "EFAIL", message = err.message or "the run failed" } }
    end
  end
  return order
end

--- The suites of `odp compare` results (odp.results.compare): comparisons is a list of {res=, board=} (board:
-- the board they compare, with --by board), one suite each ("compare" or "compare.<board>"), one testcase per
-- compared metric with B/A and its CI in system-out. With fail_if_slower (a percentage), the latency row
-- (the first) fails when compare.gate does, as `odp compare --fail-if-slower` exits 1.
function M.compare_suites(comparisons, fail_if_slower)
  local suites = {}
  for _, cmp in ipairs(comparisons) do
    local res = cmp.res
    local s = { name = "compare" .. (cmp.board and ("." .. cmp.board) or ""), cases = {},
      properties = { { "a", tostring(res.a.path) }, { "b", tostring(res.b.path) } } }
    for i, r in ipairs(res.rows) do
      local c = { classname = "odp." .. s.name, name = r.metric,
        out = ("B/A %s, 95%% CI [%s, %s], verdict %s"):format(r.ratio and ("%.4f"):format(r.ratio) or "-",
          r.ci95 and ("%.4f"):format(r.ci95[1]) or "-", r.ci95 and ("%.4f"):format(r.ci95[2]) or "-", r.verdict) }
      local gate = i == 1 and compare.gate(res, fail_if_slower)
      if gate and gate.failed then c.failure = { type = "slower", message = (gate.text:gsub("^FAIL: ", "")) } end
      s.cases[#s.cases + 1] = c
    end
    suites[#suites + 1] = s
  end
  return suites
end

--- Writes records as JUnit XML to spec.file. -> true | nil, "EIO: ...", "EIO"
function M.deliver(records, spec)
  return sys.write_file(spec.file, M.xml(M.suites(records)))
end

return M
