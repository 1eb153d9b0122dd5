-- Precompiles Lua sources for odp's bytecode searcher (src/main.c, search_bytecode): each SOURCE is loaded as
-- require would load it (by the absolute path package.path finds it at, so error messages and tracebacks name the same file and lines) and
-- dumped with its debug information to OUT, after a header naming the source's path, size and FNV-1a 64 of
-- its bytes. odp loads OUT only while all three still match; otherwise it parses the source.
--   build/odp run tools/luac.lua SOURCE OUT [SOURCE OUT ...]     (make writes build/luac/ this way)
local sys = require("odp.sys")

local function fnv1a64(s)
  local h = 0xcbf29ce484222325 -- integer arithmetic wraps in Lua 5.4, as the C unsigned one does
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return h
end

for i = 1, #arg, 2 do
  local src, out = arg[i], assert(arg[i + 1], "usage: SOURCE OUT ...")
  assert(src:sub(1, 1) == "/", "SOURCE must be the absolute path require finds: " .. src)
  local text = assert(sys.read_file(src))
  local chunk = assert(load(text, "@" .. src, "t"))
  local header = ("odp-bytecode 1 %s %d %d\n"):format(src, #text, fnv1a64(text))
  assert(sys.mkdir_p(out:match("^(.*)/[^/]*$") or "."))
  assert(sys.write_file(out, header .. string.dump(chunk)))
end
