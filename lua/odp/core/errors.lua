--- Structured errors for flows and the CLI.
-- A flow that cannot go on raises `errors.fail(code, message, exit)`; odp.cli.main prints the message on one
-- line and exits with `exit` (3 device/infrastructure by default, 2 usage, 130 interrupted, 1 measurement).
-- Anything else that is raised is a bug or a script error and is shown with a traceback.
local M = {}

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(e) return e.message end

--- Raises a structured failure.
---@param code string one of ETIMEDOUT EAUTH EHOSTKEY ENODEV EBUSY EPROTO ECRC ENOTFOUND EIO ECANCELED EUSAGE,
--- EMISMATCH (outputs that disagree with --reference), or of the targets' own: ECONNLOST (a board's connection
--- dropped and did not come back, or dropped under a program that may have started), ENOSPC (no space left on
--- BOARD:DIR)
---@param message string one line, says what to do
---@param exit? integer process exit code (default 3; 2 for EUSAGE, 130 for ECANCELED: Ctrl-C)
function M.fail(code, message, exit)
  error(setmetatable({ code = code, message = message,
    exit = exit or (code == "EUSAGE" and 2 or code == "ECANCELED" and 130 or 3) }, Failure), 0)
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
---@param exit? integer the exit code, when not the code's own (errors.fail)
function M.check(ok, msg, code, context, exit)
  if ok == nil or ok == false then
    local text = M.text(msg)
    M.fail(code_of(msg, code), context and (context .. ": " .. text) or text, exit)
  end
  return ok, msg, code
end

function M.is_failure(e) return getmetatable(e) == Failure end

return M
