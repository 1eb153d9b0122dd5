-- Precompiles Lua sources for odp's bytecode searcher (src/main.c, search_bytecode): each SOURCE is loaded as
-- require would load it (by the absolute path package.path finds it at, so error messages and tracebacks name
-- the same file and lines) and dumped with its debug information to OUT, after a header naming the source's
-- path, size and a hash of its bytes, and the hash of the chunk itself. odp loads OUT only while all of them
-- still match; otherwise it parses the source.
--   build/odp run tools/luac.lua [--as FROM=TO] SOURCE OUT [SOURCE OUT ...]
-- (make writes build/luac/ this way). --as: a SOURCE starting with FROM is named as if it started with TO
-- (make install reads $(DESTDIR)$(PREFIX)/share/odp/lua/ and names the files $(PREFIX)/share/odp/lua/...).
local sys = require("odp.sys")

-- src/main.c's source_hash: FNV-1a's step over native 8-byte words, then the last bytes one by one (integer
-- arithmetic wraps in Lua 5.4 as the C unsigned one does)
local function source_hash(s)
  local h, n, i = 0xcbf29ce484222325, #s, 1
  while i + 7 <= n do
    local w
    w, i = string.unpack("=i8", s, i)
    h = (h ~ w) * 0x100000001b3
  end
  for j = i, n do h = (h ~ s:byte(j)) * 0x100000001b3 end
  return h
end

local from, to, first = "", "", 1
if arg[1] == "--as" then
  from, to = (arg[2] or ""):match("^(.*)=(.*)$")
  assert(from, "usage: --as FROM=TO")
  first = 3
end
for i = first, #arg, 2 do
  local src, out = arg[i], assert(arg[i + 1], "usage: [--as FROM=TO] SOURCE OUT ...")
  local name = src:sub(1, #from) == from and to .. src:sub(#from + 1) or src
  assert(name:sub(1, 1) == "/", "SOURCE must be the absolute path require finds: " .. name)
  local text = assert(sys.read_file(src))
  local chunk = assert(load(text, "@" .. name, "t"))
  local body = string.dump(chunk)
  local header = ("odp-bytecode 1 %s %d %d %d\n"):format(name, #text, source_hash(text), source_hash(body))
  assert(sys.mkdir_p(out:match("^(.*)/[^/]*$") or "."))
  assert(sys.write_file(out, header .. body))
end
