--- Structured errors: library code reports, the CLI presents.
-- A module that cannot go on raises `errors.fail(code, message)`: a code of M.CODES and one line for the user.
-- It never chooses an exit status: the status is the code's, from M.CODES (the one table; docs/SCRIPTING.md,
-- "Errors", shows it and tests/lua/errors_test.lua holds the two together). odp.cli.main prints the message
-- and exits with it. Anything else that is raised is a bug or a script error and is shown with a traceback.
local sys = require("odp.sys")

local M = {}

--- Every error code odp raises or records, and the exit status it gives: {code, status, what it means}.
-- The C modules' codes (src/util/err.h) and the Lua side's own. 1: the flow ran and what it measures failed;
-- 2: usage; 3: the device or the infrastructure; 130: interrupted.
M.CODES = {
  { "EUSAGE", 2, "a bad option, value, file, model, key or script: what the user gave" },
  { "ERUNNER", 1, "the measured program failed: it exited non-zero, was killed (by a signal, at --timeout), or did not write what it owes (an output file)" },
  { "EBUILD", 1, "the firmware build failed (the device file's configure or build command)" },
  { "EMISMATCH", 1, "the outputs disagree with the reference (--reference and its gates)" },
  { "EFAIL", 1, "a sweep point failed without saying how (its run_point returned no record)" },
  { "ECANCELED", 130, "interrupted (Ctrl-C; SIGHUP and SIGTERM exit 129 and 143)" },
  { "ETIMEDOUT", 3, "the board, probe, connection or a tool did not answer in time" },
  { "EAUTH", 3, "authentication failed (SSH keys, passphrase)" },
  { "EHOSTKEY", 3, "the board's host key is unknown or changed" },
  { "ENODEV", 3, "no such device, or the device cannot run this (its architecture, glibc, CPUs)" },
  { "EBUSY", 3, "the device or a file is in use by another process" },
  { "EPROTO", 3, "the device or a tool answered something odp cannot read" },
  { "ECRC", 3, "a transfer's checksum differs" },
  { "ENOTFOUND", 3, "something odp needs is not there: a file on the board, a probe, a tool, an RTT block" },
  { "EIO", 3, "an I/O error: a read, write or transfer failed" },
  { "ECONNLOST", 3, "the board's connection dropped and did not come back, or dropped under a program that may have started" },
  { "EAGAIN", 3, "a run queued on the board never started (its connection was lost before its turn): odp sends it again where it can" },
  { "ENOSPC", 3, "no space left on the board (or this machine)" },
  { "ENOTSUP", 3, "the board, its kernel or this odp cannot do what was asked" },
}
local STATUS = {}
for _, c in ipairs(M.CODES) do STATUS[c[1]] = c[2] end

--- The exit status of an error code (M.CODES); a code odp does not declare (a record of another version) is 3.
--- ECANCELED is the signal's own: 130 for Ctrl-C, 129 and 143 once SIGHUP or SIGTERM asked odp to end.
---@param code string|nil
---@return integer
function M.exit_status(code)
  if code == "ECANCELED" then
    local sig = sys.terminating()
    if sig then return 128 + sig end
  end
  return STATUS[code] or 3
end

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(e) return e.message end

--- A structured failure: {code, message, exit}, its exit the code's (M.exit_status); M.fail raises it.
---@param code string one of M.CODES
---@param message string one line, says what to do
function M.failure(code, message)
  return setmetatable({ code = code, message = message, exit = M.exit_status(code) }, Failure)
end

--- Raises a structured failure (M.failure).
---@param code string one of M.CODES
---@param message string one line, says what to do
function M.fail(code, message)
  error(M.failure(code, message), 0)
end

--- A C module's error message without its "ECODE: " prefix: what goes into a sentence of one's own. The one
--- place that knows the prefix's shape.
---@param msg any
---@return string
function M.text(msg)
  return (tostring(msg):gsub("^E%u+: ", ""))
end

--- The code of a `nil, "ECODE: msg", code` triple: code, else the message's prefix, else EIO.
local function code_of(msg, code)
  return code or (type(msg) == "string" and msg:match("^(E%u+):")) or "EIO"
end

--- Passes a `nil, "ECODE: msg", "ECODE"` triple on with a context in front of its message: nil,
--- "ECODE: context: msg", "ECODE" (for library code that returns triples); ok values go through unchanged.
---@param context string what was being done, e.g. "uploading m.pte to pi-1"
function M.wrap(context, ok, msg, code, ...)
  if ok ~= nil and ok ~= false then return ok, msg, code, ... end
  code = code_of(msg, code)
  return nil, ("%s: %s: %s"):format(code, context, M.text(msg)), code
end

--- Turns a `nil, "ECODE: msg", "ECODE"` triple from a C module into a raised failure; with a context its
--- message reads "context: msg". Ok values are returned unchanged.
---@param context? string what was being done
function M.check(ok, msg, code, context)
  if ok == nil or ok == false then
    local text = M.text(msg)
    M.fail(code_of(msg, code), context and (context .. ": " .. text) or text)
  end
  return ok, msg, code
end

function M.is_failure(e) return getmetatable(e) == Failure end

return M
