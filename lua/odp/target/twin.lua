--- The QEMU twin of an Ethos-U board (a device file's `twin` table, devices/twin_m55.lua: launch, stop,
-- state_env): launch.sh starts it into a state directory that holds its pid, stop.sh stops it. The board
-- (odp.run.board) and the Ethos-U flow (its --keep-twin) both start and stop it through here.
local errors = require("odp.core.errors")
local proc = require("odp.proc")
local search = require("odp.core.search")
local sys = require("odp.sys")

local M = {}

-- A script of the twin table (tests/twin/launch.sh): found as every path odp is given (odp.core.search).
local script = search.find

--- The state directory a twin is told to use: opts.twin_state, else $ODP_TWIN_STATE (the twin's state_env).
function M.state_dir(tw, opts)
  return opts.twin_state or os.getenv(tw.state_env or "ODP_TWIN_STATE")
end

--- Whether a twin runs in the state directory dir (its pid answers kill -0).
function M.alive(dir)
  local pid = dir and sys.read_file(dir .. "/pid")
  return pid and proc.run { argv = { "kill", "-0", pid:match("%d+") or "0" }, timeout = 5 }.ok
end

--- Starts the twin on image with its state in state. lifeline: the twin ends with odp, however odp ends
-- (launch.sh -l 3). A twin that does not start raises ENODEV (exit 3).
function M.launch(tw, image, state, lifeline)
  local argv = { script(tw.launch or "tests/twin/launch.sh") }
  if lifeline then argv[2], argv[3] = "-l", "3" end
  argv[#argv + 1], argv[#argv + 2] = image, state
  local r = proc.run { argv = argv, timeout = 60, lifeline = lifeline and 3 or nil }
  if not r or not r.ok then
    errors.fail("ENODEV", ("cannot start the twin: %s"):format(r and (r.stderr:match("[^\n]+") or "") or "?"))
  end
end

--- Stops the twin running with its state in state (stop.sh), when one was started there.
function M.stop(tw, state)
  if state and sys.stat(state .. "/pid") then
    proc.run { argv = { script(tw.stop or "tests/twin/stop.sh"), state }, timeout = 20 }
  end
end

return M
