--- Cram-style CLI transcripts, run by odp: `odp run tests/lib/cram.lua FILE.t`.
-- In FILE.t, unindented lines are comments; "  $ cmd" runs cmd with sh from the project top ($ODP is the
-- binary, $TMP a fresh directory); the indented lines after it are the expected stdout+stderr; a line
-- ending in " (re)" is a Lua pattern anchored at both ends, "..." alone matches any number of lines;
-- "  [N]" is the expected exit status (0 when absent). Each command is one test.
local T = require("t")
local proc = require("odp.proc")

local file = assert(arg[1], "usage: cram.lua FILE.t")
local tmp = T.tmpdir()
local cases, current = {}, nil
local lineno = 0
for line in io.lines(file) do
  lineno = lineno + 1
  local cmd = line:match("^  %$ (.*)$")
  if cmd then
    current = { cmd = cmd, expect = {}, status = 0, line = lineno }
    cases[#cases + 1] = current
  elseif current and line:match("^  %[(%d+)%]$") then
    current.status = tonumber(line:match("^  %[(%d+)%]$"))
  elseif current and line:match("^  ") then
    current.expect[#current.expect + 1] = line:sub(3)
  else
    current = nil
  end
end

local function line_matches(want, got)
  if got == nil then return false end
  local pat = want:match("^(.*) %(re%)$")
  if pat then return got:find("^" .. pat .. "$") ~= nil end
  return want == got
end

-- Matches expected lines (with "..." wildcards) against the output lines.
local function matches(expect, got, i, j)
  i, j = i or 1, j or 1
  if i > #expect then return j > #got end
  if expect[i] == "..." then
    for k = j, #got + 1 do if matches(expect, got, i + 1, k) then return true end end
    return false
  end
  return line_matches(expect[i], got[j]) and matches(expect, got, i + 1, j + 1)
end

for _, c in ipairs(cases) do
  T.test(("%s:%d: %s"):format(file, c.line, c.cmd), function()
    local r = assert(proc.run { "sh", "-c", c.cmd .. " 2>&1", cwd = os.getenv("ODP_TOP") or ".",
      env = { TMP = tmp }, timeout = 120 })
    local got = {}
    for l in (r.stdout .. (r.stdout:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do got[#got + 1] = l end
    if r.stdout == "" then got = {} end
    if not matches(c.expect, got) then
      error(("output differs\n--- expected\n%s\n--- got\n%s"):format(table.concat(c.expect, "\n"),
        table.concat(got, "\n")), 0)
    end
    T.eq(r.status, c.status, "exit status")
  end)
end
T.done()
