--- Preflight: checks that need the board, made before anything is uploaded or run. Each failure is one line
-- and exit code 3 (errors.fail). check(target, {runner=, model=, data=, device=, remote_dir=, need_bytes=})
-- -> facts. odp.run makes them once per board (board:preflight) for scripts declared with preflight = true.
--   * the runner's ELF machine vs the board's `uname -m`
--   * the newest GLIBC_x.y the runner needs (.gnu.version_r) vs the board's glibc (with the device's advice,
--     e.g. Graviton4: launch Ubuntu 26.04)
--   * free space in the remote dir for runner + model (+ margin for the ETDump)
-- The model's own check (a .pte this runner can load) needs no board: the flow's validate makes it first
-- (odp.run.check_model, exit 2).
local elf = require("odp.elf")
local sys = require("odp.sys")
local errors = require("odp.core.errors")

local M = {}

M.MARGIN_BYTES = 64 * 1024 * 1024 -- ETDump, logs, the helper

-- uname -m spellings -> ELF machine names (odp.elf)
local ARCH = { aarch64 = "aarch64", arm64 = "aarch64", armv8l = "arm", armv7l = "arm", armv6l = "arm",
  x86_64 = "x86_64", amd64 = "x86_64", i386 = "i386", i486 = "i386", i586 = "i386", i686 = "i386",
  riscv64 = "riscv", ppc64le = "ppc64", ppc64 = "ppc64", s390x = "s390x" }

function M.normalize_arch(a) return a and (ARCH[a] or a) end

local function fail(code, msg) errors.fail(code, msg, 3) end

local function mb(n) return ("%.1f MB"):format(n / 1e6) end

function M.check(target, opts)
  opts = opts or {}
  local facts = { arch = target:arch() }
  local device = opts.device or {}
  if opts.runner then
    local e, err = elf.read(opts.runner)
    if not e then fail("EPROTO", ("runner %s is not a Linux program: %s"):format(opts.runner, err)) end
    facts.runner = e
    local board = M.normalize_arch(facts.arch or device.arch) -- the device file's arch when uname fails
    if not board then fail("EIO", ("cannot tell the architecture of %s (uname -m failed)"):format(target.uri)) end
    if e.machine ~= board then
      fail("ENODEV", ("runner %s is built for %s but %s is %s (uname -m): use the runner built for this board%s")
        :format(opts.runner, e.machine, target.uri, facts.arch, device.runner and (" (" .. device.runner .. ")") or ""))
    end
    if not e.static and e.glibc_required then
      facts.libc = target:libc_version()
      if not facts.libc then
        fail("ENODEV", ("runner %s needs glibc %s but %s has no glibc (musl or Android?): use a static runner " ..
          "or one built for that system"):format(opts.runner, e.glibc_required, target.uri))
      end
      if elf.version_cmp(e.glibc_required, facts.libc) > 0 then
        fail("ENODEV", ("runner %s needs GLIBC_%s but %s has glibc %s, so it would not start: %s")
          :format(opts.runner, e.glibc_required, target.uri, facts.libc, device.glibc_advice or
            "run it on a newer OS image, or use a runner built against an older glibc"))
      end
    end
  end
  local dir = opts.remote_dir or target.remote_dir
  if dir then
    local need = (opts.need_bytes or 0) + M.MARGIN_BYTES
    for _, p in ipairs { opts.runner, opts.model, opts.data } do
      local st = p and sys.stat(p)
      if st then need = need + st.size end
    end
    facts.free_bytes = target:free_bytes(dir)
    if facts.free_bytes and facts.free_bytes < need then
      fail("EIO", ("only %s free in %s on %s; runner, model and ETDump need about %s: pick another --remote-dir")
        :format(mb(facts.free_bytes), dir, target.uri, mb(need)))
    end
  end
  return facts
end

return M
