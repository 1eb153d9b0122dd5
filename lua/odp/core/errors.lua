--- Structured errors for flows and the CLI.
-- A flow that cannot go on raises `errors.fail(code, message, exit)`; odp.cli.main prints the message on one
-- line and exits with `exit` (3 device/infrastructure by default, 2 usage, 130 interrupted, 1 measurement).
-- Anything else that is raised is a bug or a script error and is shown with a traceback.
local M = {}

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(e) return e.message end

--- Raises a structured failure.
---@param code string one of ETIMEDOUT EAUTH EHOSTKEY ENODEV EBUSY EPROTO ECRC ENOTFOUND EIO ECANCELED EUSAGE EMISMATCH (outputs that disagree with --reference)
---@param message string one line, says what to do
---@param exit? integer process exit code (default 3; 2 for EUSAGE, 130 for ECANCELED: Ctrl-C)
function M.fail(code, message, exit)
  error(setmetatable({ code = code, message = message,
    exit = exit or (code == "EUSAGE" and 2 or code == "ECANCELED" and 130 or 3) }, Failure), 0)
end

--- Turns a `nil, "ECODE: msg", "ECODE"` triple from a C module into a raised failure.
function M.check(ok, msg, code, exit)
  if ok == nil or ok == false then
    if code == nil and type(msg) == "string" then code = msg:match("^(E%u+):") end
    local text = type(msg) == "string" and msg:gsub("^E%u+: ", "") or tostring(msg)
    M.fail(code or "EIO", text, exit)
  end
  return ok, msg, code
end

function M.is_failure(e) return getmetatable(e) == Failure end

return M
