--- The one search path for the files a user names by a relative path (a script, a device file, a lab file, the
-- paths inside a device file: a build's source_dir, a twin's launch script), in odp's one precedence:
-- as given (relative to the current directory), else in each `ODP_PATH` directory (`:`-separated), else in
-- odp's own tree: the source tree when odp runs from it, PREFIX/share/odp when installed. So `odp run
-- scripts/host.lua` and `--device devices/rpi5.lua` work from any directory, and a directory of one's own
-- scripts and devices put in ODP_PATH is searched before odp's (docs/SCRIPTING.md, "Finding files").
local host = require("odp.host")
local sys = require("odp.sys")

local M = {}

--- The directories searched after the current one, in order: ODP_PATH's, then odp's own tree.
---@return string[]
function M.dirs()
  local out = {}
  for dir in (os.getenv("ODP_PATH") or ""):gmatch("[^:]+") do out[#out + 1] = dir end
  out[#out + 1] = host.root
  return out
end

--- The file path names: path itself when it exists or is absolute, else the first dir/path of M.dirs() that
--- exists; path as given when none does (the caller's error then names what the user wrote).
---@param path string
---@return string
function M.find(path)
  if path:sub(1, 1) == "/" or sys.stat(path) then return path end
  for _, dir in ipairs(M.dirs()) do
    local p = dir .. "/" .. path
    if sys.stat(p) then return p end
  end
  return path
end

return M
