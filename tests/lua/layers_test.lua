-- The Lua layering (docs/architecture.md): lua/odp/ is grouped by layer, lowest first, and a module never
-- requires one from a higher layer. Every lua/odp/**.lua is read; its requires of odp.* Lua modules (literal
-- names, and the literal prefix of a computed one: require("odp.target." .. kind) is the target layer) are
-- checked against the order. C modules (odp.sys, odp.ssh, ...: their luaopen_odp_* in src/) sit below all.
local T = require("t")
local sys = require("odp.sys")

local ORDER = { "core", "parse", "target", "results", "run", "flows", "cli" }
local RANK = {}
for i, name in ipairs(ORDER) do RANK[name] = i end

-- The one allowed upward reach: odp.run's flow registry (run.flow(name)) finds a flow by its name for
-- board:profile{} and the sweep; the flows require odp.run, never the other way round.
local EXCEPTIONS = { ["run/init.lua odp.flows."] = true }

-- The C modules: every luaopen_odp_<name> in src/ (odp.host is the binary's own facts table, main.c).
local function c_modules(root)
  local names = { host = true }
  for _, f in ipairs(sys.readdir(root .. "/src") or {}) do
    if f:match("^l_.*%.c$") then
      for name in T.read(root .. "/src/" .. f):gmatch("luaopen_odp_([%w_]+)") do names[name] = true end
    end
  end
  return names
end

-- Every .lua file under dir, as paths relative to it.
local function lua_files(dir, prefix, out)
  out = out or {}
  for _, name in ipairs(sys.readdir(dir) or {}) do
    local path, rel = dir .. "/" .. name, (prefix and (prefix .. "/") or "") .. name
    local st = sys.stat(path)
    if st and st.type == "dir" then
      lua_files(path, rel, out)
    elseif name:match("%.lua$") then
      out[#out + 1] = rel
    end
  end
  table.sort(out)
  return out
end

-- The layer of a module name (odp.<layer>.x or odp.<layer>), "C" for a C module, nil for a name that is
-- neither (a stale name: a require that cannot load).
local function layer_of(name, cmods)
  local first = name:match("^odp%.([%w_]+)")
  if RANK[first] then return first end
  if cmods[first] and not name:find("%.", 5) then return "C" end
end

--- Checks the tree under lua_dir (its odp/ directory); returns a list of "file: requires name (layer)" lines.
local function check(lua_dir, cmods)
  local problems = {}
  for _, rel in ipairs(lua_files(lua_dir .. "/odp")) do
    local own = rel:match("^([%w_]+)/")
    if not RANK[own] then
      problems[#problems + 1] = ("%s: not in a layer directory (%s)"):format(rel, table.concat(ORDER, ", "))
    else
      local src = T.read(lua_dir .. "/odp/" .. rel):gsub("%-%-[^\n]*", "") -- comments name modules freely
      for _, name, rest in src:gmatch("require%s*%(?%s*([\"'])(odp[%w_%.]*)%1(%s*%.?%.?)") do
        local computed = rest:match("%.%.") ~= nil
        local layer = layer_of(name, cmods)
        local file = lua_dir .. "/" .. name:gsub("%.", "/")
        if layer and layer ~= "C" and not computed and not (sys.stat(file .. ".lua") or sys.stat(file .. "/init.lua")) then
          layer = nil
        end
        if not layer then
          if not computed then problems[#problems + 1] = ("%s: requires %s, which is no module"):format(rel, name) end
        elseif layer ~= "C" and RANK[layer] > RANK[own] and not EXCEPTIONS[rel .. " " .. name] then
          problems[#problems + 1] = ("%s (%s) requires %s (%s, a higher layer)"):format(rel, own, name, layer)
        end
      end
    end
  end
  return problems
end

local root = T.root()
local cmods = c_modules(root)

T.test("the checker finds an upward require, a stale name and a computed one (a tree made to fail)", function()
  local dir = T.tmpdir() .. "/lua"
  assert(sys.mkdir_p(dir .. "/odp/target")) assert(sys.mkdir_p(dir .. "/odp/core"))
  T.write(dir .. "/odp/target/bad.lua", 'local f = require("odp.flows.executorch")\n' ..
    "local c = require 'odp.cli.main'\nlocal e = require(\"odp.core.errors\")\nlocal s = require(\"odp.sys\")\n" ..
    "-- require(\"odp.cli.repl\") in a comment is not a require\n")
  T.write(dir .. "/odp/core/computed.lua", 'local m = require("odp.results." .. name)\nlocal x = require("odp.etdump")\n' ..
    'local y = require("odp.core.gone")\n')
  T.write(dir .. "/odp/stray.lua", "return {}\n")
  for _, m in ipairs({ "flows/executorch", "cli/main", "core/errors" }) do -- the modules bad.lua names exist
    assert(sys.mkdir_p(dir .. "/odp/" .. m:match("^%w+")))
    T.write(dir .. "/odp/" .. m .. ".lua", "return {}\n")
  end
  local got = check(dir, cmods)
  table.sort(got)
  T.eq(got, {
    "core/computed.lua (core) requires odp.results. (results, a higher layer)",
    "core/computed.lua: requires odp.core.gone, which is no module",
    "core/computed.lua: requires odp.etdump, which is no module",
    "stray.lua: not in a layer directory (core, parse, target, results, run, flows, cli)",
    "target/bad.lua (target) requires odp.cli.main (cli, a higher layer)",
    "target/bad.lua (target) requires odp.flows.executorch (flows, a higher layer)",
  })
end)

T.test("lua/odp: no module requires one from a higher layer, nor a module that does not exist", function()
  T.ok(cmods.sys and cmods.ssh and cmods.probe, "C modules found in src/")
  local files = lua_files(root .. "/lua/odp")
  T.ok(#files > 40, "the tree was read: " .. #files .. " files")
  local problems = check(root .. "/lua", cmods)
  T.eq(problems, {}, table.concat(problems, "\n"))
end)

T.test("the REPL's odp namespace follows the layers: odp.parse.pte, odp.run.board, odp.run.point", function()
  local odp = require("odp.cli.repl").odp_namespace()
  T.eq(odp.parse.pte.read, require("odp.parse.pte").read)
  T.eq(odp.run.board.open, require("odp.run.board").open, "a layer's module")
  T.eq(odp.run.point, require("odp.run").point, "the layer's own field first")
  T.eq(odp.sys.getpid, require("odp.sys").getpid)
  T.eq(odp.nosuch, nil); T.eq(odp.parse.nosuch, nil)
  -- a module that exists but fails to load says why, instead of looking absent
  local dir = T.tmpdir()
  assert(sys.mkdir_p(dir .. "/odp/parse"))
  T.write(dir .. "/odp/parse/broken_for_test.lua", "error('broken on purpose')\n")
  local saved = package.path
  package.path = dir .. "/?.lua;" .. package.path
  local ok, e = pcall(function() return odp.parse.broken_for_test end)
  package.path = saved
  T.eq(ok, false); T.match(tostring(e), "broken on purpose")
end)

T.done()
