--- Parser for the report of GNU `time -v` (Debian's /usr/bin/time) and toybox `time -v` (Android), found
-- anywhere in a text (a transcript mixing the timed program's output with the report is fine). Lines may
-- be indented with tabs or spaces and end in CRLF. Never raises on content; linear time.
--
-- Peak memory is `max_rss_kb` (KiB, as wait4 reports it). Status: GNU time prints "Exit status: 0" even for
-- a child killed by a signal, so prefer the status odp gets from wait4; `terminated_by_signal` comes from
-- GNU time's "Command terminated by signal N" line.
local M = {}

local function num(s) return tonumber(s) end
local function int(s) return math.tointeger(tonumber(s)) end
local function pct(s) return tonumber((s:match("^([%d.]+)%%"))) end -- "?%" (no CPU time) -> nil

-- "h:mm:ss" when the run took an hour or more, else "m:ss.cc"; toybox prints plain seconds.
local function elapsed(s)
  local h, m, sec = s:match("^(%d+):(%d+):(%d+%.?%d*)$")
  if h then return tonumber(h) * 3600 + tonumber(m) * 60 + tonumber(sec) end
  local mm, ss = s:match("^(%d+):(%d+%.?%d*)$")
  if mm then return tonumber(mm) * 60 + tonumber(ss) end
  return tonumber(s)
end

--- label (as printed, before ": ") -> {key, converter}. Users may add labels of other `time` flavours.
M.labels = {
  -- GNU time 1.9 -v
  ["Command being timed"] = { "command", function(s) return (s:match('^"(.*)"$') or s) end },
  ["User time (seconds)"] = { "user_s", num },
  ["System time (seconds)"] = { "system_s", num },
  ["Percent of CPU this job got"] = { "cpu_percent", pct },
  ["Elapsed (wall clock) time (h:mm:ss or m:ss)"] = { "elapsed_s", elapsed },
  ["Average shared text size (kbytes)"] = { "avg_shared_text_kb", int },
  ["Average unshared data size (kbytes)"] = { "avg_unshared_data_kb", int },
  ["Average stack size (kbytes)"] = { "avg_stack_kb", int },
  ["Average total size (kbytes)"] = { "avg_total_kb", int },
  ["Maximum resident set size (kbytes)"] = { "max_rss_kb", int },
  ["Average resident set size (kbytes)"] = { "avg_rss_kb", int },
  ["Major (requiring I/O) page faults"] = { "major_faults", int },
  ["Minor (reclaiming a frame) page faults"] = { "minor_faults", int },
  ["Voluntary context switches"] = { "voluntary_switches", int },
  ["Involuntary context switches"] = { "involuntary_switches", int },
  ["Swaps"] = { "swaps", int },
  ["File system inputs"] = { "fs_inputs", int },
  ["File system outputs"] = { "fs_outputs", int },
  ["Socket messages sent"] = { "socket_msgs_sent", int },
  ["Socket messages received"] = { "socket_msgs_received", int },
  ["Signals delivered"] = { "signals_delivered", int },
  ["Page size (bytes)"] = { "page_size_bytes", int },
  ["Exit status"] = { "exit_status", int },
  -- toybox time -v (toys/posix/time.c)
  ["Real time (s)"] = { "elapsed_s", num },
  ["System time (s)"] = { "system_s", num },
  ["User time (s)"] = { "user_s", num },
  ["Max RSS (KiB)"] = { "max_rss_kb", int },
  ["Major faults"] = { "major_faults", int },
  ["Minor faults"] = { "minor_faults", int },
}

local TOYBOX_ONLY = { ["Real time (s)"] = true, ["Max RSS (KiB)"] = true, ["Major faults"] = true }
local MAX_LINE = 4096 -- report lines are short; longer lines are other output

---@class odp.parse.GnuTime
---@field format string            "gnu" | "toybox"
---@field command string?          the timed command line (GNU)
---@field user_s number?
---@field system_s number?
---@field cpu_percent number?      nil when GNU time printed "?%"
---@field elapsed_s number?        wall time, seconds (GNU resolves 0.01 s)
---@field max_rss_kb integer?      peak resident set size, KiB
---@field avg_rss_kb integer?
---@field major_faults integer?
---@field minor_faults integer?
---@field voluntary_switches integer?
---@field involuntary_switches integer?
---@field swaps integer?
---@field fs_inputs integer?
---@field fs_outputs integer?
---@field socket_msgs_sent integer?
---@field socket_msgs_received integer?
---@field signals_delivered integer?
---@field page_size_bytes integer?
---@field exit_status integer?     as GNU time printed it (0 even after a signal)
---@field terminated_by_signal integer?  from "Command terminated by signal N"
---@field nonzero_status integer?  from "Command exited with non-zero status N"

--- Finds and parses a `time -v` report in text. When the text holds several reports, later fields win.
---@param text string?
---@return odp.parse.GnuTime|nil  nil when no report line was found
function M.parse(text)
  if text == nil then return nil end
  if type(text) ~= "string" then
    error("bad argument #1 to 'parse' (string expected, got " .. type(text) .. ")", 2)
  end
  local r, found, toybox = {}, false, false
  local labels = M.labels
  local pos, n = 1, #text
  local find, sub, match = string.find, string.sub, string.match
  while pos <= n do
    local e = find(text, "\n", pos, true) or n + 1
    if e - pos <= MAX_LINE then
      local line = sub(text, pos, e - 1)
      local label, value = match(line, "^%s*(%a.-):%s+(.-)%s*$") -- the label is up to the first ": "
      local spec = label and labels[label]
      if spec then
        local v = spec[2](value)
        if v ~= nil then
          r[spec[1]] = v
          found = true
          if TOYBOX_ONLY[label] then toybox = true end
        end
      else
        local sig = match(line, "^%s*Command terminated by signal (%d+)")
        if sig then r.terminated_by_signal = int(sig); found = true end
        local st = match(line, "^%s*Command exited with non%-zero status (%d+)")
        if st then r.nonzero_status = int(st); found = true end
      end
    end
    pos = e + 1
  end
  if not found then return nil end
  r.format = toybox and "toybox" or "gnu"
  return r
end

return M
