-- The Lua layering (docs/architecture.md): lua/odp/ is grouped by layer, lowest first, and a module never
-- requires one from a higher layer. Every lua/odp/**.lua is read; its requires of odp.* Lua modules (literal
-- names, and the literal prefix of a computed one: require("odp.target." .. kind) is the target layer) are
-- checked against the order. C modules (odp.sys, odp.ssh, ...: their luaopen_odp_* in src/) sit below all.
-- Every require counts, those inside functions too: the module graph they make has no cycle (but through the
-- named registries, REGISTRIES below), and a require inside a function says why on its line or the line
-- above: `-- lazy: start-up`, `-- lazy: run-time name` or `-- lazy: optional` (grep "lazy:" lists them all).
local T = require("t")
local sys = require("odp.sys")
local lualex = require("lualex")

local ORDER = { "core", "parse", "target", "results", "run", "flows", "cli" }
local RANK = {}
for i, name in ipairs(ORDER) do RANK[name] = i end

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

-- Every require in src, read by tests/lib/lualex.lua (strings, long strings and comments are skipped; blocks
-- counted here): {line, name, computed, in_function, reason}. The forms: require("x"), require "x",
-- pcall(require, "x"), require("x." .. name) (computed: name is its literal prefix) and require(var) (computed,
-- name ""). reason: the text after "-- lazy:" on the require's line or the line above.
local function requires(src)
  local toks, comments = lualex.lex(src)
  local out, stack, pending_do = {}, {}, 0
  local function in_function()
    for _, b in ipairs(stack) do if b == "function" then return true end end
    return false
  end
  for k, tk in ipairs(toks) do
    if tk.t == "id" then
      local w, prev = tk.v, toks[k - 1]
      local field = prev and prev.t == "op" and (prev.v == "." or prev.v == ":")
      if field then -- a.end is no keyword use; a.require is not require
      elseif w == "function" or w == "if" or w == "repeat" then stack[#stack + 1] = w
      elseif w == "while" or w == "for" then stack[#stack + 1] = w pending_do = pending_do + 1
      elseif w == "do" then
        if pending_do > 0 then pending_do = pending_do - 1 else stack[#stack + 1] = "do" end
      elseif w == "end" or w == "until" then stack[#stack] = nil
      elseif w == "require" then
        local a, b, c = toks[k + 1], toks[k + 2], toks[k + 3]
        local site = { line = tk.line, in_function = in_function() }
        if a and a.t == "str" then site.name = a.v
        elseif a and a.t == "op" and (a.v == "(" or a.v == ",") and b and b.t == "str" then
          site.name, site.computed = b.v, c and c.t == "op" and c.v == ".."
        else site.name, site.computed = "", true end
        local why = (comments[tk.line] or ""):match("%-%- lazy: ([^\n]*)") or
          (comments[tk.line - 1] or ""):match("%-%- lazy: ([^\n]*)")
        site.reason = why and why:gsub("%s*%(.*%)%s*$", "") -- a reason may say more in parentheses
        out[#out + 1] = site
      end
    end
  end
  return out
end

-- The reasons a require may sit inside a function (the comment `-- lazy: <reason>` on its line or the line
-- above; a parenthesis after it says more): start-up (the module stays out of what every odp process loads:
-- tests/lua/startup_test.lua holds that set, bench/README.md "Startup" measures it; or a C library / grammar only
-- some runs need), run-time name
-- (the module is chosen by a name known only then: through a registry below) and optional (a library that
-- may be absent). Anything else -- a cycle it hides, a module every process has loaded -- goes at the top.
local REASONS = { ["start-up"] = true, ["run-time name"] = true, ["optional"] = true }

-- The named registries: the only places a module name is computed (require("odp.flows." .. name),
-- require(var)). file -> literal prefix -> what it is. Requires through them are no edges of the graph
-- below: a registry is where a lower layer finds a higher one by name (the flows require odp.run, and
-- odp.run.flows finds a flow by its name), so it closes no cycle.
local REGISTRIES = {
  ["run/flows.lua"] = { ["odp.flows."] = "the flow registry: a flow module by its name (device.FLOWS)" },
  ["target/device.lua"] = { ["odp.target."] = "the target kinds: a transport's module by its name" },
  ["target/lab.lua"] = { ["odp.target."] = "the lab engines' providers (lab_lava, lab_labgrid)" },
  ["cli/main.lua"] = { ["odp.cli.commands."] = "the commands: odp COMMAND's module" },
  ["cli/commands/version.lua"] = { ["odp."] = "odp version -v: each C module, loaded to show it loads" },
  ["cli/repl.lua"] = { [""] = "the REPL's odp namespace: odp.parse.pte, odp.run.board, ..." },
  ["results/publish.lua"] = { [""] = "the lab engines' reporters: --report NAME's module" },
}

-- The cycles of a graph {module -> {module -> true}}, each as "a -> b -> ... -> a" (one per strongly
-- connected component, Tarjan), sorted.
local function cycles(graph)
  local index, low, on, stack, n, out = {}, {}, {}, {}, 0, {}
  local function connect(v)
    n = n + 1 index[v], low[v] = n, n
    stack[#stack + 1], on[v] = v, true
    local succ = {}
    for w in pairs(graph[v] or {}) do succ[#succ + 1] = w end
    table.sort(succ)
    for _, w in ipairs(succ) do
      if not index[w] then connect(w) low[v] = math.min(low[v], low[w])
      elseif on[w] then low[v] = math.min(low[v], index[w]) end
    end
    if low[v] == index[v] then
      local comp = {}
      repeat local w = table.remove(stack) on[w] = nil comp[#comp + 1] = w until w == v
      if #comp > 1 or (graph[v] or {})[v] then
        table.sort(comp)
        -- one cycle through the component, from its first name, along edges inside it (BFS: a shortest one)
        local inside = {}
        for _, m in ipairs(comp) do inside[m] = true end
        local from, prev, queue, found = comp[1], {}, { comp[1] }, nil
        while #queue > 0 and not found do
          local u = table.remove(queue, 1)
          local ws = {}
          for w in pairs(graph[u] or {}) do if inside[w] then ws[#ws + 1] = w end end
          table.sort(ws)
          for _, w in ipairs(ws) do
            if w == from then found = u break end
            if not prev[w] then prev[w] = u queue[#queue + 1] = w end
          end
        end
        local path, u = { from }, found
        while u and u ~= from do table.insert(path, 2, u) u = prev[u] end
        path[#path + 1] = from
        out[#out + 1] = table.concat(path, " -> ")
      end
    end
  end
  local names = {}
  for v in pairs(graph) do names[#names + 1] = v end
  table.sort(names)
  for _, v in ipairs(names) do if not index[v] then connect(v) end end
  table.sort(out)
  return out
end

--- Checks the tree under lua_dir (its odp/ directory); returns a list of problems: upward requires, stale
-- names, computed names outside a registry, requires inside functions without a reason, cycles.
local function check(lua_dir, cmods, registries)
  registries = registries or REGISTRIES
  local problems, graph, used = {}, {}, {}
  local function problem(fmt, ...) problems[#problems + 1] = fmt:format(...) end
  for _, rel in ipairs(lua_files(lua_dir .. "/odp")) do
    local own = rel:match("^([%w_]+)/")
    local mod = "odp." .. rel:gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
    graph[mod] = graph[mod] or {}
    if not RANK[own] then
      problem("%s: not in a layer directory (%s)", rel, table.concat(ORDER, ", "))
    else
      for _, r in ipairs(requires(T.read(lua_dir .. "/odp/" .. rel))) do
        local where = ("%s:%d"):format(rel, r.line)
        local registry = r.computed and (registries[rel] or {})[r.name]
        if r.computed then
          if registry then used[rel .. " " .. r.name] = true
          else problem("%s: computes a module name (%s...) outside a named registry", where, r.name) end
        end
        if r.in_function and not REASONS[r.reason or ""] then
          problem("%s: requires %s inside a function without a reason (-- lazy: start-up | run-time name | optional)",
            where, r.name ~= "" and r.name or "a computed name")
        end
        local name = r.name
        local layer = name:match("^odp") and layer_of(name, cmods)
        local file = lua_dir .. "/" .. name:gsub("%.", "/")
        local exists = layer == "C" or (layer and (r.computed or sys.stat(file .. ".lua") or sys.stat(file .. "/init.lua")))
        if name:match("^odp%.") and not exists and not r.computed then
          problem("%s: requires %s, which is no module", where, name)
        elseif layer and layer ~= "C" and RANK[own] and RANK[layer] > RANK[own] and not registry then
          problem("%s (%s) requires %s (%s, a higher layer)", where, own, name, layer)
        end
        if exists and layer ~= "C" and not r.computed then graph[mod][name] = true end
      end
    end
  end
  for file, prefixes in pairs(registries) do
    for prefix in pairs(prefixes) do
      if sys.stat(lua_dir .. "/odp/" .. file) and not used[file .. " " .. prefix] then
        problem("%s: the registry for %q computes no name any more (tests/lua/layers_test.lua REGISTRIES)", file, prefix)
      end
    end
  end
  for _, c in ipairs(cycles(graph)) do problem("a cycle: %s", c) end
  return problems
end

local root = T.root()
local cmods = c_modules(root)

T.test("the checker finds what breaks the layers, a hidden cycle and an unexplained lazy require (a tree made to fail)", function()
  local dir = T.tmpdir() .. "/lua"
  for _, d in ipairs({ "core", "target", "results", "run", "flows", "cli" }) do assert(sys.mkdir_p(dir .. "/odp/" .. d)) end
  T.write(dir .. "/odp/target/bad.lua", 'local f = require("odp.flows.executorch")\n' ..
    "local c = require 'odp.cli.main'\nlocal e = require(\"odp.core.errors\")\nlocal s = require(\"odp.sys\")\n" ..
    "-- require(\"odp.cli.repl\") in a comment is not a require\nlocal t = [[ require(\"odp.cli.repl\") ]]\n")
  T.write(dir .. "/odp/core/computed.lua", 'local m = require("odp.results." .. name)\nlocal x = require("odp.etdump")\n' ..
    'local y = require("odp.core.gone")\n')
  T.write(dir .. "/odp/stray.lua", "return {}\n")
  -- a cycle hidden in function bodies (a.lua -> b.lua at the top, b.lua -> a.lua inside a function), one
  -- lazy require with its reason, one without, one in a for loop at the top (not in a function)
  T.write(dir .. "/odp/results/a.lua", 'local b = require("odp.results.b")\nreturn {}\n')
  T.write(dir .. "/odp/results/b.lua", "local M = {}\nfor _, x in ipairs({}) do require(\"odp.core.errors\") end\n" ..
    "function M.f()\n  if true then\n    return require(\"odp.results.a\").x\n  end\nend\n" ..
    "local function g()\n  -- lazy: optional\n  local y = require(\"lyaml\")\n  local e = require(\"odp.core.errors\") -- lazy: start-up\n" ..
    "  local z = 1\n  local ok, m = pcall(require, \"odp.core.errors\")\nend\nreturn M\n")
  -- a registry (run/reg.lua) may reach up to the flows by a computed name: its cycle is no cycle; the same
  -- computed name elsewhere, and require(var), are outside a registry
  T.write(dir .. "/odp/run/reg.lua", 'local M = {}\nfunction M.get(n)\n  return require("odp.flows." .. n) -- lazy: run-time name\nend\nreturn M\n')
  T.write(dir .. "/odp/flows/executorch.lua", 'local reg = require("odp.run.reg")\nreturn {}\n')
  T.write(dir .. "/odp/run/other.lua", 'local function f(n)\n  return require("odp.flows." .. n) -- lazy: run-time name\nend\n' ..
    "local function g(name) return require(name) end\n")
  T.write(dir .. "/odp/cli/main.lua", "return {}\n")
  T.write(dir .. "/odp/core/errors.lua", "return {}\n")
  local got = check(dir, cmods, { ["run/reg.lua"] = { ["odp.flows."] = "flows" }, ["cli/gone.lua"] = { [""] = "stale" },
    ["core/errors.lua"] = { ["odp."] = "stale" } })
  table.sort(got)
  T.eq(got, {
    "a cycle: odp.results.a -> odp.results.b -> odp.results.a",
    "core/computed.lua:1 (core) requires odp.results. (results, a higher layer)",
    "core/computed.lua:1: computes a module name (odp.results....) outside a named registry",
    "core/computed.lua:2: requires odp.etdump, which is no module",
    "core/computed.lua:3: requires odp.core.gone, which is no module",
    "core/errors.lua: the registry for \"odp.\" computes no name any more (tests/lua/layers_test.lua REGISTRIES)",
    "results/b.lua:13: requires odp.core.errors inside a function without a reason (-- lazy: start-up | run-time name | optional)",
    "results/b.lua:5: requires odp.results.a inside a function without a reason (-- lazy: start-up | run-time name | optional)",
    "run/other.lua:2 (run) requires odp.flows. (flows, a higher layer)",
    "run/other.lua:2: computes a module name (odp.flows....) outside a named registry",
    "run/other.lua:4: computes a module name (...) outside a named registry",
    "run/other.lua:4: requires a computed name inside a function without a reason (-- lazy: start-up | run-time name | optional)",
    "stray.lua: not in a layer directory (core, parse, target, results, run, flows, cli)",
    "target/bad.lua:1 (target) requires odp.flows.executorch (flows, a higher layer)",
    "target/bad.lua:2 (target) requires odp.cli.main (cli, a higher layer)",
  })
end)

T.test("lua/odp: no upward require, no stale name, no cycle, no computed name outside a registry, every lazy require explained", function()
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
