--- LAVA for tests: Debian 12's lava-dispatcher, lava-common, lava-dispatcher-host and lava-server packages,
-- fetched with `apt-get download` and unpacked with `dpkg-deb -x` (never installed: lava-dispatcher pulls
-- in systemd and python3-guestfs, lava-server a whole Django site). Their Python dependencies are Debian
-- packages too (vendor/packages.txt, [test]). Nothing here imitates LAVA: it is LAVA's own code.
--   local lava = require("lava")
--   local root = lava.unpacked()                  -- the packages' files (usr/bin/lava-run, ...)
--   lava.test_shell_bin(dir)                      -- lava-test-case & co. as LAVA's overlay installs them
--   lava.device_dictionary{ssh_host=..., ...}     -- rendered from lava-server's ssh.jinja2 / base.jinja2
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}
M.PACKAGES = { "lava-dispatcher", "lava-common", "lava-dispatcher-host", "lava-server" }
M.VERSION = "2023.01"

local function sh(cmd, timeout)
  local r = assert(proc.run { "sh", "-c", cmd, timeout = timeout or 300 })
  if not r.ok then error("harness command failed: " .. cmd .. "\n" .. r.stderr .. r.stdout, 2) end
  return r.stdout
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- The directory the packages are unpacked in (tests/.tmp/lava-<version>/root), fetched on first use.
function M.unpacked()
  local base = require("odp.host").root .. "/tests/.tmp/lava-" .. M.VERSION
  local root = base .. "/root"
  if not sys.stat(base .. "/.complete") then
    sh(("rm -rf %s && mkdir -p %s/debs && cd %s/debs && apt-get download %s >/dev/null 2>&1 || "
      .. "{ apt-get update >/dev/null 2>&1; apt-get download %s; }"):format(q(base), q(base), q(base),
      table.concat(M.PACKAGES, " "), table.concat(M.PACKAGES, " ")))
    sh(("cd %s/debs && for f in *.deb; do dpkg-deb -x \"$f\" %s || exit 1; done && touch %s/.complete")
      :format(q(base), q(root), q(base)))
  end
  return root
end

function M.python_path()
  return M.unpacked() .. "/usr/lib/python3/dist-packages"
end

--- Copies the test shell helpers (lava-test-case, lava-test-set, lava-common-functions) into dir the way
-- LAVA's overlay does (actions/deploy/overlay.py: "#!<lava_test_sh_cmd>" and a blank line, then the script,
-- mode 0755). -> dir
function M.test_shell_bin(dir, names)
  local src = M.python_path() .. "/lava_dispatcher/lava_test_shell/"
  sh("mkdir -p " .. q(dir))
  for _, name in ipairs(names or { "lava-test-case", "lava-test-set", "lava-common-functions" }) do
    local f = assert(io.open(src .. name, "rb"))
    local body = f:read("a")
    f:close()
    local out = assert(io.open(dir .. "/" .. name, "wb"))
    out:write("#!/bin/sh\n\n", body)
    out:close()
    sh("chmod 0755 " .. q(dir .. "/" .. name))
  end
  return dir
end

--- A device dictionary for the `ssh` device type, rendered by Jinja2 from lava-server's own templates as
-- lava-server does: `{% extends 'ssh.jinja2' %}` and one `{% set %}` per variable (values: strings,
-- numbers or Python literals given as {literal = "..."}). -> YAML text
function M.device_dictionary(vars)
  local lines = { "{% extends 'ssh.jinja2' %}" }
  local keys = {}
  for k in pairs(vars) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = vars[k]
    local lit = type(v) == "table" and v.literal or (type(v) == "number" and tostring(v)) or
      ("'" .. tostring(v):gsub("\\", "\\\\"):gsub("'", "\\'") .. "'")
    lines[#lines + 1] = ("{%% set %s = %s %%}"):format(k, lit)
  end
  local r = assert(proc.run { "/usr/bin/python3", "-c", [==[
import sys, jinja2
env = jinja2.Environment(loader=jinja2.FileSystemLoader([sys.argv[1]]), autoescape=False, trim_blocks=True)
sys.stdout.write(env.from_string(sys.stdin.read()).render())
]==], M.unpacked() .. "/usr/share/lava-server/device-types", stdin = table.concat(lines, "\n") .. "\n", timeout = 60 })
  if not r.ok then error("rendering the device dictionary failed: " .. r.stderr) end
  return r.stdout
end

--- The environment lava-run needs: LAVA's packages on PYTHONPATH ahead of Debian's Python modules, plus
-- stand_in_dir (holding the guestfs stand-in) when given.
function M.env(stand_in_dir)
  return { PYTHONPATH = (stand_in_dir and (stand_in_dir .. ":") or "") .. M.python_path(),
    PATH = os.getenv("PATH") }
end

--- The result entries of a lava-run log (one YAML mapping per line, `lvl: results`): a list of `msg` tables.
function M.results(log_text)
  local lyaml = require("lyaml")
  local out = {}
  for line in log_text:gmatch("[^\n]+") do
    if line:find('"lvl": "results"', 1, true) then
      local entry = lyaml.load(line)
      out[#out + 1] = entry.msg
    end
  end
  return out
end

M.quote, M.sh = q, sh
return M
