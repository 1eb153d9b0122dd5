--- The ExecuTorch flow, its failures: one line that says why a runner process failed, from its exit, its own
-- error lines and what odp knows of the model (a backend it delegates to, external weights, missing kernels).
local function oomkill() return require("odp.parse.oomkill") end -- lazy: start-up (only a runner killed by SIGKILL)
local pte = require("odp.parse.pte")
local sys = require("odp.sys")

local M = {}

-- The runner's own cause in a failure's line: its first error lines (the F line, the assert that ended it,
-- last), each bounded, so the line stays one line.
local MAX_CAUSES, MAX_CAUSE = 2, 160

local function cut(text, n) return #text > n and (text:sub(1, n - 3) .. "...") or text end

-- What the board logs of the kills for want of memory: the kernel's log, then lmkd's lines on Android, the newest
-- of each, cut on the board to what the parser reads (its end: the newest kills), then the kernel's uptime (the
-- kernel log's clock).
local KILL_LOG = "{ dmesg 2>&1 | tail -n 400; logcat -d -b events -b main -t 1000 2>/dev/null; } | cut -c1-4096 " ..
  "| tail -c %d; cat /proc/uptime; true"

-- Who sent the SIGKILL odp did not: the board's log for a kill of the runner (the kernel's OOM killer, a memory
-- cgroup's, Android's lmkd), else what could not be read and where to look.
local function killer(target, runner, r)
  local log, err = nil, "not asked"
  if target then
    log, err = target:exec({ "sh", "-c", KILL_LOG:format(oomkill().MAX_TEXT) }, { timeout = 30, rusage = false,
      capture_limit = oomkill().MAX_TEXT + 4096 })
  end
  local text = log and log.stdout or ""
  local uptime = tonumber(text:sub(-64):match("(%d+%.?%d*) %d+%.?%d*%s*$")) -- (its line is the last, < 64 bytes)
  -- a kernel kill only from the runner's own time (the log keeps older kills of the same program). The kernel log's
  -- clock stops while the board sleeps and uptime's does not: on a board that slept since boot a kill reads as
  -- older and the line says none was found (never a wrong killer)
  local since = uptime and uptime - (r.wall_s or 0) - 5
  local k = oomkill().find(oomkill().kills(text), runner, nil, since)
  if k then return oomkill().describe(k, runner) .. "; from the board's log" end
  local denied = text:match("dmesg: ([^\n]*)")
  local where = not log and ("the board's log could not be read (%s)"):format(tostring(err):sub(1, 80))
    or denied and ("the board's kernel log is not readable here (dmesg: %s)"):format(denied:sub(1, 80))
    or "the board's log names no kill of it"
  return ("not odp's timeout; %s: on a phone or a small board, likely the low-memory killer (see dmesg, or " ..
    "logcat -b events for lmkd's killinfo)"):format(where)
end

-- What odp knows that explains a runner's failure, from its lines and the model's .pte; nil when nothing.
local function explain(ctx, parsed, r, target)
  local o = ctx.opts
  local texts = {}
  for _, e in ipairs(parsed.errors or {}) do texts[#texts + 1] = e.text end
  local all = table.concat(texts, "\n")
  if o.llm then
    -- ExecuTorch's LLM runner (extension/llm/runner): it tries every tokenizer format it knows, printing each
    -- failure as an E line, and says "Loaded ... tokenizer" once one succeeds
    if r.signal_name == "KILL" or r.signal == 9 then return killer(target, o.runner, r) end
    local err = r.stderr or ""
    if err:find("tokenizer", 1, true) and not err:find("Loaded %S+ tokenizer") then
      return ("the tokenizer %s did not load in any format this runner knows (HF tokenizer.json, tiktoken, " ..
        "SentencePiece, llama2.c): is it this model's?"):format(o.tokenizer)
    end
    local method = all:match("Required metadata method (%S+) not found")
    if method then
      return ("the model has no %s method: it is not exported for ExecuTorch's LLM runner (export_llama writes " ..
        "the metadata methods)"):format(method)
    end
  end
  local info = pte.read(o.model) -- checked before the run (validate): read again only here
  local backends = {}
  for _, d in ipairs(info and pte.delegates(info) or {}) do
    if not backends[d.backend] then backends[#backends + 1], backends[d.backend] = d.backend, true end
  end
  local backend = all:match("Backend (%S+) is not registered")
  if backend and backends[backend] then
    return ("the model delegates to %s, which this runner does not register: use a runner built with that backend")
      :format(backend)
  elseif backend then
    return ("this runner does not register the backend %s"):format(backend)
  end
  if all:find("external_data_map is null", 1, true) and not o.data then
    local ptd = o.model:gsub("%.pte$", "") .. ".ptd"
    return ("the model keeps its weights in an external data file: pass --data %s"):format(sys.stat(ptd) and ptd
      or "FILE.ptd")
  end
  local missing = parsed.missing_operators or {}
  if #missing > 0 then
    return ("this runner has no kernel for %s%s: use a runner built with %s"):format(
      table.concat(missing, ", ", 1, math.min(#missing, 3)), #missing > 3 and (" and %d more"):format(#missing - 3) or "",
      #missing > 1 and "them" or "it")
  end
  for _, e in ipairs(parsed.errors or {}) do
    if e.status_name == "NotFound" and #backends > 0 then
      return ("the model delegates to %s: is it registered in this runner?"):format(table.concat(backends, ", "))
    end
  end
end


-- One line that says why a runner process failed, from its exit, its own error lines and odp's explanation.
--- -> the error code and the line, or nothing when the process succeeded.
--- target: the board, whose log says who killed a runner (nil: not asked).
function M.message(ctx, r, parsed, target)
  local causes, final = {}, nil
  for _, e in ipairs(parsed.errors or {}) do
    local text = e.text:gsub("%.$", "") .. (e.status_name and (" [" .. e.status_name .. "]") or "")
    if e.level == "F" then final = text break end
    if #causes < MAX_CAUSES then causes[#causes + 1] = cut(text, MAX_CAUSE) end
  end
  if final then causes[#causes + 1] = cut(final, MAX_CAUSE) end
  if #causes == 0 then
    -- no ExecuTorch error line: the first line of its own that is no info log line (the dynamic loader's
    -- "version `GLIBC_2.38' not found", the shell's "Exec format error", ...)
    for line in (r.stderr or ""):gmatch("[^\r\n]+") do
      -- (nor the LLM runner's tokenizer library's lines: it tries every format, failing loudly, before one loads)
      if not line:match("^[DIW] %d%d:%d%d:") and not line:match("^[DIWE] tokenizers:") and line:match("%S") then causes[1] = cut(line, MAX_CAUSE) break end
    end
  end
  local why = #causes > 0 and table.concat(causes, "; ") or nil
  local function with_why(head)
    local note = explain(ctx, parsed, r, target)
    return head .. (why and (": " .. why) or "") .. (note and (" (" .. note .. ")") or "")
  end
  if r.timed_out then
    return "ERUNNER", "runner did not finish before the timeout; killed with its process group"
  elseif r.canceled then
    return "ECANCELED", "interrupted; runner killed"
  elseif r.signal then
    return "ERUNNER", with_why(("runner killed by SIG%s"):format(r.signal_name or r.signal))
  elseif r.status ~= 0 then
    if r.stderr:find("unknown command line flag 'etdump_path'", 1, true) then
      return "ERUNNER", "this runner was built without the event tracer: it has no --etdump_path; drop --etdump"
    end
    return "ERUNNER", with_why(("runner exited with status %d"):format(r.status))
  end
end

return M
