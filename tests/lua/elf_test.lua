-- odp.elf: the ELF facts preflight needs, checked against readelf on real and crafted binaries.
local T = require("t")
local elf = require("odp.elf")
local craft = require("elfcraft")
local tmp = T.tmpdir()
local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")

local function same_set(list, set)
  local n = 0
  for _, v in ipairs(list) do T.ok(set[v], "readelf lists GLIBC_" .. v); n = n + 1 end
  local m = 0
  for _ in pairs(set) do m = m + 1 end
  T.eq(n, m, "number of GLIBC versions")
end

T.test("a dynamic x86_64 program: machine, interpreter, GLIBC needs equal readelf's", function()
  local e = assert(elf.read("/bin/ls"))
  T.eq(e.class, 64); T.eq(e.machine, "x86_64"); T.eq(e.endian, "little"); T.eq(e.static, false)
  T.eq(e.interpreter, "/lib64/ld-linux-x86-64.so.2")
  local set = craft.readelf_glibc("/bin/ls")
  same_set(e.glibc_versions, set)
  -- the newest needed version is the maximum, compared numerically
  for _, v in ipairs(e.glibc_versions) do T.ok(elf.version_cmp(v, e.glibc_required) <= 0, v) end
end)

T.test("a crafted GLIBC_9.99 need is found and is the required version", function()
  local bin = craft.needs_glibc(tmp)
  local e = assert(elf.read(bin))
  T.eq(e.glibc_required, "9.99")
  same_set(e.glibc_versions, craft.readelf_glibc(bin))
end)

T.test("aarch64 dynamic and static binaries", function()
  local e = assert(elf.read(craft.aarch64(tmp)))
  T.eq(e.machine, "aarch64"); T.eq(e.interpreter, "/lib/ld-linux-aarch64.so.1"); T.eq(e.static, false)
  T.ok(e.glibc_required, "needs some glibc")
  e = assert(elf.read(build .. "/odp-rusage-aarch64"))
  T.eq(e.machine, "aarch64"); T.eq(e.static, true); T.eq(e.type, "exec"); T.eq(#e.glibc_versions, 0)
  T.eq(e.glibc_required, nil)
end)

T.test("not an ELF, truncated, missing: errors with codes", function()
  T.write(tmp .. "/text", "hello")
  local _, err, code = elf.read(tmp .. "/text")
  T.eq(code, "EPROTO"); T.match(err, "not an ELF")
  T.write(tmp .. "/trunc", T.read("/bin/ls"):sub(1, 40))
  _, err, code = elf.read(tmp .. "/trunc")
  T.eq(code, "EPROTO"); T.match(err, "truncated")
  _, err, code = elf.read(tmp .. "/missing")
  T.eq(code, "ENOTFOUND")
  -- a header cut after the section table offset: parses the header, skips what is outside
  T.write(tmp .. "/cut", T.read("/bin/ls"):sub(1, 4096))
  local e = assert(elf.read(tmp .. "/cut"))
  T.eq(e.machine, "x86_64"); T.eq(#e.glibc_versions, 0)
end)

T.test("version_cmp is numeric", function()
  T.eq(elf.version_cmp("2.9", "2.34"), -1); T.eq(elf.version_cmp("2.34", "2.34"), 0)
  T.eq(elf.version_cmp("2.36", "2.34.1"), 1); T.eq(elf.version_cmp("2.34", "2.34.1"), -1)
end)

T.done()
