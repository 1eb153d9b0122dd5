-- The C modules' API has one declaration (docs/api/c_modules.lua): every function odp registers is declared
-- there and nothing else is, and the reference (docs/api.md) and stubs (docs/luals/odp_c.lua) generated from
-- it are the committed ones.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local decl = dofile(root .. "/docs/api/c_modules.lua")

-- The C modules: those built in (package.preload) and the lazy ones the Makefile lists (LAZY :=).
local function c_modules()
  local names = {}
  for name in pairs(package.preload) do
    if name:match("^odp%.") then names[#names + 1] = name end
  end
  local lazy = T.read(root .. "/Makefile"):match("\nLAZY%s*:=%s*([^\n]+)")
  T.ok(lazy, "the Makefile lists the lazy modules")
  for m in lazy:gmatch("%S+") do names[#names + 1] = "odp." .. m end
  table.sort(names)
  return names
end

-- Every registered function: module functions as "odp.m.f", methods of odp's userdata types as "Type.f".
local function registered()
  local set = {}
  for _, name in ipairs(c_modules()) do
    local mod = require(name)
    for k, v in pairs(mod) do
      if type(v) == "function" then set[name .. "." .. k] = true end
    end
  end
  for key, mt in pairs(debug.getregistry()) do
    if type(key) == "string" and key:match("^odp%.") and type(mt) == "table" and mt.__name == key then
      local methods = type(mt.__index) == "table" and mt.__index or {}
      for k, v in pairs(methods) do
        if type(v) == "function" then set[key .. "." .. k] = true end
      end
    end
  end
  return set
end

local function declared()
  local set, lua_added = {}, {}
  for _, m in ipairs(decl.modules) do
    for _, fn in ipairs(m[3]) do
      local name = assert(fn[1]:match("^([%w_]+)%("), fn[1])
      if fn.lua then lua_added[m[1] .. "." .. name] = true else set[m[1] .. "." .. name] = true end
    end
  end
  return set, lua_added
end

T.test("every registered C function is declared in docs/api/c_modules.lua, and every declared one exists", function()
  local have = registered()
  local want, lua_added = declared()
  local missing, stale = {}, {}
  for k in pairs(have) do
    if not want[k] and not lua_added[k] then missing[#missing + 1] = k end
  end
  for k in pairs(want) do if not have[k] then stale[#stale + 1] = k end end
  table.sort(missing) table.sort(stale)
  T.eq(missing, {}, "registered but not declared")
  T.eq(stale, {}, "declared but not registered")
  T.ok(have["odp.sys.terminating"] and have["odp.Stream.read"] and have["odp.ssh.Session.exec"],
    "the enumeration sees module functions, core methods and a lazy module's methods")
end)

T.test("the methods lua/odp/core/stream.lua adds are there once it is loaded", function()
  local _, lua_added = declared()
  require("odp.core.stream")
  local methods = require("odp.streamcore").methods
  for k in pairs(lua_added) do
    T.eq(type(methods[k:match("([%w_]+)$")]), "function", k)
  end
end)

T.test("docs/api.md and docs/luals/odp_c.lua are what tools/apidoc.lua makes of the declarations", function()
  local out = T.tmpdir()
  local r = proc.run { odp, "run", root .. "/tools/apidoc.lua", out, timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  for _, f in ipairs({ "api.md", "luals/odp_c.lua" }) do
    T.ok(T.read(out .. "/" .. f) == T.read(root .. "/docs/" .. f),
      ("docs/%s is out of date: run `build/odp run tools/apidoc.lua` and commit it"):format(f))
  end
end)

T.test("the stubs parse as Lua and name each declared function once", function()
  local stubs = T.read(root .. "/docs/luals/odp_c.lua")
  T.ok(load(stubs, "=odp_c.lua", "t"), "the stubs are Lua")
  local want = declared()
  local n = 0
  for _ in pairs(want) do n = n + 1 end
  local defs = select(2, stubs:gsub("\nfunction [%w_]+[%.:][%w_]+%(", ""))
  local _, lua_added = declared()
  for _ in pairs(lua_added) do n = n + 1 end
  T.eq(defs, n)
  T.ok(sys.stat(root .. "/docs/api.md"), "the reference exists")
end)

-- The declarations against the C source (tests/lib/csig.lua reads the bindings): the option keys a function
-- accepts, how many arguments it reads, how many values a success returns and the fields it sets on what it
-- returns. Names alone drifted: probe.open's timeout, serial.list's fields and serial.open's second return were
-- in C and nowhere declared.
local apidoc = dofile(root .. "/tools/apidoc.lua")

-- The keys a brace {a?: T, b: U} declares at its own level (not those of a callback's parameters or of a
-- nested table).
local function top_keys(brace, out)
  local depth, i, inner = 0, 1, brace:sub(2, -2)
  local start = 1
  local function take(part)
    local k = part:match("^%s*([%w_]+)%??:")
    if k then out[k] = true end
  end
  while i <= #inner do
    local ch = inner:sub(i, i)
    if ch == "{" or ch == "(" or ch == "[" or ch == "<" then depth = depth + 1
    elseif ch == "}" or ch == ")" or ch == "]" or (ch == ">" and inner:sub(i - 1, i - 1) ~= "-") then depth = depth - 1
    elseif ch == "," and depth == 0 then take(inner:sub(start, i - 1)); start = i + 1 end
    i = i + 1
  end
  take(inner:sub(start))
  return out
end

-- Every field name a type text mentions: its braces at every depth, and the fields of the named types it uses.
local function field_names(text, types, out, seen)
  out, seen = out or {}, seen or {}
  for brace in text:gmatch("%b{}") do
    top_keys(brace, out)
    field_names(brace:sub(2, -2), types, out, seen)
  end
  for tname in text:gmatch("odp%.[%w_%.]+") do
    if types[tname] and not seen[tname] then
      seen[tname] = true
      for _, f in ipairs(types[tname]) do
        out[f:match("^([%w_]+)")] = true
        field_names(f, types, out, seen)
      end
    end
  end
  return out
end

-- The option keys a parameter's type declares: its own braces' keys, and a named options type's fields.
local function option_keys(ptype, types)
  local out = {}
  for brace in ptype:gmatch("%b{}") do top_keys(brace, out) end
  for tname in ptype:gmatch("odp%.[%w_%.]+") do
    for _, f in ipairs(types[tname] or {}) do out[f:match("^([%w_]+)")] = true end
  end
  return out
end

local function keys_of(set)
  local list = {}
  for k in pairs(set) do list[#list + 1] = k end
  table.sort(list)
  return list
end

T.test("every declaration matches its C binding: option keys, arguments, returns and returned fields", function()
  local c = require("csig").read(root)
  local types = {}
  for _, t in ipairs(decl.types) do types[t[1]] = t[3] end
  local drift = {}
  local function say(name, fmt, ...) drift[#drift + 1] = name .. ": " .. fmt:format(...) end
  for _, m in ipairs(decl.modules) do
    for _, fn in ipairs(m[3]) do
      local sig = apidoc.parse_signature(fn[1])
      local name = m[1] .. "." .. sig.name
      local info = c[name]
      if fn.lua then
        -- a method lua/odp/core/stream.lua adds: the keys its check_opts allows
        local body = T.read(root .. "/lua/odp/core/stream.lua"):match("\nfunction M%." .. sig.name .. "%(.-\nend")
        local allowed = body and body:match("check_opts%(opts,%s*(%b{})")
        local want = {}
        for k in (allowed or ""):gmatch("([%w_]+)%s*=%s*true") do want[#want + 1] = k end
        table.sort(want)
        local p = sig.params[#sig.params]
        local declared = p and p.name == "opts" and keys_of(option_keys(p.type, types)) or {}
        if not allowed then say(name, "no check_opts found in lua/odp/core/stream.lua's M.%s", sig.name)
        elseif table.concat(declared, ",") ~= table.concat(want, ",") then
          say(name, "Lua accepts options {%s}, the declaration {%s}", table.concat(want, ", "), table.concat(declared, ", "))
        end
      end
      if not fn.lua and info then
        if info.unreadable then say(name, "its binding %s is written in a way csig.lua cannot read", info.unreadable) end
        local variadic = sig.params[1] and sig.params[1].name == "..."
        if not variadic and info.nargs ~= #sig.params then
          say(name, "C reads %d argument(s), the declaration has %d", info.nargs, #sig.params)
        end
        if info.opts then
          local p = sig.params[info.opts_idx]
          local declared = p and keys_of(option_keys(p.type, types)) or {}
          local want = {}
          for _, k in ipairs(info.opts) do want[#want + 1] = k end
          table.sort(want)
          if table.concat(declared, ",") ~= table.concat(want, ",") then
            say(name, "C accepts options {%s}, the declaration {%s}", table.concat(want, ", "), table.concat(declared, ", "))
          end
        end
        -- what a success returns: the values before "string? err, odp.ECode? code"; an iterator's generic-for
        -- triple (function, state, control) is one declared value
        -- (or, where the value before the code is a result's or a message, all but the code)
        local success = #sig.returns
        for i, r in ipairs(sig.returns) do
          if r.type:match("ECode") then success = (sig.returns[i - 1] or {}).name == "err" and i - 2 or i - 1 break end
        end
        local iterator = sig.returns[1] and sig.returns[1].type:match("^fun%(") and info.returns == 3
        if info.returns and info.returns ~= success and not iterator then
          say(name, "C returns %d value(s) on success, the declaration %d", info.returns, success)
        end
        -- a return declared as a plain table (table, table[]) leaves its fields to the Lua module that reads it
        local ret_text = fn[1]:match("%->(.*)$") or ""
        local known = field_names(ret_text, types)
        for _, f in ipairs(ret_text:match("%f[%w]table%f[^%w<]") and {} or keys_of(info.fields)) do
          if not known[f] and not f:match("^__") then say(name, "C sets field '%s', not declared", f) end
        end
      end
    end
  end
  T.eq(drift, {}, "docs/api/c_modules.lua against src/l_*.c")
end)

T.test("docs/SCRIPTING.md keeps no copy of the signatures: each C module's section links to its reference", function()
  local guide, ref = T.read(root .. "/docs/SCRIPTING.md"), T.read(root .. "/docs/api.md")
  local declared = {}
  for _, m in ipairs(decl.modules) do declared[m[1]] = true end
  local sections = 0
  local at = {} -- where each "## " heading starts
  for pos in ("\n" .. guide):gmatch("\n()## ") do at[#at + 1] = pos - 1 end
  at[#at + 1] = #guide + 1
  for i = 1, #at - 1 do
    local mod, body = guide:sub(at[i], at[i + 1] - 1):match("^## (odp%.[%w_]+)\n(.*)$")
    if mod and declared[mod] then
      sections = sections + 1
      local anchor = mod:gsub("%.", ""):lower()
      T.ok(body:find("(api.md#" .. anchor .. ")", 1, true), mod .. "'s section links to api.md#" .. anchor)
      T.ok(ref:find("\n## " .. mod .. "\n", 1, true), "docs/api.md has a section " .. mod)
    end
  end
  T.ok(sections >= 8, "the C modules' sections were found")
end)

T.done()
