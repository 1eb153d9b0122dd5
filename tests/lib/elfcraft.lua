--- Builds ELF test binaries with known properties (no guessing): an x86_64 program whose .gnu.version_r needs
-- GLIBC_9.99 (a shared library defining that version through a linker version script), and an aarch64 one.
local proc = require("odp.proc")
local M = {}

local function sh(cmd)
  local r = assert(proc.run { "sh", "-c", cmd, timeout = 120 })
  if not r.ok then error("elfcraft: " .. cmd .. "\n" .. r.stderr, 2) end
  return r.stdout
end

--- dir/needs_glibc_9.99: links against dir/libfake.so, whose fake_fn is versioned GLIBC_9.99. cc: the compiler
--- (default cc; aarch64-linux-gnu-gcc for an aarch64 one).
function M.needs_glibc(dir, version, cc)
  version, cc = version or "9.99", cc or "cc"
  local bin = dir .. "/needs_glibc_" .. version
  sh(string.format([[cd %s && printf 'int fake_fn(void){return 0;}\n' > fake.c &&
printf 'GLIBC_%s { global: fake_fn; local: *; };\n' > fake.map &&
%s -shared -fPIC -Wl,--version-script=fake.map -Wl,-soname,libfake.so -o libfake.so fake.c &&
printf 'int fake_fn(void);\nint main(void){return fake_fn();}\n' > main.c &&
%s -o %s main.c -L. -lfake]], dir, version, cc, cc, bin))
  return bin
end

--- dir/hello_aarch64: a dynamically linked aarch64 program (Debian gcc-aarch64-linux-gnu).
function M.aarch64(dir)
  local bin = dir .. "/hello_aarch64"
  sh(string.format("cd %s && printf 'int main(void){return 0;}\\n' > h.c && aarch64-linux-gnu-gcc -o %s h.c", dir, bin))
  return bin
end

--- GLIBC versions readelf -V lists (the reference the reader is checked against).
function M.readelf_glibc(path)
  local set, list = {}, {}
  for v in sh("readelf -V -W " .. path):gmatch("Name: GLIBC_([%d%.]+)") do
    if not set[v] then set[v] = true; list[#list + 1] = v end
  end
  return set, list
end

return M
