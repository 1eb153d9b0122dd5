--- The interactive prompt (`odp repl [DEVICE]`): Lua with every odp module at hand as `odp.<name>`,
-- the device description as `device`, line editing, history, multi-line statements, tab completion.
local rl = require("odp.readline")

local M = {}

--- A readable one-line-ish rendering of any value (tables to a depth of 3).
function M.show(v, depth, seen)
  depth, seen = depth or 0, seen or {}
  if type(v) == "string" then return ("%q"):format(v):gsub("\\\n", "\\n") end
  if type(v) ~= "table" then return tostring(v) end
  if seen[v] then return "<cycle>" end
  if depth >= 3 then return "{...}" end
  seen[v] = true
  local parts, n = {}, #v
  for i = 1, n do parts[#parts + 1] = M.show(v[i], depth + 1, seen) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local ks = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or ("[" .. M.show(k, depth + 1, seen) .. "]")
    parts[#parts + 1] = ks .. " = " .. M.show(v[k], depth + 1, seen)
  end
  seen[v] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- `odp` in the REPL: odp.proc, odp.ssh, ... loaded on first use.
function M.odp_namespace()
  return setmetatable({}, { __index = function(t, k)
    local ok, mod = pcall(require, "odp." .. k)
    if ok then rawset(t, k, mod) return mod end
  end })
end

local MODULES = { "proc", "sys", "ssh", "adb", "probe", "rtt", "xmodem", "serial", "etdump", "pte", "elf",
  "stats", "json", "report", "sweep", "stream" }

-- Candidates for "a.b.c" / "a:b" prefixes: fields of tables, methods of userdata (through debug).
local function complete(env)
  return function(text)
    local path, sep, last = text:match("^(.-)([.:])([%w_]*)$")
    local fields = {}
    local function add_from(t)
      if type(t) == "table" then for k in pairs(t) do if type(k) == "string" then fields[k] = true end end end
    end
    if not path then
      last = text
      add_from(env)
      add_from(_G)
      for _, kw in ipairs({ "local", "function", "return", "then", "else", "end", "while", "for", "repeat" }) do
        fields[kw] = true
      end
    else
      local v = env
      for part in path:gmatch("[^.:]+") do
        if type(v) ~= "table" and type(v) ~= "userdata" then v = nil break end
        local ok, x = pcall(function() return v[part] end)
        v = ok and x or nil
      end
      if v == env.odp then for _, m in ipairs(MODULES) do fields[m] = true end end
      if type(v) == "table" then add_from(v) end
      local mt = (type(v) == "table" or type(v) == "userdata") and debug.getmetatable(v)
      if mt and type(mt.__index) == "table" then add_from(mt.__index) end
    end
    local out = {}
    for k in pairs(fields) do
      if k:sub(1, #last) == last then out[#out + 1] = (path and (path .. sep) or "") .. k end
    end
    table.sort(out)
    return out
  end
end

local function history_path()
  local base = os.getenv("XDG_STATE_HOME") or ((os.getenv("HOME") or ".") .. "/.local/state")
  require("odp.sys").mkdir_p(base .. "/odp")
  return base .. "/odp/repl_history"
end

--- Runs the loop until end of input. env: the globals the user's lines see.
function M.loop(env)
  local hist = history_path()
  rl.read_history(hist)
  rl.set_completer(complete(env))
  local buffer = nil
  while true do
    local line = rl.readline(buffer and ">> " or "odp> ")
    if not line then io.write("\n") break end
    local src = buffer and (buffer .. "\n" .. line) or line
    if src:match("%S") then
      local fn, err = load("return " .. src, "=repl", "t", env)
      if not fn then fn, err = load(src, "=repl", "t", env) end
      if not fn and err:match("<eof>$") then
        buffer = src
      else
        buffer = nil
        rl.add_history((src:gsub("\n", " ")))
        if not fn then
          io.stderr:write(err, "\n")
        else
          -- the traceback stops at the user's line: odp's own frames below it are noise here
          local res = table.pack(xpcall(fn, function(e)
            return (debug.traceback(tostring(e), 2):gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
          end))
          if not res[1] then
            io.stderr:write(tostring(res[2]), "\n")
          elseif res.n > 1 then
            local parts = {}
            for i = 2, res.n do parts[#parts + 1] = M.show(res[i]) end
            print(table.concat(parts, "\t"))
          end
        end
      end
    end
  end
  rl.write_history(hist)
end

return M
