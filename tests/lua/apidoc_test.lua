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

T.done()
