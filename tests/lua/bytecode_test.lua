-- Precompiled Lua (src/main.c search_bytecode, tools/luac.lua, make's build/luac/): a chunk is loaded only
-- while its header names the very source require found (path, size, bytes); anything else parses the source.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")

-- Runs the Lua chunk `code` under the odp binary `bin` (env: extra environment) -> its stdout.
local function run_lua(bin, code, env)
  local dir = T.tmpdir()
  T.write(dir .. "/s.lua", code)
  local r = proc.run { argv = { bin, "run", dir .. "/s.lua" }, env = env, timeout = 60 }
  T.eq(r.status, 0, r.stderr)
  return r.stdout
end

T.test("every module of lua/ has a fresh chunk in build/luac/, with the source's name and lines", function()
  local r = proc.run { "find", root .. "/lua", "-name", "*.lua", timeout = 30 }
  local names = {}
  for path in r.stdout:gmatch("[^\n]+") do
    names[#names + 1] = path:sub(#root + 6, -5):gsub("/init$", ""):gsub("/", ".")
  end
  T.ok(#names > 40, "found lua/'s modules")
  local out = run_lua(odp, ([[
local root = require("odp.host").root
for _, name in ipairs({ %s }) do
  local chunk, path = package.searchers[2](name)
  local parsed = loadfile(path)
  local a, b = debug.getinfo(chunk, "S"), debug.getinfo(parsed, "S")
  print(name, type(chunk), path:sub(#root + 1), a.source == b.source and a.lastlinedefined == b.lastlinedefined)
end]]):format(("%q, "):rep(#names):format(table.unpack(names))))
  local n = 0
  for name, kind, path, same in out:gmatch("(%S+)\t(%S+)\t(%S+)\t(%S+)\n") do
    n = n + 1
    T.eq(kind, "function", name .. ": a chunk (make builds build/luac/)")
    T.eq(path, "/lua/" .. name:gsub("%.", "/") .. (sys.stat(root .. "/lua/" .. name:gsub("%.", "/") .. ".lua") and ".lua" or "/init.lua"))
    T.eq(same, "true", name .. ": the chunk's source name and lines are the source's")
  end
  T.eq(n, #names)
  -- Debian's dkjson (odp.core.json's codec), from its own path under /usr/share/lua/5.4/
  T.eq(run_lua(odp, [[local f, p = package.searchers[2]("dkjson") io.write(type(f), " ", p)]]),
    "function /usr/share/lua/5.4/dkjson.lua")
end)

-- A copy of odp (binary and lua/) in a temp dir, with a probe module lua/probe.lua whose source returns
-- "source", and a chunk for it whose code returns "chunk": which of the two require returns tells which was
-- loaded. The chunk is tools/luac.lua's own for a source `return "chunk"` (so its body hash is right), under
-- the header fields luac.lua writes for the probe's source.
local function probe_tree()
  local dir = T.tmpdir()
  assert(sys.mkdir_p(dir .. "/build"))
  T.eq(proc.run { "cp", "-r", root .. "/lua", dir .. "/lua", timeout = 60 }.status, 0)
  T.eq(proc.run { "cp", odp, dir .. "/build/odp", timeout = 60 }.status, 0)
  dir = sys.realpath(dir)
  local src, out = dir .. "/lua/probe.lua", dir .. "/build/luac/probe.luac"
  local function luac(text)
    T.write(src, text)
    local r = proc.run { dir .. "/build/odp", "run", root .. "/tools/luac.lua", src, out, timeout = 60 }
    T.eq(r.status, 0, r.stderr)
    local made = T.read(out)
    local size, source_hash, body_hash, body = made:match("^odp%-bytecode 1 " .. src:gsub("%p", "%%%0")
      .. " (%d+) (%-?%d+) (%-?%d+)\n(.*)$")
    T.eq(tonumber(size), #text, "the header names the source's path and size")
    return source_hash, body_hash, body
  end
  local _, chunk_hash, chunk = luac('return "chunk"\n')
  local source_hash = luac('return "source"\n')
  T.write(out, ("odp-bytecode 1 %s %d %s %s\n"):format(src, #'return "source"\n', source_hash, chunk_hash) .. chunk)
  return dir, src
end

T.test("a chunk whose header matches is what require loads; an edited source of the same size is parsed", function()
  local dir, src = probe_tree()
  local bin = dir .. "/build/odp"
  T.eq(run_lua(bin, "io.write((require('probe')))"), "chunk")
  T.write(src, 'return "SOURCE"\n') -- same size, other bytes
  T.eq(run_lua(bin, "io.write((require('probe')))"), "SOURCE")
  T.write(src, 'return "source" -- longer\n')
  T.eq(run_lua(bin, "io.write((require('probe')))"), "source")
end)

T.test("an ODP_PATH override of the same bytes is parsed from its own file", function()
  local dir = probe_tree()
  local over = T.tmpdir()
  T.write(over .. "/probe.lua", 'return "source"\n')
  T.eq(run_lua(dir .. "/build/odp", "io.write(require('probe'), ' ', package.searchers[2]('probe') == nil and 'nil' or 'chunk')",
    { ODP_PATH = over }), "source nil")
end)

T.test("a truncated, damaged or foreign chunk falls back to the source, without an error", function()
  local dir = probe_tree()
  local bin = dir .. "/build/odp"
  local chunk = T.read(dir .. "/build/luac/probe.luac")
  T.eq(run_lua(bin, "io.write((require('probe')))"), "chunk")
  local header = chunk:match("^[^\n]*\n")
  local bad = { chunk:sub(1, #chunk - 5), header, header .. "return 'text, not a chunk'", "", "x",
    chunk .. "\0", header:gsub(" (%-?%d+)\n$", "\n") .. chunk:sub(#header + 1) }
  -- a byte of the body changed, at random places (Lua's undump would trust it; the body hash refuses it)
  local rnd = T.lcg(17)
  for _ = 1, 20 do
    local at = #header + 1 + rnd(#chunk - #header)
    bad[#bad + 1] = chunk:sub(1, at - 1) .. string.char((chunk:byte(at) + 1 + rnd(255)) % 256) .. chunk:sub(at + 1)
  end
  for i, b in ipairs(bad) do
    T.write(dir .. "/build/luac/probe.luac", b)
    T.eq(run_lua(bin, "io.write((require('probe')))"), "source", "damaged chunk " .. i)
  end
end)

T.test("a module's source and chunk are each opened once and read in one read (strace)", function()
  local dir = T.tmpdir()
  T.write(dir .. "/s.lua", 'require("odp.core.stats")')
  local trace = dir .. "/open.trace"
  local r = assert(proc.run { argv = { "strace", "-y", "-e", "trace=openat,read", "-o", trace, odp, "run",
    dir .. "/s.lua" }, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local text = T.read(trace)
  local count, seen = {}, {}
  for line in text:gmatch("[^\n]+") do
    local call = line:match("^(%w+)%(")
    local file = line:match('^openat%(AT_FDCWD[^,]*, "([^"]+)"') or line:match("^read%(%d+<([^>]+)>")
    local name = file and not line:find(" = %-1 ") and file:match("/(stats%.luac?)$") -- ODP_PATH's misses aside
    if name then
      count[call .. " " .. name] = (count[call .. " " .. name] or 0) + 1
      seen[#seen + 1] = line
    end
  end
  -- no probe of the source before it is read (package.searchpath's), no read to see the end fstat gave
  T.eq(count, { ["openat stats.lua"] = 1, ["read stats.lua"] = 1, ["openat stats.luac"] = 1,
    ["read stats.luac"] = 1 }, table.concat(seen, "\n"))
end)

-- make install with the flags of the build under test (make asan: ODP_MAKEFLAGS), so its objects stay as built
local function make_install(build, ...)
  local argv = { "sh", "-c", 'eval "make -s ${ODP_MAKEFLAGS:-} BUILD=\\"$0\\" install $*"', build, ... }
  local r = proc.run { argv = argv, cwd = root, timeout = 300 }
  T.eq(r.status, 0, r.stderr)
end

T.test("make install writes chunks for the installed sources, named as installed (also with DESTDIR)", function()
  local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
  local dir = sys.realpath(T.tmpdir())
  make_install(build, "PREFIX=" .. dir .. "/p")
  T.eq(run_lua(dir .. "/p/bin/odp", [[local f, p = package.searchers[2]("odp.core.stats")
io.write(type(f), " ", p, " ", type((package.searchers[2]("dkjson"))))]]),
    "function " .. dir .. "/p/share/odp/lua/odp/core/stats.lua function")
  make_install(build, "PREFIX=/opt/odp", "DESTDIR=" .. dir .. "/stage")
  T.match(T.read(dir .. "/stage/opt/odp/lib/odp/luac/odp/core/stats.luac"),
    "^odp%-bytecode 1 /opt/odp/share/odp/lua/odp/core/stats%.lua %d+ %-?%d+ %-?%d+\n")
end)

T.done()
