--- The interactive prompt (`odp repl [DEVICE]`): Lua with every odp module at hand as `odp.<name>`,
-- the device description as `device`, line editing, history, multi-line statements, tab completion.
local rl = require("odp.readline")
local errors = require("odp.core.errors")
local report = require("odp.results.report")
local result = require("odp.results.result")
local sys = require("odp.sys")

local M = {}

--- A readable one-line-ish rendering of any value (tables to a depth of 3).
function M.show(v, depth, seen)
  depth, seen = depth or 0, seen or {}
  if type(v) == "string" then return ("%q"):format(v):gsub("\\\n", "\\n") end
  local mt = (type(v) == "table" or type(v) == "userdata") and getmetatable(v)
  if type(mt) == "table" and mt.__tostring then return tostring(v) end -- a Board, help text
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

-- lua/odp/'s layers, lowest first (docs/architecture.md)
local LAYERS = { "core", "parse", "target", "results", "run", "flows", "cli" }

--- `odp` in the REPL: odp.proc, odp.ssh, ... loaded on first use. A Lua module answers to its short name too
-- (odp.board is odp.run.board, odp.stats is odp.core.stats), and odp.<layer> is that layer's namespace.
function M.odp_namespace(prefix)
  prefix = prefix or "odp."
  return setmetatable({}, { __index = function(t, k)
    if type(k) ~= "string" then return nil end
    local names = { prefix .. k }
    if prefix == "odp." then
      for _, layer in ipairs(LAYERS) do
        if k == layer then
          local ns = M.odp_namespace(prefix .. k .. ".")
          if package.searchpath(prefix .. k, package.path) then
            -- a layer that is a module too (odp.run: run.point, run.open_board): its own fields first
            local mod, find = require(prefix .. k), getmetatable(ns).__index -- lazy: run-time name
            getmetatable(ns).__index = function(ns_t, kk)
              local v = mod[kk]
              if v == nil then v = find(ns_t, kk) end
              return v
            end
          end
          rawset(t, k, ns)
          return ns
        end
        names[#names + 1] = prefix .. layer .. "." .. k
      end
    end
    for _, name in ipairs(names) do
      -- only a module that is not there is passed over: one that fails to load says why
      if package.preload[name] or package.searchpath(name, package.path) or package.searchpath(name, package.cpath) then
        local mod = require(name) -- lazy: run-time name
        rawset(t, k, mod)
        return mod
      end
    end
  end })
end

local MODULES = { "proc", "sys", "ssh", "adb", "probe", "rtt", "xmodem", "serial", "etdump", "pte", "elf",
  "stats", "json", "report", "sweep", "stream", "board", "device" }

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
      local ok_verbs, verbs = false, nil
      if type(v) == "table" and type(v.verbs) == "function" then ok_verbs, verbs = pcall(v.verbs, v) end
      if ok_verbs then -- a board: its verbs, not its insides
        for _, name in ipairs(verbs) do fields[name] = true end
      else
        if type(v) == "table" then add_from(v) end
        local mt = (type(v) == "table" or type(v) == "userdata") and debug.getmetatable(v)
        if mt and type(mt.__index) == "table" then add_from(mt.__index) end
      end
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
  sys.mkdir_p(base .. "/odp")
  return base .. "/odp/repl_history"
end

-- How a value is printed: a result record as the human report, anything else with show().
local function print_values(res)
  local parts = {}
  for i = 2, res.n do
    local v = res[i]
    if type(v) == "table" and v.schema == result.SCHEMA then
      io.stdout:write(report.formats.human({ v }))
    else
      parts[#parts + 1] = M.show(v)
    end
  end
  if #parts > 0 then print(table.concat(parts, "\t")) end
end

-- An error at the prompt: odp's structured failures (a board call that failed, Ctrl-C) are one line.
local function message(e)
  if errors.is_failure(e) then return ("%s: %s"):format(e.code, e.message) end
  return (debug.traceback(tostring(e), 3):gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
end

--- Runs the loop until end of input. env: the globals the user's lines see. Ctrl-C during a statement
-- interrupts it (odp.sys: every wait returns ECANCELED, children are killed) and comes back here; Ctrl-C at
-- the prompt drops the line, twice in a row leaves. Keys typed on the terminal while a statement runs are
-- discarded after it (a Ctrl-D among them leaves), unless input was already waiting when it began (a paste).
function M.loop(env)
  local hist = history_path()
  rl.read_history(hist)
  rl.set_completer(complete(env))
  local buffer, interrupted = nil, false
  while true do
    local line, why = rl.readline(buffer and ">> " or "odp> ")
    -- SIGHUP (the terminal closed) or SIGTERM: leave; odp.cli.main closes the boards
    if sys.terminating() then break end
    if line == false and why == "interrupted" then
      io.write("\n")
      if interrupted and not buffer then break end
      if not buffer then io.stderr:write("(Ctrl-C again or Ctrl-D to leave)\n") end
      buffer, interrupted = nil, true
      goto continue
    end
    if not line then io.write("\n") break end
    interrupted = false
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
          -- Input already waiting now (the rest of a paste) was meant to follow this statement: it is kept.
          -- Keys typed while the statement runs are typed blind, and a half-line of them must not reach a
          -- board: they are discarded, and said; a Ctrl-D among them leaves after the statement.
          local pasted = rl.input_waiting()
          -- the traceback stops at the user's line: odp's own frames below it are noise here
          local res = table.pack(xpcall(fn, message))
          local canceled = sys.cancel_requested()
          sys.cancel_clear() -- the statement is over: the next one (and the board) start afresh
          local typed, eof = "", false
          if not pasted then typed, eof = rl.discard_typeahead() end
          if not res[1] then
            io.stderr:write(tostring(res[2]), "\n")
          elseif res.n > 1 then
            print_values(res)
          end
          if canceled and res[1] then io.stderr:write("(interrupted)\n") end
          if typed ~= "" then io.stderr:write(("(typed while it ran, not run: %s)\n"):format(M.show(typed))) end
          if sys.terminating() then break end
          if eof then io.stderr:write("(Ctrl-D while it ran: leaving)\n") break end
        end
      end
    end
    ::continue::
  end
  rl.write_history(hist)
end

return M
