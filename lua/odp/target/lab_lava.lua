--- `--boards lava`: the boards of a LAVA job, from the environment LAVA gives a test shell or a docker test
-- action (docs/lava/README.md). LAVA's device dictionary says what hardware a job has; the lab admin names
-- odp's device file for each piece with the key `odp_device` in the dictionary's `static_info` or
-- `device_info` list, which LAVA exports as LAVA_STATIC_INFO_<i>_<key> / LAVA_DEVICE_INFO_<i>_<key>.
-- Every entry with `odp_device` is one board; its transport options come from its other keys and from
-- what LAVA sets for the job's DUT:
--   ssh boards    ssh_host, ssh_port, ssh_user, ssh_identity, known_hosts -> host, port, user, identity, known_hosts
--   adb boards    board_id (else ANDROID_SERIAL for the first board) -> serial; adb_server_socket
--   probe boards  jlink_serial or board_id (else LAVA_BOARD_ID for the first board) -> jlink_serial;
--                 jlink_device (the J-Link's name for the core), jlink_ip (J-Link Remote Server)
--   every board   odp_name -> name, odp_tags (comma-separated) -> tags, connection (a name in the
--                 dictionary's connection_list) -> console = LAVA_CONNECTION_COMMAND_<NAME>
-- The first board is LAVA's DUT: it also gets console = LAVA_CONNECTION_COMMAND and power = {reset =
-- LAVA_HARD_RESET_COMMAND, on = LAVA_POWER_ON_COMMAND, off = LAVA_POWER_OFF_COMMAND} (shell commands run
-- on the worker). LAVA_JOB_ID is copied into every board as lava_job_id.
local device = require("odp.target.device")
local options = require("odp.core.options")

local M = {}

-- the device dictionary keys odp reads itself (the transports' keys are read by name below)
local ODP_KEYS = { odp_device = true, odp_name = true, odp_tags = true }

-- Values of the environment are text LAVA copied from the device dictionary or the job: bounded, so a
-- runaway value is a warning, not a board.
local MAX_VALUE = 4096
local MAX_ENTRIES = 256

local function integer(s) return s and s:match("^%d+$") and math.tointeger(tonumber(s)) or nil end

--- The info entries of env: a list of {where = "LAVA_STATIC_INFO_0", kind = "static"|"device", index = i,
-- keys = {key = value}}, device_info first, each list in index order.
function M.entries(env)
  local by, out = {}, {}
  for name, value in pairs(env) do
    local kind, i, key = tostring(name):match("^LAVA_(%u+)_INFO_(%d+)_(.+)$")
    if (kind == "STATIC" or kind == "DEVICE") and #i <= 3 then
      local where = ("LAVA_%s_INFO_%s"):format(kind, i)
      local e = by[where]
      if not e then
        e = { where = where, kind = kind:lower(), index = tonumber(i), keys = {} }
        by[where] = e
        out[#out + 1] = e
      end
      e.keys[key] = tostring(value)
    end
  end
  table.sort(out, function(a, b)
    if a.kind ~= b.kind then return a.kind == "device" end
    return a.index < b.index
  end)
  return out
end

local function device_path(name)
  if name:find("/") or name:match("%.lua$") then return name end
  return "devices/" .. name .. ".lua"
end

--- The boards in env (a table of environment variables; os.getenv's view when nil is not accepted: pass
-- one). -> {boards = {...}, warnings = {...}} | nil, "ENOTFOUND: ...", "ENOTFOUND"
function M.boards(env)
  assert(type(env) == "table", "lab_lava.boards(env): env must be a table of environment variables")
  local boards, warnings, names = {}, {}, {}
  local entries = M.entries(env)
  if #entries > MAX_ENTRIES then
    return nil, ("EUSAGE: %d LAVA_*_INFO_ entries, more than odp reads (%d)"):format(#entries, MAX_ENTRIES), "EUSAGE"
  end
  -- values come from the lab admin's dictionary: control characters would break the one-line messages
  local function warn(fmt, ...) warnings[#warnings + 1] = (fmt:format(...):gsub("%c", "?")) end
  local first = true
  for _, e in ipairs(entries) do
    local k = e.keys
    -- the dictionary's other keys are LAVA's and the lab's; the odp_ ones are odp's, and a misspelt one would
    -- silently drop the board or its name
    for key in pairs(k) do
      if key:match("^odp_") and not ODP_KEYS[key] then
        local near = options.closest(key, ODP_KEYS)
        return nil, (("EUSAGE: %s_%s is not a key odp reads (%s)"):format(e.where, key, near and
          ("did you mean " .. near .. "?") or "odp_device, odp_name, odp_tags"):gsub("%c", "?")), "EUSAGE"
      end
    end
    local too_long
    for key, v in pairs(k) do if #v > MAX_VALUE then too_long = key end end
    if too_long then
      warn("%s_%s: longer than %d bytes; entry skipped", e.where, too_long, MAX_VALUE)
    elseif not k.odp_device then
      warn("%s: no odp_device key, so not an odp board (keys: %s)", e.where, (function()
        local ks = {}
        for key in pairs(k) do ks[#ks + 1] = key end
        table.sort(ks)
        return table.concat(ks, ", ")
      end)())
    else
      local path = device_path(k.odp_device)
      local ok, dev = pcall(device.load, path)
      if not ok then
        warn("%s_odp_device=%s: %s", e.where, k.odp_device, type(dev) == "table" and dev.message or tostring(dev))
      else
        local b = { device = path, tags = { "lava" }, lava_job_id = env.LAVA_JOB_ID }
        for t in (k.odp_tags or ""):gmatch("[^,%s]+") do b.tags[#b.tags + 1] = t end
        local bad
        if dev.transport == "ssh" then
          b.host, b.user, b.identity, b.known_hosts = k.ssh_host, k.ssh_user, k.ssh_identity, k.known_hosts
          b.port = integer(k.ssh_port)
          if not b.host then bad = "ssh_host (the board's address) is not set" end
          if k.ssh_port and not b.port then bad = ("ssh_port '%s' is not a port number"):format(k.ssh_port) end
        elseif dev.transport == "adb" then
          b.serial = k.board_id or (first and (env.ANDROID_SERIAL or env.LAVA_BOARD_ID)) or nil
          b.adb_server_socket = k.adb_server_socket
          if not b.serial then bad = "no adb serial: board_id is not set (nor ANDROID_SERIAL)" end
        elseif dev.transport == "probe" then
          b.jlink_serial = integer(k.jlink_serial or k.board_id or (first and env.LAVA_BOARD_ID) or nil)
          b.jlink_device, b.jlink_ip = k.jlink_device, k.jlink_ip
          if not (b.jlink_serial or b.jlink_ip) then
            bad = "no J-Link: jlink_serial (or board_id, LAVA_BOARD_ID) is not a serial number, and jlink_ip is not set"
          end
        end
        if bad then
          warn("%s: %s; board skipped", e.where, bad)
        else
          b.name = k.odp_name or k.board_id or b.host or ("lava-" .. e.kind .. "-" .. e.index)
          if names[b.name] then b.name = b.name .. "-" .. e.kind .. "-" .. e.index end
          names[b.name] = true
          if k.connection then
            b.console = env["LAVA_CONNECTION_COMMAND_" .. k.connection:upper()]
            if not b.console then
              warn("%s_connection=%s: LAVA_CONNECTION_COMMAND_%s is not set", e.where, k.connection, k.connection:upper())
            end
          end
          if first then
            b.console = b.console or env.LAVA_CONNECTION_COMMAND
            local power = { reset = env.LAVA_HARD_RESET_COMMAND, on = env.LAVA_POWER_ON_COMMAND,
              off = env.LAVA_POWER_OFF_COMMAND }
            if next(power) then b.power = power end
          end
          first = false
          boards[#boards + 1] = b
        end
      end
    end
  end
  if #boards == 0 then
    local hint = env.ANDROID_SERIAL and (" (ANDROID_SERIAL=%s is set: add odp_device to the device dictionary's "
      .. "device_info entry for it)"):format(tostring(env.ANDROID_SERIAL):gsub("%c", "?")) or ""
    return nil, ("ENOTFOUND: no usable board in LAVA's environment: no LAVA_STATIC_INFO_<i>_odp_device or " ..
      "LAVA_DEVICE_INFO_<i>_odp_device names a device file%s%s"):format(hint,
      #warnings > 0 and ("; " .. table.concat(warnings, "; ")) or ""), "ENOTFOUND"
  end
  return { boards = boards, warnings = warnings }
end

return M
